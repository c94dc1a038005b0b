"""``tdf-check-copy-before-write``: refuse what One-Shot Bufferize's
copy-before-write mode cannot bufferize, before it runs.

With ``copy-before-write`` (``tdf-bufferize{copy-before-write}``, the
functional baseline of ``tdf-lower-to-cpu``), One-Shot Bufferize skips its
analysis, and MLIR 22's ``func.call`` bufferization then reads the analysis
state it did not make: any call with tensor operands or results crashes the
process (``getCalledFunction``, SIGSEGV; upstream ``mlir-opt`` does the same).
This pass, right before One-Shot in that mode, reports each such call with a
located error and fails, so the pipeline stops with a diagnostic instead.
Calls without tensors, ``tdf.call`` kernels and programs without calls are
untouched. It changes nothing. No options.

Example error::

    input.mlir:5:8: error: func.call @g has tensor operands or results:
    copy-before-write bufferization cannot handle such a call (One-Shot
    Bufferize crashes on it); inline @g or bufferize without copy-before-write
"""

from __future__ import annotations

from mlir import ir

from .ir_utils import collect_ops
from .registry import PassContext, register_pass

__all__ = ["check_copy_before_write"]


@register_pass(
    "tdf-check-copy-before-write",
    "Reject func.calls with tensors before copy-before-write One-Shot Bufferize (it would crash)",
    statistics=[("calls", "func.call ops with tensor operands or results")],
)
def check_copy_before_write(op, ctx: PassContext) -> None:
    """See the module docstring: an error per such call; no rewrite."""
    for call in collect_ops(op, "func.call"):
        values = list(call.operands) + list(call.results)
        if any(isinstance(v.type, ir.RankedTensorType | ir.UnrankedTensorType) for v in values):
            callee = ir.FlatSymbolRefAttr(call.attributes["callee"]).value
            ctx.statistic("calls")
            ctx.error(call, f"func.call @{callee} has tensor operands or results: "
                            f"copy-before-write bufferization cannot handle such a call "
                            f"(One-Shot Bufferize crashes on it); inline @{callee} or "
                            f"bufferize without copy-before-write")
