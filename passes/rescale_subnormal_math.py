"""``tdf-rescale-subnormal-math``: keep f32 ``math.log``/``log2`` of subnormal
inputs and ``math.exp`` with subnormal results exact under
``tdf-math-approximation``.

Upstream's polynomial ``log``/``log2`` read the exponent field, so a
subnormal input (exponent field 0) comes out as ``log(2^-126)`` (up to 16
units wrong), and its ``exp`` flushes subnormal results to 0. This pass, run
before ``tdf-math-approximation`` (see
:data:`tdf.passes.pipelines.APPROXIMATE_MATH`), rewrites f32 scalars and
vectors so that the approximated op only sees arguments it is accurate for;
every other input takes the unchanged path (a select):

- ``log``/``log2``: ``|x| < 2^-126`` → ``log(x * 2^24) - 24 log 2``
  (``- 24`` for ``log2``); 0, negative, inf and NaN are unaffected;
- ``exp``: ``x < ln(2^-126)`` → ``exp(x / 2)^2`` (both halves normal, the
  product rounds once into the subnormal range).

A rewritten op is marked ``tdf.rescaled`` and not rewritten again. Other
element types are left alone. No options; statistic ``rescaled``.

Before::

    %y = math.log %x : f32

After::

    %small = arith.cmpf olt, %abs_x, %min_normal : f32
    %scaled = arith.mulf %x, %two_24 : f32
    %in = arith.select %small, %scaled, %x : f32
    %l = math.log %in {tdf.rescaled} : f32
    %fixed = arith.addf %l, %minus_24_ln2 : f32
    %y = arith.select %small, %fixed, %l : f32
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith
from mlir.dialects import math as math_d

from ._float_ir import OLT, SMALLEST_NORMAL, cmpf, element_name, float_const
from .ir_utils import collect_ops
from .registry import PassContext, register_pass

__all__ = ["rescale_subnormal_math"]

RESCALED_ATTR = "tdf.rescaled"
_LN2 = 0.6931471805599453
_SCALE_EXP = {"f32": 24}
# Below this input f32 exp's result is subnormal (ln of the smallest normal).
_EXP_SUBNORMAL = -87.33654475


def _rescale(inner, element: str) -> None:
    """Rewrites one ``math.log``/``log2``/``exp`` (see the module docstring)."""
    x = inner.operands[0]
    k = _SCALE_EXP[element]
    result = inner.results[0]
    cond_type = ir.IntegerType.get_signless(1)
    if isinstance(x.type, ir.VectorType):
        cond_type = ir.VectorType.get(ir.VectorType(x.type).shape, cond_type)
    with ir.InsertionPoint(inner), inner.location:
        if inner.name == "math.exp":
            small = cmpf(OLT, x, float_const(x.type, _EXP_SUBNORMAL), cond_type)
            scaled = arith.MulFOp(x, float_const(x.type, 0.5)).result
        else:
            absolute = math_d.AbsFOp(x).result
            small = cmpf(OLT, absolute, float_const(x.type, SMALLEST_NORMAL[element]), cond_type)
            scaled = arith.MulFOp(x, float_const(x.type, 2.0 ** k)).result
        chosen = arith.SelectOp(small, scaled, x).result
    inner.operands[0] = chosen
    inner.attributes[RESCALED_ATTR] = ir.UnitAttr.get()
    uses = [(u.owner, u.operand_number) for u in result.uses]
    with ir.InsertionPoint.after(inner), inner.location:
        if inner.name == "math.exp":
            fixed = arith.MulFOp(result, result).result
        else:
            shift = -k * _LN2 if inner.name == "math.log" else -float(k)
            fixed = arith.AddFOp(result, float_const(x.type, shift)).result
        final = arith.SelectOp(small, fixed, result).result
    for owner, number in uses:
        owner.operands[number] = final


@register_pass(
    "tdf-rescale-subnormal-math",
    "Keep f32 math.log/log2 of subnormal inputs and math.exp with subnormal results exact "
    "under tdf-math-approximation (rescaled arguments)",
    statistics=[("rescaled", "math.log/log2/exp ops rescaled")],
)
def rescale_subnormal_math(op, ctx: PassContext) -> None:
    """See the module docstring."""
    for inner in collect_ops(op, ("math.log", "math.log2", "math.exp")):
        element = element_name(inner.operands[0].type)
        if element != "f32" or RESCALED_ATTR in inner.attributes:
            continue
        _rescale(inner, element)
        ctx.statistic("rescaled")
