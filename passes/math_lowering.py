"""Lowering of every ``math`` op on the CPU: ``tdf-expand-math`` and the
math part of the LLVM lowering (:data:`MATH_TO_LLVM`).

Upstream has no single pass that lowers the whole math dialect for a JIT:
``convert-math-to-libm`` marks the whole dialect illegal (so an op it has no
libm function for, e.g. ``math.copysign``, fails the pass) and lowers
``math.rsqrt`` to ``rsqrtf``, which libm does not define;
``convert-math-to-llvm`` leaves ``acosh``/``asinh``/``atanh``/``cbrt``/
``erf``/``erfc``/``ipowi``/``isinf``/``isnormal``/``clampf`` alone. tdf lowers
them in this order (:data:`MATH_TO_LLVM`):

1. ``tdf-expand-math`` (this module): ``math.isinf`` and ``math.isnormal``
   to ``math.absf`` + ``arith.cmpf`` (nothing upstream lowers them);
2. ``math-expand-ops{ops=clampf}``: ``clampf`` to ``minimumf``/``maximumf``;
3. ``convert-math-to-funcs``: ``ipowi`` (and ``fpowi`` with a non-i32/i64
   exponent) to outlined software loops;
4. ``convert-math-to-llvm``: everything with an LLVM intrinsic, ``rsqrt`` as
   ``1 / sqrt`` (correctly rounded square root and division, <= 1 ulp);
5. ``convert-math-to-libm``: the rest (``acosh``, ``asinh``, ``atanh``,
   ``cbrt``, ``erf``, ``erfc``) to libm calls.

``tdf-math-approximation`` (C++, in the extension) may run before this to
turn f32 ``exp``/``log``/``tanh``/... into vectorizable polynomials; see
:mod:`tdf.passes.pipelines`.
"""

from __future__ import annotations

import math as _pymath

from mlir import ir

from ._ir import collect_ops
from .registry import PassContext, register_pass

#: The math part of the CPU lowering, in order (see the module docstring).
LIBM_OPS = ("acosh", "asinh", "atanh", "cbrt", "erf", "erfc", "expm1", "log1p")

#: f32 ops that ``tdf-math-approximation`` turns into upstream's polynomials
#: by default: the ones whose measured error stays within 4 ulp on the whole
#: f32 range, edge values included (docs/Codegen.md has the table). ``log``,
#: ``log2`` and ``exp`` qualify only after ``tdf-rescale-subnormal-math``. Not here:
#: ``sin``/``cos`` (inf for |x| >= ~1e30: no full range reduction), ``atan``
#: (~40 ulp), ``atan2`` (wrong sign for -0), ``cbrt`` (NaN for inf),
#: ``erfc`` (0 instead of subnormal results).
APPROXIMATED_OPS = ("acos", "asin", "erf", "exp", "expm1", "log", "log1p", "log2", "tanh")

#: Math ops to vectorizable polynomials (f32), before loops are lowered.
APPROXIMATE_MATH = [
    "tdf-rescale-subnormal-math",
    "tdf-math-approximation{ops=" + ",".join(APPROXIMATED_OPS) + "}",
]

MATH_TO_LLVM = [
    "tdf-expand-math",
    "math-expand-ops{ops=clampf}",
    "convert-math-to-funcs",
    "tdf-convert-math-to-libm{ops=" + ",".join(LIBM_OPS) + "}",
    "convert-math-to-llvm",
]

_SMALLEST_NORMAL = {"f16": 2.0 ** -14, "bf16": 2.0 ** -126, "f32": 2.0 ** -126, "f64": 2.0 ** -1022}


def _float_const(type_, value: float):
    """An ``arith.constant`` of scalar or vector float ``type_`` (splat)."""
    if isinstance(type_, (ir.VectorType, ir.RankedTensorType)):
        element = ir.ShapedType(type_).element_type
        attr = ir.DenseElementsAttr.get_splat(type_, ir.FloatAttr.get(element, value))
    else:
        attr = ir.FloatAttr.get(type_, value)
    return ir.Operation.create("arith.constant", results=[type_],
                               attributes={"value": attr}).result


def _cmpf(predicate: int, lhs, rhs, result_type):
    return ir.Operation.create(
        "arith.cmpf", results=[result_type], operands=[lhs, rhs],
        attributes={"predicate": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), predicate)}).result


# arith.cmpf predicates (arith::CmpFPredicate).
_OEQ, _OGE, _OLT = 1, 3, 4


def _element_name(type_) -> str:
    if isinstance(type_, (ir.VectorType, ir.RankedTensorType)):
        return str(ir.ShapedType(type_).element_type)
    return str(type_)


