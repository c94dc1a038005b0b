"""Element-wise primitives: arithmetic, math functions, comparisons, logic,
``select_n``, ``convert_element_type``, ``clamp`` and ``iota``.

Each becomes one ``linalg.generic`` (all loops parallel, rank-0 operands and
size-1 dimensions broadcast through the indexing maps) whose body is built
from ``arith``/``math`` ops with XLA's semantics:

- integer ``div``: ``x / 0 == -1``, ``INT_MIN / -1 == INT_MIN``, rounding
  toward zero; ``rem``: ``x % 0 == x``, sign of the dividend;
- ``max``/``min`` propagate NaN; ``sign`` keeps NaN and signed zeros;
- float → int conversion saturates and maps NaN to 0;
- ``float16``/``bfloat16`` arithmetic is computed in ``float32`` and rounded
  back per operation (as XLA's CPU backend does).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
from mlir import ir
from mlir.dialects import arith, linalg
from mlir.dialects import math as mmath

from . import _xla_math
from ._builder import bits, element_type, is_bool, is_float, is_unsigned, rule

_F32 = None


def _f32():
    return ir.F32Type.get()


def _is_half(etype) -> bool:
    return isinstance(etype, (ir.F16Type, ir.BF16Type))


def _widen(x):
    return arith.ExtFOp(_f32(), x).result if _is_half(x.type) else x


def _narrow(x, etype):
    return arith.TruncFOp(etype, x).result if _is_half(etype) and x.type != etype else x


def _float_rule(name, fn):
    """Registers a unary/binary float-and-int rule: ``fn(tr, eqn, *scalars)``
    gets float scalars widened to f32 when the operands are f16/bf16."""
    @rule(name)
    def translate(tr, eqn, args):
        out_et = element_type(eqn.outvars[0].aval.dtype)

        def scalar(*xs):
            widened = [_widen(x) if _is_half(x.type) else x for x in xs]
            return _narrow(fn(tr, eqn, *widened), out_et)

        return [tr.elementwise(eqn.outvars[0].aval, args, scalar)]
    return translate


def _in_dtype(eqn, i=0):
    return eqn.invars[i].aval.dtype


def _contract():
    """``#arith.fastmath<contract>``: LLVM may fuse a multiply into the add
    or subtract that is its only use (one rounding), as XLA:CPU compiles
    (LLVM's ``fp-contract=fast``): jax.jit's bits for ``a * b + c``."""
    return ir.Attribute.parse("#arith.fastmath<contract>")


def _contractible(x) -> bool:
    return isinstance(x.type, (ir.F32Type, ir.F64Type))


def _binary(float_op, int_op, bool_op=None, uint_op=None, contract=False):
    def fn(tr, eqn, x, y):
        dtype = _in_dtype(eqn)
        if is_float(dtype):
            if contract and _contractible(x):
                return float_op(x, y, fastmath=_contract()).result
            return float_op(x, y).result
        if is_bool(dtype) and bool_op is not None:
            return bool_op(x, y).result
        if is_unsigned(dtype) and uint_op is not None:
            return uint_op(x, y).result
        return int_op(x, y).result
    return fn


_float_add = _float_rule("add", _binary(arith.AddFOp, arith.AddIOp, arith.OrIOp, contract=True))
_float_add_any = _float_rule("add_any", _binary(arith.AddFOp, arith.AddIOp, arith.OrIOp,
                                                contract=True))
_float_sub = _float_rule("sub", _binary(arith.SubFOp, arith.SubIOp, arith.XOrIOp, contract=True))
_float_mul = _float_rule("mul", _binary(arith.MulFOp, arith.MulIOp, arith.AndIOp, contract=True))
_float_rule("max", _binary(arith.MaximumFOp, arith.MaxSIOp, arith.OrIOp, arith.MaxUIOp))
_float_rule("min", _binary(arith.MinimumFOp, arith.MinSIOp, arith.AndIOp, arith.MinUIOp))
_float_rule("and", _binary(None, arith.AndIOp))
_float_rule("or", _binary(None, arith.OrIOp))
_float_rule("xor", _binary(None, arith.XOrIOp))


def _int_guards(tr, eqn, x, y):
    etype = x.type
    width = bits(_in_dtype(eqn))
    zero = tr.const(0, etype)
    one = tr.const(1, etype)
    minus_one = tr.const(-1, etype)
    int_min = tr.const(-(1 << (width - 1)), etype)
    by_zero = arith.CmpIOp(arith.CmpIPredicate.eq, y, zero).result
    overflow = arith.AndIOp(arith.CmpIOp(arith.CmpIPredicate.eq, x, int_min).result,
                            arith.CmpIOp(arith.CmpIPredicate.eq, y, minus_one).result).result
    unsafe = arith.OrIOp(by_zero, overflow).result
    safe_y = arith.SelectOp(unsafe, one, y).result
    return by_zero, overflow, safe_y, minus_one, int_min, zero


def _unsigned_div_rem(tr, x, y, div):
    """Unsigned ``x / y`` (``x / 0`` is all ones) or ``x % y`` (``x % 0 == x``)."""
    zero = tr.const(0, x.type)
    by_zero = arith.CmpIOp(arith.CmpIPredicate.eq, y, zero).result
    safe_y = arith.SelectOp(by_zero, tr.const(1, x.type), y).result
    if div:
        return arith.SelectOp(by_zero, tr.const(-1, x.type), arith.DivUIOp(x, safe_y).result).result
    return arith.SelectOp(by_zero, x, arith.RemUIOp(x, safe_y).result).result


def _div(tr, eqn, x, y):
    if is_float(_in_dtype(eqn)):
        return arith.DivFOp(x, y).result
    if is_bool(_in_dtype(eqn)):
        return x
    if is_unsigned(_in_dtype(eqn)):
        return _unsigned_div_rem(tr, x, y, True)
    by_zero, overflow, safe_y, minus_one, int_min, _ = _int_guards(tr, eqn, x, y)
    q = arith.DivSIOp(x, safe_y).result
    q = arith.SelectOp(overflow, int_min, q).result
    return arith.SelectOp(by_zero, minus_one, q).result


def _rem(tr, eqn, x, y):
    if is_float(_in_dtype(eqn)):
        return arith.RemFOp(x, y).result
    if is_unsigned(_in_dtype(eqn)):
        return _unsigned_div_rem(tr, x, y, False)
    by_zero, overflow, safe_y, _, _, zero = _int_guards(tr, eqn, x, y)
    r = arith.RemSIOp(x, safe_y).result
    r = arith.SelectOp(overflow, zero, r).result
    return arith.SelectOp(by_zero, x, r).result


_float_div = _float_rule("div", _div)


def _splat_float(value):
    """The float every element of tensor ``value`` holds when it is a
    constant (``arith.constant``, or ``tensor.from_elements``,
    ``tensor.extract``, ``linalg.fill`` of one), else None."""
    for _ in range(4):
        owner = value.owner
        if isinstance(owner, ir.Block):
            return None
        op = owner.operation
        if op.name == "arith.constant":
            attr = op.attributes["value"]
            if isinstance(attr, ir.FloatAttr):
                return attr.value
            if isinstance(attr, ir.DenseFPElementsAttr) and attr.is_splat:
                return ir.FloatAttr(attr.get_splat_value()).value
            return None
        if op.name in ("tensor.from_elements", "tensor.extract", "linalg.fill") and op.operands:
            value = op.operands[0]
            continue
        return None
    return None


@rule("div")
def _div_rule(tr, eqn, args):
    """``x / c`` with a constant float ``c`` is ``x * (1 / c)``, the
    reciprocal rounded to ``c``'s type (float32 for bfloat16, which XLA
    computes in float32): XLA's algebraic simplifier rewrites it so, and
    jax.jit's results have those bits."""
    dtype = _in_dtype(eqn)
    divisor = _splat_float(args[1]) if is_float(dtype) else None
    if divisor is None:
        return _float_div(tr, eqn, args)
    kind = np.float32 if np.dtype(dtype) == np.dtype(ml_dtypes.bfloat16) else np.dtype(dtype).type
    with np.errstate(divide="ignore", over="ignore"):
        reciprocal = float(kind(1) / kind(divisor))
    etype = element_type(dtype)
    if _reassociates(dtype):  # x / c is x * (1 / c): a link of a chain of products
        inner = tr.constant_chains.get(args[0])
        if inner is not None and inner[0] == "mul":
            return _emit_chain(tr, eqn, inner[1], _fold("mul", dtype, inner[2], reciprocal), "mul")
        return _emit_chain(tr, eqn, args[0], reciprocal, "mul")

    def scalar(x):
        wide = _widen(x)
        c = tr.const(reciprocal, wide.type)
        if _is_half(etype):
            return _narrow(arith.MulFOp(wide, c).result, etype)
        return arith.MulFOp(wide, c, fastmath=_contract()).result

    return [tr.elementwise(eqn.outvars[0].aval, [args[0]], scalar)]


