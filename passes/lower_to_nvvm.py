"""``tdf-lower-to-nvvm``: the GPU path, from in-place tensor programs to NVVM/PTX.

The pipeline runs, in order (each stage is also available on its own through
:func:`stage_pipelines`, which :mod:`tdf.gpu` uses to report per stage):

1. ``donate``: ``tdf-check-sizes`` (a static shape whose size overflows
   int64 is refused: bufferization would abort), ``tdf-donate`` (and
   ``tdf-insert-inplace`` when ``inplace``);
2. ``bufferize``: One-Shot Bufferize with function boundaries and identity
   layouts, then ``canonicalize, cse`` (self-copies fold away) and
   ``symbol-dce`` (kernels nobody calls are not compiled). The in-place decisions are fixed here:
   an operand updated in place is the same buffer as the result;
3. ``gpu``: ``tdf-gpu-device-memory`` (below) makes every buffer a device
   buffer with explicit, counted host<->device transfers at the entry points;
   linalg ops on memrefs become ``scf.parallel`` loops (unit dimensions
   folded away), ``tdf-gpu-coalesce`` puts their dimensions innermost first,
   they are tiled (guards, no min/max bounds) and mapped outermost-first: the
   contiguous dimension lands on ``threadIdx.x`` (coalesced accesses),
   turned into ``gpu.launch`` and outlined into ``gpu.func`` kernels;
   ``tdf-gpu-check-host-access`` then rejects host code that would still
   touch device memory, and ``tdf-widen-i1-memrefs`` stores ``i1`` buffers
   as ``i8`` (host signatures, device buffers and kernels; the memref to
   LLVM lowering asserts on ``i1`` loads and stores);
4. ``nvvm``: ``gpu-lower-to-nvvm-pipeline`` for the chosen chip: NVVM, the host
   side through the GPU runtime ABI (``mgpu*`` calls) and ``gpu.binary``
   holding PTX (``format=isa``), a cubin (``bin``) or a fatbin (``fatbin``;
   both need the CUDA toolkit).

Options of ``tdf-lower-to-nvvm``:

* ``chip`` (default ``sm_90``): ``sm_<N>`` or ``sm_<N>a``, validated here
  against a table of chips and the PTX ISA version each needs (MLIR aborts
  the process when the PTX version is too old for the chip);
* ``inplace`` (default true): run ``tdf-insert-inplace``;
* ``strict`` (default false): run ``tdf-verify-inplace{strict=true}`` (a copy
  forced by a ``tdf.call_inplace`` is an error);
* ``format`` (default ``isa``): ``isa`` (PTX text), ``bin`` or ``fatbin``;
* ``opt-level`` (default 3): 0 to 3;
* ``tile-sizes`` (default ``32,8``): thread-block shape, innermost dimension
  first: the first size is the block width along the contiguous dimension
  (``threadIdx.x``), the second along the next dimension, and so on;
* ``stop-at`` (default ``nvvm``): ``bufferize``, ``gpu`` or ``nvvm``, the last
  stage to run (``gpu`` leaves the GPU dialect for inspection).

Before (a donated element-wise chain, after ``tdf-insert-inplace``)::

    func.func @chain(%x: tensor<64x128xf32> {tdf.donate}, %y: tensor<64x128xf32>)
        -> tensor<64x128xf32> {
      %0 = tdf.call_inplace @add_inplace(%x, %y) inplace [0] : ...
      return %0 : tensor<64x128xf32>
    }

After ``stop-at=gpu``::

    func.func @chain(%x: memref<64x128xf32>, %y: memref<64x128xf32>) -> memref<64x128xf32> {
      %dx = gpu.alloc () : memref<64x128xf32>
      gpu.memcpy %dx, %x {tdf.transfer = "h2d"} ...
      %dy = gpu.alloc () ...
      gpu.memcpy %dy, %y {tdf.transfer = "h2d"} ...
      call @add_inplace(%dx, %dy)          // writes %dx: no device copy
      gpu.memcpy %x, %dx {tdf.transfer = "d2h"} ...
      gpu.dealloc %dx ...
      return %x : memref<64x128xf32>
    }
    gpu.module @add_inplace_kernel { gpu.func @add_inplace_kernel(...) kernel { ... } }

After the full pipeline: ``llvm.func``s calling ``mgpuMemAlloc``,
``mgpuMemcpy``, ``mgpuLaunchKernel`` and a ``gpu.binary`` whose object is PTX
with ``.target sm_90``.
"""

from __future__ import annotations

import re

from mlir import ir
from mlir.dialects import arith, gpu, linalg, memref

from ._ir import arg_dicts, collect_ops, has_body, is_public
from .pipelines import ONE_SHOT
from .registry import PassContext, PassOption, register_pass, register_pipeline

