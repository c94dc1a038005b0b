"""``tdf-stack-small-buffers``: small bookkeeping buffers on the stack.

Runs at the end of ``tdf-bufferize``, after the deallocations are lowered.
Lowering ``bufferization.dealloc`` with several memrefs (dynamic ownership:
loops, branches) allocates a handful of tiny buffers per call -- the
pointers to compare and the ownership flags passed to the generated
``dealloc_helper`` -- and frees them a few ops later. Each would be one
``malloc`` per call. A ``memref.alloc`` in a function's entry block (never
inside a loop, so the stack does not grow per iteration) with a static size
of at most ``max-bytes`` bytes, whose every alias stays in the function (not
returned, not passed to an opaque call, no pointer escape;
:func:`tdf.passes.analysis.buffers.aliases`) and that is freed by a
``memref.dealloc`` of the allocation itself in that block, becomes a
``memref.alloca``; its deallocation is erased. ``tdf-plan-memory``'s
arenas (``tdf.arena``) stay on the heap: a call's temporaries are one heap
allocation, as ``memory_analysis()`` reports.

Option ``max-bytes`` (default 512). Statistic ``promoted``.

Before::

    %flags = memref.alloc() : memref<2xi1>
    ...
    call @dealloc_helper(..., %cast, ...)
    memref.dealloc %flags : memref<2xi1>

After::

    %flags = memref.alloca() : memref<2xi1>
    ...
    call @dealloc_helper(..., %cast, ...)
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import memref

from ..vocabulary import ARENA_ATTR, element_nbytes
from .analysis.buffers import aliases
from .ir_utils import function_bodies
from .registry import PassContext, PassOption, register_pass
from .unown_opaque_results import opaque_callees

__all__ = ["stack_small_buffers"]


def _static_bytes(mtype) -> int | None:
    if not mtype.has_static_shape:
        return None
    nbytes = element_nbytes(mtype.element_type)
    if nbytes is None:
        return None
    for d in mtype.shape:
        nbytes *= d
    return nbytes


def _promotable(alloc, entry, limit: int, opaque: set) -> list | None:
    """The ``memref.dealloc`` ops of ``alloc`` when it can live on the
    stack, else None."""
    mtype = ir.MemRefType(alloc.results[0].type)
    size = _static_bytes(mtype)
    if size is None or size > limit or len(alloc.operands) or mtype.memory_space is not None \
            or ARENA_ATTR in alloc.attributes:
        return None
    _, _, escapes = aliases(alloc.results[0], opaque)
    if escapes:
        return None
    deallocs = [use.owner.operation if hasattr(use.owner, "operation") else use.owner
                for use in alloc.results[0].uses]
    deallocs = [op for op in deallocs if op.name == "memref.dealloc"]
    if not deallocs or any(op.block != entry for op in deallocs):
        return None
    return deallocs


@register_pass(
    "tdf-stack-small-buffers",
    "Small entry-block buffers freed in the same block become stack allocations",
    options=[PassOption("max-bytes", int, 512, "Largest buffer (bytes) moved to the stack")],
    statistics=[("promoted", "allocations moved to the stack")],
)
def stack_small_buffers(op, ctx: PassContext) -> None:
    """See the module docstring."""
    limit = int(ctx.option("max-bytes"))
    opaque = opaque_callees(op.operation)
    count = 0
    for func in function_bodies(op):
        if len(func.regions[0].blocks) != 1:
            continue
        entry = func.regions[0].blocks[0]
        for alloc in [o.operation for o in entry.operations if o.operation.name == "memref.alloc"]:
            deallocs = _promotable(alloc, entry, limit, opaque)
            if deallocs is None:
                continue
            with ir.InsertionPoint(alloc), alloc.location:
                attrs = {"alignment": alloc.attributes["alignment"]} \
                    if "alignment" in alloc.attributes else {}
                alloca = memref.AllocaOp(alloc.results[0].type, [], [],
                                         alignment=ir.IntegerAttr(attrs["alignment"]).value
                                         if attrs else None).result
            alloc.results[0].replace_all_uses_with(alloca)
            for dealloc in deallocs:
                dealloc.erase()
            alloc.erase()
            count += 1
    ctx.statistic("promoted", count)
