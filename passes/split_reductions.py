"""``tdf-split-reductions``: long floating-point reductions as a tree of
short ones, vectorizable and as accurate as XLA's.

A ``linalg.generic`` that reduces ``n`` elements into one accumulator adds
them one after the other: LLVM cannot vectorize the loop (float addition is
not associative) and the rounding error grows with ``n`` (a float32 sum of
squares over 1.8M elements was off by 8e-4 relative). This pass, on tensors
after kernel fusion, rewrites the innermost reduction loop ``r`` of static size
``n = B * I * L + t`` (``L = 16`` lanes and ``I = 16`` for a sum; ``L = 64``,
``I = 4`` for a max or min, exact in any order: four independent vector
chains; a tail ``t < 256``) of a generic
whose body ends in ``acc <op> value`` (``op``: ``addf``, ``maximumf``,
``minimumf``, ``maxnumf``, ``minnumf``; f32 or f64) into:

1. the same op over loops ``(..., b, i, j)`` in place of ``r``, reading
   its inputs expanded to ``[..., B, I, L, ...]`` there (views: element
   ``b * I * L + i * L + j``), accumulating into partials
   ``P[..., b, j]`` (``j``, innermost, is parallel: the loop over the 16
   lanes vectorizes, and each partial sums only ``I`` elements);
2. the tail's ``t`` elements reduced into the op's init by a copy of the op
   over that slice (a short sequential loop);
3. ``P`` collapsed to ``[..., B * L]`` and reduced into that by a plain
   reduction generic, which the pass splits again while it is long enough:
   a 16-ary summation tree.

The combination is reassociated, as XLA's reductions are (results equal
within rounding, never bit-identical to a sequential sum). Reductions shorter
than :data:`MIN_SIZE`, with a dynamic size, whose reduction
loop is not innermost, whose body reads ``linalg.index`` or uses the
accumulator elsewhere, and integer reductions (exact; LLVM vectorizes them)
are left alone. No options; statistic ``split``.

Before::

    %s = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>,
                                          affine_map<(d0) -> ()>],
                         iterator_types = ["reduction"]}
        ins(%x : tensor<4096xf32>) outs(%zero : tensor<f32>) {...addf...}

After::

    %e = tensor.expand_shape %x [[0, 1, 2]] output_shape [16, 16, 16]
        : tensor<4096xf32> into tensor<16x16x16xf32>
    %p = linalg.generic {indexing_maps = [affine_map<(b, i, j) -> (b, i, j)>,
                                          affine_map<(b, i, j) -> (b, j)>],
                         iterator_types = ["parallel", "reduction", "parallel"]}
        ins(%e : tensor<16x16x16xf32>) outs(%p0 : tensor<16x16xf32>) {...addf...}
    %c = tensor.collapse_shape %p [[0, 1]] : tensor<16x16xf32> into tensor<256xf32>
    %s = linalg.generic {... iterator_types = ["reduction"]}
        ins(%c : tensor<256xf32>) outs(%zero : tensor<f32>) {...addf...}
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, linalg, tensor

from .analysis.contractions import dim_positions
from .ir_utils import collect_ops, defining_op, indexing_maps, iterator_types
from .registry import PassContext, register_pass

__all__ = ["split_reductions", "MIN_SIZE", "LANES", "ORDERLESS_LANES"]

#: Reductions of at least this many elements are split.
MIN_SIZE = 1024
#: Partial accumulators per block (the vectorized lane loop) of a sum.
LANES = 16
#: ... of a max or min: exact in any order, so four vectors of lanes per
#: block, four independent chains (NaN-propagating ``maximumf`` costs about
#: six dependent instructions per vector: one chain of 16 steps per block left
#: a row-wise max over 4096x1024 floats latency-bound, 3.0 against 2.1 ms).
ORDERLESS_LANES = 64
_ORDERLESS = ("arith.maximumf", "arith.minimumf", "arith.maxnumf", "arith.minnumf")
#: Elements per block: each partial sums BLOCK / LANES of them per level.
BLOCK = 256
_IDENTITY = {"arith.addf": 0.0, "arith.maximumf": float("-inf"),
             "arith.minimumf": float("inf"), "arith.maxnumf": float("-inf"),
             "arith.minnumf": float("inf")}
_COMBINERS = {"arith.addf": arith.AddFOp, "arith.maximumf": arith.MaximumFOp,
              "arith.minimumf": arith.MinimumFOp, "arith.maxnumf": arith.MaxNumFOp,
              "arith.minnumf": arith.MinNumFOp}
_FLOATS = ("f32", "f64")


def _combiner(op):
    """The ``acc <op> value`` op that ends the body, or None."""
    block = op.regions[0].blocks[0]
    body = list(block.operations)
    yielded = list(body[-1].operands)
    if len(yielded) != 1 or any(o.name == "linalg.index" for o in body):
        return None
    combiner = defining_op(yielded[0])
    acc = block.arguments[len(block.arguments) - 1]
    if combiner is None or combiner.name not in _IDENTITY:
        return None
    uses = list(acc.uses)
    if len(uses) != 1 or uses[0].owner != combiner or acc not in list(combiner.operands):
        return None
    return combiner


def _split_dim(op):
    """``(r, n)``: the innermost loop dimension (a reduction) and its static
    size, or None."""
    iterators = iterator_types(op) or []
    r = len(iterators) - 1
    if r < 0 or iterators[r] != "reduction":
        return None
    maps = indexing_maps(op)
    for value, amap in zip(list(op.operands)[:-1], maps):
        positions = dim_positions(amap)
        if positions is None:
            return None
        if r in positions:
            size = ir.RankedTensorType(value.type).shape[positions.index(r)]
            return (r, size) if size != ir.ShapedType.get_dynamic_size() else None
    return None


def _candidate(op):
    """``(r, n, combiner)`` for a generic to split, or None."""
    if len(op.results) != 1 or not isinstance(op.results[0].type, ir.RankedTensorType):
        return None
    out_type = ir.RankedTensorType(op.results[0].type)
    if str(out_type.element_type) not in _FLOATS or not out_type.has_static_shape:
        return None
    found = _split_dim(op)
    combiner = _combiner(op)
    if found is None or combiner is None:
        return None
    r, n = found
    if n < MIN_SIZE:
        return None
    for value, amap in zip(list(op.operands)[:-1], indexing_maps(op)[:-1]):
        if r in dim_positions(amap) and not ir.RankedTensorType(value.type).has_static_shape:
            return None
    return r, n, combiner


def _shifted(p, r):
    return p if p < r else p + 2


def _slice(value, at, start, size):
    """``value[..., start:start + size, ...]`` along dimension ``at`` (a
    view)."""
    t = ir.RankedTensorType(value.type)
    shape = list(t.shape)
    offsets = [0] * len(shape)
    offsets[at] = start
    sizes = shape[:at] + [size] + shape[at + 1:]
    return tensor.extract_slice(ir.RankedTensorType.get(sizes, t.element_type), value, [], [],
                                [], offsets, sizes, [1] * len(shape))


def _sliced_inputs(op, maps, r, start, size):
    """The op's inputs restricted to ``[start, start + size)`` of loop ``r``."""
    out = []
    for value, amap in zip(list(op.operands)[:-1], maps[:-1]):
        positions = dim_positions(amap)
        out.append(_slice(value, positions.index(r), start, size) if r in positions else value)
    return out