__all__ = [
    "PTX_VERSION",
    "FORMATS",
    "STAGES",
    "validate_options",
    "stage_pipelines",
    "ptx_feature",
]

# Minimum PTX ISA version for each chip LLVM 22's NVPTX backend knows (PTX ISA
# release notes); the pipeline asks for exactly this version.
PTX_VERSION = {
    "sm_70": 60, "sm_72": 61, "sm_75": 63,
    "sm_80": 70, "sm_86": 71, "sm_87": 74, "sm_89": 78,
    "sm_90": 78, "sm_90a": 80,
    "sm_100": 86, "sm_100a": 86, "sm_101": 86, "sm_101a": 86,
    "sm_120": 87, "sm_120a": 87,
}
# sm_90 itself is accepted by PTX 7.8, but the upstream NVVM target's default
# feature check wants PTX 8.0 there (TOOLCHAIN.md): keep 8.0 for sm_90.
PTX_VERSION["sm_90"] = 80

FORMATS = ("isa", "bin", "fatbin")
STAGES = ("bufferize", "gpu", "nvvm")
_CHIP = re.compile(r"^sm_[0-9]{2,3}a?$")
_TILES = re.compile(r"^[1-9][0-9]{0,3}(,[1-9][0-9]{0,3}){0,2}$")

BUFFERIZE = ONE_SHOT


def ptx_feature(chip: str) -> str:
    """The ``cubin-features`` string for ``chip``, e.g. ``+ptx80`` for sm_90."""
    return f"+ptx{PTX_VERSION[chip]}"


def validate_options(options: dict) -> None:
    """Raises ValueError naming the bad option, before anything reaches MLIR
    (a bad chip/PTX pair aborts the process inside MLIR)."""
    chip = options["chip"]
    if not _CHIP.match(chip) or chip not in PTX_VERSION:
        known = ", ".join(sorted(PTX_VERSION, key=lambda c: (int(re.sub(r"\D", "", c)), c)))
        raise ValueError(f"unsupported chip '{chip}' for tdf-lower-to-nvvm (supported: {known})")
    if options["format"] not in FORMATS:
        raise ValueError(f"unknown format '{options['format']}' for tdf-lower-to-nvvm "
                         f"(expected one of: {', '.join(FORMATS)})")
    if not 0 <= options["opt-level"] <= 3:
        raise ValueError(f"opt-level {options['opt-level']} of tdf-lower-to-nvvm is not in [0, 3]")
    if options["stop-at"] not in STAGES:
        raise ValueError(f"unknown stop-at '{options['stop-at']}' for tdf-lower-to-nvvm "
                         f"(expected one of: {', '.join(STAGES)})")
    if not _TILES.match(options["tile-sizes"]):
        raise ValueError(f"bad tile-sizes '{options['tile-sizes']}' for tdf-lower-to-nvvm "
                         f"(expected 1 to 3 positive integers separated by commas)")
    threads = 1
    for size in options["tile-sizes"].split(","):
        threads *= int(size)
    if threads > 1024:
        raise ValueError(f"tile-sizes '{options['tile-sizes']}' make {threads} threads per "
                         f"block (at most 1024)")


def stage_pipelines(options: dict) -> list[tuple[str, str]]:
    """The pipeline as ``[(stage, pass list)]`` up to ``stop-at``; validates
    ``options`` (a full option dict, see the module docstring)."""
    validate_options(options)
    donate = "tdf-check-sizes, tdf-donate" + (", tdf-insert-inplace" if options["inplace"] else "")
    if options["strict"]:
        donate += ", tdf-verify-inplace{strict=true}"
    stages = [
        ("donate", donate),
        ("bufferize", f"{BUFFERIZE}, canonicalize, cse, canonicalize, symbol-dce"),
        ("gpu", ", ".join([
            "tdf-gpu-device-memory",
            "func.func(convert-linalg-to-parallel-loops, canonicalize)",
            "tdf-gpu-coalesce",
            "func.func(scf-parallel-loop-tiling{parallel-loop-tile-sizes="
            f"{options['tile-sizes']} no-min-max-bounds=true}}, "
            "gpu-map-parallel-loops{mapping-policy=outermost-first}, "
            "convert-parallel-loops-to-gpu, canonicalize)",
            "gpu-kernel-outlining",
            "tdf-gpu-check-host-access",
            "tdf-widen-i1-memrefs",
            "func.func(gpu-async-region)",
            "canonicalize, cse",
        ])),
        ("nvvm", (f"gpu-lower-to-nvvm-pipeline{{cubin-chip={options['chip']} "
                  f"cubin-features={ptx_feature(options['chip'])} "
                  f"cubin-format={options['format']} opt-level={options['opt-level']}}}")),
    ]
    last = {"bufferize": 2, "gpu": 3, "nvvm": 4}[options["stop-at"]]
    return stages[:last]


