"""Special functions: ``lgamma`` and ``digamma``, XLA's algorithms.

Both use the Lanczos approximation (g = 7, nine coefficients) of
``Gamma(z + 1)`` for ``x >= 0.5`` and the reflection formula below it, as
XLA does; float16/bfloat16 are computed in float32 (:func:`_float_rule`).

- ``lgamma``: ``+inf`` at the poles (non-positive integers) and at ``±inf``;
- ``digamma``: NaN at the poles.
"""

from __future__ import annotations

import math

from mlir.dialects import arith
from mlir.dialects import math as mmath

from ._elementwise import _float_rule
from ._xla_math import ScalarOps

_LANCZOS_GAMMA = 7.0
_LANCZOS_BASE = 0.99999999999980993227684700473478
_LANCZOS = (676.520368121885098567009190444019, -1259.13921672240287047156078755283,
            771.3234287776530788486528258894, -176.61502916214059906584551354,
            12.507343278686904814458936853, -0.13857109526572011689554707,
            9.984369578019570859563e-6, 1.50563273514931155834e-7)


def _lanczos_setup(o, x):
    """(reflect, z, log_t, t): ``z = -x`` below 0.5, else ``x - 1``."""
    reflect = o.lt(x, o.c(0.5))
    z = o.select(reflect, arith.NegFOp(x).result, o.sub(x, o.c(1.0)))
    t = o.add(o.c(_LANCZOS_GAMMA + 0.5), z)
    log_t = o.add(o.c(math.log(_LANCZOS_GAMMA + 0.5)),
                  mmath.Log1pOp(o.div(z, o.c(_LANCZOS_GAMMA + 0.5))).result)
    return reflect, z, log_t, t


def _lgamma(tr, eqn, x):
    o = ScalarOps(tr, x.type)
    reflect, z, log_t, t = _lanczos_setup(o, x)
    series = o.c(_LANCZOS_BASE)
    for i, coefficient in enumerate(_LANCZOS):
        series = o.add(series, o.div(o.c(coefficient), o.add(z, o.c(i + 1.0))))
    log_y = o.add(o.add(o.c(0.5 * math.log(2 * math.pi)),
                        o.mul(o.sub(o.add(z, o.c(0.5)), o.div(t, log_t)), log_t)),
                  mmath.LogOp(series).result)
    abs_x = mmath.AbsFOp(x).result
    frac = o.sub(abs_x, mmath.FloorOp(abs_x).result)
    reduced = o.select(o.lt(o.c(0.5), frac), o.sub(o.c(1.0), frac), frac)
    denom = mmath.LogOp(mmath.SinOp(o.mul(o.c(math.pi), reduced)).result).result
    finite = arith.CmpFOp(arith.CmpFPredicate.ONE, mmath.AbsFOp(denom).result,
                          o.c(float("inf"))).result
    reflection = o.select(finite, o.sub(o.sub(o.c(math.log(math.pi)), denom), log_y),
                          arith.NegFOp(denom).result)
    result = o.select(reflect, reflection, log_y)
    infinite = arith.CmpFOp(arith.CmpFPredicate.OEQ, abs_x, o.c(float("inf"))).result
    return o.select(infinite, o.c(float("inf")), result)


def _digamma(tr, eqn, x):
    o = ScalarOps(tr, x.type)
    reflect, z, log_t, t = _lanczos_setup(o, x)
    num, denom = o.c(0.0), o.c(_LANCZOS_BASE)
    for i, coefficient in enumerate(_LANCZOS):
        shifted = o.add(z, o.c(i + 1.0))
        num = o.sub(num, o.div(o.c(coefficient), o.mul(shifted, shifted)))
        denom = o.add(denom, o.div(o.c(coefficient), shifted))
    y = o.sub(o.add(log_t, o.div(num, denom)), o.div(o.c(_LANCZOS_GAMMA), t))
    reduced = o.add(x, mmath.AbsFOp(mmath.FloorOp(o.add(x, o.c(0.5))).result).result)
    angle = o.mul(o.c(math.pi), reduced)
    cot = o.div(mmath.CosOp(angle).result, mmath.SinOp(angle).result)
    result = o.select(reflect, o.sub(y, o.mul(o.c(math.pi), cot)), y)
    pole = arith.AndIOp(arith.CmpFOp(arith.CmpFPredicate.OLE, x, o.c(0.0)).result,
                        arith.CmpFOp(arith.CmpFPredicate.OEQ, x,
                                     mmath.FloorOp(x).result).result).result
    return o.select(pole, o.c(float("nan")), result)


_float_rule("lgamma", _lgamma)
_float_rule("digamma", _digamma)
