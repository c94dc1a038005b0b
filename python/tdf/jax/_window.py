"""Windowed reductions (pooling) and their gradients: ``reduce_window_sum``,
``reduce_window_max``, ``reduce_window_min``, the generic ``reduce_window``
(a jaxpr body, one or more operands), ``select_and_scatter_add`` (the
gradient of a max/min pool) and ``select_and_gather_add`` (its forward-mode
derivative).

A window reduction is one ``linalg.generic`` over the output dimensions and
the window dimensions (``reduction`` iterators) whose input map reads
``x[y * stride + k * window_dilation]``: base dilation and padding are first
applied to the operand by :func:`dilate_pad` (a filled tensor and one strided
``tensor.insert_slice``). The window loops are placed just outside the
trailing dimensions that have no window (the channels of an NHWC pool), so
the innermost loop stays contiguous and vectorizes.

Semantics are XLA's CPU ones: the accumulator starts at the init value and
takes the window's elements in row-major order (``acc = f(acc, x)``);
padding and base-dilation holes are skipped (for the ``_sum``/``_max``/
``_min`` forms they hold the reduction's identity, which is the same).
``select_and_scatter_add`` picks in every window the first in-bounds element
and replaces it by a later one whenever ``select(selected, current)``
(``ge`` for a max pool) is false, exactly as XLA's emitter does (so the
first maximum wins, and a NaN is selected), then adds the window's source
value to the selected element; an element that several windows select
receives their values in the windows' row-major order, from 0. It is two
parallel ``linalg.generic`` ops: the selected offset of each window, then,
for each operand element, the sum over the (at most ``ceil(w / s)`` per
dimension) windows that contain it — bit-identical to ``jax.jit``.
"""

from __future__ import annotations

import math

import numpy as np
from mlir import ir
from mlir.dialects import arith, linalg, tensor

from ._builder import is_bool, is_float, is_unsigned, rule
from ._reduce import _combine, _identity

__all__ = ["dilate_pad", "window_geometry"]


# ------------------------------------------------------------ dilation, padding


