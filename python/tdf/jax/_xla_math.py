"""XLA:CPU's float32 ``log``, ``log1p`` and ``erf``, operation for operation.

``jax.jit`` on the CPU does not call libm for these: XLA emits its own
vectorizable approximations (Cephes-style, from Eigen). tdf's own math
lowering (upstream MLIR's polynomials, libm) is as accurate but rounds
differently in the last bit, so a program whose result goes through them
(``jax.random.normal``/``exponential``/``gumbel``/``truncated_normal``,
``categorical``) would be a few ulps off ``jax.jit``. These builders repeat
XLA's sequence of float32 operations exactly (no fused multiply-adds except
where XLA uses one, the same constants, the same special cases and NaN
bits), so the results are ``jax.jit``'s bits.

- :func:`log`: ``x = m * 2^e`` with ``m`` in ``[sqrt(1/2), sqrt(2))``; a
  degree-8 polynomial in ``m - 1``, ``e * ln 2`` added in two parts.
  Subnormal arguments are clamped to the smallest normal; ``0`` → ``-inf``,
  ``+inf`` → ``+inf``, negative or NaN → the NaN with all bits set.
- :func:`log1p`: for ``|x| < sqrt(2) - 1`` Cephes' rational approximation
  ``x - x²/2 + x³ P(x)/Q(x)``, otherwise :func:`log` of ``1 + x``.
- :func:`erf`: ``x P(x²) / Q(x²)`` (Horner with fused multiply-adds),
  ``±1`` for ``|x| >= 3.832``.

Scalars of type f32 only (callers widen float16/bfloat16 as XLA does).
"""

from __future__ import annotations

import numpy as np
from mlir import ir
from mlir.dialects import arith
from mlir.dialects import math as mmath

__all__ = ["log", "log1p", "erf", "ScalarOps"]


def _f(bits: int) -> float:
    """The float32 whose bit pattern is ``bits``."""
    return float(np.array(bits, np.uint32).view(np.float32))


# log: the reduced argument's polynomial (Horner in three interleaved
# chains, as XLA evaluates it) and ln 2 in a high and a low part.
_LOG_P = [_f(b) for b in (0x3D9021BB, 0xBDEBD1B8, 0x3DEF251A, 0xBDFE5D4F, 0x3E11E9BF,
                          0xBE2AAE50, 0x3E4CCEAC, 0xBE7FFFFC, 0x3EAAAAAA)]
_LN2_LOW, _LN2_HIGH = _f(0xB95E8083), _f(0x3F318000)
_SQRT_HALF = _f(0x3F3504F3)
_SMALLEST_NORMAL = _f(0x00800000)
# log1p: Cephes' rational approximation below sqrt(2) - 1.
_LOG1P_P = [_f(b) for b in (0x417101AD, 0x42A6185B, 0x435DC32D, 0x439A8CA3, 0x43586D8A,
                            0x42707982)]
_LOG1P_Q = [float(np.float32(4.527e-05))] + [
    _f(b) for b in (0x3EFF40C5, 0x40D284FA, 0x41EF4B9C, 0x4273CC76, 0x426473AD, 0x41A05101)]
_LOG1P_SMALL = _f(0x3ED413CD)
# erf: odd numerator, even denominator in x², saturated from 3.832.
_ERF_P = [_f(b) for b in (0x39702D51, 0x3B5F5DA2, 0x3D50B6EB, 0x3E3DA740, 0x3F906EBA)]
_ERF_Q = [_f(b) for b in (0xB3FD3906, 0x37C588DF, 0x3A856D28, 0x3C6687D4, 0x3DE34C21,
                          0x3EFEB44A)] + [1.0]
_ERF_SATURATED = _f(0x407547CB)


class ScalarOps:
    """Scalar float arithmetic on one element type, with constants."""

    def __init__(self, tr, etype):
        self.tr, self.etype = tr, etype

    def c(self, value):
        return self.tr.const(value, self.etype)

    @staticmethod
    def add(a, b):
        return arith.AddFOp(a, b).result

    @staticmethod
    def sub(a, b):
        return arith.SubFOp(a, b).result

    @staticmethod
    def mul(a, b):
        return arith.MulFOp(a, b).result

    @staticmethod
    def div(a, b):
        return arith.DivFOp(a, b).result

    @staticmethod
    def lt(a, b):
        return arith.CmpFOp(arith.CmpFPredicate.OLT, a, b).result

    @staticmethod
    def select(c, a, b):
        return arith.SelectOp(c, a, b).result