# ------------------------------------------------- chains of constant operands
#
# XLA's algebraic simplifier reassociates a chain of additions (subtractions)
# of constants, ``(x + c1) + c2 -> x + (c1 + c2)``, and of multiplications by
# constants (a division by a constant is already one by its reciprocal),
# ``(x * c1) * c2 -> x * (c1 * c2)``, the constants folded in the operands'
# type: jax.jit's bits for ``(x - mean) / std * scale``, ``x * 0.5 * lr`` or
# the PRNG's float16 ``uniform(minval=tiny)``, whose ``(bits - 1) + tiny`` is
# ``bits + (-1 + tiny)`` = ``bits - 1`` in float16. Measured with jax.jit on
# float32 and float16 (every element equal to the reassociated form); bfloat16
# chains are left in order, as jax.jit computes them.


def _reassociates(dtype) -> bool:
    return np.dtype(dtype) in (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64))


def _fold(kind: str, dtype, a: float, b: float) -> float:
    t = np.dtype(dtype).type
    with np.errstate(all="ignore"):
        return float(t(a) + t(b)) if kind == "add" else float(t(a) * t(b))


def _constant_operand(args, negate: bool):
    """(x, c): the operand and the float every element of the other one
    holds (negated for a subtraction, whose constant must be its right
    operand), or None."""
    c = _splat_float(args[1])
    if c is not None:
        return args[0], -c if negate else c
    if negate:
        return None
    c = _splat_float(args[0])
    return (args[1], c) if c is not None else None


