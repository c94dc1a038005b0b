"""``tdf-gpu-device-memory``: place every buffer of a bufferized program on
the GPU, with explicit, counted host<->device transfers at the entry points.

Runs after One-Shot Bufferize, before GPU mapping (the ``gpu`` stage of
``tdf-lower-to-nvvm``).

In every ``func.func`` with a body (all of them are host code that launches
kernels once mapped): ``memref.alloc``/``alloca`` become ``gpu.alloc`` and
``memref.dealloc`` ``gpu.dealloc`` (``tdf-plan-memory``'s arena keeps its
``tdf.arena`` attribute); ``memref.copy`` becomes ``linalg.copy``
(mapped to a device kernel like any linalg op, counted as ``device-copies``:
these are exactly the copies the in-place rules could not avoid). A buffer
with a non-identity layout cannot be placed and is an error.

Public functions are the entry points called with host buffers: each memref
argument gets a device buffer and an ``h2d`` ``gpu.memcpy`` (a host
``memref.load`` of an argument that is not donated, which the program
never writes, keeps reading the host buffer); at the return,
donated (``tdf.donate``/writable) arguments are copied back (``d2h``) and a
result that is a donated argument's buffer returns that argument; other
results are copied to fresh host buffers. Every transfer carries
``tdf.transfer = "h2d"|"d2h"``. Device buffers created in the entry block
are freed before returning. ``tdf.donate`` is dropped from the entry's
arguments (only valid on tensors). An entry point must be a single block
ending in ``func.return``. No options.

Before::

    func.func @step(%cache: memref<4x16xf32> {tdf.donate}, ...) -> memref<4x16xf32> {
      ... (writes %cache)
      return %cache : memref<4x16xf32>
    }

After::

    func.func @step(%cache: memref<4x16xf32>, ...) -> memref<4x16xf32> {
      %dcache = gpu.alloc () : memref<4x16xf32>
      gpu.memcpy %dcache, %cache {tdf.transfer = "h2d"} ...
      ... (writes %dcache)
      gpu.memcpy %cache, %dcache {tdf.transfer = "d2h"} ...
      gpu.dealloc %dcache : memref<4x16xf32>
      return %cache : memref<4x16xf32>
    }
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, gpu, linalg, memref

from ..vocabulary import ARENA_ATTR, DONATE_ATTR, TRANSFER_ATTR, WRITABLE_ATTR
from .ir_utils import arg_dicts, collect_ops, defining_op, has_body, is_public, memref_root
from .registry import PassContext, register_pass

__all__ = ["TRANSFER_ATTR", "gpu_device_memory", "host_code", "device_buffer", "transfer"]


def _dynamic_sizes(value, mtype):
    """``memref.dim`` of every dynamic dimension of ``value`` (metadata only)."""
    sizes = []
    for dim, extent in enumerate(mtype.shape):
        if ir.ShapedType.is_dynamic_size(extent):
            index = ir.IntegerAttr.get(ir.IndexType.get(), dim)
            sizes.append(memref.dim(value, arith.constant(ir.IndexType.get(), index)))
    return sizes


def _identity(mtype) -> bool:
    layout = mtype.layout
    return isinstance(layout, ir.AffineMapAttr) and layout.value == ir.AffineMap.get_identity(mtype.rank)


def transfer(dst, src, direction: str):
    """A ``gpu.memcpy`` from ``src`` to ``dst`` tagged ``tdf.transfer =
    direction`` (``h2d``/``d2h``: the report counts them)."""
    op = gpu.MemcpyOp(None, [], dst, src)
    op.operation.attributes[TRANSFER_ATTR] = ir.StringAttr.get(direction)
    return op


def _device_memory_in_body(func, ctx: PassContext) -> list:
    """memref.alloc/alloca -> gpu.alloc, memref.dealloc -> gpu.dealloc,
    memref.copy -> linalg.copy (a device kernel). Returns the new gpu.allocs."""
    work = collect_ops(func, ("memref.alloc", "memref.alloca", "memref.dealloc", "memref.copy"))
    allocs = []
    for op in work:
        with ir.InsertionPoint(op), op.location:
            if op.name in ("memref.alloc", "memref.alloca"):
                result = op.results[0]
                if not _identity(result.type):
                    ctx.error(op, f"cannot place {result.type} on the device: only identity layouts are supported")
                    continue
                operands = list(op.operands)
                dynamic = operands[: len([d for d in result.type.shape if ir.ShapedType.is_dynamic_size(d)])]
                symbols = operands[len(dynamic):]
                new = gpu.AllocOp(result.type, None, [], dynamic, symbols)
                if ARENA_ATTR in op.attributes:  # tdf-plan-memory's arena stays one
                    new.operation.attributes[ARENA_ATTR] = op.attributes[ARENA_ATTR]
                result.replace_all_uses_with(new.results[0])
                allocs.append(new.operation)
                ctx.statistic("device-allocs")
            elif op.name == "memref.dealloc":
                gpu.DeallocOp(None, [], op.operands[0])
            else:
                linalg.copy(op.operands[0], outs=[op.operands[1]])
                ctx.statistic("device-copies")
        op.erase()
    return allocs


def device_buffer(value) -> bool:
    """Whether memref ``value`` may be device memory once this pass has
    run: anything but a host buffer -- a ``memref.alloc``/``alloca`` of host
    code, an entry point's argument, or a view of one. (A ``gpu.alloc``, a
    private function's parameter, which host code passes device buffers to,
    a loop-carried buffer or a call's result are device memory.)"""
    root = memref_root(value)
    owner = defining_op(root)
    if owner is None:  # a block argument: an entry point's is the caller's
        parent = root.owner.owner
        return not (parent is not None and parent.operation.name == "func.func"
                    and is_public(parent.operation))
    return owner.name not in ("memref.alloc", "memref.alloca")


