"""``tdf-strided-copies-to-loops``: turn ``memref.copy`` between
non-contiguous views into ``linalg.copy``.

``finalize-memref-to-llvm`` lowers a ``memref.copy`` whose operands are not
both contiguous (identity layout) to a call of the generic ``memrefCopy``
runtime function (element by element, through descriptors): slow for the row
writes of a KV-cache update. This pass, run before
``convert-linalg-to-loops`` in ``tdf-lower-to-cpu``, rewrites those copies
to ``linalg.copy``, which becomes plain loops LLVM can vectorize. Copies
between two identity-layout memrefs stay ``memref.copy`` (a ``memcpy``). No
options; statistic ``rewritten``.

Before::

    memref.copy %row, %slot : memref<1x4xf32> to memref<1x4xf32, strided<[4, 1], offset: ?>>

After::

    linalg.copy ins(%row : memref<1x4xf32>) outs(%slot : memref<1x4xf32, strided<[4, 1], offset: ?>>)
"""

from __future__ import annotations

from mlir import ir

from .ir_utils import collect_ops
from .registry import PassContext, register_pass

__all__ = ["strided_copies_to_loops"]


def _has_identity_layout(t) -> bool:
    m = ir.MemRefType(t)
    identity = ir.MemRefType.get(m.shape, m.element_type, memory_space=m.memory_space)
    return m == identity


@register_pass(
    "tdf-strided-copies-to-loops",
    "Turn memref.copy between non-contiguous views into linalg.copy (loops, vectorizable)",
    statistics=[("rewritten", "memref.copy ops turned into linalg.copy")],
)
def strided_copies_to_loops(op, ctx: PassContext) -> None:
    """See the module docstring."""
    from mlir.dialects import linalg

    for copy in collect_ops(op, "memref.copy"):
        src, dst = copy.operands[0], copy.operands[1]
        if _has_identity_layout(src.type) and _has_identity_layout(dst.type):
            continue
        with ir.InsertionPoint(copy), copy.location:
            linalg.copy(src, outs=[dst])
        copy.erase()
        ctx.statistic("rewritten")