class _B(ScalarOps):
    """Scalar f32/i32 builders."""

    def __init__(self, tr):
        self.f32 = ir.F32Type.get()
        self.i32 = ir.IntegerType.get_signless(32)
        super().__init__(tr, self.f32)

    def i(self, value):
        return self.tr.const(value, self.i32)

    @staticmethod
    def cmp(pred, a, b):
        return arith.CmpFOp(getattr(arith.CmpFPredicate, pred), a, b).result

    def bits(self, x):
        return arith.BitcastOp(self.i32, x).result

    def float(self, x):
        return arith.BitcastOp(self.f32, x).result


def _log_reduce(b, x):
    """(r, e): ``x`` clamped to the normal range, ``r = m - 1`` (``m`` in
    ``[sqrt(1/2), sqrt(2))``) and the exponent ``e`` such that ``x = m 2^e``."""
    tiny = b.c(_SMALLEST_NORMAL)
    clamped = b.select(b.cmp("OGT", x, tiny), x, tiny)
    xi = b.bits(clamped)
    exponent = arith.SIToFPOp(b.f32, arith.SubIOp(arith.ShRUIOp(xi, b.i(23)).result,
                                                  b.i(127)).result).result
    exponent = b.add(exponent, b.c(1.0))
    # the mantissa in [0.5, 1)
    m = b.float(arith.OrIOp(arith.AndIOp(xi, b.i(-2139095041)).result,
                            b.i(0x3F000000)).result)
    low = b.cmp("OLT", m, b.c(_SQRT_HALF))
    r = b.add(b.sub(m, b.c(1.0)), b.select(low, m, b.c(0.0)))
    e = b.sub(exponent, b.select(low, b.c(1.0), b.c(0.0)))
    return r, e


def _fma(a, b, c):
    return mmath.FmaOp(a, b, c).result


def log(tr, x):
    """XLA:CPU's float32 natural logarithm of scalar ``x``."""
    b = _B(tr)
    r, e = _log_reduce(b, x)
    r2 = b.mul(r, r)
    r3 = b.mul(r2, r)
    p = [b.c(v) for v in _LOG_P]
    y0 = _fma(_fma(r, p[0], p[1]), r, p[2])
    y1 = _fma(_fma(r, p[3], p[4]), r, p[5])
    y2 = _fma(_fma(r, p[6], p[7]), r, p[8])
    y = _fma(_fma(y0, r3, y1), r3, y2)
    y = _fma(y, r3, b.mul(e, b.c(_LN2_LOW)))
    result = b.add(_fma(b.c(-0.5), r2, r), y)
    result = _fma(e, b.c(_LN2_HIGH), result)
    # negative or NaN: all bits set; 0: -inf; +inf: +inf
    nan = b.float(b.i(-1))
    result = b.select(b.cmp("ULE", x, b.c(0.0)), nan, result)
    result = b.select(b.cmp("OEQ", x, b.c(float("inf"))), b.c(float("inf")), result)
    return b.select(b.cmp("OEQ", x, b.c(0.0)), b.c(float("-inf")), result)


def log1p(tr, x):
    """XLA:CPU's float32 ``log(1 + x)`` of scalar ``x``."""
    b = _B(tr)
    x2 = b.mul(x, x)
    # Horner from a leading 0 * x + c (XLA's form; equal for finite x, the
    # only ones this branch is selected for)
    p = b.c(1.0)
    for coefficient in _LOG1P_P:
        p = _fma(x, p, b.c(coefficient))
    q = b.c(_LOG1P_Q[0])
    for coefficient in _LOG1P_Q[1:]:
        q = _fma(x, q, b.c(coefficient))
    ratio = arith.DivFOp(q, p).result
    small = b.add(x, _fma(b.c(-0.5), x2, b.mul(b.mul(x, x2), ratio)))
    near_zero = b.cmp("OLT", mmath.AbsFOp(x).result, b.c(_LOG1P_SMALL))
    return b.select(near_zero, small, log(tr, b.add(x, b.c(1.0))))


def erf(tr, x):
    """XLA:CPU's float32 error function of scalar ``x``."""
    b = _B(tr)
    x2 = b.mul(x, x)
    p = _fma(x2, b.c(_ERF_P[0]), b.c(_ERF_P[1]))
    for coefficient in _ERF_P[2:]:
        p = _fma(x2, p, b.c(coefficient))
    q = _fma(x2, b.c(_ERF_Q[0]), b.c(_ERF_Q[1]))
    for coefficient in _ERF_Q[2:]:
        q = _fma(x2, q, b.c(coefficient))
    ratio = arith.DivFOp(b.mul(x, p), q).result
    saturated = b.cmp("OGE", mmath.AbsFOp(x).result, b.c(_ERF_SATURATED))
    return b.select(saturated, mmath.CopySignOp(b.c(1.0), x).result, ratio)
