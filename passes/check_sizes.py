"""``tdf-check-sizes``: refuse static shapes too large to address, before
bufferization.

A tensor or memref type with a static shape whose size in bits overflows
int64 (``tensor<4611686018427387904x4xf32>``) makes One-Shot Bufferize and
the memref lowering abort the process (``integer overflow in size
computation``). This pass, first in ``tdf-bufferize``, ``tdf-lower-to-cpu``
and ``tdf-lower-to-nvvm``, reports every such type with an error at the op
(or function) that holds it and fails, so the pipeline stops with a located
diagnostic instead. It changes nothing. No options.

Example error::

    input.mlir:2:8: error: result of 'tensor.empty' has type
    tensor<4611686018427387904x4xf32> whose static size (590295810358705651712
    bits) overflows int64; tdf cannot allocate or address it
"""

from __future__ import annotations

from ..limits import static_size_errors
from .registry import PassContext, register_pass


@register_pass(
    "tdf-check-sizes",
    "Reject tensor/memref types whose static size overflows int64 (bufferization would abort)",
    statistics=[("oversized", "Types whose static size overflows int64")],
)
def check_sizes(op, ctx: PassContext) -> None:
    """See the module docstring: an error per oversized type; no rewrite."""
    for location, message in static_size_errors(op):
        ctx.statistic("oversized")
        ctx.error(location, message)
