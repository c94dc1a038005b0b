"""``tdf-gpu-check-host-access``: reject host code that reads or writes
device memory after GPU mapping.

Runs after ``gpu-kernel-outlining`` in ``tdf-lower-to-nvvm``: every buffer
is then a device buffer, so host code (``func.func`` bodies outside
``gpu.module``) may only pass them around, take views and launch kernels. A
remaining load, store, copy, vector transfer or linalg op on a device buffer
(``tdf-gpu-device-memory``'s ``device_buffer``) would dereference a device
pointer on the host; each one is reported as an error naming the op and the
pass fails. Host buffers (an entry point's arguments, ``memref.alloc`` /
``alloca`` of host code: ``tdf-gpu-host-scalars``' copies of small device
buffers) may be read and written. It changes nothing. No options.

Example error::

    input.mlir:5:10: error: memref.load accesses device memory on the host: not
    supported on the GPU path (compute it in a kernel)
"""

from __future__ import annotations

from mlir import ir

from .gpu_device_memory import device_buffer
from .registry import PassContext, register_pass

__all__ = ["gpu_check_host_access"]

_HOST_FORBIDDEN = ("memref.load", "memref.store", "memref.copy", "affine.load", "affine.store",
                   "vector.load", "vector.store", "vector.transfer_read", "vector.transfer_write")


@register_pass(
    "tdf-gpu-check-host-access",
    "Reject host code that reads or writes device memory after GPU mapping",
)
def gpu_check_host_access(op, ctx: PassContext) -> None:
    """See the module docstring."""

    def visit(inner):
        name = inner.name
        if name == "gpu.module":
            return ir.WalkResult.SKIP
        if (name in _HOST_FORBIDDEN or (name.startswith("linalg.") and name != "linalg.yield")) \
                and any(device_buffer(v) for v in inner.operands
                        if isinstance(v.type, ir.MemRefType)):
            ctx.error(inner, f"{name} accesses device memory on the host: not supported on "
                             f"the GPU path (compute it in a kernel)")
        return ir.WalkResult.ADVANCE

    op.walk(visit, ir.WalkOrder.PRE_ORDER)
