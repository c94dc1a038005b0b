"""Provable equality of dynamic tensor sizes, for the in-place "fits" rule.

Two tensors of one type ``tensor<?x...>`` may have different sizes at run
time. An operand fits a result of dynamic shape only when every dimension is
*provably* the same size: :func:`dim_key` names the size of dimension ``d``
of a value by following the ops whose result sizes are those of an operand
(``tensor.empty`` sizes, ``tensor.dim`` of a constant dimension, ``tensor.cast``,
the inits of linalg ops, ``tensor.insert``/``insert_slice`` destinations,
``tdf.call``/``tdf.call_inplace`` results and ``tdf.assume_unaliased``) back to
a static size, an SSA size value or a dimension of a value with no such
producer (a function argument, a loop-carried value, an opaque result).
Equal keys mean equal sizes; anything else is "not provably equal"."""

from __future__ import annotations

from mlir import ir

__all__ = ["dim_key", "same_sizes", "fresh_shape_operand"]

_MAX_DEPTH = 32


def _dynamic() -> int:
    return ir.ShapedType.get_dynamic_size()


def fresh_shape_operand(op, result_index: int):
    """The operand giving the sizes of the dynamic dimensions of fresh result
    ``result_index`` of a ``tdf.call``/``tdf.call_inplace``: the first ranked
    tensor operand of the result's rank (the dialect's rule), or None."""
    rank = ir.RankedTensorType(op.results[result_index].type).rank
    for value in op.operands:
        if isinstance(value.type, ir.RankedTensorType) and ir.RankedTensorType(value.type).rank == rank:
            return value
    return None


def _constant_index(value):
    owner = value.owner
    if isinstance(owner, ir.Block) or owner.operation.name != "arith.constant":
        return None
    try:
        return ir.IntegerAttr(owner.operation.attributes["value"]).value
    except (ValueError, KeyError):
        return None


def _size_key(value, depth):
    """The key of an index value used as a size."""
    constant = _constant_index(value)
    if constant is not None:
        return constant
    owner = value.owner
    if not isinstance(owner, ir.Block) and owner.operation.name == "tensor.dim" and depth < _MAX_DEPTH:
        index = _constant_index(owner.operation.operands[1])
        source = owner.operation.operands[0]
        if index is not None and isinstance(source.type, ir.RankedTensorType) \
                and 0 <= index < ir.RankedTensorType(source.type).rank:
            return dim_key(source, index, depth + 1)
    return ("value", value)


def dim_key(value, d: int, depth: int = 0):
    """A key of the size of dimension ``d`` of ranked tensor ``value``: an int
    for a static size, else a hashable-by-equality tuple; equal keys mean
    provably equal sizes."""
    type_ = ir.RankedTensorType(value.type)
    size = type_.shape[d]
    if size != _dynamic():
        return size
    owner = value.owner
    if depth >= _MAX_DEPTH or isinstance(owner, ir.Block):
        return ("dim", value, d)
    op = owner.operation
    name = op.name
    result_number = ir.OpResult(value).result_number
    if name == "tensor.empty":
        dynamic_before = sum(1 for s in type_.shape[:d] if s == _dynamic())
        return _size_key(op.operands[dynamic_before], depth + 1)
    if name in ("tensor.cast", "tdf.assume_unaliased"):
        source = op.operands[0]
        if ir.RankedTensorType(source.type).rank == type_.rank:
            return dim_key(source, d, depth + 1)
    if name in ("tensor.insert", "tensor.insert_slice"):
        return dim_key(op.operands[1], d, depth + 1)
    if name.startswith("linalg.") and len(op.results) and len(op.operands) >= len(op.results):
        # Destination style: result i has the type (and sizes) of init i.
        init = op.operands[len(op.operands) - len(op.results) + result_number]
        if init.type == value.type:
            return dim_key(init, d, depth + 1)
    if name in ("tdf.call", "tdf.call_inplace"):
        index = -1
        if name == "tdf.call_inplace":
            index = list(ir.DenseI64ArrayAttr(op.attributes["inplace_indices"]))[result_number]
        if index >= 0:
            return dim_key(op.operands[index], d, depth + 1)
        source = fresh_shape_operand(op, result_number)
        if source is not None:
            return dim_key(source, d, depth + 1)
    return ("dim", value, d)


def same_sizes(a, b) -> bool:
    """True when ranked tensors ``a`` and ``b`` provably have the same sizes
    (same rank, every dimension's key equal)."""
    if a == b:
        return True
    ta, tb = ir.RankedTensorType(a.type), ir.RankedTensorType(b.type)
    if ta.rank != tb.rank:
        return False
    return all(dim_key(a, d) == dim_key(b, d) for d in range(ta.rank))
