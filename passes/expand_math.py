"""``tdf-expand-math``: expand ``math.isinf`` and ``math.isnormal``, which no
upstream CPU conversion lowers, into ``math.absf`` + ``arith.cmpf``.

First step of the math lowering in ``tdf-lower-to-cpu`` (see
:data:`tdf.passes.pipelines.MATH_TO_LLVM`). On scalars and vectors:

- ``math.isinf %x`` → ``|x| == +inf`` (ordered: false for NaN);
- ``math.isnormal %x`` → ``|x| >= smallest normal && |x| < +inf``
  (ordered: false for 0, subnormals, infinities and NaN).

An element type other than f16, bf16, f32 or f64 is an error naming the op.
No options; statistic ``expanded``.

Before::

    %b = math.isinf %x : f32

After::

    %a = math.absf %x : f32
    %inf = arith.constant 0x7F800000 : f32
    %b = arith.cmpf oeq, %a, %inf : f32
"""

from __future__ import annotations

import math as _pymath

from mlir import ir
from mlir.dialects import arith
from mlir.dialects import math as math_d

from ._float_ir import OEQ, OGE, OLT, SMALLEST_NORMAL, cmpf, element_name, float_const
from .ir_utils import collect_ops
from .registry import PassContext, register_pass

__all__ = ["expand_math"]


@register_pass(
    "tdf-expand-math",
    "Expand math.isinf and math.isnormal (no upstream lowering) into absf + cmpf",
    statistics=[("expanded", "math ops expanded")],
)
def expand_math(op, ctx: PassContext) -> None:
    """See the module docstring."""
    for inner in collect_ops(op, ("math.isinf", "math.isnormal")):
        x = inner.operands[0]
        result = inner.results[0]
        element = element_name(x.type)
        if element not in SMALLEST_NORMAL:
            ctx.error(inner, f"'{inner.name}' on element type {element} is not supported")
            continue
        with ir.InsertionPoint(inner), inner.location:
            absolute = math_d.AbsFOp(x).result
            inf = float_const(x.type, _pymath.inf)
            if inner.name == "math.isinf":
                new = cmpf(OEQ, absolute, inf, result.type)
            else:
                low = float_const(x.type, SMALLEST_NORMAL[element])
                above = cmpf(OGE, absolute, low, result.type)
                below = cmpf(OLT, absolute, inf, result.type)
                new = arith.AndIOp(above, below).result
        result.replace_all_uses_with(new)
        inner.erase()
        ctx.statistic("expanded")