def dilate_pad(tr, x, dilation, padding, fill):
    """``x`` with ``dilation[d] - 1`` holes between neighbours along every
    dimension ``d`` and ``padding[d] = (lo, hi)`` elements added at its ends
    (negative: removed), holes and padding holding the scalar ``fill`` (XLA's
    ``pad`` with interior padding). ``x`` itself when nothing changes."""
    t = ir.RankedTensorType(x.type)
    shape = list(t.shape)
    dilation = [int(v) for v in dilation]
    padding = [(int(lo), int(hi)) for lo, hi in padding]
    if all(v == 1 for v in dilation) and all(p == (0, 0) for p in padding):
        return x
    out_shape, starts, counts, first = [], [], [], []
    for n, step, (lo, hi) in zip(shape, dilation, padding):
        dilated = (n - 1) * step + 1 if n > 0 else 0
        size = max(dilated + lo + hi, 0)
        # source elements i whose position i * step + lo lies in [0, size)
        i0 = max(0, -(lo // step)) if lo < 0 else 0
        i1 = min(n - 1, (size - 1 - lo) // step) if size > 0 else -1
        out_shape.append(size)
        first.append(i0)
        counts.append(max(i1 - i0 + 1, 0))
        starts.append(i0 * step + lo)
    filled = tr.fill(fill, out_shape)
    if 0 in counts:
        return filled
    if counts != shape:
        x = tr.extract_slice(x, first, counts)
    return tr.insert_slice(x, filled, starts, counts, dilation)


def window_geometry(eqn, rank):
    """(window, strides, padding, base dilation, window dilation) of a window
    primitive's parameters, as int tuples (missing dilations: 1)."""
    p = eqn.params
    window = tuple(int(v) for v in p["window_dimensions"])
    strides = tuple(int(v) for v in p["window_strides"])
    padding = tuple((int(lo), int(hi)) for lo, hi in p["padding"])
    base = tuple(int(v) for v in p.get("base_dilation", (1,) * rank))
    wdil = tuple(int(v) for v in p.get("window_dilation", (1,) * rank))
    return window, strides, padding, base, wdil


def _loop_order(window, strides, trivial_pad):
    """Loop dimensions of a window reduction: output dimension ``d`` is loop
    ``order[d]``, window dimension of ``d`` (when ``window[d] > 1``) is loop
    ``order[rank + j]``. The window loops sit just outside the trailing
    output dimensions without a window (unit window and stride, no
    padding), so the innermost loop walks the operand contiguously (NHWC:
    the channels); when every dimension has a window, just outside the
    innermost output dimension (NCHW: the output row, not the 2- or 3-wide
    window row; measured 2.5 -> 1.8 ms for a 2x2 pool of 64x32x26x26)."""
    rank = len(window)
    tail = rank
    while tail > 0 and window[tail - 1] == 1 and strides[tail - 1] == 1 and trivial_pad[tail - 1]:
        tail -= 1
    if tail == rank and rank > 0:
        tail = rank - 1
    windowed = [d for d in range(rank) if window[d] > 1]
    # loops: output dims [0, tail), window dims, output dims [tail, rank)
    loops = list(range(tail)) + [rank + j for j in range(len(windowed))] + list(range(tail, rank))
    position = {v: i for i, v in enumerate(loops)}
    return windowed, position


def _window_generic(tr, inputs, inits, window, strides, wdil, body, valid_of=None):
    """The reduction ``linalg.generic`` over ``inputs`` (dilated and padded
    operands) into ``inits`` (of the output shape): ``body(xs, accs)``
    returns the new accumulators (``window_index(d)``, passed as a third
    argument when ``body`` takes one, is the ``index`` of window dimension
    ``d`` in the current window); ``valid_of(positions)`` (positions: the
    padded coordinates, ``index`` values) returns an ``i1`` that is false
    where the element is padding, or None for no check."""
    out_shape = list(ir.RankedTensorType(inits[0].type).shape)
    rank = len(out_shape)
    in_shape = list(ir.RankedTensorType(inputs[0].type).shape)
    trivial = [out_shape[d] == in_shape[d] for d in range(rank)]
    windowed, position = _loop_order(window, strides, trivial)
    nloops = rank + len(windowed)
    dims = tr.dims(nloops)
    y = [dims[position[d]] for d in range(rank)]
    k = {d: dims[position[rank + j]] for j, d in enumerate(windowed)}
    in_map = []
    for d in range(rank):
        e = y[d] * strides[d] if strides[d] != 1 else y[d]
        if d in k:
            e = e + (k[d] * wdil[d] if wdil[d] != 1 else k[d])
        in_map.append(e)
    iters = ["parallel"] * nloops
    for j in range(len(windowed)):
        iters[position[rank + j]] = "reduction"
    n = len(inputs)
    operands, maps = list(inputs), [in_map] * n
    if windowed:
        # The window's shape (as linalg's pooling ops take it): every loop
        # must be a dimension of some operand for the maps to be invertible.
        etype = ir.RankedTensorType(inputs[0].type).element_type
        operands.append(tr.empty([window[d] for d in windowed], etype))
        maps.append([k[d] for d in windowed])

    def window_index(d):
        return linalg.IndexOp(position[rank + windowed.index(d)]).result

    def region(*args):
        xs, accs = list(args[:n]), list(args[len(operands):])
        new = body(xs, accs, window_index)
        if valid_of is None:
            return new
        coords = []
        for d in range(rank):
            q = linalg.IndexOp(position[d]).result
            if strides[d] != 1:
                q = arith.MulIOp(q, tr.const_index(strides[d])).result
            if d in k:
                w = linalg.IndexOp(position[rank + windowed.index(d)]).result
                if wdil[d] != 1:
                    w = arith.MulIOp(w, tr.const_index(wdil[d])).result
                q = arith.AddIOp(q, w).result
            coords.append(q)
        ok = valid_of(coords)
        if ok is None:
            return new
        return [arith.SelectOp(ok, a, b).result for a, b in zip(new, accs)]

    return tr.generic(operands, maps, inits, [y] * len(inits), iters, region, rank=nloops)


def _valid_fn(tr, shape, padding, base):
    """``valid_of`` for :func:`_window_generic`: a padded coordinate is an
    element of the operand (not padding, not a base-dilation hole)."""
    checks = []
    for d, (n, (lo, _hi), step) in enumerate(zip(shape, padding, base)):
        if lo <= 0 and step == 1 and _hi <= 0:
            continue
        checks.append((d, n, lo, step))
    if not checks:
        return None

    def valid_of(coords):
        ok = None
        for d, n, lo, step in checks:
            j = arith.SubIOp(coords[d], tr.const_index(lo)).result if lo else coords[d]
            c = arith.AndIOp(
                arith.CmpIOp(arith.CmpIPredicate.sge, j, tr.const_index(0)).result,
                arith.CmpIOp(arith.CmpIPredicate.sle, j, tr.const_index((n - 1) * step)).result).result
            if step != 1:
                r = arith.RemSIOp(j, tr.const_index(step)).result
                c = arith.AndIOp(c, arith.CmpIOp(arith.CmpIPredicate.eq, r,
                                                 tr.const_index(0)).result).result
            ok = c if ok is None else arith.AndIOp(ok, c).result
        return ok

    return valid_of


_FLOATS = (ir.F16Type, ir.BF16Type, ir.F32Type, ir.F64Type)


def _zero(tr, etype):
    return tr.const(0.0 if isinstance(etype, _FLOATS) else 0, etype)


# ------------------------------------------------------------ the reductions


def _monoid(kind):
    def translate(tr, eqn, args):
        (x,) = args
        t = ir.RankedTensorType(x.type)
        rank = t.rank
        dtype = eqn.invars[0].aval.dtype
        out_shape = [int(s) for s in eqn.outvars[0].aval.shape]
        window, strides, padding, base, wdil = window_geometry(eqn, rank)
        identity = _identity(tr, kind, dtype, t.element_type)
        init = tr.fill(identity, out_shape)
        if rank == 0:
            return [x]
        if 0 in out_shape or 0 in window:
            return [init]
        xp = dilate_pad(tr, x, base, padding, identity)
        return _window_generic(tr, [xp], [init], window, strides, wdil,
                               lambda xs, accs, _k: [_combine(kind, dtype, accs[0], xs[0])])
    return translate


for _kind in ("sum", "max", "min"):
    rule(f"reduce_window_{_kind}")(_monoid(_kind))


def _scalar_call(tr, jaxpr, consts, scalars):
    """Inlines the scalar ``jaxpr`` (a reduction body) on the scalars
    ``scalars``: they travel as rank-0 tensors (which fold away) and the
    results come back as scalars."""
    args = [tr.from_scalar(s) for s in scalars]
    outs = tr.inline(jaxpr, args, consts)
    return [tr.extract(v) for v in outs]


@rule("reduce_window")
def _reduce_window(tr, eqn, args):
    n = len(args) // 2
    xs, init_values = args[:n], args[n:]
    p = eqn.params
    jaxpr = p["jaxpr"]
    consts = [tr.constant(np.asarray(c), v.aval)
              for c, v in zip(p.get("consts", ()), jaxpr.constvars)]
    rank = ir.RankedTensorType(xs[0].type).rank
    out_shape = [int(s) for s in eqn.outvars[0].aval.shape]
    window, strides, padding, base, wdil = window_geometry(eqn, rank)
    scalars = [tr.extract(v) for v in init_values]
    inits = [tr.fill(s, out_shape) for s in scalars]
    if rank == 0:
        # XLA (jax.jit) returns a rank-0 operand unchanged: the init value
        # is not applied to a window of no dimensions.
        return list(xs)
    if 0 in out_shape or 0 in window:
        return inits
    padded = [dilate_pad(tr, x, base, padding, s) for x, s in zip(xs, scalars)]
    shape = list(ir.RankedTensorType(xs[0].type).shape)

    def body(vals, accs, _k):
        return _scalar_call(tr, jaxpr, consts, list(accs) + list(vals))

    results = _window_generic(tr, padded, inits, window, strides, wdil, body,
                              _valid_fn(tr, shape, padding, base))
    _check_scalar_body(tr, results[0].owner)
    return results


#: Ops a translated scalar body may hold (rank-0 tensors fold away).
_SCALAR_BODY_OPS = ("tensor.from_elements", "tensor.extract", "linalg.index", "linalg.yield")


def _check_scalar_body(tr, op):
    """Refuses a ``reduce_window`` body that did not translate to scalar
    code (control flow, tensor-valued ops inside the window loop)."""
    for inner in op.regions[0].blocks[0].operations:
        name = inner.operation.name
        if name in _SCALAR_BODY_OPS or name.split(".")[0] in ("arith", "math"):
            continue
        raise tr.unsupported(f"a reduce_window body with non-scalar code ({name})")


# ------------------------------------------------------------ select and scatter


def _selector(tr, name, dtype):
    """``keep(selected, current)``: XLA's ``select`` computation (``ge`` for a
    max pool, ``le`` for a min pool, ``gt``/``lt`` too): true keeps the
    selected element (ordered comparisons: a NaN is never kept over)."""
    name = str(getattr(name, "name", name))
    if name not in ("ge", "le", "gt", "lt"):
        raise tr.unsupported(f"select_prim {name}")
    if is_float(dtype):
        pred = getattr(arith.CmpFPredicate, "O" + name.upper())
        return lambda a, b: arith.CmpFOp(pred, a, b).result
    prefix = "u" if (is_unsigned(dtype) or is_bool(dtype)) else "s"
    pred = getattr(arith.CmpIPredicate, prefix + name)
    return lambda a, b: arith.CmpIOp(pred, a, b).result


@rule("select_and_gather_add")
def _select_and_gather_add(tr, eqn, args):
    tangents, operand = args
    t = ir.RankedTensorType(operand.type)
    rank = t.rank
    dtype = eqn.invars[1].aval.dtype
    out_shape = [int(s) for s in eqn.outvars[0].aval.shape]
    window, strides, padding, base, wdil = window_geometry(eqn, rank)
    name = str(getattr(eqn.params["select_prim"], "name", eqn.params["select_prim"]))
    keep = _selector(tr, name, dtype)
    tet = ir.RankedTensorType(tangents.type).element_type
    start = _identity(tr, "max" if name in ("ge", "gt") else "min", dtype, t.element_type)
    zero = _zero(tr, tet)
    inits = [tr.fill(start, out_shape), tr.fill(zero, out_shape)]
    if rank == 0:
        return [tangents]
    if 0 in out_shape or 0 in window:
        return [inits[1]]
    padded = [dilate_pad(tr, operand, base, padding, start),
              dilate_pad(tr, tangents, base, padding, zero)]
    shape = list(t.shape)

    def body(vals, accs, _k):
        k = keep(accs[0], vals[0])
        return [arith.SelectOp(k, accs[0], vals[0]).result, arith.SelectOp(k, accs[1], vals[1]).result]

    return [_window_generic(tr, padded, inits, window, strides, wdil, body,
                            _valid_fn(tr, shape, padding, base))[1]]


@rule("select_and_scatter_add")
def _select_and_scatter_add(tr, eqn, args):
    source, operand = args
    t = ir.RankedTensorType(operand.type)
    st = ir.RankedTensorType(source.type)
    rank = t.rank
    dtype = eqn.invars[1].aval.dtype
    shape = list(t.shape)
    src_shape = list(st.shape)
    p = eqn.params
    window = tuple(int(v) for v in p["window_dimensions"])
    strides = tuple(int(v) for v in p["window_strides"])
    padding = tuple((int(lo), int(hi)) for lo, hi in p["padding"])
    keep = _selector(tr, p["select_prim"], dtype)
    set_ = st.element_type
    zero = _zero(tr, set_)
    if rank == 0:
        return [source]
    if 0 in shape or 0 in src_shape or 0 in window:
        return [tr.fill(zero, shape)]
    selected = _selected_offsets(tr, operand, src_shape, window, strides, padding, keep)
    return [_scatter_selected(tr, source, selected, shape, window, strides, padding, eqn)]


def _selected_offsets(tr, operand, src_shape, window, strides, padding, keep):
    """``i32`` tensor of the source's shape: the row-major offset inside
    each window of its selected element (-1: the window is all padding)."""
    t = ir.RankedTensorType(operand.type)
    i32 = ir.IntegerType.get_signless(32)
    rank = t.rank
    shape = list(t.shape)
    zero = _zero(tr, t.element_type)
    padded = dilate_pad(tr, operand, (1,) * rank, padding, zero)
    inits = [tr.fill(zero, src_shape), tr.fill(tr.const(-1, i32), src_shape)]
    windowed = [d for d in range(rank) if window[d] > 1]
    valid_of = _valid_fn(tr, shape, padding, (1,) * rank)

    def offset_of(window_index):
        """The row-major offset of the current window element."""
        off = None
        for d in windowed:
            kd = window_index(d)
            off = kd if off is None else arith.AddIOp(
                arith.MulIOp(off, tr.const_index(window[d])).result, kd).result
        if off is None:
            return tr.const(0, i32)
        return arith.IndexCastOp(i32, off).result

    def body(vals, accs, window_index):
        best, index = accs
        cur = vals[0]
        fresh = arith.CmpIOp(arith.CmpIPredicate.slt, index, tr.const(0, i32)).result
        replace = arith.XOrIOp(keep(best, cur), tr.const(1, ir.IntegerType.get_signless(1))).result
        take = arith.OrIOp(fresh, replace).result
        return [arith.SelectOp(take, cur, best).result,
                arith.SelectOp(take, offset_of(window_index), index).result]

    results = _window_generic(tr, [padded], inits, window, strides, (1,) * rank, body, valid_of)
    return results[1]


def _scatter_selected(tr, source, selected, shape, window, strides, padding, eqn):
    """``out[x]``: 0 plus, in row-major order of the windows containing
    ``x``, the source value of every window whose selected element is ``x``."""
    st = ir.RankedTensorType(source.type)
    src_shape = list(st.shape)
    rank = len(shape)
    i32 = ir.IntegerType.get_signless(32)
    etype = st.element_type
    floating = is_float(eqn.invars[0].aval.dtype)
    counts = [math.ceil(window[d] / strides[d]) if window[d] > 0 else 0 for d in range(rank)]
    init = tr.empty(shape, etype)

    def body(_out):
        x = [linalg.IndexOp(d).result for d in range(rank)]
        acc = tr.const(0.0 if floating else 0, etype)
        # per dimension: the candidate windows (index values) with their
        # validity and the element's offset inside them, in increasing order
        per_dim = []
        for d in range(rank):
            lo = padding[d][0]
            q = arith.AddIOp(x[d], tr.const_index(lo)).result if lo else x[d]
            if window[d] == 1 and strides[d] == 1 and lo == 0 and src_shape[d] == shape[d]:
                per_dim.append([(x[d], None, None)])
                continue
            hi = arith.FloorDivSIOp(q, tr.const_index(strides[d])).result \
                if strides[d] != 1 else q
            options = []
            for step in range(counts[d]):
                yd = arith.SubIOp(hi, tr.const_index(counts[d] - 1 - step)).result \
                    if counts[d] - 1 - step else hi
                r = arith.SubIOp(q, arith.MulIOp(yd, tr.const_index(strides[d])).result).result
                ok = arith.AndIOp(
                    arith.AndIOp(
                        arith.CmpIOp(arith.CmpIPredicate.sge, yd, tr.const_index(0)).result,
                        arith.CmpIOp(arith.CmpIPredicate.slt, yd,
                                     tr.const_index(src_shape[d])).result).result,
                    arith.AndIOp(
                        arith.CmpIOp(arith.CmpIPredicate.sge, r, tr.const_index(0)).result,
                        arith.CmpIOp(arith.CmpIPredicate.slt, r,
                                     tr.const_index(window[d])).result).result).result
                safe = arith.MinSIOp(arith.MaxSIOp(yd, tr.const_index(0)).result,
                                     tr.const_index(src_shape[d] - 1)).result
                options.append((safe, ok, r))
            per_dim.append(options)
        for combo in _product(per_dim):
            ys = [c[0] for c in combo]
            ok = None
            off = None
            for d, (_y, okd, r) in enumerate(combo):
                if okd is not None:
                    ok = okd if ok is None else arith.AndIOp(ok, okd).result
                if window[d] > 1:
                    rd = r if r is not None else tr.const_index(0)
                    off = rd if off is None else arith.AddIOp(
                        arith.MulIOp(off, tr.const_index(window[d])).result, rd).result
            off = tr.const(0, i32) if off is None else arith.IndexCastOp(i32, off).result
            hit = arith.CmpIOp(arith.CmpIPredicate.eq, tensor.ExtractOp(selected, ys).result,
                               off).result
            if ok is not None:
                hit = arith.AndIOp(hit, ok).result
            value = tensor.ExtractOp(source, ys).result
            added = arith.AddFOp(acc, value).result if floating else arith.AddIOp(acc, value).result
            acc = arith.SelectOp(hit, added, acc).result
        return [acc]

    return tr.generic([], [], [init], [tr.dims(rank)], ["parallel"] * rank, body)[0]


def _product(lists):
    if not lists:
        yield ()
        return
    for head in lists[0]:
        for rest in _product(lists[1:]):
            yield (head,) + rest