PIPELINE_OPTIONS = [
    PassOption("chip", str, "sm_90", "Target GPU, sm_<N>[a] (validated; picks the PTX version)"),
    PassOption("inplace", bool, True, "Run tdf-insert-inplace before bufferization"),
    PassOption("strict", bool, False,
               "Run tdf-verify-inplace{strict=true}: a copy forced by a tdf.call_inplace is an error"),
    PassOption("format", str, "isa", "gpu.binary format: isa (PTX), bin (cubin) or fatbin"),
    PassOption("opt-level", int, 3, "NVVM optimization level, 0 to 3"),
    PassOption("tile-sizes", str, "32,8", "Thread block shape, innermost (contiguous) dimension first"),
    PassOption("stop-at", str, "nvvm", "Last stage to run: bufferize, gpu or nvvm"),
]


@register_pipeline(
    "tdf-lower-to-nvvm",
    "Lower a tdf program to the GPU dialect, NVVM and a GPU binary (PTX for sm_90 by default)",
    options=PIPELINE_OPTIONS,
)
def lower_to_nvvm(options: dict) -> str:
    """Expands to the pass list of :func:`stage_pipelines`."""
    return ", ".join(passes for _, passes in stage_pipelines(options))


# ---------------------------------------------------------------------------
# tdf-gpu-device-memory
# ---------------------------------------------------------------------------

TRANSFER_ATTR = "tdf.transfer"
_DONATE = "tdf.donate"
_WRITABLE = "bufferization.writable"


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


def _bytes(mtype) -> int | None:
    if not mtype.has_static_shape:
        return None
    width = mtype.element_type.width if hasattr(mtype.element_type, "width") else None
    if width is None:
        return None
    count = 1
    for extent in mtype.shape:
        count *= extent
    return count * width // 8


def _memcpy(dst, src, direction: str):
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


