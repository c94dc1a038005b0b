"""``tdf-arena-alias-scopes``: what LLVM may assume of the arena's slices.

Runs on the LLVM dialect, last in ``tdf-lower-to-cpu``. ``tdf-plan-memory``
puts a call's temporaries in one allocation (the arena, or the bytes of a
fresh result): each becomes a ``getelementptr i8`` of that allocation at a
constant offset. To LLVM's alias analysis those slices are one object
accessed at variable offsets, so it can no longer tell that a loop reading
one temporary and writing another touches disjoint bytes (with a
``malloc`` each, it could): a loop-invariant load is reloaded after every
store, and loops are not vectorized. Measured on the GPT-2 decode step of
``benchmarks/models.py``: its compiled loops took 5x the time they take
with a ``malloc`` per temporary (1.2x the whole call).

XLA has the same problem (one allocation for all temporaries) and answers
it the same way: each buffer slice gets an alias scope, and each access to
it ``!noalias`` metadata naming the slices whose bytes it never shares
(``xla/service/llvm_ir/alias_analysis.cc``). Here:

* each view ``tdf-plan-memory`` makes is located
  ``"tdf.slice:<bytes>"(<the allocation's location>)``
  (:func:`slice_location`); the memref lowering gives that location to the
  view's ``getelementptr i8 %base[offset]``;
* this pass takes every such ``getelementptr`` with a constant offset as a
  slice ``[offset, offset + bytes)`` of its base pointer, follows the
  address of every ``llvm.load`` / ``llvm.store`` back through
  ``getelementptr`` (and a descriptor's ``insertvalue`` /
  ``extractvalue``) to a slice, and gives the access the slice's scope
  (``alias_scopes``) and the scopes of every slice of the same base whose
  bytes are disjoint from its own (``noalias_scopes``).

The claim is about bytes, never about time: two slices that share a byte
at different times (the plan reuses memory) stay "may alias", so the
metadata holds whatever order LLVM puts the accesses in. An access whose
address cannot be followed to a slice gets no metadata (LLVM assumes what
it did before). Bases with more than ``max-slices`` slices are left alone
(the metadata grows with the square).

Second claim, about origins: memory a function allocates itself (a
``malloc`` / ``aligned_alloc`` in its body: the arena, a result, a
temporary) never shares a byte with memory its arguments point to (the
caller's arrays, descriptors on the caller's stack): it did not exist when
the function was entered. Each access whose address follows back (through
``getelementptr``, descriptors, and the integer arithmetic that aligns an
allocation: ``inttoptr`` of ``ptrtoint`` plus constants) to a fresh
allocation gets scope ``fresh`` and ``!noalias`` ``argument``; each access
that follows back to an entry-block argument, the reverse (a second domain,
``tdf.origin``). Without it LLVM cannot tell a loop that reads an argument
and writes a temporary from one that overwrites its own input once the
loop is unrolled: the 16 lane partials of ``tdf-split-reductions`` stayed
16 scalar chains (a row-wise ``max`` over 4096x1024 floats took 3.7 ms,
the ``sum`` 1.35 ms) where, with the claim, they are one vector.
Arguments are not claimed disjoint from each other (the same array may be
passed twice). Functions that load or store bf16/f16 values get no origin
scopes: vectorized without run-time alias checks, some of their loops make
LLVM 22.1.8's x86 back end abort ("Unexpected illegal type!").

Option ``max-slices`` (default 512). Statistics ``tagged`` (accesses given
slice scopes) and ``origins`` (accesses given an origin scope).
"""

from __future__ import annotations

import itertools

from mlir import ir

from .ir_utils import collect_ops, defining_op
from .registry import PassContext, PassOption, register_pass

__all__ = ["arena_alias_scopes", "slice_location"]

_PREFIX = "tdf.slice:"
_DYNAMIC_INDEX = -2147483648  # a getelementptr index held by an operand
_DEPTH = 64


def slice_location(nbytes: int, location: ir.Location) -> ir.Location:
    """The location of a view of ``nbytes`` bytes made by tdf-plan-memory."""
    return ir.Location.name(f"{_PREFIX}{nbytes}", childLoc=location)


def _slice_bytes(location: ir.Location) -> int | None:
    """The largest ``tdf.slice:<bytes>`` in ``location`` (a fused location
    may hold several), or None."""
    found = None
    pending = [location]
    while pending:
        loc = pending.pop()
        if loc.is_a_name():
            name = loc.name_str
            if name.startswith(_PREFIX) and name[len(_PREFIX):].isdigit():
                found = max(found or 0, int(name[len(_PREFIX):]))
            pending.append(loc.child_loc)
        elif loc.is_a_fused():
            pending.extend(loc.locations)
    return found


def _constant(value) -> int | None:
    op = defining_op(value)
    if op is None or op.name != "llvm.mlir.constant":
        return None
    try:
        return ir.IntegerAttr(op.attributes["value"]).value
    except (ValueError, TypeError):
        return None