def host_code(op, func) -> bool:
    """Whether ``op`` of ``func`` runs on the host: no ancestor (up to
    ``func``) whose region becomes a kernel (``scf.parallel``,
    ``gpu.launch``) and not inside a linalg op's body."""
    parent = op.parent
    while parent is not None and parent.operation != func.operation:
        name = parent.operation.name
        if name in ("scf.parallel", "gpu.launch") or name.startswith("linalg."):
            return False
        parent = parent.operation.parent
    return True


def _bridge_entry(func, allocs, ctx: PassContext) -> None:
    """Explicit transfers at a public entry point: every memref argument is
    copied to a fresh device buffer (h2d); at each return, donated arguments
    are copied back (d2h) and returned device buffers copied to fresh host
    buffers (d2h); device buffers made in the entry block are freed. The
    ``tdf.donate`` attributes are dropped (the transfers now say it)."""
    block = func.regions[0].blocks[0]
    attrs = arg_dicts(func)
    donated = {i for i, d in enumerate(attrs)
               if DONATE_ATTR in d or (WRITABLE_ATTR in d and ir.BoolAttr(d[WRITABLE_ATTR]).value)}
    first = block.operations[0]
    mirrors = {}  # device value -> argument index
    device_of = {}
    for index, arg in enumerate(block.arguments):
        if not isinstance(arg.type, ir.MemRefType):
            continue
        if not _identity(arg.type):
            ctx.error(func, f"argument #{index} has type {arg.type}: the GPU path needs identity layouts")
            return
        # A host load of an argument the program never writes (not donated:
        # One-Shot Bufferize copies before writing one) reads the host buffer.
        uses = [(use.owner, use.operand_number) for use in arg.uses
                if index in donated or use.owner.name != "memref.load"
                or not host_code(use.owner, func)]
        with ir.InsertionPoint(first), func.location:
            device = gpu.AllocOp(arg.type, None, [], _dynamic_sizes(arg, arg.type), [])
            transfer(device.results[0], arg, "h2d")
        for owner, number in uses:
            owner.operands[number] = device.results[0]
        mirrors[device.results[0]] = index
        device_of[index] = device.results[0]
        ctx.statistic("transfers-h2d")
        allocs.append(device.operation)

    # Device buffers of the entry block the body frees itself (a
    # memref.dealloc made gpu.dealloc) are not freed a second time.
    entry_allocs = [a for a in allocs if a.block == block
                    and not any(use.owner.name == "gpu.dealloc" for use in a.results[0].uses)]
    returns = [op for op in block.operations if op.name == "func.return"]
    if not returns:
        ctx.error(func, "the GPU path needs a single-block entry function ending in func.return")
        return
    for ret in returns:
        with ir.InsertionPoint(ret), ret.location:
            for index in sorted(donated):
                if index in device_of:
                    transfer(block.arguments[index], device_of[index], "d2h")
                    ctx.statistic("transfers-d2h")
            new_operands = []
            for value in ret.operands:
                if not isinstance(value.type, ir.MemRefType):
                    new_operands.append(value)
                    continue
                if value in mirrors and mirrors[value] in donated:
                    new_operands.append(block.arguments[mirrors[value]])
                    continue
                host_type = ir.MemRefType.get(value.type.shape, value.type.element_type)
                host = memref.alloc(host_type, _dynamic_sizes(value, value.type), [])
                transfer(host, value, "d2h")
                ctx.statistic("transfers-d2h")
                new_operands.append(host)
            for alloc in entry_allocs:
                gpu.DeallocOp(None, [], alloc.results[0])
            for position, value in enumerate(new_operands):
                ret.operands[position] = value
    # Donation is now explicit in the transfers; the attribute is only valid on
    # tensor arguments and would be rejected on the LLVM functions.
    if any(DONATE_ATTR in d for d in attrs):
        cleaned = [ir.DictAttr.get({k: v for k, v in d.items() if k != DONATE_ATTR}) for d in attrs]
        func.attributes["arg_attrs"] = ir.ArrayAttr.get(cleaned)
    ctx.statistic("entry-points")


@register_pass(
    "tdf-gpu-device-memory",
    "Place every buffer of a bufferized program on the GPU with explicit, counted host<->device transfers",
    statistics=[("device-allocs", "memref.alloc/alloca made gpu.alloc"),
                ("device-copies", "memref.copy made a device copy kernel (linalg.copy)"),
                ("transfers-h2d", "host to device transfers at entry points"),
                ("transfers-d2h", "device to host transfers at entry points"),
                ("entry-points", "public functions given a host<->device bridge")],
)
def gpu_device_memory(op, ctx: PassContext) -> None:
    """See the module docstring."""
    for func in collect_ops(op, "func.func", has_body):
        allocs = _device_memory_in_body(func, ctx)
        if is_public(func):
            if len(func.regions[0].blocks) != 1:
                ctx.error(func, "the GPU path needs a single-block entry function")
                continue
            _bridge_entry(func, allocs, ctx)