def _bridge_entry(func, allocs, ctx: PassContext) -> None:
    """Explicit transfers at a public entry point: every memref argument is
    copied to a fresh device buffer (h2d); at each return, donated arguments
    are copied back (d2h) and returned device buffers copied to fresh host
    buffers (d2h); device buffers made in the entry block are freed. The
    ``tdf.donate`` attributes are dropped (the transfers now say it)."""
    block = func.regions[0].blocks[0]
    attrs = arg_dicts(func)
    first = block.operations[0]
    mirrors = {}  # device value -> argument index
    device_of = {}
    for index, arg in enumerate(block.arguments):
        if not isinstance(arg.type, ir.MemRefType):
            continue
        if not _identity(arg.type):
            ctx.error(func, f"argument #{index} has type {arg.type}: the GPU path needs identity layouts")
            return
        uses = [(use.owner, use.operand_number) for use in arg.uses]
        with ir.InsertionPoint(first), func.location:
            device = gpu.AllocOp(arg.type, None, [], _dynamic_sizes(arg, arg.type), [])
            _memcpy(device.results[0], arg, "h2d")
        for owner, number in uses:
            owner.operands[number] = device.results[0]
        mirrors[device.results[0]] = index
        device_of[index] = device.results[0]
        ctx.statistic("transfers-h2d")
        allocs.append(device.operation)

    entry_allocs = [a for a in allocs if a.block == block]
    donated = {i for i, d in enumerate(attrs)
               if _DONATE in d or (_WRITABLE in d and ir.BoolAttr(d[_WRITABLE]).value)}
    returns = [op for op in block.operations if op.name == "func.return"]
    if not returns:
        ctx.error(func, "the GPU path needs a single-block entry function ending in func.return")
        return
    for ret in returns:
        with ir.InsertionPoint(ret), ret.location:
            for index in sorted(donated):
                if index in device_of:
                    _memcpy(block.arguments[index], device_of[index], "d2h")
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
                _memcpy(host, value, "d2h")
                ctx.statistic("transfers-d2h")
                new_operands.append(host)
            for alloc in entry_allocs:
                gpu.DeallocOp(None, [], alloc.results[0])
            for position, value in enumerate(new_operands):
                ret.operands[position] = value
    # Donation is now explicit in the transfers; the attribute is only valid on
    # tensor arguments and would be rejected on the LLVM functions.
    if any(_DONATE in d for d in attrs):
        cleaned = [ir.DictAttr.get({k: v for k, v in d.items() if k != _DONATE}) for d in attrs]
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
    """Runs after One-Shot Bufferize, before GPU mapping.

    In every ``func.func`` with a body (all of them are host code that
    launches kernels once mapped): ``memref.alloc``/``alloca`` become
    ``gpu.alloc`` and ``memref.dealloc`` ``gpu.dealloc``; ``memref.copy``
    becomes ``linalg.copy`` (mapped to a device kernel like any linalg op,
    counted as ``device-copies``: these are exactly the copies the in-place
    rules could not avoid).

    Public functions are the entry points called with host buffers: each
    memref argument gets a device buffer and an ``h2d`` ``gpu.memcpy``; at the
    return, donated (``tdf.donate``/writable) arguments are copied back
    (``d2h``) and a result that is a donated argument's buffer returns that
    argument; other results are copied to fresh host buffers. Every transfer
    carries ``tdf.transfer = "h2d"|"d2h"``. Device buffers created in the
    entry block are freed before returning. ``tdf.donate`` is dropped from
    the entry's arguments (only valid on tensors).

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
    for func in collect_ops(op, "func.func", has_body):
        allocs = _device_memory_in_body(func, ctx)
        if is_public(func):
            if len(func.regions[0].blocks) != 1:
                ctx.error(func, "the GPU path needs a single-block entry function")
                continue
            _bridge_entry(func, allocs, ctx)


def _reverse_parallel_dims(loop) -> None:
    """Reverses the dimensions of an ``scf.parallel`` in place: bounds and
    steps are permuted, and every use of induction variable ``i`` becomes a
    use of the variable now at position ``rank - 1 - i``."""
    rank = len(loop.regions[0].blocks[0].arguments)
    if rank < 2:
        return
    operands = list(loop.operands)
    for group in range(3):  # lower bounds, upper bounds, steps
        for dim in range(rank):
            loop.operands[group * rank + dim] = operands[group * rank + rank - 1 - dim]
    args = list(loop.regions[0].blocks[0].arguments)
    uses = [[(u.owner, u.operand_number) for u in arg.uses] for arg in args]
    for dim, dim_uses in enumerate(uses):
        for owner, number in dim_uses:
            owner.operands[number] = args[rank - 1 - dim]


@register_pass(
    "tdf-gpu-coalesce",
    "Put the dimensions of outermost scf.parallel loops innermost first, for coalesced GPU mapping",
    statistics=[("reversed", "scf.parallel loops whose dimensions were reversed")],
)
def gpu_coalesce(op, ctx: PassContext) -> None:
    """Reverses the dimensions of every outermost ``scf.parallel`` without
    reductions, so that the contiguous (last) dimension of the row-major
    buffers comes first. ``scf-parallel-loop-tiling`` then gives it the first
    tile size and ``gpu-map-parallel-loops{mapping-policy=outermost-first}``
    maps it to ``threadIdx.x``: consecutive threads touch consecutive
    addresses.

    Before::

        scf.parallel (%i, %j) = (%c0, %c0) to (%c64, %c128) step (%c1, %c1) {
          %v = memref.load %a[%i, %j] : memref<64x128xf32>

    After::

        scf.parallel (%j, %i) = (%c0, %c0) to (%c128, %c64) step (%c1, %c1) {
          %v = memref.load %a[%i, %j] : memref<64x128xf32>
    """
    loops = []

    def visit(inner):
        if inner.name == "scf.parallel":
            if len(inner.results) == 0:
                loops.append(inner)
            return ir.WalkResult.SKIP
        return ir.WalkResult.ADVANCE

    op.walk(visit, ir.WalkOrder.PRE_ORDER)
    for loop in loops:
        _reverse_parallel_dims(loop)
        ctx.statistic("reversed")


_HOST_FORBIDDEN = ("memref.load", "memref.store", "memref.copy", "affine.load", "affine.store",
                   "vector.load", "vector.store", "vector.transfer_read", "vector.transfer_write")


@register_pass(
    "tdf-gpu-check-host-access",
    "Reject host code that reads or writes device memory after GPU mapping",
)
def gpu_check_host_access(op, ctx: PassContext) -> None:
    """Runs after ``gpu-kernel-outlining``: every buffer is a device buffer,
    so host code (``func.func`` bodies outside ``gpu.module``) may only pass
    them around, take views and launch kernels. A remaining load, store,
    copy or linalg op on a memref would dereference a device pointer on the
    host; it is reported as an error naming the op. Host buffers of the
    entry bridge are only touched by ``gpu.memcpy``.

    Example error: ``memref.load reads device memory on the host: not
    supported on the GPU path (compute it in a kernel)``.
    """

    def visit(inner):
        name = inner.name
        if name == "gpu.module":
            return ir.WalkResult.SKIP
        if name in _HOST_FORBIDDEN or (name.startswith("linalg.") and name != "linalg.yield"):
            ctx.error(inner, f"{name} accesses device memory on the host: not supported on "
                             f"the GPU path (compute it in a kernel)")
        return ir.WalkResult.ADVANCE

    op.walk(visit, ir.WalkOrder.PRE_ORDER)
