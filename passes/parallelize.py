"""``tdf-parallelize``: large loop nests of linalg ops on memrefs run on
several threads.

Runs after bufferization and the contraction passes, before the loops are
lowered. A linalg op (``linalg.generic``, ``linalg.map``, ``linalg.fill``,
``linalg.copy``, ``linalg.transpose``, the element-wise named ops, and the
GEMMs ``tdf-contractions-to-blas`` left to ``tdf-vectorize-contractions``:
``linalg.matmul`` / ``linalg.contract``, cut only into chunks of one static
size, which that pass then vectorizes) with at
least ``min-elements`` iterations (static shapes) whose outermost loop is
parallel and in every output is cut along that loop into contiguous chunks,
as many as its function's estimated work pays for, at most ``threads``: an
``scf.parallel`` over the chunks, each running the op on subviews of its
operands (so each chunk is the same vectorizable loop nest as before, on
fewer rows): ``ceil(n / chunks)`` rows each, a static
size when that divides the loop (LLVM's vectorizer then needs no remainder
loop). ``tdf-outline-parallel`` and ``tdf-launch-parallel`` then run the
chunks as tasks of tdf's thread pool (``tdf_rt_parallel_for``: on the
calling thread and the pool's workers, each with the caller's
floating-point mode; all on the calling thread in a forked child). A body
that reads its position along the cut loop (``linalg.index 0``: iotas,
counters) gets the chunk's start added to it.

The work estimate (:func:`work`, in the spirit of XLA's parallel task
assignment, which weighs bytes accessed, flops and transcendentals) is the
bytes the op's operands span plus, per iteration, 1 for each arithmetic op
of the body, 4 for a division, square root or gather load and 16 for a
transcendental (math ops that ``tdf-math-approximation`` already expanded count
as the arithmetic they became). The loops of one function are cut into ``min(threads,
W / min-chunk-work)`` chunks each, ``W`` the work of all of them together
(default 1 MiB of that measure, about 35 µs of one core here): the first
parallel loop of a call wakes the workers, which then spin between the
loops, so what a call must have is enough parallel work in all, not in
each loop. Judged per loop instead, a row softmax of 256K floats kept its
two cheap row reductions on one thread between parallel loops and took
1.5x the time of cutting every loop; judged per function, a whole-array sum
of 256K floats (1 MiB read, one add per element, and nothing else) stays
on one thread, where two took 1.35-1.5x its time.

Not parallelized: ops whose body calls a function (a run-time check's
failure call must run on the calling thread), allocates or contains regions;
an input that may share storage with an output (the same root, other than
two disjoint slots of one planned arena) through a different indexing map
(an in-place op is only safe chunk by chunk when each iteration reads what it
writes); dynamic shapes. Statistics ``parallelized``.

Before::

    linalg.generic {... iterator_types = ["parallel"]}
        ins(%x : memref<1048576xf32>) outs(%y : memref<1048576xf32>) {...}

After (``threads=2``)::

    scf.parallel (%t) = (%c0) to (%c2) step (%c1) {
      %lo = arith.muli %t, %c524288 : index
      %xs = memref.subview %x[%lo] [524288] [1] : ...
      %ys = memref.subview %y[%lo] [524288] [1] : ...
      linalg.generic {...} ins(%xs : ...) outs(%ys : ...) {...}
    }
"""

from __future__ import annotations

import math

from mlir import ir
from mlir.dialects import arith, memref, scf

from ..vocabulary import element_nbytes
from .analysis.contractions import dim_positions, is_strided
from .ir_utils import (
    collect_ops,
    index_const,
    indexing_maps,
    iterator_types,
    may_share_storage,
)
from .registry import PassContext, PassOption, register_pass
from .vectorize_contractions import is_gemm

__all__ = ["parallelize", "ELEMENTWISE_NAMED"]

#: Named linalg ops that are all-parallel loop nests.
ELEMENTWISE_NAMED = frozenset({
    "linalg.map", "linalg.fill", "linalg.copy", "linalg.transpose", "linalg.broadcast",
    "linalg.add", "linalg.sub", "linalg.mul", "linalg.div", "linalg.div_unsigned",
    "linalg.max", "linalg.min", "linalg.powf", "linalg.exp", "linalg.log", "linalg.abs",
    "linalg.ceil", "linalg.floor", "linalg.negf", "linalg.reciprocal", "linalg.round",
    "linalg.sqrt", "linalg.rsqrt", "linalg.square", "linalg.tanh", "linalg.erf",
    "linalg.select", "linalg.elementwise",
})
#: GEMMs left to ``tdf-vectorize-contractions`` (the BLAS's calls are not
#: linalg ops): cut along their rows like any other op, but only into chunks
#: of one static size (a dynamic chunk would not be vectorized).
_GEMMS = frozenset({"linalg.matmul", "linalg.contract"})
_OPS = ELEMENTWISE_NAMED | _GEMMS | {"linalg.generic"}
_BODY_OK_DIALECTS = ("arith.", "math.", "linalg.yield", "linalg.index", "memref.load",
                     "complex.")
