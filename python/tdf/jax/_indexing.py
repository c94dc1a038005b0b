"""Indexing primitives: ``dynamic_slice``, ``dynamic_update_slice``,
``gather`` and ``scatter``/``scatter-add``/``-mul``/``-min``/``-max``.

- ``dynamic_slice``/``dynamic_update_slice`` clamp every start index to
  ``[0, dim - size]`` (MLIR slices are undefined out of bounds) and become
  ``tensor.extract_slice``/``tensor.insert_slice``;
- ``gather`` is a ``linalg.generic`` whose body reads the start indices and
  the operand with ``tensor.extract`` (clamped for ``CLIP`` and
  ``PROMISE_IN_BOUNDS``, the fill value for an out-of-range window under
  ``FILL_OR_DROP``);
- a ``scatter`` applies its update windows one after the other: each window
  is a ``tensor.insert_slice`` (after an ``extract_slice`` + combine for the
  accumulating forms) guarded by an ``scf.if`` that drops an out-of-range
  window (``FILL_OR_DROP``, XLA's default) or clamped (``CLIP``); several
  windows are an ``scf.for`` carrying the operand, so repeated indices of a
  scatter-add accumulate and a donated operand is updated in place.
  ``.at[:, pos].set(row)`` is one guarded ``tensor.insert_slice``.
"""

from __future__ import annotations

import numpy as np
from mlir import ir
from mlir.dialects import arith, linalg, scf

from ._builder import is_bool, is_float, is_unsigned, rule
from ._reduce import _combine


def _mode_name(mode) -> str:
    return str(getattr(mode, "name", mode)).rsplit(".", 1)[-1].upper()


def _start(tr, eqn, operand, value):
    """The scalar start index ``value`` (operand ``operand`` of ``eqn``) as a
    signed integer (see :meth:`Translator.signed_index`)."""
    return tr.signed_index(tr.extract(value), eqn.invars[operand].aval.dtype)


@rule("dynamic_slice")
def _dynamic_slice(tr, eqn, args):
    x, starts = args[0], args[1:]
    sizes = [int(s) for s in eqn.params["slice_sizes"]]
    t = ir.RankedTensorType(x.type)
    if t.rank == 0:
        return [x]
    offsets = [tr.clamp_index(_start(tr, eqn, 1 + d, s), 0, t.shape[d] - sizes[d])
               for d, s in enumerate(starts)]
    return [tr.extract_slice(x, offsets, sizes)]


@rule("dynamic_update_slice")
def _dynamic_update_slice(tr, eqn, args):
    x, update, starts = args[0], args[1], args[2:]
    t, u = ir.RankedTensorType(x.type), ir.RankedTensorType(update.type)
    if t.rank == 0:
        return [update]
    offsets = [tr.clamp_index(_start(tr, eqn, 2 + d, s), 0, t.shape[d] - u.shape[d])
               for d, s in enumerate(starts)]
    return [tr.insert_slice(tr.unaliased_copy(update, x), x, offsets, list(u.shape))]


def _fill_value(tr, eqn, dtype, etype):
    value = eqn.params.get("fill_value")
    if value is None:
        if is_float(dtype):
            value = float("nan")
        elif is_bool(dtype):
            value = True
        elif is_unsigned(dtype):
            value = np.iinfo(np.dtype(dtype)).max
        else:
            value = np.iinfo(np.dtype(dtype)).min
    return tr.const(value, etype)


