"""``tdf-unown-opaque-results``: keep deallocation away from buffers returned
by opaque calls.

Ownership-based deallocation assumes the caller owns every memref a call
returns, but an opaque callee (a declaration returning memrefs, what
``tdf.call_opaque`` bufferizes to) may return a buffer it keeps or one that
aliases an argument. ``tdf-bufferize`` runs this pass twice around the
deallocation pass:

- ``phase=snapshot`` (before deallocation) copies each opaque result into a
  fresh buffer right after the call and redirects every use to the copy
  (statistic ``snapshots``);
- ``phase=unown`` (after deallocation, before it is lowered) sets the
  deallocation condition of the opaque result itself to false, so that tdf
  never frees or writes the callee's buffer (statistic ``unowned``).

Any other ``phase`` is an error. Before (``phase=snapshot``)::

    %r = call @opaque(%a) : (memref<4xf32>) -> memref<4xf32>
    "use"(%r)

After::

    %r = call @opaque(%a) : (memref<4xf32>) -> memref<4xf32>
    %owned = memref.alloc() : memref<4xf32>
    memref.copy %r, %owned : memref<4xf32> to memref<4xf32>
    "use"(%owned)
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, memref

from .ir_utils import collect_ops, function_type, has_body, memref_root, sym_name
from .registry import PassContext, PassOption, register_pass

__all__ = ["opaque_callees", "unown_opaque_results"]

def opaque_callees(module_op) -> set:
    """Names of declarations (no body) that return memrefs: what
    ``tdf.call_opaque`` bufferizes to."""
    names = set()
    for func in collect_ops(module_op, "func.func"):
        if has_body(func):
            continue
        ftype = function_type(func)
        if any(isinstance(t, ir.MemRefType) for t in ftype.results):
            names.add(sym_name(func))
    return names


def _opaque_calls(op):
    names = opaque_callees(op)
    return collect_ops(op, "func.call",
                       lambda call: ir.FlatSymbolRefAttr(call.attributes["callee"]).value in names)


def _owned_copy(call, result):
    """A fresh buffer holding a copy of ``result``, created right after
    ``call``; returns it (cast back to ``result``'s type when that has a
    layout)."""
    mtype = ir.MemRefType(result.type)
    owned_type = ir.MemRefType.get(mtype.shape, mtype.element_type,
                                   memory_space=mtype.memory_space)
    with ir.InsertionPoint.after(call), call.location:
        index = ir.IndexType.get()
        dynamic = []
        for dim, size in enumerate(mtype.shape):
            if size == ir.ShapedType.get_dynamic_size():
                c = arith.ConstantOp(index, dim)
                dynamic.append(memref.DimOp(result, c.result).result)
        alloc = memref.AllocOp(owned_type, dynamic, [])
        owned = alloc.result
        if owned_type != mtype:
            owned = memref.CastOp(mtype, owned).result
        memref.CopyOp(result, alloc.result)
    return owned


def _snapshot_opaque_results(op, ctx: PassContext) -> None:
    for call in _opaque_calls(op):
        for result in call.results:
            if not isinstance(result.type, ir.MemRefType):
                continue
            uses = [(u.owner, u.operand_number) for u in result.uses]
            owned = _owned_copy(call, result)
            for owner, number in uses:
                owner.operands[number] = owned
            ctx.statistic("snapshots")


def _unown_opaque_results(op, ctx: PassContext) -> None:
    results = set()
    for call in _opaque_calls(op):
        for result in call.results:
            results.add(result)
    if not results:
        return
    for dealloc in collect_ops(op, "bufferization.dealloc"):
        count = ir.DenseI32ArrayAttr(dealloc.attributes["operandSegmentSizes"])[0]
        for i in range(count):
            if memref_root(dealloc.operands[i]) in results:
                with ir.InsertionPoint(dealloc), dealloc.location:
                    false = arith.ConstantOp(ir.IntegerType.get_signless(1), 0)
                dealloc.operands[count + i] = false.result
                ctx.statistic("unowned")


@register_pass(
    "tdf-unown-opaque-results",
    "Keep deallocation away from buffers returned by opaque calls",
    options=[PassOption("phase", str, "snapshot",
                        "snapshot: copy opaque results into owned buffers (before deallocation); "
                        "unown: never free the callee's buffer (after deallocation)")],
    statistics=[("snapshots", "Opaque results copied into owned buffers"),
                ("unowned", "Deallocations of opaque results removed")],
)
def unown_opaque_results(op, ctx: PassContext) -> None:
    """See the module docstring."""
    phase = ctx.option("phase")
    if phase == "snapshot":
        _snapshot_opaque_results(op, ctx)
    elif phase == "unown":
        _unown_opaque_results(op, ctx)
    else:
        ctx.error(op, f"unknown phase '{phase}' (expected 'snapshot' or 'unown')")