def _chained(tr, eqn, args, kind: str, negate: bool, otherwise):
    """The result of ``x + c`` / ``x - c`` (``kind`` "add") or ``x * c``
    (``kind`` "mul") with a constant ``c``: when ``x`` is itself ``y + c1``
    (``y * c1``), ``y + fold(c1 + c)``; otherwise ``otherwise(tr, eqn,
    args)``. Each such result is remembered with its (base, constant)."""
    dtype = _in_dtype(eqn)
    found = _constant_operand(args, negate) if is_float(dtype) and _reassociates(dtype) else None
    if found is None:
        return otherwise(tr, eqn, args)
    x, c = found
    chains = tr.constant_chains
    inner = chains.get(x)
    if kind == "mul" and c == 1.0 and inner is not None:
        # x * 1 is x (XLA's simplifier drops it): the chain x is in goes on
        out = otherwise(tr, eqn, args)
        chains[out[0]] = inner
        return out
    if inner is None or inner[0] != kind:
        out = otherwise(tr, eqn, args)
        chains[out[0]] = (kind, x, c)
        return out
    return _emit_chain(tr, eqn, inner[1], _fold(kind, dtype, inner[2], c), kind)


def _emit_chain(tr, eqn, base, c: float, kind: str):
    """``base + c`` / ``base * c``, remembered as a chain."""
    etype = element_type(_in_dtype(eqn))
    op = arith.AddFOp if kind == "add" else arith.MulFOp

    def scalar(v):
        wide = _widen(v)
        if _is_half(etype):
            return _narrow(op(wide, tr.const(c, wide.type)).result, etype)
        return op(wide, tr.const(c, wide.type), fastmath=_contract()).result

    out = [tr.elementwise(eqn.outvars[0].aval, [base], scalar)]
    tr.constant_chains[out[0]] = (kind, base, c)
    return out


