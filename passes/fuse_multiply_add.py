"""``tdf-fuse-multiply-add``: contractable multiply-adds of the LLVM dialect
become ``llvm.intr.fma`` before LLVM sees them, and no ``contract`` flag is
left: the rounding of a program no longer depends on the optimisation level.

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
  ``fsub z, (fmul x, y)`` → ``fma(-x, y, z)``;

where both ops carry ``contract`` (or ``fast``), the ``fmul`` has no other
use and is in the same block (the combiner sees one block at a time). Then
``contract`` is dropped from the flags of every ``fadd``, ``fsub``, ``fmul``
and ``fneg`` (an ``fmul`` with several uses stays unfused at every level;
``fast``, which tdf does not emit, is left alone). Runs last in the LLVM lowering. Statistic
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


def _fuse(add) -> bool:
    lhs, rhs = add.operands[0], add.operands[1]
    first, second = _fusable_product(lhs, add), _fusable_product(rhs, add)
    if first is None and second is None:
        return False
    loc = add.location
    with ir.InsertionPoint(add):
        if first is not None:
            x, y = first.operands[0], first.operands[1]
            z = rhs if add.name == "llvm.fadd" else _neg(rhs, loc)
            fused, mul = _fma(x, y, z, loc), first
        else:
            x, y = second.operands[0], second.operands[1]
            if add.name == "llvm.fsub":
                x = _neg(x, loc)
            fused, mul = _fma(x, y, lhs, loc), second
    add.results[0].replace_all_uses_with(fused)
    add.erase()
    mul.erase()
    return True


@register_pass(
    "tdf-fuse-multiply-add",
    "Contractable fmul + fadd/fsub pairs to llvm.intr.fma, contract flags dropped "
    "(the same rounding at every opt level)",
    statistics=[("fused", "multiply-adds fused into llvm.intr.fma")],
)
def fuse_multiply_add(op, ctx: PassContext) -> None:
    """See the module docstring."""
    for add in collect_ops(op, ("llvm.fadd", "llvm.fsub")):
        if _contractable(add) and _fuse(add):
            ctx.statistic("fused")
    for flagged in collect_ops(op, ("llvm.fadd", "llvm.fsub", "llvm.fmul", "llvm.fneg")):
        flags = _flags(flagged)
        if "contract" not in flags:
            continue
        kept = [f for f in flags if f != "contract"]
        flagged.attributes[_FLAGS] = ir.Attribute.parse(
            f"#llvm.fastmath<{', '.join(kept) or 'none'}>")
