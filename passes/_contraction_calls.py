"""Contractions on memrefs as calls of a contraction library route: what
``tdf-contractions-to-blas`` (``tdf_rt_contract``, CPU) and
``tdf-contractions-to-cublas`` (``tdf_gpu_contract``, GPU) share.

Both pass one descriptor (``python/src/Contraction.h``): a ``flags`` word
(:func:`contraction_flags`), per operand its aligned pointer and offset,
the rank, and per loop dimension its size and each operand's stride, as
``i64`` values (:func:`emit_contract_call`). The output buffer is the
destination: the call accumulates into it, except when the op's init was
just filled with zero (:func:`zero_fill_before`): the fill is dropped and
the call overwrites the buffer.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, func, memref

from ..vocabulary import ARENA_ATTR, MEMREF_VIEW_OPS, RUNTIME_FUNCTIONS
from ._runtime_sites import declare
from .analysis.contractions import (
    CONTRACTION_OPS,
    MAX_DIMS,
    TYPE_CODES,
    Contraction,
    classify,
    is_strided,
)
from .ir_utils import collect_ops, defining_op, iterator_types, op_key
from .registry import PassContext

__all__ = ["contraction_flags", "find_contractions", "emit_contract_calls", "zero_fill_before",
           "fresh_buffer"]

# Ops between a fill and the contraction that touch no memory.
_PURE = frozenset({"arith.constant", "memref.dim", "memref.extract_aligned_pointer_as_index",
                   "arith.index_cast"}) | MEMREF_VIEW_OPS
# Allocations: a host buffer, or a device buffer (tdf-gpu-device-memory).
_ALLOCS = ("memref.alloc", "gpu.alloc")


def contraction_flags(types, kinds, accumulate: bool, threads: int = 0) -> int:
    """The ``flags`` word of ``tdf_rt_contract``: element types of A, B, C
    in bits 0-11, accumulate in bit 12, loop dimension kinds from bit 16
    (two bits each), the BLAS thread count (0: default) from bit 32."""
    flags = TYPE_CODES[types[0]] | TYPE_CODES[types[1]] << 4 | TYPE_CODES[types[2]] << 8
    flags |= int(accumulate) << 12
    for d, kind in enumerate(kinds):
        flags |= kind << (16 + 2 * d)
    return flags | threads << 32


def fresh_buffer(c) -> bool:
    """``c`` is a buffer of its own: an allocation (host or device), or a
    view of ``tdf-plan-memory``'s arena (whose other views live elsewhere in
    it while ``c`` is live)."""
    owner = defining_op(c)
    if owner is None:
        return False
    if owner.name in _ALLOCS:
        return True
    if owner.name != "memref.view":
        return False
    base = defining_op(owner.operands[0])
    return base is not None and base.name in _ALLOCS and ARENA_ATTR in base.attributes


def _root(value):
    """The buffer ``value`` views: itself, or the first fresh buffer
    (:func:`fresh_buffer`) or non-view value its chain of views reaches."""
    while not fresh_buffer(value):
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


def zero_fill_before(op, c, inputs, scans: dict):
    """The ``linalg.fill`` of zero into ``c`` (a fresh allocation or arena
    view, or a view of one, that no input views) right before ``op``, or
    None. ``scans`` keeps each block's :func:`_fills_before` (one scan per
    block for all the ops asked about); pass the same dict for every op."""
    ops = op.operation.block.operations
    key = op_key(ops[0])
    if key not in scans:
        scans[key] = _fills_before(ops)
    fills = scans[key]
    root = _root(c)
    if not fresh_buffer(root) or any(_root(v) == root for v in inputs):
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


def find_contractions(op, ctx: PassContext, library: str) -> list[Contraction]:
    """The contractions on memrefs under ``op`` that
    :func:`~tdf.passes.analysis.contractions.classify` accepts; with the
    ``remarks`` option, a remark ``not a <library> contraction: <why>`` for
    each one left alone. Ops on tensors are skipped silently."""
    found = []
    for target in collect_ops(op, CONTRACTION_OPS):
        if not all(isinstance(v.type, ir.MemRefType) for v in target.operands):
            continue
        if not all(is_strided(v.type) for v in target.operands):
            if ctx.option("remarks"):
                ctx.remark(target, f"not a {library} contraction: an operand's layout is not strided")
            continue
        contraction = classify(target)
        if isinstance(contraction, str):
            if ctx.option("remarks") and _has_reduction(target):
                ctx.remark(target, f"not a {library} contraction: {contraction}")
            continue
        found.append(contraction)
    return found


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


def _rewrite(contraction, callee: str, threads: int, fill) -> None:
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
        func.call([], callee, args)
    op.operation.erase()
    if fill is not None:
        fill.erase()


def emit_contract_calls(module, found: list[Contraction], callee: str, threads: int = 0) -> None:
    """Replaces each contraction of ``found`` with a call of ``callee`` (a
    runtime function taking the descriptor, declared in ``module``),
    dropping the zero fill of its output where :func:`zero_fill_before`
    finds one."""
    if not found:
        return
    declare(module, callee)
    assert RUNTIME_FUNCTIONS[callee] == 8 + 4 * MAX_DIMS
    # The fills first: a rewrite adds ops before its contraction and erases
    # it and its own fill, which is no other contraction's.
    scans: dict = {}  # op_key of a block's first op -> _fills_before
    fills = []
    for contraction in found:
        a, b, c = contraction.operands
        fills.append(zero_fill_before(contraction.op.operation, c, (a, b), scans))
    for contraction, fill in zip(found, fills):
        _rewrite(contraction, callee, threads, fill)
