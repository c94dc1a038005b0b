"""``tdf-gpu-pooled-alloc``: device buffers from a pool. The host code's
calls of MLIR's CUDA runtime ``mgpuMemAlloc``/``mgpuMemFree`` become calls of
tdf's ``tdf_gpu_mem_alloc``/``tdf_gpu_mem_free`` (the same arguments: size,
stream, host-shared flag; pointer, stream).

Runs last in ``tdf-lower-to-nvvm`` (option ``pool``), on the LLVM dialect
``gpu-lower-to-nvvm-pipeline`` produced. MLIR's functions take a fresh
``cuMemAlloc`` for every buffer of every call and give it back with
``cuMemFree``, which waits for the whole device; tdf's runtime
(``python/src/GpuRuntime.cpp``) takes them from device 0's stream-ordered
pool (``cuMemAllocAsync``/``cuMemFreeAsync`` on the stream the call names),
which keeps what a call frees for the next one. The program then needs
``libtdf_gpu_runtime.so`` where it runs (``tdf.gpu`` registers it in its
engine; an exported library links it).

Only the symbols change: each ``llvm.func`` declaration of ``mgpuMemAlloc``
or ``mgpuMemFree`` is renamed and every ``llvm.call`` of it follows. No
options; statistic ``calls``.

Before / after::

    %p = llvm.call @mgpuMemAlloc(%size, %stream, %false) : (i64, !llvm.ptr, i8) -> !llvm.ptr
    %p = llvm.call @tdf_gpu_mem_alloc(%size, %stream, %false) : (i64, !llvm.ptr, i8) -> !llvm.ptr
"""

from __future__ import annotations

from mlir import ir

from ..vocabulary import GPU_MEM_ALLOC, GPU_MEM_FREE
from .ir_utils import collect_ops
from .registry import PassContext, register_pass

__all__ = ["gpu_pooled_alloc", "RENAMED"]

#: MLIR's CUDA runtime function -> tdf's.
RENAMED = {"mgpuMemAlloc": GPU_MEM_ALLOC, "mgpuMemFree": GPU_MEM_FREE}


@register_pass(
    "tdf-gpu-pooled-alloc",
    "Device buffers from tdf's stream-ordered pool: mgpuMemAlloc/mgpuMemFree calls become "
    "tdf_gpu_mem_alloc/tdf_gpu_mem_free",
    statistics=[("calls", "allocation and free calls redirected to the pool")],
)
def gpu_pooled_alloc(op, ctx: PassContext) -> None:
    """See the module docstring."""
    calls = 0
    for call in collect_ops(op, "llvm.call"):
        if "callee" not in call.attributes:
            continue  # an indirect call
        new = RENAMED.get(ir.FlatSymbolRefAttr(call.attributes["callee"]).value)
        if new is not None:
            call.attributes["callee"] = ir.FlatSymbolRefAttr.get(new)
            calls += 1
    for func in collect_ops(op, "llvm.func"):
        new = RENAMED.get(ir.StringAttr(func.attributes["sym_name"]).value)
        if new is not None:
            func.attributes["sym_name"] = ir.StringAttr.get(new)
    if calls:
        ctx.statistic("calls", calls)
