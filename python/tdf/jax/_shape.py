"""Shape primitives: ``broadcast_in_dim``, ``reshape``, ``squeeze``,
``transpose``, ``slice``, ``split``, ``concatenate``, ``pad``, ``rev`` and the
identity ``copy``/``copy_p``.

Reshapes are ``tensor.collapse_shape``/``expand_shape`` views, slices and
the parts of a split are ``tensor.extract_slice`` and concatenations ``tensor.concat`` (all of which
the in-place passes understand); broadcasts, transposes, reversals and pads
are ``linalg.generic`` ops.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, linalg, tensor

from ._builder import rule


@rule("broadcast_in_dim")
def _broadcast_in_dim(tr, eqn, args):
    (x,) = args[:1]
    aval = eqn.outvars[0].aval
    shape = tuple(int(s) for s in aval.shape)
    bdims = tuple(eqn.params["broadcast_dimensions"])
    src = ir.RankedTensorType(x.type)
    if tuple(src.shape) == shape and bdims == tuple(range(len(shape))):
        return [x]
    if src.rank == 0:
        return [tr.fill(tr.extract(x), shape)]
    dims = tr.dims(len(shape))
    in_map = [0 if (src.shape[i] == 1 and shape[d] != 1) else dims[d] for i, d in enumerate(bdims)]
    init = tr.empty(shape, src.element_type)
    return tr.generic([x], [in_map], [init], [dims], ["parallel"] * len(shape),
                      lambda a, _o: [a])


@rule("reshape")
def _reshape(tr, eqn, args):
    (x,) = args
    dims = eqn.params.get("dimensions")
    if dims not in (None, ()) and tuple(dims) != tuple(range(len(dims))):
        x = _permute(tr, x, tuple(int(d) for d in dims))  # reshape of the transpose
    return [tr.reshape(x, eqn.outvars[0].aval.shape)]


def _permute(tr, x, perm):
    t = ir.RankedTensorType(x.type)
    dims = tr.dims(len(perm))
    in_map = [dims[perm.index(j)] for j in range(len(perm))]
    init = tr.empty([t.shape[p] for p in perm], t.element_type)
    return tr.generic([x], [in_map], [init], [dims], ["parallel"] * len(perm),
                      lambda a, _o: [a])[0]


@rule("squeeze")
def _squeeze(tr, eqn, args):
    return [tr.reshape(args[0], eqn.outvars[0].aval.shape)]


@rule("expand_dims")
def _expand_dims(tr, eqn, args):
    return [tr.reshape(args[0], eqn.outvars[0].aval.shape)]


@rule("copy", "copy_p", "stop_gradient", "optimization_barrier", "reduce_precision_noop")
def _identity(tr, eqn, args):
    return list(args)


@rule("transpose")
def _transpose(tr, eqn, args):
    (x,) = args
    perm = tuple(int(p) for p in eqn.params["permutation"])
    if perm == tuple(range(len(perm))):
        return [x]
    return [_permute(tr, x, perm)]


@rule("slice")
def _slice(tr, eqn, args):
    (x,) = args
    start = [int(s) for s in eqn.params["start_indices"]]
    strides = eqn.params.get("strides") or [1] * len(start)
    strides = [int(s) for s in strides]
    shape = [int(s) for s in eqn.outvars[0].aval.shape]
    if not shape:
        return [x]
    return [tr.extract_slice(x, start, shape, strides)]


@rule("split")
def _split(tr, eqn, args):
    """``split``: one ``tensor.extract_slice`` view per output along ``axis``."""
    (x,) = args
    axis = int(eqn.params["axis"])
    shape = [int(s) for s in ir.RankedTensorType(x.type).shape]
    outs, start = [], 0
    for size in (int(s) for s in eqn.params["sizes"]):
        offsets = [start if d == axis else 0 for d in range(len(shape))]
        sizes = [size if d == axis else s for d, s in enumerate(shape)]
        outs.append(tr.extract_slice(x, offsets, sizes))
        start += size
    return outs


@rule("concatenate")
def _concatenate(tr, eqn, args):
    dim = int(eqn.params["dimension"])
    parts = [a for a in args if ir.RankedTensorType(a.type).shape[dim] != 0]
    rtype = ir.RankedTensorType.get(tuple(eqn.outvars[0].aval.shape),
                                              ir.RankedTensorType(args[0].type).element_type)
    if not parts:
        return [tr.empty(rtype.shape, rtype.element_type)]
    if len(parts) == 1:
        return [parts[0]]
    return [tensor.ConcatOp(rtype, dim, parts).result]


@rule("rev")
def _rev(tr, eqn, args):
    (x,) = args
    axes = set(int(d) for d in eqn.params["dimensions"])
    t = ir.RankedTensorType(x.type)
    dims = tr.dims(t.rank)
    in_map = [(ir.AffineConstantExpr.get(t.shape[i] - 1) - dims[i]) if i in axes else dims[i]
              for i in range(t.rank)]
    if not axes or t.rank == 0:
        return [x]
    init = tr.empty(t.shape, t.element_type)
    return tr.generic([x], [in_map], [init], [dims], ["parallel"] * t.rank, lambda a, _o: [a])


@rule("pad")
def _pad(tr, eqn, args):
    x, padding_value = args
    config = [tuple(int(v) for v in c) for c in eqn.params["padding_config"]]
    t = ir.RankedTensorType(x.type)
    out_shape = tuple(int(s) for s in eqn.outvars[0].aval.shape)
    if t.rank == 0:
        return [x]
    pad = tr.extract(padding_value)
    init = tr.empty(out_shape, t.element_type)

    def body(_out):
        # out[i] = x[j / (interior+1)] where j = i - lo is a multiple of
        # (interior+1) inside the operand, else the padding value.
        valid = None
        src = []
        for d, (lo, _hi, interior) in enumerate(config):
            i = linalg.IndexOp(d).result
            j = arith.SubIOp(i, tr.const_index(lo)).result
            step = interior + 1
            q = arith.FloorDivSIOp(j, tr.const_index(step)).result if step > 1 else j
            ok = arith.AndIOp(arith.CmpIOp(arith.CmpIPredicate.sge, j, tr.const_index(0)).result,
                              arith.CmpIOp(arith.CmpIPredicate.slt, q,
                                           tr.const_index(t.shape[d])).result).result
            if step > 1:
                r = arith.RemSIOp(j, tr.const_index(step)).result
                ok = arith.AndIOp(ok, arith.CmpIOp(arith.CmpIPredicate.eq, r,
                                                   tr.const_index(0)).result).result
            valid = ok if valid is None else arith.AndIOp(valid, ok).result
            clamped = arith.MinSIOp(arith.MaxSIOp(q, tr.const_index(0)).result,
                                    tr.const_index(max(t.shape[d] - 1, 0))).result
            src.append(clamped)
        if any(s == 0 for s in t.shape):
            return [pad]
        value = tensor.ExtractOp(x, src).result
        return [arith.SelectOp(valid, value, pad).result]

    return tr.generic([], [], [init], [tr.dims(len(out_shape))], ["parallel"] * len(out_shape),
                      body)



@rule("tile")
def _tile(tr, eqn, args):
    (x,) = args
    t = ir.RankedTensorType(x.type)
    shape = tuple(int(s) for s in eqn.outvars[0].aval.shape)
    if tuple(t.shape) == shape:
        return [x]
    if 0 in t.shape or 0 in shape:
        return [tr.empty(shape, t.element_type)]
    dims = tr.dims(len(shape))
    # the operand may have fewer dimensions than the result (leading reps)
    lead = len(shape) - t.rank
    in_map = [dims[lead + i] % t.shape[i] if shape[lead + i] != t.shape[i] else dims[lead + i]
              for i in range(t.rank)]
    init = tr.empty(shape, t.element_type)
    return tr.generic([x], [in_map], [init], [dims], ["parallel"] * len(shape),
                      lambda a, _o: [a])


@rule("stack")
def _stack(tr, eqn, args):
    axis = int(eqn.params["axis"])
    aval = eqn.outvars[0].aval
    shape = tuple(int(s) for s in aval.shape)
    part_shape = shape[:axis] + (1,) + shape[axis + 1:]
    parts = [tr.reshape(a, part_shape) for a in args]
    if len(parts) == 1:
        return parts
    rtype = ir.RankedTensorType.get(shape, ir.RankedTensorType(args[0].type).element_type)
    return [tensor.ConcatOp(rtype, axis, parts).result]


@rule("unstack")
def _unstack(tr, eqn, args):
    (x,) = args
    axis = int(eqn.params["axis"])
    t = ir.RankedTensorType(x.type)
    outs = []
    for i, var in enumerate(eqn.outvars):
        offsets = [i if d == axis else 0 for d in range(t.rank)]
        sizes = [1 if d == axis else t.shape[d] for d in range(t.rank)]
        outs.append(tr.extract_slice(x, offsets, sizes, result_shape=list(var.aval.shape)))
    return outs