#: Work of one body op, per iteration (the bytes of memory traffic it is
#: worth): transcendentals, then the slow arithmetic and gathers; other ops 1.
_TRANSCENDENTAL = frozenset({
    "math.exp", "math.exp2", "math.expm1", "math.log", "math.log2", "math.log10",
    "math.log1p", "math.sin", "math.cos", "math.tan", "math.tanh", "math.sinh",
    "math.cosh", "math.asin", "math.acos", "math.atan", "math.atan2", "math.asinh",
    "math.acosh", "math.atanh", "math.erf", "math.erfc", "math.powf", "math.fpowi",
    "math.cbrt",
})
_SLOW = frozenset({"arith.divf", "arith.divsi", "arith.divui", "arith.remf", "arith.remsi",
                   "arith.remui", "math.sqrt", "math.rsqrt", "memref.load"})
_FREE = frozenset({"linalg.yield", "linalg.index", "arith.constant"})


def _outputs(op) -> int:
    if "operandSegmentSizes" in op.attributes:
        return list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))[-1]
    return 1


def _body_ok(op) -> bool:
    """No calls, allocations or nested regions in the body."""
    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                if len(inner.regions) or not inner.name.startswith(_BODY_OK_DIALECTS):
                    return False
    return True


def _iterations(op, maps) -> list[int] | None:
    """Static size of each loop, or None."""
    sizes: dict[int, int] = {}
    for value, amap in zip(op.operands, maps):
        if not isinstance(value.type, ir.MemRefType):
            continue
        shape = ir.MemRefType(value.type).shape
        for j, p in enumerate(dim_positions(amap) or []):
            sizes.setdefault(p, shape[j])
    n = maps[0].n_dims if maps else 0
    if len(sizes) != n or any(s == ir.ShapedType.get_dynamic_size() for s in sizes.values()):
        return None
    return [sizes[d] for d in range(n)]


def _aliasing_ok(op, maps, outputs: int) -> bool:
    operands = list(op.operands)
    first_out = len(operands) - outputs
    for o in range(first_out, len(operands)):
        for i in range(first_out):
            if (isinstance(operands[i].type, ir.MemRefType) and str(maps[i]) != str(maps[o])
                    and may_share_storage(operands[i], operands[o])):
                return False
    return True


def work(op, maps, sizes) -> int:
    """Estimated work of the linalg ``op`` (static loop ``sizes``): the
    bytes its memref operands span (each the product of the loops its map
    reads) plus the iterations times the weight of its body's ops."""
    bytes_ = 0
    for value, amap in zip(op.operands, maps):
        if isinstance(value.type, ir.MemRefType):
            t = ir.MemRefType(value.type)
            bytes_ += (element_nbytes(t.element_type) or 8) * math.prod(
                sizes[p] for p in set(dim_positions(amap) or []))
    per_iteration = 0
    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                name = inner.name
                per_iteration += (16 if name in _TRANSCENDENTAL else 4 if name in _SLOW
                                  else 0 if name in _FREE else 1)
    return bytes_ + math.prod(sizes) * per_iteration


def _plan(op, min_elements: int):
    """``(maps, sizes)`` when ``op`` is safe to cut along loop 0 and has at
    least ``min_elements`` iterations."""
    if op.name not in _OPS or not all(isinstance(v.type, ir.MemRefType) or
                                      not isinstance(v.type, ir.ShapedType)
                                      for v in op.operands):
        return None
    if not all(is_strided(v.type) for v in op.operands if isinstance(v.type, ir.MemRefType)):
        return None
    maps = indexing_maps(op)
    if len(maps) != len(op.operands) or any(dim_positions(m) is None for m in maps):
        return None
    iterators = iterator_types(op)  # None: a named all-parallel op
    outputs = _outputs(op)
    sizes = _iterations(op, maps)
    if sizes is None or not sizes or sizes[0] < 2 or math.prod(sizes) < min_elements:
        return None
    if iterators is not None and iterators[0] != "parallel":
        return None
    if any(0 not in (dim_positions(m) or []) for m in maps[len(maps) - outputs:]):
        return None
    if not _body_ok(op) or not _aliasing_ok(op, maps, outputs):
        return None
    return maps, sizes


