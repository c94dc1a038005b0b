"""``tdf-gpu-host-scalars``: host code that reads or writes an element of a
small device buffer goes through a host copy of that buffer.

Runs in the ``gpu`` stage of ``tdf-lower-to-nvvm``, after
``tdf-gpu-device-memory`` (every buffer is a device buffer, entry arguments
have device copies) and before linalg ops become kernels. A JAX program
reads scalars on the host: a decode position that indexes a cache, the
start indices of a ``dynamic_update_slice``, a reduction (a LayerNorm's
mean) that a later fused loop uses as a scalar. On the GPU those values
live in device memory, which host code cannot dereference.

Each ``memref.load`` in host code (a function body outside ``scf.parallel``
and ``gpu.launch``) of a device buffer with an identity layout, a static
shape and at most ``max-bytes`` bytes becomes a device-to-host
``gpu.memcpy`` of the whole buffer into a host buffer (one ``memref.alloca``
per buffer and function, at the function's entry) and a load from it; a
``memref.store`` is copied down, stored into and copied back up. The
copies carry ``tdf.transfer`` (``d2h`` / ``h2d``, counted by the report),
and ``gpu-async-region`` makes the host wait for the kernels that wrote the
buffer before it reads. A load of an entry argument that the program never
writes is served by ``tdf-gpu-device-memory`` from the argument's host
buffer (no transfer at all).

Anything else (a larger buffer, a view with an offset, a dynamic shape) is
left as it is and ``tdf-gpu-check-host-access`` reports it.

A linalg op of host code that computes one element (every output has one
element: a reduction to a scalar, a rank-0 fill, a one-element copy) would
have no parallel loop left once lowered, so nothing of it would become a
kernel and its loads and stores would stay on the host. Each is moved into a
``gpu.launch`` of one block of one thread (outlined with the other kernels).
A long reduction to a scalar then runs on a single GPU thread: correct, not
fast.

Runs after ``tdf-contractions-to-cublas`` (a contraction it turned into a
host call is no linalg op any more). Options: ``max-bytes`` (256);
statistics ``transfers``, ``single-thread-kernels``.

Before / after::

    %pos = memref.load %dev[] : memref<i32>

    %host = memref.alloca() : memref<i32>          // at the function's entry
    gpu.memcpy %host, %dev {tdf.transfer = "d2h"} : memref<i32>, memref<i32>
    %pos = memref.load %host[] : memref<i32>
"""

from __future__ import annotations

import math

from mlir import ir
from mlir.dialects import gpu, memref

from ..vocabulary import element_nbytes
from .gpu_device_memory import device_buffer, host_code, transfer
from .ir_utils import collect_ops, has_body, identity_layout
from .registry import PassContext, PassOption, register_pass

__all__ = ["gpu_host_scalars"]


def _single_point(op) -> bool:
    """Whether linalg op ``op`` computes one element: every output has a
    static shape of one element (rank 0 or all dimensions 1). Lowered to
    loops, it has no parallel loop left (a reduction to a scalar is a
    sequential loop; canonicalize folds single-iteration loops away), so
    nothing of it would become a kernel."""
    outputs = _outputs(op)
    return bool(outputs) and all(
        isinstance(v.type, ir.MemRefType) and ir.MemRefType(v.type).has_static_shape
        and math.prod(ir.MemRefType(v.type).shape) == 1 for v in outputs)


def _outputs(op) -> list:
    """The ``outs`` / ``inits`` operands of linalg op ``op`` (the last
    operand when its builder names neither)."""
    view = op.opview
    for name in ("outputs", "inits"):
        if hasattr(view, name):
            return list(getattr(view, name))
    if hasattr(view, "init"):
        return [view.init]
    return [op.operands[len(op.operands) - 1]] if len(op.operands) else []


def _launch_single_thread(op) -> None:
    """Moves ``op`` into a ``gpu.launch`` of one block of one thread."""
    with ir.InsertionPoint(op), op.location:
        launch = gpu.LaunchOp((1, 1, 1), (1, 1, 1))
    body = launch.regions[0].blocks[0]
    with ir.InsertionPoint(body), op.location:
        terminator = gpu.TerminatorOp()
    op.move_before(terminator)


@register_pass(
    "tdf-gpu-host-scalars",
    "Host reads and writes of small device buffers go through a host copy (gpu.memcpy); "
    "one-element linalg ops run as one-thread kernels",
    options=[PassOption("max-bytes", int, 256,
                        "Largest device buffer a host load or store copies whole")],
    statistics=[("transfers", "device<->host copies made for host loads and stores"),
                ("single-thread-kernels", "one-element linalg ops launched on one GPU thread")],
)
def gpu_host_scalars(op, ctx: PassContext) -> None:
    """See the module docstring."""
    limit = ctx.option("max-bytes")
    transfers = launches = 0
    for func in collect_ops(op, "func.func", has_body):
        for linalg_op in collect_ops(func, where=lambda o: o.name.startswith("linalg.")
                                     and o.name != "linalg.yield"):
            if host_code(linalg_op, func) and _single_point(linalg_op):
                _launch_single_thread(linalg_op)
                launches += 1
        entry = func.regions[0].blocks[0]
        hosts = {}  # device buffer -> its host copy in this function
        for access in collect_ops(func, ("memref.load", "memref.store")):
            target = access.operands[0 if access.name == "memref.load" else 1]
            mtype = ir.MemRefType(target.type)
            if not (host_code(access, func) and device_buffer(target) and identity_layout(mtype)
                    and mtype.has_static_shape
                    and math.prod(mtype.shape) * element_nbytes(mtype.element_type) <= limit):
                continue
            if target not in hosts:
                with ir.InsertionPoint.at_block_begin(entry), access.location:
                    hosts[target] = memref.alloca(mtype, [], [])
            host = hosts[target]
            with ir.InsertionPoint(access), access.location:
                transfer(host, target, "d2h")
            position = 0 if access.name == "memref.load" else 1
            access.operands[position] = host
            transfers += 1
            if access.name == "memref.store":
                with ir.InsertionPoint.after(access), access.location:
                    transfer(target, host, "h2d")
                transfers += 1
    if transfers:
        ctx.statistic("transfers", transfers)
    if launches:
        ctx.statistic("single-thread-kernels", launches)