def _chain_rule(name: str, kind: str, negate: bool, otherwise) -> None:
    """Registers ``name``'s rule: :func:`_chained`, else ``otherwise``."""
    rule(name)(lambda tr, eqn, args: _chained(tr, eqn, args, kind, negate, otherwise))


_chain_rule("add", "add", False, _float_add)
_chain_rule("add_any", "add", False, _float_add_any)
_chain_rule("sub", "add", True, _float_sub)
_chain_rule("mul", "mul", False, _float_mul)


_float_rule("rem", _rem)


def _neg(tr, eqn, x):
    if is_float(_in_dtype(eqn)):
        if _contractible(x):
            return arith.NegFOp(x, fastmath=_contract()).result
        return arith.NegFOp(x).result
    return arith.SubIOp(tr.const(0, x.type), x).result


def _abs(tr, eqn, x):
    if is_float(_in_dtype(eqn)):
        return mmath.AbsFOp(x).result
    if is_unsigned(_in_dtype(eqn)):
        return x
    return mmath.AbsIOp(x).result


def _sign(tr, eqn, x):
    if is_float(_in_dtype(eqn)):
        pos = arith.CmpFOp(arith.CmpFPredicate.OGT, x, tr.const(0.0, x.type)).result
        neg = arith.CmpFOp(arith.CmpFPredicate.OLT, x, tr.const(0.0, x.type)).result
        r = arith.SelectOp(neg, tr.const(-1.0, x.type), x).result
        return arith.SelectOp(pos, tr.const(1.0, x.type), r).result
    zero = tr.const(0, x.type)
    if is_unsigned(_in_dtype(eqn)):
        nonzero = arith.CmpIOp(arith.CmpIPredicate.ne, x, zero).result
        return arith.ExtUIOp(x.type, nonzero).result
    pos = arith.CmpIOp(arith.CmpIPredicate.sgt, x, zero).result
    neg = arith.CmpIOp(arith.CmpIPredicate.slt, x, zero).result
    r = arith.SelectOp(neg, tr.const(-1, x.type), zero).result
    return arith.SelectOp(pos, tr.const(1, x.type), r).result


_float_rule("neg", _neg)
_float_rule("abs", _abs)
_float_rule("sign", _sign)


def _math(op):
    return lambda tr, eqn, x: op(x).result


for _name, _op in (("exp", mmath.ExpOp), ("exp2", mmath.Exp2Op),
                   ("expm1", mmath.ExpM1Op), ("sqrt", mmath.SqrtOp),
                   ("rsqrt", mmath.RsqrtOp), ("tanh", mmath.TanhOp),
                   ("erfc", mmath.ErfcOp), ("sin", mmath.SinOp), ("cos", mmath.CosOp),
                   ("tan", mmath.TanOp), ("floor", mmath.FloorOp), ("ceil", mmath.CeilOp),
                   ("atan", mmath.AtanOp), ("cbrt", mmath.CbrtOp), ("asin", mmath.AsinOp),
                   ("acos", mmath.AcosOp), ("sinh", mmath.SinhOp), ("cosh", mmath.CoshOp),
                   ("asinh", mmath.AsinhOp), ("acosh", mmath.AcoshOp), ("atanh", mmath.AtanhOp)):
    _float_rule(_name, _math(_op))


def _xla_f32(xla_fn, op):
    """``xla_fn`` (XLA:CPU's own float32 algorithm, :mod:`._xla_math`) on
    float32 scalars (and float16/bfloat16 ones, widened), ``op`` on float64."""
    def fn(tr, eqn, x):
        if isinstance(x.type, ir.F32Type):
            return xla_fn(tr, x)
        return op(x).result
    return fn


def log1p_f(tr, x):
    """``log1p`` as jax.jit computes it (f32: XLA's algorithm)."""
    return _xla_f32(_xla_math.log1p, mmath.Log1pOp)(tr, None, x)


_float_rule("log", _xla_f32(_xla_math.log, mmath.LogOp))
_float_rule("log1p", _xla_f32(_xla_math.log1p, mmath.Log1pOp))
_float_rule("erf", _xla_f32(_xla_math.erf, mmath.ErfOp))