def _chunk_view(value, amap, lo, length, static_length: int | None):
    """``value`` restricted to ``[lo, lo + length)`` of loop 0 (a subview;
    ``static_length``: the length when it is known), or ``value`` itself
    when it does not have loop 0."""
    positions = dim_positions(amap) or []
    if not isinstance(value.type, ir.MemRefType) or 0 not in positions:
        return value
    t = ir.MemRefType(value.type)
    at = positions.index(0)
    offsets: list = [0] * t.rank
    offsets[at] = lo
    sizes: list = list(t.shape)
    sizes[at] = length if static_length is None else static_length
    strides, _ = t.get_strides_and_offset()
    shape = list(t.shape)
    shape[at] = ir.ShapedType.get_dynamic_size() if static_length is None else static_length
    layout = ir.StridedLayoutAttr.get(ir.ShapedType.get_dynamic_stride_or_offset(), strides)
    result = ir.MemRefType.get(shape, t.element_type, layout, t.memory_space)
    return memref.subview(value, offsets, sizes, [1] * t.rank, result_type=result)


def _offset_loop_index(op, lo) -> None:
    """Each ``linalg.index 0`` of the chunk ``op`` (its iteration along loop
    0 of the chunk) plus ``lo``: the iteration of the whole loop nest."""
    for index in collect_ops(op, "linalg.index"):
        if ir.IntegerAttr(index.attributes["dim"]).value != 0:
            continue
        with ir.InsertionPoint.after(index), index.location:
            shifted = arith.addi(index.result, lo)
        index.result.replace_all_uses_except(shifted, shifted.owner.operation)


def _chunk(n: int, chunks: int) -> int:
    """Iterations of each chunk of a loop of ``n`` cut into ``chunks``."""
    return -(-n // min(chunks, n))  # ceil(n / chunks)


def _cut(op, maps, sizes, chunks: int) -> None:
    n = sizes[0]
    chunk = _chunk(n, chunks)
    tasks = -(-n // chunk)
    index = ir.IndexType.get()
    with ir.InsertionPoint(op), op.location:
        loop = scf.ParallelOp([], [index_const(0)], [index_const(tasks)], [index_const(1)], [])
        body = loop.regions[0].blocks.append(index)
        with ir.InsertionPoint(body):
            task = body.arguments[0]
            lo = arith.muli(task, index_const(chunk))
            # Every chunk has ``chunk`` iterations when they divide the loop
            # (a static size: LLVM's vectorizer needs no remainder loop).
            length = index_const(chunk) if n % chunk == 0 else \
                arith.minsi(index_const(chunk), arith.subi(index_const(n), lo))
            views = [_chunk_view(v, m, lo, length, chunk if n % chunk == 0 else None)
                     for v, m in zip(op.operands, maps)]
            clone = op.operation.clone()
            for k, view in enumerate(views):
                clone.operands[k] = view
            _offset_loop_index(clone, lo)
            scf.ReduceOp([], 0)
    # The clone was made at the op's position: move it into the loop body.
    clone.move_before(list(body.operations)[-1])
    op.operation.erase()


@register_pass(
    "tdf-parallelize",
    "Large linalg loop nests on memrefs cut into chunks along their outer parallel loop, "
    "as an scf.parallel (run as tasks of tdf's thread pool after tdf-outline-parallel)",
    options=[PassOption("threads", int, 2, "Most chunks per op (the thread count; 1: nothing)"),
             PassOption("min-elements", int, 262144, "Iterations an op needs to be cut"),
             PassOption("min-chunk-work", int, 1 << 20,
                        "Estimated work of a function's cut loops per chunk (bytes accessed, "
                        "plus per iteration 1 per arithmetic op, 4 per division or square "
                        "root, 16 per transcendental)")],
    statistics=[("parallelized", "linalg ops cut into chunks")],
)
def parallelize(op, ctx: PassContext) -> None:
    """See the module docstring."""
    threads, min_elements = ctx.option("threads"), ctx.option("min-elements")
    min_work = ctx.option("min-chunk-work")
    if threads < 1 or min_elements < 1 or min_work < 1:
        ctx.error(op, f"threads, min-elements and min-chunk-work must be positive, got "
                      f"{threads}, {min_elements} and {min_work}")
        return
    if threads == 1:
        return
    funcs = [op] if op.name == "func.func" else collect_ops(op, "func.func")
    cut = 0
    for func in funcs:
        plans = [(target, plan) for target in collect_ops(func, _OPS)
                 if (plan := _plan(target, min_elements)) is not None]
        chunks = min(threads, sum(work(target, *plan) for target, plan in plans) // min_work)
        if chunks < 2:
            continue
        for target, (maps, sizes) in plans:
            if sizes[0] % _chunk(sizes[0], chunks) and is_gemm(target):
                continue
            _cut(target, maps, sizes, chunks)
            cut += 1
    if cut:
        ctx.statistic("parallelized", cut)
