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
``memref.store`` is copied down, stored into and copied back up. A load in
host loops (``scf.for``/``while``/``if``) that do not write the buffer
(through any view: no linalg output, store, copy, memcpy destination or
call operand) is served by one copy in front of the outermost such loop,
for buffers of up to ``max-hoisted-bytes``: a scatter loop reading its
indices reads them once per call, not once per index. The
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
host call is no linalg op any more). Options: ``max-bytes`` (256),
``max-hoisted-bytes`` (65536); statistics ``transfers``,
``single-thread-kernels``.

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

from ..vocabulary import MEMREF_VIEW_OPS, element_nbytes
from .gpu_device_memory import device_buffer, host_code, transfer
from .ir_utils import collect_ops, defining_op, has_body, identity_layout, memref_root
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


def _may_write(loop, root) -> bool:
    """Whether an op inside ``loop`` may write buffer ``root`` (through any
    view of it): a linalg op's output, a store, a copy's or memcpy's
    destination, or any other use but a load, a view and a linalg input
    (a call, say)."""
    for inner in collect_ops(loop):
        if inner.operation == loop.operation:
            continue
        name = inner.name
        if name == "memref.load" or name in MEMREF_VIEW_OPS:
            continue
        if name.startswith("linalg.") and name != "linalg.yield":
            candidates = _outputs(inner)
        elif name == "gpu.memcpy":
            candidates = [inner.operands[len(inner.operands) - 2]]  # after async deps: dst, src
        else:
            candidates = list(inner.operands)
        if any(isinstance(v.type, ir.MemRefType) and memref_root(v) == root for v in candidates):
            return True
    return False


def _inside(op, region_op) -> bool:
    """Whether ``op`` is nested in ``region_op``'s regions."""
    parent = op.parent
    while parent is not None:
        if parent.operation == region_op.operation:
            return True
        parent = parent.operation.parent
    return False


def _hoisted_position(access, target, func, written: dict):
    """The op to copy ``target`` in front of for a host read ``access``: the
    outermost loop (or ``scf.if``) around it that does not write the buffer
    and that ``target`` is defined outside of; ``access`` itself when there
    is none."""
    root = memref_root(target)
    defined_in = defining_op(target)
    position = access
    parent = access.parent
    while parent is not None and parent.operation != func.operation:
        if parent.operation.name not in ("scf.for", "scf.while", "scf.if"):
            break
        if defined_in is not None and _inside(defined_in, parent):
            break
        key = (parent.operation, root)
        if key not in written:  # each loop's body is scanned once per buffer
            written[key] = _may_write(parent, root)
        if written[key]:
            break
        position = parent.operation
        parent = parent.operation.parent
    return position


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
                        "Largest device buffer a host load or store copies whole"),
             PassOption("max-hoisted-bytes", int, 65536,
                        "Largest device buffer copied once in front of a loop that reads it")],
    statistics=[("transfers", "device<->host copies made for host loads and stores"),
                ("single-thread-kernels", "one-element linalg ops launched on one GPU thread")],
)
def gpu_host_scalars(op, ctx: PassContext) -> None:
    """See the module docstring."""
    limit, hoisted_limit = ctx.option("max-bytes"), ctx.option("max-hoisted-bytes")
    transfers = launches = 0
    for func in collect_ops(op, "func.func", has_body):
        for linalg_op in collect_ops(func, where=lambda o: o.name.startswith("linalg.")
                                     and o.name != "linalg.yield"):
            if host_code(linalg_op, func) and _single_point(linalg_op):
                _launch_single_thread(linalg_op)
                launches += 1
        entry = func.regions[0].blocks[0]
        hosts = {}  # device buffer -> its host copy in this function
        copied = set()  # (device buffer, loop) copied in front of the loop
        written: dict = {}  # (loop, buffer) -> whether the loop may write it
        for access in collect_ops(func, ("memref.load", "memref.store")):
            target = access.operands[0 if access.name == "memref.load" else 1]
            mtype = ir.MemRefType(target.type)
            if not (host_code(access, func) and device_buffer(target) and identity_layout(mtype)
                    and mtype.has_static_shape):
                continue
            # A read in a loop that does not write the buffer copies it once,
            # before the loop.
            before = _hoisted_position(access, target, func, written) \
                if access.name == "memref.load" else access
            nbytes = math.prod(mtype.shape) * element_nbytes(mtype.element_type)
            if nbytes > (limit if before == access else hoisted_limit):
                continue
            if target not in hosts:
                with ir.InsertionPoint.at_block_begin(entry), access.location:
                    hosts[target] = memref.alloca(mtype, [], [])
            host = hosts[target]
            if (target, before) not in copied:
                with ir.InsertionPoint(before), access.location:
                    transfer(host, target, "d2h")
                transfers += 1
                if before != access:
                    copied.add((target, before))
            position = 0 if access.name == "memref.load" else 1
            access.operands[position] = host
            if access.name == "memref.store":
                with ir.InsertionPoint.after(access), access.location:
                    transfer(target, host, "h2d")
                transfers += 1
    if transfers:
        ctx.statistic("transfers", transfers)
    if launches:
        ctx.statistic("single-thread-kernels", launches)
