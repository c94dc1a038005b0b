"""``tdf-contractions-to-blas``: contractions on memrefs become calls of the
tdf runtime's ``tdf_rt_contract``, which runs them through a tuned BLAS
(OpenBLAS) in destination-passing style.

Runs after bufferization, before ``tdf-vectorize-contractions`` and
``convert-linalg-to-loops``. Every linalg op that
:func:`tdf.passes.analysis.contractions.classify` accepts (``C (+)= A * B``
over projected permutation maps: matmul, batch_matmul, matvec, vecmat, dot,
``linalg.contract`` and contraction ``linalg.generic`` ops, f32/f64, bf16/f16
inputs of f32) is replaced by one call that passes, per operand, its aligned
pointer and offset and, per loop dimension, its kind, size and each
operand's stride (``memref.extract_strided_metadata``): any layout,
including transposed and strided views, static or dynamic shapes. The
runtime picks the GEMM's dimensions, the transpose flags and leading
dimensions, loops or batches the others, and copies only what no BLAS
layout describes (see ``python/src/Blas.cpp``).

The output buffer is the destination: the call accumulates into it
(``beta = 1``), except when the op's init was just filled with zero
(``linalg.fill`` of ``0.0`` into a fresh ``memref.alloc``, a view of
``tdf-plan-memory``'s arena, or a view of either (a batch chunk's rows of
a convolution's result) that no input reads, right before, no other access in between): the fill is dropped and the call overwrites the
buffer (``beta = 0``).

Option ``threads`` (0: the library's default, the cores) is the BLAS thread
count of these calls; ``remarks`` reports each contraction left to loops.
Statistic ``contractions``.

Before::

    linalg.fill ins(%zero : f32) outs(%c : memref<8x16xf32>)
    linalg.matmul ins(%a, %bt : memref<8x4xf32>, memref<4x16xf32, strided<[1, 4]>>)
                  outs(%c : memref<8x16xf32>)

After (sketch)::

    %base, %off, %sizes:2, %strides:2 = memref.extract_strided_metadata %a ...
    ...
    func.call @tdf_rt_contract(%flags, %pa, %offa, %pb, %offb, %pc, %offc,
                               %rank, %m, %sam, %c0, %scm, ...) : (i64, ...) -> ()
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, func, memref

from ..vocabulary import ARENA_ATTR, CONTRACT, MEMREF_VIEW_OPS, RUNTIME_FUNCTIONS
from ._runtime_sites import declare
from .analysis.contractions import CONTRACTION_OPS, MAX_DIMS, TYPE_CODES, classify, is_strided
from .ir_utils import collect_ops, defining_op, iterator_types, op_key
from .registry import PassContext, PassOption, register_pass

__all__ = ["contractions_to_blas", "contraction_flags"]

# Ops between a fill and the contraction that touch no memory.
_PURE = frozenset({"arith.constant", "memref.dim", "memref.extract_aligned_pointer_as_index",
                   "arith.index_cast"}) | MEMREF_VIEW_OPS


def contraction_flags(types, kinds, accumulate: bool, threads: int = 0) -> int:
    """The ``flags`` word of ``tdf_rt_contract``: element types of A, B, C
    in bits 0-11, accumulate in bit 12, loop dimension kinds from bit 16
    (two bits each), the BLAS thread count (0: default) from bit 32."""
    flags = TYPE_CODES[types[0]] | TYPE_CODES[types[1]] << 4 | TYPE_CODES[types[2]] << 8
    flags |= int(accumulate) << 12
    for d, kind in enumerate(kinds):
        flags |= kind << (16 + 2 * d)
    return flags | threads << 32


def _fresh(c) -> bool:
    """``c`` is a buffer of its own: an allocation, or a view of
    ``tdf-plan-memory``'s arena (whose other views live elsewhere in it while
    ``c`` is live)."""
    owner = defining_op(c)
    if owner is None:
        return False
    if owner.name == "memref.alloc":
        return True
    if owner.name != "memref.view":
        return False
    base = defining_op(owner.operands[0])
    return base is not None and base.name == "memref.alloc" and ARENA_ATTR in base.attributes


def _root(value):
    """The buffer ``value`` views: itself, or the first fresh buffer
    (:func:`_fresh`) or non-view value its chain of views reaches."""
    while not _fresh(value):
        owner = defining_op(value)
        if owner is None or owner.name not in MEMREF_VIEW_OPS:
            return value
        value = owner.operands[0]
    return value


def _fills_before(ops) -> dict:
    """For each op of ``ops`` (one block's, in order): the ``linalg.fill``
    nearest before it with only :data:`_PURE` ops in between, keyed by
    :func:`op_key` (one scan of the block, not one per contraction)."""
    fills, last = {}, None
    for candidate in ops:
        candidate = candidate.operation
        name = candidate.name
        if last is not None:
            fills[op_key(candidate)] = last
        if name == "linalg.fill":
            last = candidate
        elif name not in _PURE:
            last = None
    return fills


def _zero_fill_before(op, c, inputs, fills: dict):
    """The ``linalg.fill`` of zero into ``c`` (a fresh allocation or arena
    view, or a view of one, that no input views) right before ``op``
    (``fills``: :func:`_fills_before` of its block), or None."""
    root = _root(c)
    if not _fresh(root) or any(_root(v) == root for v in inputs):
        return None
    fill = fills.get(op_key(op.operation))
    if fill is None or list(fill.operands)[1] != c:
        return None
    value = defining_op(list(fill.operands)[0])
    if value is None or value.name != "arith.constant":
        return None
    attr = value.attributes["value"]
    return fill if isinstance(attr, ir.FloatAttr) and attr.value == 0.0 else None


def _has_reduction(op) -> bool:
    """Named contractions, and generics with a reduction loop (element-wise
    generics are not worth a remark)."""
    return op.name != "linalg.generic" or "reduction" in (iterator_types(op) or [])


def _i64(value):
    return arith.index_cast(ir.IntegerType.get_signless(64), value)


def _const(n: int):
    return arith.constant(ir.IntegerType.get_signless(64), n)


def _operand_layout(value, amap):
    """(pointer, offset, {loop dim: (size, stride)}) of one operand, as i64
    values."""
    rank = ir.MemRefType(value.type).rank
    meta = memref.ExtractStridedMetadataOp(value)
    results = list(meta.results)
    offset, sizes, strides = results[1], results[2:2 + rank], results[2 + rank:]
    pointer = memref.ExtractAlignedPointerAsIndexOp(value).result
    dims = {}
    for j, expr in enumerate(amap.results):
        dims[ir.AffineDimExpr(expr).position] = (sizes[j], strides[j])
    return _i64(pointer), _i64(offset), dims


def _rewrite(contraction, threads: int, fill) -> None:
    op = contraction.op
    with ir.InsertionPoint(op), op.location:
        layouts = [_operand_layout(v, m) for v, m in zip(contraction.operands, contraction.maps)]
        zero = _const(0)
        args = [_const(contraction_flags(contraction.types, contraction.kinds,
                                         accumulate=fill is None, threads=threads))]
        for pointer, offset, _ in layouts:
            args += [pointer, offset]
        args.append(_const(len(contraction.kinds)))
        for d in range(MAX_DIMS):
            if d >= len(contraction.kinds):
                args += [zero] * 4
                continue
            size = next(dims[d][0] for _, _, dims in layouts if d in dims)
            args.append(_i64(size))
            args += [_i64(dims[d][1]) if d in dims else zero for _, _, dims in layouts]
        func.call([], CONTRACT, args)
    op.operation.erase()
    if fill is not None:
        fill.erase()


@register_pass(
    "tdf-contractions-to-blas",
    "Contractions on memrefs (matmul, batch_matmul, matvec, vecmat, dot, contraction "
    "generics; f32/f64, bf16/f16 inputs of f32) to calls of the runtime's BLAS route",
    options=[PassOption("threads", int, 0, "BLAS threads of these calls (0: the default)"),
             PassOption("remarks", bool, False, "A remark for every contraction left as loops")],
    statistics=[("contractions", "contractions turned into tdf_rt_contract calls")],
)
def contractions_to_blas(op, ctx: PassContext) -> None:
    """See the module docstring. Ops on tensors are left alone."""
    threads = ctx.option("threads")
    if not 0 <= threads < 1 << 16:
        ctx.error(op, f"threads must be in 0..65535, got {threads}")
        return
    found = []
    for target in collect_ops(op, CONTRACTION_OPS):
        if not all(isinstance(v.type, ir.MemRefType) for v in target.operands):
            continue
        if not all(is_strided(v.type) for v in target.operands):
            if ctx.option("remarks"):
                ctx.remark(target, "not a BLAS contraction: an operand's layout is not strided")
            continue
        contraction = classify(target)
        if isinstance(contraction, str):
            if ctx.option("remarks") and _has_reduction(target):
                ctx.remark(target, f"not a BLAS contraction: {contraction}")
            continue
        found.append(contraction)
    if not found:
        return
    declare(op, CONTRACT)  # op is the module
    assert RUNTIME_FUNCTIONS[CONTRACT] == 8 + 4 * MAX_DIMS
    # The fills first: a rewrite adds ops before its contraction and erases
    # it and its own fill, which is no other contraction's.
    scans: dict = {}  # op_key of a block's first op -> _fills_before
    fills = []
    for contraction in found:
        target = contraction.op.operation
        ops = target.block.operations
        key = op_key(ops[0])
        if key not in scans:
            scans[key] = _fills_before(ops)
        scan = scans[key]
        a, b, c = contraction.operands
        fills.append(_zero_fill_before(target, c, (a, b), scan))
    for contraction, fill in zip(found, fills):
        _rewrite(contraction, threads, fill)
    ctx.statistic("contractions", len(found))
