"""``tdf-widen-i1-memrefs``: store ``i1`` memref elements as ``i8``.

The 22.x ``finalize-memref-to-llvm`` aborts the process on a ``memref.store``
of ``i1`` (e.g. the conditions array of the generic ``bufferization.dealloc``
lowering). This pass, run after the loops are explicit and before that
conversion (in ``tdf-lower-to-cpu``, and in ``tdf-lower-to-nvvm`` after the
kernels are outlined), retypes every ``memref<...xi1>`` value (op results,
block arguments, ``func.func``/``gpu.func`` signatures) to ``memref<...xi8>``
with the same layout and memory space, extends stored values
(``arith.extui``) and truncates loaded ones (``arith.trunci``).
``memref.global`` ops of ``i1`` are widened with their initial values
(``dense<[true, false]>`` → ``dense<[1, 0]>``), so non-splat bool constants
lower too. numpy's bool is one byte, so the layout is what the runtime
passes. No options; statistic ``widened``.

Before::

    %m = memref.alloc() : memref<2xi1>
    memref.store %true, %m[%c0] : memref<2xi1>
    %b = memref.load %m[%c1] : memref<2xi1>

After::

    %m = memref.alloc() : memref<2xi8>
    %e = arith.extui %true : i1 to i8
    memref.store %e, %m[%c0] : memref<2xi8>
    %w = memref.load %m[%c1] : memref<2xi8>
    %b = arith.trunci %w : i8 to i1
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith

from .ir_utils import collect_ops, function_type
from .registry import PassContext, register_pass

__all__ = ["widen_i1_memrefs"]


def _widen(t):
    """memref<...xi1> → memref<...xi8> (same layout and memory space); other
    types unchanged (None)."""
    if not isinstance(t, ir.MemRefType):
        return None
    m = ir.MemRefType(t)
    if str(m.element_type) != "i1":
        return None
    return ir.MemRefType.get(m.shape, ir.IntegerType.get_signless(8), m.layout, m.memory_space)


def _widen_types(inner, ctx: PassContext) -> None:
    """Retypes the signature (functions), block arguments and results of
    ``inner``."""
    if inner.name in ("func.func", "gpu.func"):
        ftype = function_type(inner)
        ins = [_widen(t) or t for t in ftype.inputs]
        outs = [_widen(t) or t for t in ftype.results]
        if ins != list(ftype.inputs) or outs != list(ftype.results):
            inner.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(ins, outs))
    for region in inner.regions:
        for block in region.blocks:
            for arg in block.arguments:
                wide = _widen(arg.type)
                if wide is not None:
                    arg.set_type(wide)
                    ctx.statistic("widened")
    for result in inner.results:
        wide = _widen(result.type)
        if wide is not None:
            result.set_type(wide)
            ctx.statistic("widened")


@register_pass(
    "tdf-widen-i1-memrefs",
    "Store i1 memref elements as i8 (finalize-memref-to-llvm asserts on i1 stores)",
    statistics=[("widened", "Values whose memref<..xi1> type became memref<..xi8>")],
)
def widen_i1_memrefs(op, ctx: PassContext) -> None:
    """See the module docstring."""
    i1 = ir.IntegerType.get_signless(1)
    i8 = ir.IntegerType.get_signless(8)
    ops = collect_ops(op)
    for inner in ops:
        if inner.name == "memref.global":
            _widen_global(inner, ctx)
        _widen_types(inner, ctx)
    for inner in ops:
        if inner.name == "memref.store" and inner.operands[0].type == i1:
            with ir.InsertionPoint(inner), inner.location:
                ext = arith.ExtUIOp(i8, inner.operands[0])
            inner.operands[0] = ext.result
        elif inner.name == "memref.load" \
                and str(ir.MemRefType(inner.operands[0].type).element_type) == "i8" \
                and inner.results[0].type == i1:
            result = inner.results[0]
            uses = [(u.owner, u.operand_number) for u in result.uses]
            result.set_type(i8)
            with ir.InsertionPoint.after(inner), inner.location:
                trunc = arith.TruncIOp(i1, result)
            for owner, number in uses:
                owner.operands[number] = trunc.result


def _widen_global(glob, ctx: PassContext) -> None:
    """``memref.global`` of ``memref<...xi1>`` → ``memref<...xi8>`` with its
    initial value (splat or not) converted to 0/1 bytes, so that the
    widened ``memref.get_global`` results still match their global."""
    wide = _widen(ir.TypeAttr(glob.attributes["type"]).value)
    if wide is None:
        return
    glob.attributes["type"] = ir.TypeAttr.get(wide)
    ctx.statistic("widened")
    if "initial_value" not in glob.attributes:
        return
    init = glob.attributes["initial_value"]
    if not isinstance(init, ir.DenseElementsAttr):
        return  # `uninitialized` (a unit attribute): nothing to convert
    init = ir.DenseIntElementsAttr(init)
    shape = list(wide.shape)
    i8 = ir.IntegerType.get_signless(8)
    tensor_type = ir.RankedTensorType.get(shape, i8)
    if init.is_splat:
        value = bool(ir.IntegerAttr(init.get_splat_value()).value)
        attr = ir.DenseElementsAttr.get_splat(tensor_type, ir.IntegerAttr.get(i8, int(value)))
    else:
        import numpy as np
        values = np.array(init).astype(np.int8).reshape(shape)
        attr = ir.DenseElementsAttr.get(np.ascontiguousarray(values), type=tensor_type)
    glob.attributes["initial_value"] = attr