# Giles' single-precision erfinv ("Approximating the erfinv function", GPU
# Computing Gems), XLA's f32 polynomial: w < 5 and w >= 5.
_ERF_INV_SMALL = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06,
                  0.00021858087, -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)
_ERF_INV_LARGE = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844,
                  0.00573950773, -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)


def _erf_inv_giles(tr, x):
    """Giles' polynomial (about 1e-7 relative error); ``x`` f32 or f64.
    Horner steps are fused multiply-adds and ``log1p`` is XLA's, as in
    jax.jit's CPU code (bit-identical for f32)."""
    w = arith.NegFOp(log1p_f(tr, arith.NegFOp(arith.MulFOp(x, x).result).result)).result
    small = arith.CmpFOp(arith.CmpFPredicate.OLT, w, tr.const(5.0, x.type)).result
    w = arith.SelectOp(small, arith.SubFOp(w, tr.const(2.5, x.type)).result,
                       arith.SubFOp(mmath.SqrtOp(w).result, tr.const(3.0, x.type)).result).result
    p = None
    for lo, hi in zip(_ERF_INV_SMALL, _ERF_INV_LARGE):
        c = arith.SelectOp(small, tr.const(lo, x.type), tr.const(hi, x.type)).result
        p = c if p is None else mmath.FmaOp(p, w, c).result
    return arith.MulFOp(p, x).result


def _erf_inv_newton(tr, y, x):
    """One Newton step on ``erf(x) = y``; for ``|y| > 0.5`` on
    ``log(erfc(x)) = log(1 - |y|)`` instead (``1 - |y|`` is exact there, and
    the logarithm of the steep tail is nearly quadratic, so the step
    converges as fast as in the middle)."""
    a, t = mmath.AbsFOp(y).result, mmath.AbsFOp(x).result
    tail = arith.CmpFOp(arith.CmpFPredicate.OGT, a, tr.const(0.5, y.type)).result
    slope = arith.MulFOp(tr.const(2.0 / np.sqrt(np.pi), y.type),
                         mmath.ExpOp(arith.NegFOp(arith.MulFOp(t, t).result).result).result).result
    erfc = mmath.ErfcOp(t).result
    # step = residual / derivative of each form
    log_gap = arith.SubFOp(mmath.LogOp(erfc).result,
                           mmath.LogOp(arith.SubFOp(tr.const(1.0, y.type), a).result).result).result
    step_tail = arith.NegFOp(arith.DivFOp(arith.MulFOp(log_gap, erfc).result, slope).result).result
    step_mid = arith.DivFOp(arith.SubFOp(mmath.ErfOp(t).result, a).result, slope).result
    t = arith.SubFOp(t, arith.SelectOp(tail, step_tail, step_mid).result).result
    return mmath.CopySignOp(t, y).result


def _erf_inv(tr, eqn, x):
    """XLA's float32 ``erf_inv`` (Giles' polynomial, ``±inf`` at ``±1``);
    float64 refines it with three Newton steps to full precision."""
    result = _erf_inv_giles(tr, x)
    if isinstance(x.type, ir.F64Type):
        for _ in range(3):
            result = _erf_inv_newton(tr, x, result)
    one = arith.CmpFOp(arith.CmpFPredicate.OEQ, mmath.AbsFOp(x).result, tr.const(1.0, x.type)).result
    inf = arith.MulFOp(x, tr.const(float("inf"), x.type)).result
    return arith.SelectOp(one, inf, result).result


_float_rule("erf_inv", _erf_inv)


def _logistic(tr, eqn, x):
    one = tr.const(1.0, x.type)
    e = mmath.ExpOp(arith.NegFOp(x).result).result
    return arith.DivFOp(one, arith.AddFOp(one, e).result).result


def _square(tr, eqn, x):
    return (arith.MulFOp(x, x) if is_float(_in_dtype(eqn)) else arith.MulIOp(x, x)).result


def _round(tr, eqn, x):
    method = int(eqn.params.get("rounding_method", 0))
    return (mmath.RoundEvenOp(x) if method == 1 else mmath.RoundOp(x)).result


def _atan2(tr, eqn, x, y):
    return mmath.Atan2Op(x, y).result