def _tail(op, maps, r, start, size):
    """A copy of ``op`` over the last ``size`` elements of loop ``r``, into
    the op's own init: the elements that do not fill a block."""
    inputs = _sliced_inputs(op, maps, r, start, size)
    tail = op.operation.clone(ir.InsertionPoint(op))
    for k, value in enumerate(inputs):
        tail.operands[k] = value
    return tail.results[0]


def _stage_one(op, inputs, maps, r, inner, lanes):
    """The inputs and maps of stage 1: every input that has loop ``r`` is
    expanded there into ``[B, I, lanes]`` (a view: ``tensor.expand_shape``)
    and read with loops ``b, i, j`` at ``r, r + 1, r + 2``; the partials
    ``P[..., b, j]`` take the output map plus ``b, j``."""
    n_dims = maps[0].n_dims + 2
    dims = [ir.AffineExpr.get_dim(d) for d in range(n_dims)]
    expanded, new_maps = [], []
    for value, amap in zip(inputs, maps[:-1]):
        positions = dim_positions(amap)
        exprs = []
        for p in positions:
            exprs += dims[r:r + 3] if p == r else [dims[_shifted(p, r)]]
        if r in positions:
            value = _expand(value, positions.index(r), inner, lanes)
        expanded.append(value)
        new_maps.append(ir.AffineMap.get(n_dims, 0, exprs))
    partial = [dims[_shifted(p, r)] for p in dim_positions(maps[-1])] + [dims[r], dims[r + 2]]
    new_maps.append(ir.AffineMap.get(n_dims, 0, partial))
    return expanded, new_maps