def _byte_offset(gep) -> int | None:
    """The constant offset of an ``i8`` ``getelementptr`` with one index."""
    if ir.TypeAttr(gep.attributes["elem_type"]).value != ir.IntegerType.get_signless(8):
        return None
    raw = list(ir.DenseI32ArrayAttr(gep.attributes["rawConstantIndices"]))
    if len(raw) != 1:
        return None
    if raw[0] != _DYNAMIC_INDEX:
        return raw[0]
    return _constant(gep.operands[1]) if len(gep.operands) == 2 else None


def _slices(func) -> dict:
    """{view getelementptr: (base value, offset, bytes)}."""
    found = {}
    for gep in collect_ops(func, "llvm.getelementptr"):
        nbytes = _slice_bytes(gep.location)
        if nbytes is None:
            continue
        offset = _byte_offset(gep)
        if offset is not None and offset >= 0:
            found[gep] = (_root(gep.operands[0]), offset, nbytes)
    return found


def _root(value):
    """``value`` seen through ``extractvalue`` of an ``insertvalue`` chain."""
    for _ in range(_DEPTH):
        op = defining_op(value)
        if op is None or op.name != "llvm.extractvalue":
            break
        inserted = _inserted(op)
        if inserted is None:
            break
        value = inserted
    return value


def _inserted(extract):
    """The value an ``extractvalue`` reads, through the ``insertvalue``
    chain that built the struct, or None."""
    position = list(ir.DenseI64ArrayAttr(extract.attributes["position"]))
    struct = extract.operands[0]
    for _ in range(_DEPTH):
        op = defining_op(struct)
        if op is None or op.name != "llvm.insertvalue":
            return None
        if list(ir.DenseI64ArrayAttr(op.attributes["position"])) == position:
            return op.operands[1]
        struct = op.operands[0]
    return None


def _step(op, through_integers: bool):
    """The address ``op`` computes its result from, or None: the base of a
    ``getelementptr``, what an ``extractvalue`` reads, and (when
    ``through_integers``) the pointer an ``inttoptr`` aligns."""
    if op.name == "llvm.getelementptr":
        return op.operands[0]
    if op.name == "llvm.extractvalue":
        return _inserted(op)
    if op.name == "llvm.inttoptr" and through_integers:
        return _pointer_of_integer(op.operands[0])
    return None


def _walk(value, memo: dict, stop, through_integers: bool):
    """Follows ``value`` back (:func:`_step`) until ``stop(op, value)`` says
    what it is (not None; ``op`` is None for a block argument); None when
    the chain ends first. Every op passed is memoized with the answer, so
    walking all of a function's addresses is linear."""
    chain = []
    found = None
    for _ in range(_DEPTH):
        op = defining_op(value)
        if op is not None and op in memo:
            found = memo[op]
            break
        found = stop(op, value)
        if found is not None or op is None:
            break
        chain.append(op)
        value = _step(op, through_integers)
        if value is None:
            break
    for op in chain:
        memo[op] = found
    return found


class _Tracer:
    """Follows an address back to the view it is computed from."""

    def __init__(self, views):
        self.views = views
        self.memo: dict = {}

    def view_of(self, value):
        return _walk(value, self.memo, lambda op, _: op if op in self.views else None, False)


def _metadata(slices: dict, limit: int, names) -> dict:
    """{view: (alias_scopes, noalias_scopes)}: a scope per view, one domain
    per base; the noalias list names the byte-disjoint views of its base."""
    by_base: dict = {}
    for view, (base, offset, nbytes) in slices.items():
        by_base.setdefault(base, []).append((view, offset, nbytes))
    out = {}
    for views in by_base.values():
        if len(views) > limit or len(views) < 2:
            continue
        domain = f"#llvm.alias_scope_domain<id = distinct[{next(names)}]<>, " \
                 f"description = \"tdf.arena\">"
        text = ", ".join(f"#llvm.alias_scope<id = distinct[{next(names)}]<>, "
                         f"domain = {domain}>" for _ in views)
        scopes = list(ir.ArrayAttr(ir.Attribute.parse(f"[{text}]")))
        order = sorted(range(len(views)), key=lambda i: views[i][1])
        for i, (view, offset, nbytes) in enumerate(views):
            disjoint = [scopes[j] for j in order
                        if views[j][1] + views[j][2] <= offset
                        or offset + nbytes <= views[j][1]]
            if disjoint:
                out[view] = (ir.ArrayAttr.get([scopes[i]]), ir.ArrayAttr.get(disjoint))
    return out


#: Calls whose result is memory allocated there and then.
_ALLOCATORS = frozenset({"malloc", "aligned_alloc"})
#: Integer ops of the alignment arithmetic an allocation's pointer goes
#: through (``(p + a - 1) - (p + a - 1) % a``).
_ALIGN_OPS = frozenset({"llvm.add", "llvm.sub", "llvm.urem", "llvm.and"})


