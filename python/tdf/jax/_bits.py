"""Bit-level element-wise primitives: ``bitcast_convert_type``,
``reduce_precision``, ``nextafter``, ``clz`` and ``population_count``.

- ``bitcast_convert_type`` between types of one width is an
  ``arith.bitcast``; to a narrower type it adds a last dimension of
  ``wide / narrow`` elements (element ``j`` holds bits ``j*narrow ...``: the
  lowest-order bits first, as XLA on a little-endian CPU), to a wider type it
  removes that dimension;
- ``reduce_precision`` rounds the mantissa to nearest even and clamps the
  exponent (overflow to a signed infinity, underflow, subnormals included,
  to a signed zero) on the integer bits, as XLA does; NaN stays NaN;
- ``nextafter`` steps the integer bits of ``x`` towards ``y`` (XLA's
  algorithm: NaN if either is NaN, ``y`` when they are equal, the smallest
  subnormal with ``y``'s sign from zero).
"""

from __future__ import annotations

import numpy as np
from mlir import ir
from mlir.dialects import arith, linalg
from mlir.dialects import math as mmath

from ._builder import bits, element_type, is_float, rule
from ._elementwise import _narrow, _widen


def _int_type(width: int) -> ir.IntegerType:
    return ir.IntegerType.get_signless(width)


def _as_int(x):
    """The bits of scalar ``x`` as a signless integer (``x`` itself for one)."""
    if isinstance(x.type, ir.IntegerType):
        return x
    return arith.BitcastOp(_int_type(ir.FloatType(x.type).width), x).result


def _from_int(v, etype):
    return v if v.type == etype else arith.BitcastOp(etype, v).result


def _cmp(pred, a, b):
    return arith.CmpIOp(getattr(arith.CmpIPredicate, pred), a, b).result


def _select(c, a, b):
    return arith.SelectOp(c, a, b).result


@rule("bitcast_convert_type")
def _bitcast_convert_type(tr, eqn, args):
    (x,) = args
    src, dst = eqn.invars[0].aval.dtype, eqn.outvars[0].aval.dtype
    out = eqn.outvars[0].aval
    src_w, dst_w = bits(src), bits(dst)
    dst_et = element_type(dst)
    if "bool" in (np.dtype(src).name, np.dtype(dst).name):
        raise tr.unsupported("bitcast of bool")
    if src_w == dst_w:
        return [tr.elementwise(out, [x], lambda v: _from_int(_as_int(v), dst_et))]
    shape = [int(s) for s in out.shape]
    rank = len(shape)
    dims = tr.dims(rank)
    init = tr.empty(shape, dst_et)
    if src_w > dst_w:
        # out[..., j] = bits j*dst_w.. of x[...]
        def split_body(v, _o):
            j = arith.IndexCastOp(_int_type(src_w), linalg.IndexOp(rank - 1).result).result
            shift = arith.MulIOp(j, tr.const(dst_w, _int_type(src_w))).result
            part = arith.ShRUIOp(_as_int(v), shift).result
            return [_from_int(arith.TruncIOp(_int_type(dst_w), part).result, dst_et)]
        return tr.generic([x], [dims[:-1]], [init], [dims], ["parallel"] * rank, split_body)
    # x[..., j] are the parts of out[...], lowest-order bits first
    count = dst_w // src_w

    def join_body(*vs):
        acc = None
        for j, v in enumerate(vs[:-1]):
            part = arith.ExtUIOp(_int_type(dst_w), _as_int(v)).result
            if j:
                part = arith.ShLIOp(part, tr.const(j * src_w, part.type)).result
            acc = part if acc is None else arith.OrIOp(acc, part).result
        return [_from_int(acc, dst_et)]
    maps = [dims + [j] for j in range(count)]
    return tr.generic([x] * count, maps, [init], [dims], ["parallel"] * rank, join_body)


# (exponent bits, mantissa bits) of the float types
_FLOAT_LAYOUT = {16: {"float16": (5, 10), "bfloat16": (8, 7)}, 32: (8, 23), 64: (11, 52)}


def _layout(dtype):
    width = bits(dtype)
    entry = _FLOAT_LAYOUT[width]
    return entry[np.dtype(dtype).name] if width == 16 else entry


