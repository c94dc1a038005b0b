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

Option ``max-slices`` (default 512). Statistic ``tagged`` (accesses given
scopes).
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


class _Tracer:
    """Follows an address back to the view it is computed from."""

    def __init__(self, views):
        self.views = views
        self.memo: dict = {}

    def view_of(self, value):
        chain = []
        found = None
        for _ in range(_DEPTH):
            op = defining_op(value)
            if op is None:
                break
            if op in self.views:
                found = op
                break
            if op in self.memo:
                found = self.memo[op]
                break
            chain.append(op)
            if op.name == "llvm.getelementptr":
                value = op.operands[0]
            elif op.name == "llvm.extractvalue":
                value = _inserted(op)
                if value is None:
                    break
            else:
                break
        for op in chain:
            self.memo[op] = found
        return found


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


@register_pass(
    "tdf-arena-alias-scopes",
    "Alias scopes for tdf-plan-memory's slices: accesses to disjoint bytes do not alias",
    options=[PassOption("max-slices", int, 512,
                        "Bases with more slices get no metadata")],
    statistics=[("tagged", "loads and stores given alias scopes")],
)
def arena_alias_scopes(op, ctx: PassContext) -> None:
    """See the module docstring."""
    limit = int(ctx.option("max-slices"))
    names = itertools.count()
    for func in collect_ops(op.operation, "llvm.func"):
        slices = _slices(func)
        if len(slices) < 2:
            continue
        metadata = _metadata(slices, limit, names)
        if not metadata:
            continue
        tracer = _Tracer(metadata)
        for access in collect_ops(func, ("llvm.load", "llvm.store")):
            view = tracer.view_of(access.operands[0 if access.name == "llvm.load" else 1])
            if view is None:
                continue
            access.attributes["alias_scopes"], access.attributes["noalias_scopes"] = \
                metadata[view]
            ctx.statistic("tagged", 1)