@rule("gather")
def _gather(tr, eqn, args):
    x, indices = args
    p = eqn.params
    dn = p["dimension_numbers"]
    offset_dims = tuple(int(d) for d in dn.offset_dims)
    collapsed = tuple(int(d) for d in dn.collapsed_slice_dims)
    start_index_map = tuple(int(d) for d in dn.start_index_map)
    op_batching = tuple(int(d) for d in dn.operand_batching_dims)
    idx_batching = tuple(int(d) for d in dn.start_indices_batching_dims)
    slice_sizes = [int(s) for s in p["slice_sizes"]]
    mode = _mode_name(p["mode"])
    aval = eqn.outvars[0].aval
    out_shape = tuple(int(s) for s in aval.shape)
    t, it = ir.RankedTensorType(x.type), ir.RankedTensorType(indices.type)
    dtype = eqn.invars[0].aval.dtype
    batch_out_dims = [o for o in range(len(out_shape)) if o not in offset_dims]
    window_dims = [d for d in range(t.rank) if d not in collapsed and d not in op_batching]
    fill = mode == "FILL_OR_DROP"
    fill_value = _fill_value(tr, eqn, dtype, t.element_type) if fill else None
    init = tr.empty(out_shape, t.element_type)
    def body(_out):
        out_idx = [linalg.IndexOp(o).result for o in range(len(out_shape))]
        batch = [out_idx[o] for o in batch_out_dims]
        starts = [tr.const_index(0)] * t.rank
        valid = None
        for j, d in enumerate(start_index_map):
            raw = tr.extract(indices, batch + [tr.const_index(j)]) if it.rank else tr.extract(indices)
            raw = tr.signed_index(raw, eqn.invars[1].aval.dtype)
            high = t.shape[d] - slice_sizes[d]
            if fill:
                ok = arith.AndIOp(
                    arith.CmpIOp(arith.CmpIPredicate.sge, raw, tr.const(0, raw.type)).result,
                    arith.CmpIOp(arith.CmpIPredicate.sle, raw, tr.const(high, raw.type)).result).result
                valid = ok if valid is None else arith.AndIOp(valid, ok).result
            starts[d] = tr.clamp_index(raw, 0, high)
        for m, d in enumerate(op_batching):
            starts[d] = batch[idx_batching[m]]
        src = list(starts)
        for k, d in enumerate(window_dims):
            src[d] = arith.AddIOp(starts[d], out_idx[offset_dims[k]]).result
        value = tensor_extract(x, src)
        if valid is not None:
            value = arith.SelectOp(valid, value, fill_value).result
        return [value]

    if 0 in t.shape and 0 not in out_shape:
        if fill:
            return [tr.fill(fill_value, out_shape)]
        raise tr.unsupported("a gather from an empty operand")
    return tr.generic([], [], [init], [tr.dims(len(out_shape))],
                      ["parallel"] * len(out_shape), body)


def tensor_extract(x, indices):
    from mlir.dialects import tensor
    return tensor.ExtractOp(x, list(indices)).result


_SCATTER_KINDS = {"scatter": None, "scatter-add": "sum", "scatter_add": "sum",
                  "scatter-mul": "prod", "scatter_mul": "prod", "scatter-min": "min",
                  "scatter_min": "min", "scatter-max": "max", "scatter_max": "max"}


def _scatter_window(rank: int, ut, window_upd, unit_dims) -> list[int]:
    """The window a scatter writes into its operand of rank ``rank``: size
    1 in the ``unit_dims`` (inserted and batching dimensions), else the size
    of the next update window dimension ``window_upd`` of updates type
    ``ut``."""
    window, k = [], 0
    for d in range(rank):
        if d in unit_dims:
            window.append(1)
        else:
            window.append(int(ut.shape[window_upd[k]]))
            k += 1
    return window


def _update_window(tr, updates, coords, scatter_upd, upd_window_shape):
    """The window of ``updates`` at scatter coordinates ``coords`` (the
    values of its ``scatter_upd`` dimensions), shaped ``upd_window_shape``."""
    ut = ir.RankedTensorType(updates.type)
    if list(ut.shape) == upd_window_shape:
        return updates
    offsets, sizes = [], []
    c = iter(coords)
    for d in range(ut.rank):
        if d in scatter_upd:
            offsets.append(next(c))
            sizes.append(1)
        else:
            offsets.append(0)
            sizes.append(int(ut.shape[d]))
    return tr.extract_slice(updates, offsets, sizes, result_shape=upd_window_shape)