def _expand(value, at, inner, lanes):
    t = ir.RankedTensorType(value.type)
    shape = list(t.shape)
    n = shape[at]
    new_shape = shape[:at] + [n // (inner * lanes), inner, lanes] + shape[at + 1:]
    groups = [[d] for d in range(at)] + [[at, at + 1, at + 2]] + \
        [[d + 2] for d in range(at + 1, len(shape))]
    return tensor.expand_shape(ir.RankedTensorType.get(new_shape, t.element_type), value,
                               groups, [], new_shape)


def _fill(shape, etype, value):
    empty = tensor.empty(shape, etype)
    return linalg.fill(arith.constant(etype, value), outs=[empty])


def _reduce_last(source, init, combiner_name, etype):
    """A generic reducing the last dimension of ``source`` into ``init``."""
    rank = ir.RankedTensorType(source.type).rank
    dims = [ir.AffineExpr.get_dim(d) for d in range(rank)]
    maps = [ir.AffineMap.get(rank, 0, dims), ir.AffineMap.get(rank, 0, dims[:-1])]
    op = linalg.GenericOp([init.type], [source], [init],
                          ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in maps]),
                          ir.ArrayAttr.get([ir.Attribute.parse(
                              f"#linalg.iterator_type<{'parallel' if d < rank - 1 else 'reduction'}>")
                              for d in range(rank)]))
    block = op.regions[0].blocks.append(etype, etype)
    with ir.InsertionPoint(block):
        combined = _COMBINERS[combiner_name](block.arguments[1], block.arguments[0])
        linalg.YieldOp([combined.result])
    return op


def _split(op, r, n, combiner) -> object:
    """Rewrites ``op``; returns the final reduction (a new candidate)."""
    maps = indexing_maps(op)
    lanes = ORDERLESS_LANES if combiner.name in _ORDERLESS else LANES
    inner = BLOCK // lanes
    blocks = n // BLOCK
    rest = n - blocks * BLOCK
    out_type = ir.RankedTensorType(op.results[0].type)
    etype = out_type.element_type
    iterators = iterator_types(op) or []
    iterators[r:r + 1] = ["parallel", "reduction", "parallel"]
    with ir.InsertionPoint(op), op.location:
        partial_shape = list(out_type.shape) + [blocks, lanes]
        init = _fill(partial_shape, etype, _IDENTITY[combiner.name])
        init_of_final = list(op.operands)[-1]
        if rest:
            init_of_final = _tail(op, maps, r, blocks * BLOCK, rest)
        inputs = _sliced_inputs(op, maps, r, 0, blocks * BLOCK) if rest else \
            list(op.operands)[:-1]
        inputs, stage_maps = _stage_one(op, inputs, maps, r, inner, lanes)
        stage = op.operation.clone(ir.InsertionPoint(op))
        for k, value in enumerate(inputs + [init]):
            stage.operands[k] = value
        stage.results[0].set_type(ir.RankedTensorType.get(partial_shape, etype))
        stage.attributes["indexing_maps"] = ir.ArrayAttr.get(
            [ir.AffineMapAttr.get(m) for m in stage_maps])
        stage.attributes["iterator_types"] = ir.ArrayAttr.get(
            [ir.Attribute.parse(f"#linalg.iterator_type<{t}>") for t in iterators])
        rank = len(partial_shape)
        groups = [[d] for d in range(rank - 2)] + [[rank - 2, rank - 1]]
        collapsed = tensor.collapse_shape(
            ir.RankedTensorType.get(list(out_type.shape) + [blocks * lanes], etype),
            stage.results[0], groups)
        final = _reduce_last(collapsed, init_of_final, combiner.name, etype)
    op.results[0].replace_all_uses_with(final.results[0])
    op.operation.erase()
    return final


@register_pass(
    "tdf-split-reductions",
    "Long float reductions (sum, max, min) as a vectorizable 16-ary tree of short ones "
    "(on tensors; reassociates like XLA)",
    statistics=[("split", "reduction loops split")],
)
def split_reductions(op, ctx: PassContext) -> None:
    """See the module docstring."""
    work = list(collect_ops(op, "linalg.generic"))
    split = 0
    while work:
        target = work.pop()
        found = _candidate(target)
        if found is None:
            continue
        work.append(_split(target, *found))
        split += 1
    ctx.statistic("split", split)
