"""``tdf-specialize-contractions``: BLAS contractions on tensors become
``linalg.contract`` ops, with transposes of their inputs folded into their
indexing maps.

Runs on tensors before kernel fusion (``tdf-fuse-elementwise``) when
the CPU pipeline sends contractions to the BLAS
(``tdf-contractions-to-blas``). Two things would otherwise stop a contraction
from reaching the library, or make it slow there:

1. elementwise fusion folds producers into a ``linalg.generic`` consumer: a
   ``relu`` before a matmul would become part of the contraction's body, which
   is then no longer ``C + A * B``. A ``linalg.contract`` is not a fusion
   consumer; the producer stays its own loop;
2. a transpose feeding a contraction (``x @ w.T`` in JAX is a ``transpose``
   then a ``dot_general``) would be a copy of the operand, or, fused, a
   strided gather in the innermost loop. Folded into the indexing map, the
   contraction reads the untransposed operand and the BLAS runtime passes it
   with a transpose flag.

Every contraction that :func:`tdf.passes.analysis.contractions.classify`
accepts is handled: a ``linalg.generic`` always becomes a
``linalg.contract``; a named op (``linalg.matmul``, ...) only when a
transpose is folded into it. A transpose is a ``linalg.transpose`` or an
all-parallel ``linalg.generic`` that only yields its input through a
permutation map into an identity-mapped init; it is left in place for its
other users (and erased by canonicalization when none is left). No options;
statistics ``specialized`` and ``folded-transposes``.

Before::

    %wt = linalg.transpose ins(%w : tensor<16x8xf32>) outs(%e : tensor<8x16xf32>)
        permutation = [1, 0]
    %y = linalg.matmul ins(%x, %wt : tensor<4x8xf32>, tensor<8x16xf32>)
                       outs(%z : tensor<4x16xf32>) -> tensor<4x16xf32>

After::

    %y = linalg.contract indexing_maps = [affine_map<(m, n, k) -> (m, k)>,
                                          affine_map<(m, n, k) -> (n, k)>,
                                          affine_map<(m, n, k) -> (m, n)>]
        ins(%x, %w : tensor<4x8xf32>, tensor<16x8xf32>)
        outs(%z : tensor<4x16xf32>) -> tensor<4x16xf32>
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import linalg

from .analysis.contractions import CONTRACTION_OPS, classify, dim_positions
from .ir_utils import collect_ops, defining_op
from .registry import PassContext, register_pass

__all__ = ["specialize_contractions", "transpose_source"]


def _is_identity(amap) -> bool:
    return dim_positions(amap) == list(range(amap.n_dims)) and amap.n_dims == len(amap.results)


def transpose_source(value):
    """``(source, perm)`` when ``value`` is a transpose of ``source`` with
    ``value[i_0, ..., i_n] = source[i_perm[0], ..., i_perm[n]]`` read through
    the transpose's loop order, else None."""
    owner = defining_op(value)
    if owner is None or len(owner.results) != 1:
        return None
    if owner.name == "linalg.transpose":
        # result[j] = input[k] with k[perm[j]] = j: input dimension i is
        # result dimension perm^-1[i].
        perm = list(ir.DenseI64ArrayAttr(owner.attributes["permutation"]))
        inverse = [perm.index(i) for i in range(len(perm))]
        return owner.operands[0], inverse
    if owner.name != "linalg.generic" or len(owner.operands) != 2:
        return None
    if any("parallel" not in str(t) for t in ir.ArrayAttr(owner.attributes["iterator_types"])):
        return None
    body = list(owner.regions[0].blocks[0].operations)
    block = owner.regions[0].blocks[0]
    if len(body) != 1 or list(body[0].operands) != [block.arguments[0]]:
        return None
    in_map, out_map = (ir.AffineMapAttr(m).value
                       for m in ir.ArrayAttr(owner.attributes["indexing_maps"]))
    positions = dim_positions(in_map)
    if positions is None or not _is_identity(out_map) or len(positions) != in_map.n_dims:
        return None
    # result[d] = input[d[positions[0]], ...]: input dimension i is loop d positions[i].
    return owner.operands[0], positions


def _fold(amap, perm):
    """The map reading ``source`` where ``amap`` read ``transpose(source)``:
    source dimension i is transpose dimension ``perm[i]``."""
    exprs = list(amap.results)
    return ir.AffineMap.get(amap.n_dims, amap.n_symbols, [exprs[p] for p in perm])


def _specialize(contraction) -> int:
    """Rewrites one contraction; returns the number of transposes folded
    (-1 when nothing changed)."""
    op = contraction.op
    inputs = list(op.operands)[:2]
    maps = list(contraction.maps)
    folded = 0
    for i in range(2):
        source = transpose_source(inputs[i])
        if source is None:
            continue
        inputs[i], perm = source
        maps[i] = _fold(maps[i], perm)
        folded += 1
    if op.name != "linalg.generic" and not folded:
        return -1
    init = list(op.operands)[2]
    with ir.InsertionPoint(op), op.location:
        result = linalg.contract(*inputs, outs=[init],
                                 indexing_maps=maps)
    op.results[0].replace_all_uses_with(result)
    op.operation.erase()
    return folded


@register_pass(
    "tdf-specialize-contractions",
    "BLAS contractions on tensors to linalg.contract (no longer fusion consumers), "
    "with transposes of their inputs folded into the indexing maps",
    statistics=[("specialized", "contractions turned into linalg.contract"),
                ("folded-transposes", "transposes folded into a contraction's maps")],
)
def specialize_contractions(op, ctx: PassContext) -> None:
    """See the module docstring."""
    specialized = folded = 0
    for target in collect_ops(op, CONTRACTION_OPS):
        if len(target.results) != 1 or not isinstance(target.results[0].type,
                                                      ir.RankedTensorType):
            continue
        contraction = classify(target)
        if isinstance(contraction, str):
            continue
        count = _specialize(contraction)
        if count >= 0:
            specialized += 1
            folded += count
    ctx.statistic("specialized", specialized)
    ctx.statistic("folded-transposes", folded)