@rule(*_SCATTER_KINDS)
def _scatter(tr, eqn, args):
    x, indices, updates = args
    kind = _SCATTER_KINDS[eqn.primitive.name]
    p = eqn.params
    if kind is None and p.get("update_jaxpr") is not None:
        raise tr.unsupported("a scatter with a custom update function, e.g. .at[].apply")
    dn = p["dimension_numbers"]
    window_upd = tuple(int(d) for d in dn.update_window_dims)
    inserted = tuple(int(d) for d in dn.inserted_window_dims)
    to_operand = tuple(int(d) for d in dn.scatter_dims_to_operand_dims)
    op_batching = tuple(int(d) for d in dn.operand_batching_dims)
    idx_batching = tuple(int(d) for d in dn.scatter_indices_batching_dims)
    mode = _mode_name(p["mode"])
    dtype = eqn.invars[0].aval.dtype
    t, it, ut = (ir.RankedTensorType(v.type) for v in (x, indices, updates))
    batch_shape = list(it.shape[:-1]) if it.rank else []
    scatter_upd = [d for d in range(ut.rank) if d not in window_upd]
    window = _scatter_window(t.rank, ut, window_upd, set(inserted) | set(op_batching))
    upd_window_shape = [int(ut.shape[d]) for d in window_upd]
    count = int(np.prod(batch_shape, dtype=np.int64)) if batch_shape else 1
    if count == 0 or 0 in window:
        return [x]

    def apply(acc, coords):
        """One window at batch coordinates ``coords`` (index values)."""
        starts = [0] * t.rank
        valid = None
        for j, d in enumerate(to_operand):
            raw = tr.extract(indices, coords + [tr.const_index(j)]) if it.rank else tr.extract(indices)
            raw = tr.signed_index(raw, eqn.invars[1].aval.dtype)
            high = t.shape[d] - window[d]
            if mode == "CLIP":
                starts[d] = tr.clamp_index(raw, 0, high)
                continue
            ok = arith.AndIOp(
                arith.CmpIOp(arith.CmpIPredicate.sge, raw, tr.const(0, raw.type)).result,
                arith.CmpIOp(arith.CmpIPredicate.sle, raw, tr.const(high, raw.type)).result).result
            valid = ok if valid is None else arith.AndIOp(valid, ok).result
            starts[d] = tr.clamp_index(raw, 0, max(high, 0))
        for m, d in enumerate(op_batching):
            starts[d] = coords[idx_batching[m]]

        def update(acc):
            source = _update_window(tr, updates, coords, scatter_upd, upd_window_shape)
            source = tr.unaliased_copy(source, acc)
            if kind is not None:
                current = tr.extract_slice(acc, starts, window, result_shape=upd_window_shape)
                source = _combine_tensors(tr, kind, dtype, current, source)
            return tr.insert_slice(source, acc, starts, window)

        if valid is None:
            return update(acc)
        op = scf.IfOp(valid, [acc.type], has_else=True)
        with ir.InsertionPoint(op.then_block):
            scf.YieldOp([update(acc)])
        with ir.InsertionPoint(op.else_block):
            scf.YieldOp([acc])
        return op.results[0]

    if count == 1:
        return [apply(x, [tr.const_index(0)] * len(batch_shape))]
    loop = scf.ForOp(tr.const_index(0), tr.const_index(count), tr.const_index(1), [x])
    with ir.InsertionPoint(loop.body):
        rest = loop.induction_variable
        coords = []
        for size in reversed(batch_shape):
            coords.append(arith.RemUIOp(rest, tr.const_index(size)).result)
            rest = arith.DivUIOp(rest, tr.const_index(size)).result
        coords.reverse()
        scf.YieldOp([apply(loop.inner_iter_args[0], coords)])
    return [loop.results[0]]


class _Aval:
    def __init__(self, shape, dtype):
        self.shape, self.dtype = tuple(shape), dtype


def _combine_tensors(tr, kind, dtype, a, b):
    shape = ir.RankedTensorType(a.type).shape
    return tr.elementwise(_Aval(shape, dtype), [a, b], lambda x, y: _combine(kind, dtype, x, y))
