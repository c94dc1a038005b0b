"""``tdf-guard-bf16-narrowing``: bfloat16 roundings that LLVM would narrow
into bfloat16 arithmetic with a constant become integer roundings.

A bfloat16 operation is computed in float32 and rounded
(``truncf(addf(extf(x), c))``). LLVM's InstCombine narrows such a rounding
into bfloat16 arithmetic when every operand is an extension from bfloat16
or a constant bfloat16 can hold (the result is the same). Vectorized, and
fed by a rounded float32 intermediate, LLVM 22.1.8's x86 back end cannot
legalize that arithmetic on a constant splat and aborts the process
("Unexpected illegal type!" in LegalizeDAG): ``1 - x / 39`` or
``x / 3 + 1`` on 64 or more bfloat16 elements did.

This pass, on the arith ops before ``convert-arith-to-llvm``, finds each
``arith.truncf`` to bf16 (scalar or vector) of an ``addf``/``subf``/
``mulf``/``divf`` in f32 whose operands are extensions from bf16 or
constants, at least one a constant that bf16 holds exactly, and computes
the rounding with integer ops instead: round to nearest even
(``(u + 0x7fff + ((u >> 16) & 1)) >> 16`` of the float32 bits ``u``), a NaN
quieted with its upper payload kept (``(u >> 16) | 0x40``). That is the
rounding ``truncf`` has (and ``vcvtneps2bf16`` computes) for every input
but a float32 subnormal, which calls see only with ``flush_denormals=False``
(then this keeps the bf16 subnormal, as IEEE rounding does). LLVM cannot
narrow through it. Statistic ``guarded``.

Before::

    %e = arith.extf %x : bf16 to f32
    %s = arith.subf %one, %e : f32
    %r = arith.truncf %s : f32 to bf16

After (sketch)::

    %u = arith.bitcast %s : f32 to i32
    ... round to nearest even on %u, NaN quieted ...
    %r = arith.bitcast %h : i16 to bf16
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
from mlir import ir
from mlir.dialects import arith

from .ir_utils import collect_ops, defining_op
from .registry import PassContext, register_pass

__all__ = ["guard_bf16_narrowing"]

_BINARY = ("arith.addf", "arith.subf", "arith.mulf", "arith.divf")


def _element(t):
    return ir.VectorType(t).element_type if isinstance(t, ir.VectorType) else t


def _like(t, element):
    """``element``, or a vector of it shaped as ``t``."""
    if isinstance(t, ir.VectorType):
        return ir.VectorType.get(ir.VectorType(t).shape, element)
    return element


def _bf16_constant(value) -> bool:
    """``value`` is an ``arith.constant`` (scalar or splat) that bf16 holds."""
    op = defining_op(value)
    if op is None or op.name != "arith.constant":
        return False
    attr = op.attributes["value"]
    if isinstance(attr, ir.FloatAttr):
        v = attr.value
    elif isinstance(attr, ir.DenseFPElementsAttr) and attr.is_splat:
        v = ir.FloatAttr(attr.get_splat_value()).value
    else:
        return False
    return bool(np.isnan(v)) or float(ml_dtypes.bfloat16(v)) == v


def _from_bf16(value) -> bool:
    op = defining_op(value)
    return (op is not None and op.name == "arith.extf"
            and isinstance(_element(op.operands[0].type), ir.BF16Type))


def _narrowable(trunc) -> bool:
    if not isinstance(_element(trunc.results[0].type), ir.BF16Type):
        return False
    src = trunc.operands[0]
    if not isinstance(_element(src.type), ir.F32Type):
        return False
    op = defining_op(src)
    if op is None or op.name not in _BINARY:
        return False
    operands = list(op.operands)
    constants = [_bf16_constant(v) for v in operands]
    return any(constants) and all(c or _from_bf16(v) for c, v in zip(constants, operands))


def _rounded(x):
    """The bf16 of f32 ``x`` (scalar or vector), rounded to nearest even
    with integer ops, a NaN quieted."""
    t = x.type
    i32 = _like(t, ir.IntegerType.get_signless(32))
    i16 = _like(t, ir.IntegerType.get_signless(16))

    def c(n):
        if isinstance(t, ir.VectorType):
            return arith.constant(i32, ir.DenseElementsAttr.get_splat(
                i32, ir.IntegerAttr.get(ir.IntegerType.get_signless(32), n)))
        return arith.constant(i32, n)

    u = arith.bitcast(i32, x)
    high = arith.shrui(u, c(16))
    lsb = arith.andi(high, c(1))
    rounded = arith.shrui(arith.addi(arith.addi(u, c(0x7FFF)), lsb), c(16))
    quiet = arith.ori(high, c(0x40))
    magnitude = arith.andi(u, c(0x7FFFFFFF))
    is_nan = arith.cmpi(arith.CmpIPredicate.ugt, magnitude, c(0x7F800000))
    bits = arith.trunci(i16, arith.select(is_nan, quiet, rounded))
    return arith.bitcast(_like(t, ir.BF16Type.get()), bits)


@register_pass(
    "tdf-guard-bf16-narrowing",
    "bf16 roundings of f32 arithmetic on bf16 values and constants as integer roundings "
    "(LLVM's x86 back end aborts on the bf16 arithmetic it would narrow them into)",
    statistics=[("guarded", "bf16 roundings computed with integer ops")],
)
def guard_bf16_narrowing(op, ctx: PassContext) -> None:
    """See the module docstring."""
    found = [t for t in collect_ops(op, "arith.truncf") if _narrowable(t)]
    for trunc in found:
        with ir.InsertionPoint(trunc), trunc.location:
            value = _rounded(trunc.operands[0])
        trunc.results[0].replace_all_uses_with(value)
        trunc.erase()
    if found:
        ctx.statistic("guarded", len(found))