def _pow(tr, eqn, x, y):
    xf, yf = is_float(_in_dtype(eqn, 0)), is_float(_in_dtype(eqn, 1))
    if xf and yf:
        return mmath.PowFOp(x, y).result
    if xf:
        return mmath.FPowIOp(x, y).result
    return mmath.IPowIOp(x, y).result


def _integer_pow(tr, eqn, x):
    y = int(eqn.params["y"])
    floating = is_float(_in_dtype(eqn))
    mul = arith.MulFOp if floating else arith.MulIOp
    result, base, n = None, x, abs(y)
    while n:
        if n & 1:
            result = base if result is None else mul(result, base).result
        n >>= 1
        if n:
            base = mul(base, base).result
    if result is None:
        result = tr.const(1.0 if floating else 1, x.type)
    if y < 0:
        if not floating:
            raise tr.unsupported("negative integer_pow of an integer")
        result = arith.DivFOp(tr.const(1.0, x.type), result).result
    return result


_float_rule("logistic", _logistic)
_float_rule("square", _square)
_float_rule("round", _round)
_float_rule("atan2", _atan2)
_float_rule("pow", _pow)
_float_rule("integer_pow", _integer_pow)


def _is_finite(tr, eqn, x):
    inf = tr.const(float("inf"), x.type)
    return arith.CmpFOp(arith.CmpFPredicate.ONE, mmath.AbsFOp(x).result, inf).result


_float_rule("is_finite", _is_finite)


def _not(tr, eqn, x):
    return arith.XOrIOp(x, tr.const(-1 if not is_bool(_in_dtype(eqn)) else 1, x.type)).result


_float_rule("not", _not)

_FCMP = {"lt": "OLT", "le": "OLE", "gt": "OGT", "ge": "OGE", "eq": "OEQ", "ne": "UNE"}
_ICMP = {"lt": "slt", "le": "sle", "gt": "sgt", "ge": "sge", "eq": "eq", "ne": "ne"}
_UCMP = {"lt": "ult", "le": "ule", "gt": "ugt", "ge": "uge", "eq": "eq", "ne": "ne"}


def _compare(name):
    def fn(tr, eqn, x, y):
        dtype = _in_dtype(eqn)
        if is_float(dtype):
            return arith.CmpFOp(getattr(arith.CmpFPredicate, _FCMP[name]), x, y).result
        table = _UCMP if is_bool(dtype) or is_unsigned(dtype) else _ICMP
        return arith.CmpIOp(getattr(arith.CmpIPredicate, table[name]), x, y).result
    return fn


for _name in _FCMP:
    _float_rule(_name, _compare(_name))


def _clamp(tr, eqn, lo, x, hi):
    dtype = _in_dtype(eqn, 1)
    if is_float(dtype):
        return arith.MinimumFOp(arith.MaximumFOp(x, lo).result, hi).result
    if is_unsigned(dtype):
        return arith.MinUIOp(arith.MaxUIOp(x, lo).result, hi).result
    return arith.MinSIOp(arith.MaxSIOp(x, lo).result, hi).result


_float_rule("clamp", _clamp)


def _shift(kind):
    def fn(tr, eqn, x, y):
        width = bits(_in_dtype(eqn))
        too_far = arith.CmpIOp(arith.CmpIPredicate.uge, y, tr.const(width, y.type)).result
        zero = tr.const(0, x.type)
        if kind == "left":
            r, fill = arith.ShLIOp(x, y).result, zero
        elif kind == "logical":
            r, fill = arith.ShRUIOp(x, y).result, zero
        else:
            r = arith.ShRSIOp(x, y).result
            fill = arith.ShRSIOp(x, tr.const(width - 1, x.type)).result
        return arith.SelectOp(too_far, fill, r).result
    return fn


_float_rule("shift_left", _shift("left"))
_float_rule("shift_right_logical", _shift("logical"))
_float_rule("shift_right_arithmetic", _shift("arithmetic"))


@rule("select_n")
def _select_n(tr, eqn, args):
    pred_dtype = _in_dtype(eqn, 0)

    def fn(pred, *cases):
        if len(cases) == 1:
            return cases[0]
        if is_bool(pred_dtype):
            return arith.SelectOp(pred, cases[1], cases[0]).result
        result = cases[0]
        for k in range(1, len(cases)):
            hit = arith.CmpIOp(arith.CmpIPredicate.eq, pred, tr.const(k, pred.type)).result
            result = arith.SelectOp(hit, cases[k], result).result
        return result

    return [tr.elementwise(eqn.outvars[0].aval, args, fn)]