class _Origins:
    """Follows an address back to where its memory comes from: "fresh" (an
    allocation call of this function), "argument" (an entry-block argument)
    or None (anything else: a loaded pointer, a select, a call's result)."""

    def __init__(self, func):
        self.entry = func.regions[0].blocks[0]
        self.memo: dict = {}

    def _stop(self, op, value):
        if op is None:
            return "argument" if value.owner == self.entry else None
        if op.name == "llvm.call" and "callee" in op.attributes and \
                ir.FlatSymbolRefAttr(op.attributes["callee"]).value in _ALLOCATORS:
            return "fresh"
        return None

    def of(self, value):
        return _walk(value, self.memo, self._stop, True)


def _pointer_of_integer(value):
    """The one pointer an alignment computation (``ptrtoint`` of it, plus
    constants through add/sub/urem/and) starts from, or None."""
    pointers = []
    pending = [value]
    for _ in range(_DEPTH):
        if not pending:
            break
        op = defining_op(pending.pop())
        if op is None:
            return None
        if op.name == "llvm.ptrtoint":
            pointers.append(op.operands[0])
        elif op.name in _ALIGN_OPS:
            pending.extend(op.operands)
        elif op.name != "llvm.mlir.constant":
            return None
    # The pointer may be reached more than once (``x - x % a`` reads ``x`` twice).
    if pending or not pointers or any(p != pointers[0] for p in pointers[1:]):
        return None
    return pointers[0]


def _origin_scopes(names):
    """(fresh scope, argument scope), in a domain of their own."""
    domain = f"#llvm.alias_scope_domain<id = distinct[{next(names)}]<>, " \
             f"description = \"tdf.origin\">"
    text = ", ".join(f"#llvm.alias_scope<id = distinct[{next(names)}]<>, "
                     f"domain = {domain}>" for _ in range(2))
    fresh, argument = ir.ArrayAttr(ir.Attribute.parse(f"[{text}]"))
    return fresh, argument


def _half_precision(access) -> bool:
    """Whether ``access`` loads or stores bf16/f16 values (scalars or vectors)."""
    value = access.results[0] if access.name == "llvm.load" else access.operands[0]
    element = value.type
    if isinstance(element, ir.VectorType):
        element = element.element_type
    return isinstance(element, (ir.BF16Type, ir.F16Type))


def _tag_origins(func, accesses, names, ctx: PassContext) -> None:
    # LLVM 22.1.8's x86 back end aborts ("Unexpected illegal type!" in
    # LegalizeDAG) on some bf16 loops once they can be vectorized without
    # run-time alias checks: functions with half-precision accesses keep
    # LLVM's own view.
    if any(_half_precision(access) for access in accesses):
        return
    origins = _Origins(func)
    found = [(access, origins.of(_address(access))) for access in accesses]
    kinds = {origin for _, origin in found}
    if not {"fresh", "argument"} <= kinds:
        return  # nothing to tell apart
    fresh, argument = _origin_scopes(names)
    for access, origin in found:
        if origin is None:
            continue
        own, other = (fresh, argument) if origin == "fresh" else (argument, fresh)
        scopes = list(ir.ArrayAttr(access.attributes["alias_scopes"])) \
            if "alias_scopes" in access.attributes else []
        noalias = list(ir.ArrayAttr(access.attributes["noalias_scopes"])) \
            if "noalias_scopes" in access.attributes else []
        access.attributes["alias_scopes"] = ir.ArrayAttr.get(scopes + [own])
        access.attributes["noalias_scopes"] = ir.ArrayAttr.get(noalias + [other])
        ctx.statistic("origins", 1)


def _address(access):
    return access.operands[0 if access.name == "llvm.load" else 1]


@register_pass(
    "tdf-arena-alias-scopes",
    "Alias scopes for tdf-plan-memory's slices: accesses to disjoint bytes do not alias",
    options=[PassOption("max-slices", int, 512,
                        "Bases with more slices get no metadata")],
    statistics=[("tagged", "loads and stores given slice scopes"),
                ("origins", "loads and stores given an origin scope")],
)
def arena_alias_scopes(op, ctx: PassContext) -> None:
    """See the module docstring."""
    limit = int(ctx.option("max-slices"))
    names = itertools.count()
    for func in collect_ops(op.operation, "llvm.func"):
        if not func.regions[0].blocks:
            continue  # a declaration
        accesses = collect_ops(func, ("llvm.load", "llvm.store"))
        slices = _slices(func)
        metadata = _metadata(slices, limit, names) if len(slices) >= 2 else {}
        if metadata:
            tracer = _Tracer(metadata)
            for access in accesses:
                view = tracer.view_of(_address(access))
                if view is None:
                    continue
                access.attributes["alias_scopes"], access.attributes["noalias_scopes"] = \
                    metadata[view]
                ctx.statistic("tagged", 1)
        _tag_origins(func, accesses, names, ctx)
