"""``tdf-fuse-multiply-add``: contractable multiply-adds of the LLVM dialect
become ``llvm.intr.fma`` before LLVM sees them, so that their rounding does
not depend on LLVM's optimisation level.

The JAX frontend marks float ``add``/``sub``/``mul`` ``fastmath<contract>``
(XLA:CPU compiles with LLVM's ``fp-contract=fast``: ``a * b + c`` rounds
once, and ``jax.jit`` gives those bits). LLVM's code generator fuses such a
pair only when it optimises (its DAG combiner); at ``-O0`` it rounds the
product first. So a tiered compile (``-O0`` code first, then ``-O2``) gave
the first calls of a program other bits than the later ones. This pass makes
the fusion explicit, with the DAG combiner's rules (non-aggressive, as on
x86), so that every opt level computes the same thing:

- ``fadd (fmul x, y), z`` → ``fma(x, y, z)``; else
  ``fadd z, (fmul x, y)`` → ``fma(x, y, z)``;
- ``fsub (fmul x, y), z`` → ``fma(x, y, -z)``; else
  ``fsub z, (fmul x, y)`` → ``fma(-x, y, z)``; else
  ``fsub (fneg (fmul x, y)), z`` → ``fma(-x, y, -z)``;
- an ``fneg`` operand with no other use first turns the op around, as the
  combiner canonicalizes: ``a + -b`` is ``a - b``, ``-a + b`` is ``b - a``,
  ``a - -b`` is ``a + b``;
- an ``fadd`` of two products fuses the one LLVM's optimizer puts first: its
  ``Reassociate`` pass orders the operands of every commutative op by rank
  (a value computed later in the function ranks higher: arguments, then each
  block's memory accesses in order, an expression one above its highest
  operand) and swaps ``p + q`` when ``q`` ranks lower. ``jax.jit`` gives
  those bits: ``a * b + a * a`` is ``fma(a, a, a * b)`` there;

where both ops carry ``contract`` (or ``fast``), the ``fmul`` has no other
use and is in the same block (the combiner sees one block at a time). The
flags of what is left are kept: LLVM's optimizer also contracts a float16 or
bfloat16 product that the frontend computes in float32 and rounds
(``fpext(fptrunc(fmul))``: it narrows the product, then fuses the extension
into the add), which is how ``jax.jit`` rounds such programs; that case
alone still rounds differently at ``-O0`` (``docs/Runtime.md``).
Runs last in the LLVM lowering. Statistic
``fused``.

Before::

    %p = llvm.fmul %a, %b {fastmathFlags = #llvm.fastmath<contract>} : f32
    %s = llvm.fadd %p, %c {fastmathFlags = #llvm.fastmath<contract>} : f32

After::

    %s = llvm.intr.fma(%a, %b, %c) : (f32, f32, f32) -> f32
"""

from __future__ import annotations

from mlir import ir

from .ir_utils import collect_ops, defining_op
from .registry import PassContext, register_pass

__all__ = ["fuse_multiply_add"]

_FLAGS = "fastmathFlags"


def _flags(op) -> list[str]:
    if _FLAGS not in op.attributes:
        return []
    text = str(op.attributes[_FLAGS])  # #llvm.fastmath<contract, afn>
    inner = text[text.index("<") + 1:text.rindex(">")]
    return [f.strip() for f in inner.split(",") if f.strip() and f.strip() != "none"]


def _contractable(op) -> bool:
    flags = _flags(op)
    return "contract" in flags or "fast" in flags


def _fusable_product(value, add):
    """The ``llvm.fmul`` defining ``value`` when it may fuse into ``add``."""
    mul = defining_op(value)
    if mul is None or mul.name != "llvm.fmul" or not _contractable(mul):
        return None
    if len(list(value.uses)) != 1 or mul.block != add.block:
        return None
    return mul


def _fma(x, y, z, loc):
    return ir.Operation.create("llvm.intr.fma", results=[z.type], operands=[x, y, z],
                               loc=loc).result


def _neg(x, loc):
    return ir.Operation.create("llvm.fneg", results=[x.type], operands=[x], loc=loc).result


def _negated(value, add):
    """The ``llvm.fneg`` defining ``value`` when ``value`` has no other use
    and is in ``add``'s block (the combiner rewrites ``a + -b`` as ``a - b``
    and ``-a + b`` as ``b - a`` before it fuses), or None."""
    neg = defining_op(value)
    if neg is None or neg.name != "llvm.fneg":
        return None
    if len(list(value.uses)) != 1 or neg.block != add.block:
        return None
    return neg


