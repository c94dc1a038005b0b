"""Cumulative reductions: ``cumsum``/``cumprod``/``cummax``/``cummin``/
``cumlogsumexp``, in linear time.

Each is a sequential scan along its axis (``reverse=True`` walks it from the
end), never a masked triangle:

- when the axis is the innermost non-unit dimension, an ``scf.for`` over the
  other elements (row by row) around an ``scf.for`` along the axis that
  carries the running value as a scalar: ``tensor.extract`` of the input,
  ``tensor.insert`` into the result (contiguous, no temporaries);
- otherwise an ``scf.for`` along the axis carrying the result and the running
  slice (a tensor of the other dimensions): each step combines the input's
  slice into the running one (a ``linalg.generic`` that updates it in place,
  contiguous along the inner dimensions) and inserts it into the result.

The combiners are the reductions' (``_reduce._combine``: NaN propagates
through ``max``/``min``, unsigned integers compare unsigned) and, for
``cumlogsumexp``, ``logaddexp`` as ``jnp.logaddexp`` computes it (in float32
for float16/bfloat16, rounded back each step).
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, scf, tensor
from mlir.dialects import math as mmath

from ._builder import element_type, rule
from ._reduce import _combine, _identity


def _logaddexp(tr, a, b):
    """``log(exp(a) + exp(b))``: ``max + log1p(exp(-|a - b|))``, and
    ``a + b`` where ``a - b`` is NaN (equal infinities, NaN operands)."""
    etype = a.type
    half = isinstance(etype, (ir.F16Type, ir.BF16Type))
    if half:
        f32 = ir.F32Type.get()
        a, b = arith.ExtFOp(f32, a).result, arith.ExtFOp(f32, b).result
    delta = arith.SubFOp(a, b).result
    big = arith.MaximumFOp(a, b).result
    tail = mmath.Log1pOp(mmath.ExpOp(arith.NegFOp(mmath.AbsFOp(delta).result).result).result).result
    nan = arith.CmpFOp(arith.CmpFPredicate.UNO, delta, delta).result
    out = arith.SelectOp(nan, arith.AddFOp(a, b).result, arith.AddFOp(big, tail).result).result
    return arith.TruncFOp(etype, out).result if half else out


def _combiner(tr, kind, dtype):
    if kind == "logsumexp":
        return lambda acc, x: _logaddexp(tr, acc, x)
    return lambda acc, x: _combine(kind, dtype, acc, x)


def _identity_of(tr, kind, dtype, etype):
    if kind == "logsumexp":
        return tr.const(float("-inf"), etype)
    return _identity(tr, kind, dtype, etype)


def _position(tr, k, n, reverse):
    """The axis position of step ``k`` (an ``index``) of ``n``."""
    return arith.SubIOp(tr.const_index(n - 1), k).result if reverse else k


def _rows(tr, shape, axis, body, init):
    """``body(coords, acc)`` for every combination of the dimensions other
    than ``axis`` (``coords`` with None at ``axis``), one ``scf.for`` over
    their product carrying ``init``."""
    others = [d for d in range(len(shape)) if d != axis]
    count = 1
    for d in others:
        count *= shape[d]
    loop = scf.ForOp(tr.const_index(0), tr.const_index(count), tr.const_index(1), [init])
    with ir.InsertionPoint(loop.body):
        rest = loop.induction_variable
        coords: list = [None] * len(shape)
        for d in reversed(others):
            coords[d] = arith.RemUIOp(rest, tr.const_index(shape[d])).result
            rest = arith.DivUIOp(rest, tr.const_index(shape[d])).result
        scf.YieldOp([body(coords, loop.inner_iter_args[0])])
    return loop.results[0]


def _scalar_scan(tr, x, axis, reverse, combine, identity):
    """The scan along an innermost axis: a scalar carried along each row."""
    t = ir.RankedTensorType(x.type)
    shape = list(t.shape)
    n = shape[axis]

    def row(coords, out):
        loop = scf.ForOp(tr.const_index(0), tr.const_index(n), tr.const_index(1), [out, identity])
        with ir.InsertionPoint(loop.body):
            out_k, acc = loop.inner_iter_args
            where = list(coords)
            where[axis] = _position(tr, loop.induction_variable, n, reverse)
            acc = combine(acc, tensor.ExtractOp(x, where).result)
            scf.YieldOp([tensor.InsertOp(acc, out_k, where).result, acc])
        return loop.results[0]

    return _rows(tr, shape, axis, row, tr.empty(shape, t.element_type))


def _slice_scan(tr, x, axis, reverse, combine, identity):
    """The scan along an outer axis: the running slice of the other
    dimensions updated in place, inserted into the result at every step."""
    t = ir.RankedTensorType(x.type)
    shape = list(t.shape)
    n = shape[axis]
    rest = [s for d, s in enumerate(shape) if d != axis]
    sizes = [1 if d == axis else s for d, s in enumerate(shape)]
    running = tr.fill(identity, rest)
    loop = scf.ForOp(tr.const_index(0), tr.const_index(n), tr.const_index(1),
                     [tr.empty(shape, t.element_type), running])
    with ir.InsertionPoint(loop.body):
        out, acc = loop.inner_iter_args
        k = _position(tr, loop.induction_variable, n, reverse)
        offsets = [k if d == axis else 0 for d in range(len(shape))]
        cur = tr.extract_slice(x, offsets, sizes, result_shape=rest)
        dims = tr.dims(len(rest))
        acc = tr.generic([cur], [dims], [acc], [dims], ["parallel"] * len(rest),
                         lambda a, s: [combine(s, a)])[0]
        scf.YieldOp([tr.insert_slice(acc, out, offsets, sizes), acc])
    return loop.results[0]


def _cumulative(kind):
    def translate(tr, eqn, args):
        (x,) = args
        axis = int(eqn.params["axis"])
        reverse = bool(eqn.params.get("reverse", False))
        t = ir.RankedTensorType(x.type)
        dtype = eqn.invars[0].aval.dtype
        shape = list(t.shape)
        if t.rank == 0 or 0 in shape or shape[axis] == 1:
            return [x]
        combine = _combiner(tr, kind, dtype)
        identity = _identity_of(tr, kind, dtype, element_type(dtype))
        innermost = all(s == 1 for s in shape[axis + 1:])
        scan = _scalar_scan if innermost else _slice_scan
        return [scan(tr, x, axis, reverse, combine, identity)]
    return translate


for _kind, _name in (("sum", "cumsum"), ("prod", "cumprod"), ("max", "cummax"),
                     ("min", "cummin"), ("logsumexp", "cumlogsumexp")):
    rule(_name)(_cumulative(_kind))
