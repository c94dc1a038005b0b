"""Builders of float constants and comparisons shared by the math passes
(``tdf-expand-math``, ``tdf-rescale-subnormal-math``); each works on scalars
and on vectors or tensors of floats."""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith

__all__ = ["SMALLEST_NORMAL", "OEQ", "OGE", "OLT", "float_const", "cmpf", "element_name"]

#: The smallest positive normal number of each float type.
SMALLEST_NORMAL = {"f16": 2.0 ** -14, "bf16": 2.0 ** -126, "f32": 2.0 ** -126, "f64": 2.0 ** -1022}

#: ``arith.cmpf`` predicates (``arith::CmpFPredicate``).
OEQ, OGE, OLT = 1, 3, 4


def float_const(type_, value: float):
    """An ``arith.constant`` of scalar or vector float ``type_`` (splat)."""
    if isinstance(type_, (ir.VectorType, ir.RankedTensorType)):
        element = ir.ShapedType(type_).element_type
        attr = ir.DenseElementsAttr.get_splat(type_, ir.FloatAttr.get(element, value))
    else:
        attr = ir.FloatAttr.get(type_, value)
    return arith.ConstantOp(type_, attr).result


def cmpf(predicate: int, lhs, rhs, result_type):
    """``arith.cmpf`` of ``lhs`` and ``rhs`` with ``predicate``."""
    return arith.CmpFOp(predicate, lhs, rhs, results=[result_type]).result


def element_name(type_) -> str:
    """The element type of a scalar, vector or tensor type, as printed."""
    if isinstance(type_, (ir.VectorType, ir.RankedTensorType)):
        return str(ir.ShapedType(type_).element_type)
    return str(type_)
