"""Run-time shape checks of linalg ops with dynamic dimensions (part of
``tdf-bounds-checks``).

A linalg op iterates over one domain: every operand dimension indexed by
loop dimension ``d_k`` alone must have the same size. The verifier checks
this for static sizes; with ``?`` sizes (dynamic-shaped arguments, kernels
on ``memref<?x...>``) a mismatch would read or write out of bounds, so each
such pair gets a run-time check before the op::

    %n0 = tensor.dim %x, %c0 : tensor<?xf32>
    %n1 = tensor.dim %y, %c0 : tensor<?xf32>
    %bad = arith.cmpi ne, %n1, %n0 : index
    scf.if %bad { func.call @tdf_rt_bounds_error(%site, %n1, %n0, %c1, %c0) }

(the values: the operand's size, the loop's size, the operand number and the
operand number the loop's size comes from). The site's kind is ``shape``;
the runtime raises ``ValueError`` naming the op, its location, the dimension
and both sizes.

A ``tensor.cast``/``memref.cast`` from a dynamic to a static size asserts the
size: it is compared with the static size before the cast (site kind
``cast``).

Covered: ops with an ``indexing_maps`` attribute (``linalg.generic`` and any
named op that carries one), the element-wise named ops (identity maps),
``linalg.matmul``/``batch_matmul`` (their default maps) and
``linalg.transpose``. A map result that is not a single loop dimension (e.g.
``d0 + d1``) is not checked here (its accesses are not either). Tensor
dimensions provably equal (:func:`tdf.passes.analysis.shapes.dim_key`: the same
``tensor.empty`` size, a ``tensor.dim`` of the same value, ...) need no check."""

from __future__ import annotations

from mlir import ir

from ..vocabulary import BOUNDS_ERROR
from ._runtime_sites import emit_failure_branch
from .analysis.kernels import ELEMENTWISE_OPS
from .analysis.shapes import dim_key
from .ir_utils import cmpi, dim_size, index_const

__all__ = ["plan_shape_checks", "emit_shape_check", "plan_cast_checks", "emit_cast_check"]

_MATMUL = {"linalg.matmul": [(0, 2), (2, 1), (0, 1)],
           "linalg.batch_matmul": [(0, 1, 3), (0, 3, 2), (0, 1, 2)]}


def _dim_position(expr):
    """The position of a lone loop dimension ``d<k>``, else None."""
    try:
        return ir.AffineDimExpr(expr).position
    except (ValueError, TypeError):
        return None


def _dims_of_maps(op):
    """Per operand: a list (one entry per operand dimension) of the loop
    dimension it is indexed by alone, or None; None for a scalar operand.
    None overall when the op's maps are unknown."""
    operands = list(op.operands)
    if "indexing_maps" in op.attributes:
        maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]
        if len(maps) != len(operands):
            return None
        out = []
        for value, amap in zip(operands, maps):
            if not isinstance(value.type, ir.ShapedType):
                out.append(None)
                continue
            dims = []
            for expr in amap.results:
                dims.append(_dim_position(expr))
            out.append(dims)
        return out
    shaped = [isinstance(v.type, ir.ShapedType) for v in operands]
    if op.name in _MATMUL and all(shaped) and len(operands) == 3:
        return [list(m) for m in _MATMUL[op.name]]
    if op.name == "linalg.transpose" and len(operands) == 2 and all(shaped):
        perm = list(ir.DenseI64ArrayAttr(op.attributes["permutation"]))
        # output[i] = input[perm[i]]: loop dims are the output's.
        inverse = [0] * len(perm)
        for i, p in enumerate(perm):
            inverse[p] = i
        return [inverse, list(range(len(perm)))]
    if op.name in ELEMENTWISE_OPS and op.name != "linalg.generic":
        ranks = {ir.ShapedType(v.type).rank for v in operands if isinstance(v.type, ir.ShapedType)}
        if len(ranks) != 1:
            return None
        rank = ranks.pop()
        return [list(range(rank)) if s else None for s in shaped]
    return None


def plan_cast_checks(op) -> list[int]:
    """The dimensions a ``tensor.cast``/``memref.cast`` makes static from a
    dynamic source size (the cast asserts the size; nothing else checks it)."""
    if op.name not in ("tensor.cast", "memref.cast"):
        return []
    source, result = op.operands[0].type, op.results[0].type
    if not (isinstance(source, ir.ShapedType) and isinstance(result, ir.ShapedType)):
        return []
    source, result = ir.ShapedType(source), ir.ShapedType(result)
    if not (source.has_rank and result.has_rank) or source.rank != result.rank:
        return []
    dynamic = ir.ShapedType.get_dynamic_size()
    return [d for d in range(source.rank)
            if source.shape[d] == dynamic and result.shape[d] != dynamic]


def emit_cast_check(op, d, sites) -> None:
    """At the current insertion point (before cast ``op``): dimension ``d``
    of the source has the static size of the result type."""
    size, _ = _dim(op.operands[0], d)
    static = index_const(ir.ShapedType(op.results[0].type).shape[d])
    site = sites.add("cast", op, d)
    emit_failure_branch(cmpi("ne", size, static), BOUNDS_ERROR, [site, size, static, 0, 0])


def plan_shape_checks(op) -> list[tuple]:
    """``(operand, dim, ref_operand, ref_dim)`` pairs of ``op`` whose sizes
    must agree and are not both static."""
    if not op.name.startswith("linalg."):
        return []
    per_operand = _dims_of_maps(op)
    if per_operand is None:
        return []
    dynamic = ir.ShapedType.get_dynamic_size()
    first = {}
    pairs = []
    for index, dims in enumerate(per_operand):
        if dims is None:
            continue
        shape = ir.ShapedType(op.operands[index].type)
        if not shape.has_rank or shape.rank != len(dims):
            return []
        for d, loop in enumerate(dims):
            if loop is None:
                continue
            if loop not in first:
                first[loop] = (index, d)
                continue
            ref_index, ref_d = first[loop]
            ref_size = ir.ShapedType(op.operands[ref_index].type).shape[ref_d]
            if shape.shape[d] == dynamic or ref_size == dynamic:
                a, b = op.operands[index], op.operands[ref_index]
                if isinstance(a.type, ir.RankedTensorType) and isinstance(b.type, ir.RankedTensorType) \
                        and dim_key(a, d) == dim_key(b, ref_d):
                    continue  # provably equal (passes/analysis/shapes.py)
                pairs.append((index, d, ref_index, ref_d))
    return pairs


def _dim(value, d):
    shaped = ir.ShapedType(value.type)
    if shaped.shape[d] != ir.ShapedType.get_dynamic_size():
        return None, shaped.shape[d]
    return dim_size(value, d), None


def emit_shape_check(op, pair, sites) -> None:
    """At the current insertion point (before ``op``): the check of one pair."""
    index, d, ref_index, ref_d = pair
    size, size_static = _dim(op.operands[index], d)
    ref, ref_static = _dim(op.operands[ref_index], ref_d)
    size = size if size is not None else index_const(size_static)
    ref = ref if ref is not None else index_const(ref_static)
    site = sites.add("shape", op, d)
    emit_failure_branch(cmpi("ne", size, ref), BOUNDS_ERROR, [site, size, ref, index, ref_index])