def _round_mantissa(tr, v, src_m, mantissa_bits):
    shift = src_m - mantissa_bits
    last_bit = tr.const(1 << shift, v.type)
    bias = arith.AddIOp(arith.ShRUIOp(arith.AndIOp(v, last_bit).result, tr.const(shift, v.type)).result,
                        tr.const((1 << (shift - 1)) - 1, v.type)).result
    return arith.AndIOp(arith.AddIOp(v, bias).result, tr.const(~((1 << shift) - 1), v.type)).result


def _clamp_exponent(tr, v, width, src_e, src_m, exponent_bits):
    exp_mask = ((1 << src_e) - 1) << src_m
    bias = (1 << (src_e - 1)) - 1
    reduced_bias = (1 << (exponent_bits - 1)) - 1
    exponent = arith.AndIOp(v, tr.const(exp_mask, v.type)).result
    overflows = _cmp("ugt", exponent, tr.const((bias + reduced_bias) << src_m, v.type))
    underflows = _cmp("ule", exponent, tr.const((bias - reduced_bias) << src_m, v.type))
    signed_zero = arith.AndIOp(v, tr.const(1 << (width - 1), v.type)).result
    signed_inf = arith.OrIOp(signed_zero, tr.const(exp_mask, v.type)).result
    return _select(overflows, signed_inf, _select(underflows, signed_zero, v))


@rule("reduce_precision")
def _reduce_precision(tr, eqn, args):
    dtype = eqn.invars[0].aval.dtype
    exponent_bits = int(eqn.params["exponent_bits"])
    mantissa_bits = int(eqn.params["mantissa_bits"])
    src_e, src_m = _layout(dtype)
    width = bits(dtype)

    def fn(x):
        v = _as_int(x)
        if mantissa_bits < src_m:
            v = _round_mantissa(tr, v, src_m, mantissa_bits)
        if exponent_bits < src_e:
            v = _clamp_exponent(tr, v, width, src_e, src_m, exponent_bits)
        out = _from_int(v, x.type)
        if mantissa_bits > 0:
            xw = _widen(x)
            nan = arith.CmpFOp(arith.CmpFPredicate.UNO, xw, xw).result
            out = _select(nan, x, out)
        return out

    return [tr.elementwise(eqn.outvars[0].aval, args, fn)]


@rule("nextafter")
def _nextafter(tr, eqn, args):
    width = bits(eqn.invars[0].aval.dtype)

    def fn(x, y):
        xi, yi = _as_int(x), _as_int(y)
        itype = xi.type
        zero, one = tr.const(0, itype), tr.const(1, itype)
        # magnitudes compared as the bits shifted left by one (the sign
        # dropped), signs through signed comparisons: LLVM's x86 backend
        # asserts on the masked forms of these in some fused loops
        x_mag = arith.ShLIOp(xi, one).result
        y_mag = arith.ShLIOp(yi, one).result
        opposite = _cmp("slt", arith.XOrIOp(xi, yi).result, zero)
        away = arith.OrIOp(_cmp("ugt", x_mag, y_mag), opposite).result
        r = _select(away, arith.SubIOp(xi, one).result, arith.AddIOp(xi, one).result)
        smallest = _select(_cmp("slt", yi, zero), tr.const((1 << (width - 1)) | 1, itype), one)
        from_zero = _select(_cmp("eq", y_mag, zero), yi, smallest)
        r = _select(_cmp("eq", x_mag, zero), from_zero, r)
        # selects on the integer bits (LLVM's x86 backend can abort on
        # selects of bfloat16 vectors); float16/bfloat16 compare and add in f32
        xw, yw = _widen(x), _widen(y)
        r = _select(arith.CmpFOp(arith.CmpFPredicate.OEQ, xw, yw).result, yi, r)
        nan = arith.CmpFOp(arith.CmpFPredicate.UNO, xw, yw).result
        r = _select(nan, _as_int(_narrow(arith.AddFOp(xw, yw).result, x.type)), r)
        return _from_int(r, x.type)

    if not is_float(eqn.invars[0].aval.dtype):  # pragma: no cover - JAX refuses it
        raise tr.unsupported("nextafter of integers")
    return [tr.elementwise(eqn.outvars[0].aval, args, fn)]


@rule("clz")
def _clz(tr, eqn, args):
    return [tr.elementwise(eqn.outvars[0].aval, args,
                           lambda x: mmath.CountLeadingZerosOp(x).result)]


@rule("population_count")
def _population_count(tr, eqn, args):
    return [tr.elementwise(eqn.outvars[0].aval, args, lambda x: mmath.CtPopOp(x).result)]