@register_pass(
    "tdf-expand-math",
    "Expand math.isinf and math.isnormal (no upstream lowering) into absf + cmpf",
    statistics=[("expanded", "math ops expanded")],
)
def expand_math(op, ctx: PassContext) -> None:
    """Rewrites the math ops that no upstream CPU conversion lowers, on
    scalars and vectors:

    - ``math.isinf %x`` → ``|x| == +inf`` (ordered: false for NaN);
    - ``math.isnormal %x`` → ``|x| >= smallest normal && |x| < +inf``
      (ordered: false for 0, subnormals, infinities and NaN).

    Before::

        %b = math.isinf %x : f32

    After::

        %a = math.absf %x : f32
        %inf = arith.constant 0x7F800000 : f32
        %b = arith.cmpf oeq, %a, %inf : f32
    """
    for inner in collect_ops(op, ("math.isinf", "math.isnormal")):
        x = inner.operands[0]
        result = inner.results[0]
        element = _element_name(x.type)
        if element not in _SMALLEST_NORMAL:
            ctx.error(inner, f"'{inner.name}' on element type {element} is not supported")
            continue
        with ir.InsertionPoint(inner), inner.location:
            absolute = ir.Operation.create("math.absf", results=[x.type], operands=[x]).result
            inf = _float_const(x.type, _pymath.inf)
            if inner.name == "math.isinf":
                new = _cmpf(_OEQ, absolute, inf, result.type)
            else:
                low = _float_const(x.type, _SMALLEST_NORMAL[element])
                above = _cmpf(_OGE, absolute, low, result.type)
                below = _cmpf(_OLT, absolute, inf, result.type)
                new = ir.Operation.create("arith.andi", results=[result.type],
                                          operands=[above, below]).result
        result.replace_all_uses_with(new)
        inner.erase()
        ctx.statistic("expanded")



_LN2 = 0.6931471805599453
_SCALE_EXP = {"f32": 24}
# Below this input f32 exp's result is subnormal (ln of the smallest normal).
_EXP_SUBNORMAL = -87.33654475


@register_pass(
    "tdf-rescale-subnormal-math",
    "Keep f32 math.log/log2 of subnormal inputs and math.exp with subnormal results exact "
    "under tdf-math-approximation (rescaled arguments)",
    statistics=[("rescaled", "math.log/log2/exp ops rescaled")],
)
def rescale_subnormal_math(op, ctx: PassContext) -> None:
    """Upstream's polynomial ``log``/``log2`` read the exponent field, so a
    subnormal input (exponent field 0) comes out as ``log(2^-126)`` (up to
    16 units wrong), and its ``exp`` flushes subnormal results to 0. This
    pass, run before ``tdf-math-approximation``, rewrites f32 scalars and
    vectors so that the approximated op only sees arguments it is accurate
    for; every other input takes the unchanged path (a select):

    - ``log``/``log2``: ``|x| < 2^-126`` → ``log(x * 2^24) - 24 log 2``
      (``- 24`` for ``log2``); 0, negative, inf and NaN are unaffected;
    - ``exp``: ``x < ln(2^-126)`` → ``exp(x / 2)^2`` (both halves normal,
      the product rounds once into the subnormal range).

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
    for inner in collect_ops(op, ("math.log", "math.log2", "math.exp")):
        x = inner.operands[0]
        element = _element_name(x.type)
        if element != "f32" or "tdf.rescaled" in inner.attributes:
            continue
        k = _SCALE_EXP[element]
        result = inner.results[0]
        cond_type = ir.IntegerType.get_signless(1)
        if isinstance(x.type, ir.VectorType):
            cond_type = ir.VectorType.get(ir.VectorType(x.type).shape, cond_type)

        def binary(name, lhs, rhs):
            return ir.Operation.create(name, results=[x.type], operands=[lhs, rhs]).result

        with ir.InsertionPoint(inner), inner.location:
            if inner.name == "math.exp":
                small = _cmpf(_OLT, x, _float_const(x.type, _EXP_SUBNORMAL), cond_type)
                scaled = binary("arith.mulf", x, _float_const(x.type, 0.5))
            else:
                absolute = ir.Operation.create("math.absf", results=[x.type], operands=[x]).result
                small = _cmpf(_OLT, absolute, _float_const(x.type, _SMALLEST_NORMAL[element]),
                              cond_type)
                scaled = binary("arith.mulf", x, _float_const(x.type, 2.0 ** k))
            chosen = ir.Operation.create("arith.select", results=[x.type],
                                         operands=[small, scaled, x]).result
        inner.operands[0] = chosen
        inner.attributes["tdf.rescaled"] = ir.UnitAttr.get()
        uses = [(u.owner, u.operand_number) for u in result.uses]
        with ir.InsertionPoint.after(inner), inner.location:
            if inner.name == "math.exp":
                fixed = binary("arith.mulf", result, result)
            else:
                shift = -k * _LN2 if inner.name == "math.log" else -float(k)
                fixed = binary("arith.addf", result, _float_const(x.type, shift))
            final = ir.Operation.create("arith.select", results=[x.type],
                                        operands=[small, fixed, result]).result
        for owner, number in uses:
            owner.operands[number] = final
        ctx.statistic("rescaled")