def convert_scalar(tr, x, src_dtype, dst_dtype):
    """Converts scalar ``x`` from ``src_dtype`` to ``dst_dtype`` with XLA's
    semantics (saturating float → int, NaN → 0, nonzero → True)."""
    dst = element_type(dst_dtype)
    if np.dtype(src_dtype) == np.dtype(dst_dtype):
        return x
    if is_bool(dst_dtype):
        if is_float(src_dtype):
            return arith.CmpFOp(arith.CmpFPredicate.UNE, x, tr.const(0.0, x.type)).result
        return arith.CmpIOp(arith.CmpIPredicate.ne, x, tr.const(0, x.type)).result
    if is_float(dst_dtype):
        if is_float(src_dtype):
            if _is_half(x.type) and _is_half(dst):
                return arith.TruncFOp(dst, arith.ExtFOp(_f32(), x).result).result
            if ir.FloatType(x.type).width < ir.FloatType(dst).width:
                return arith.ExtFOp(dst, x).result
            return arith.TruncFOp(dst, x).result
        if is_bool(src_dtype) or is_unsigned(src_dtype):
            return arith.UIToFPOp(dst, x).result
        return arith.SIToFPOp(dst, x).result
    # destination integer
    if is_float(src_dtype):
        return _float_to_int(tr, x, dst, dst_dtype)
    src_width, dst_width = ir.IntegerType(x.type).width, ir.IntegerType(dst).width
    if src_width == dst_width:
        return x
    if src_width > dst_width:
        return arith.TruncIOp(dst, x).result
    if is_bool(src_dtype) or is_unsigned(src_dtype):
        return arith.ExtUIOp(dst, x).result
    return arith.ExtSIOp(dst, x).result


def _float_to_int(tr, x, dst, dst_dtype):
    """Saturating float → (un)signed integer conversion, NaN → 0."""
    width = bits(dst_dtype)
    xw = _widen(x)
    if is_unsigned(dst_dtype):
        r = arith.FPToUIOp(dst, xw).result
        top, bottom = float(2 ** width), 0.0
        high_value, low_value = (1 << width) - 1, 0
    else:
        r = arith.FPToSIOp(dst, xw).result
        top, bottom = float(2 ** (width - 1)), -float(2 ** (width - 1))
        high_value, low_value = (1 << (width - 1)) - 1, -(1 << (width - 1))
    high = arith.CmpFOp(arith.CmpFPredicate.OGE, xw, tr.const(top, xw.type)).result
    low = arith.CmpFOp(arith.CmpFPredicate.OLT, xw, tr.const(bottom, xw.type)).result
    nan = arith.CmpFOp(arith.CmpFPredicate.UNO, xw, xw).result
    r = arith.SelectOp(high, tr.const(high_value, dst), r).result
    r = arith.SelectOp(low, tr.const(low_value, dst), r).result
    return arith.SelectOp(nan, tr.const(0, dst), r).result


@rule("convert_element_type")
def _convert(tr, eqn, args):
    src, dst = _in_dtype(eqn), eqn.outvars[0].aval.dtype
    if np.dtype(src) == np.dtype(dst):
        return [args[0]]
    return [tr.elementwise(eqn.outvars[0].aval, args,
                           lambda x: convert_scalar(tr, x, src, dst))]


@rule("iota")
def _iota(tr, eqn, args):
    aval = eqn.outvars[0].aval
    dimension = int(eqn.params["dimension"])
    etype = element_type(aval.dtype)
    shape = tuple(aval.shape)
    init = tr.empty(shape, etype)

    def body(_out):
        i = arith.IndexCastOp(ir.IntegerType.get_signless(64), linalg.IndexOp(dimension).result).result
        return [convert_scalar(tr, i, np.int64, aval.dtype)]

    return tr.generic([], [], [init], [tr.dims(len(shape))], ["parallel"] * len(shape), body)