class _Ranks:
    """The ranks LLVM's ``Reassociate`` gives the values of one function:
    constants 0; its arguments 3, 4, ...; each block (in order) a base
    ``(n << 16)`` above them, its block arguments (phis) and its ops that
    touch memory or may not be speculated the next ranks up from there, in
    order; any other op one more than its highest operand (``fneg`` none
    more)."""

    #: Ops with a rank of their own in their block.
    _PINNED = ("llvm.load", "llvm.store", "llvm.call", "llvm.atomicrmw", "llvm.cmpxchg",
               "llvm.fence", "llvm.alloca", "llvm.sdiv", "llvm.udiv", "llvm.srem", "llvm.urem")

    def __init__(self, func):
        self.memo: dict = {}
        entry = func.regions[0].blocks[0]
        rank = 2
        for arg in entry.arguments:
            rank += 1
            self.memo[arg] = rank
        for block in func.regions[0].blocks:
            rank += 1
            base = rank << 16
            if block != entry:
                for arg in block.arguments:
                    base += 1
                    self.memo[arg] = base
            for op in block.operations:
                if op.name in self._PINNED:
                    base += 1
                    for result in op.results:
                        self.memo[result] = base

    def of(self, value) -> int:
        if value in self.memo:
            return self.memo[value]
        op = defining_op(value)
        if op is None:
            return 0
        if op.name in ("llvm.mlir.constant", "llvm.mlir.zero", "llvm.mlir.poison",
                       "llvm.mlir.undef", "llvm.mlir.addressof"):
            rank = 0
        else:
            rank = max((self.of(operand) for operand in op.operands), default=0)
            rank += 0 if op.name == "llvm.fneg" else 1
        self.memo[value] = rank
        return rank


def _function(op):
    while op is not None and op.name != "llvm.func":
        op = op.parent
    return op


def _fuse(add, ranks: dict) -> bool:
    subtract = add.name == "llvm.fsub"
    x, y = add.operands[0], add.operands[1]
    negs = []
    if not subtract and _fusable_product(x, add) is not None and \
            _fusable_product(y, add) is not None:
        func = _function(add.parent)
        if func not in ranks:
            ranks[func] = _Ranks(func)
        if ranks[func].of(y) < ranks[func].of(x):
            x, y = y, x  # Reassociate's operand order
    # The combiner's canonical forms first: a + -b -> a - b, -a + b -> b - a,
    # a - -b -> a + b.
    if (neg := _negated(y, add)) is not None:
        subtract, y, negs = not subtract, neg.operands[0], [neg]
    elif not subtract and (neg := _negated(x, add)) is not None:
        subtract, x, y, negs = True, y, neg.operands[0], [neg]
    loc = add.location
    fused = None
    with ir.InsertionPoint(add):
        if (mul := _fusable_product(x, add)) is not None:  # x*y' + z, x*y' - z
            fused = _fma(mul.operands[0], mul.operands[1], _neg(y, loc) if subtract else y, loc)
            muls = [mul]
        elif (mul := _fusable_product(y, add)) is not None:  # z + x*y', z - x*y'
            first = _neg(mul.operands[0], loc) if subtract else mul.operands[0]
            fused = _fma(first, mul.operands[1], x, loc)
            muls = [mul]
        elif subtract and (neg := _negated(x, add)) is not None and \
                (mul := _fusable_product(neg.operands[0], add)) is not None:
            # -(x*y') - z
            fused = _fma(_neg(mul.operands[0], loc), mul.operands[1], _neg(y, loc), loc)
            negs, muls = negs + [neg], [mul]
    if fused is None:
        return False
    add.results[0].replace_all_uses_with(fused)
    add.erase()
    for dead in negs + muls:  # their one use was the add (or the fneg before)
        dead.erase()
    return True


@register_pass(
    "tdf-fuse-multiply-add",
    "Contractable fmul + fadd/fsub pairs to llvm.intr.fma (the same rounding at every "
    "opt level)",
    statistics=[("fused", "multiply-adds fused into llvm.intr.fma")],
)
def fuse_multiply_add(op, ctx: PassContext) -> None:
    """See the module docstring."""
    ranks: dict = {}
    for add in collect_ops(op, ("llvm.fadd", "llvm.fsub")):
        if _contractable(add) and _fuse(add, ranks):
            ctx.statistic("fused")
