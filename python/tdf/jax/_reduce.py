"""Reductions and contractions: ``reduce_sum/max/min/prod/and/or/xor``,
``argmax``/``argmin`` and ``dot_general`` (the cumulative ``cumsum``/...
scans are in :mod:`._cumulative`).

All are ``linalg.generic`` ops with reduction iterators:

- reductions start from the operation's identity (``-inf`` for a float max,
  so NaN propagates through ``arith.maximumf``);
- ``argmax``/``argmin`` carry (value, index) and take a new element only
  when it is strictly better, or NaN while the current one is not: the first
  index wins ties and the first NaN wins, as in JAX;
- ``dot_general`` orders its loops batch, lhs-free, contracting, rhs-free so
  the innermost loop walks the rhs and the result contiguously, or, for a
  float rhs whose contracting dimensions are its innermost ones, batch,
  lhs-free, rhs-free, contracting with a ``reassoc`` sum (a vectorized
  reduction, no transpose); operands are converted to
  ``preferred_element_type`` before multiplying.
"""

from __future__ import annotations

import numpy as np
from mlir import ir
from mlir.dialects import arith, linalg

from ._builder import element_type, is_bool, is_float, is_unsigned, rule
from ._elementwise import convert_scalar

_FLOAT_INIT = {"sum": 0.0, "prod": 1.0, "max": float("-inf"), "min": float("inf")}


def _identity(tr, kind, dtype, etype):
    if is_bool(dtype):
        return tr.const({"sum": 0, "or": 0, "max": 0, "xor": 0, "prod": 1, "and": 1, "min": 1}[kind],
                        etype)
    if is_float(dtype):
        return tr.const(_FLOAT_INIT[kind], etype)
    info = np.iinfo(np.dtype(dtype))
    return tr.const({"sum": 0, "prod": 1, "max": info.min, "min": info.max,
                     "or": 0, "and": -1, "xor": 0}[kind], etype)


def _combine(kind, dtype, acc, x):
    if is_bool(dtype):
        op = {"sum": arith.OrIOp, "or": arith.OrIOp, "max": arith.OrIOp, "xor": arith.XOrIOp,
              "prod": arith.AndIOp, "and": arith.AndIOp, "min": arith.AndIOp}[kind]
    elif is_float(dtype):
        op = {"sum": arith.AddFOp, "prod": arith.MulFOp, "max": arith.MaximumFOp,
              "min": arith.MinimumFOp}[kind]
    else:
        unsigned = is_unsigned(dtype)
        op = {"sum": arith.AddIOp, "prod": arith.MulIOp, "or": arith.OrIOp, "and": arith.AndIOp,
              "xor": arith.XOrIOp, "max": arith.MaxUIOp if unsigned else arith.MaxSIOp,
              "min": arith.MinUIOp if unsigned else arith.MinSIOp}[kind]
    return op(acc, x).result


def _reduction(kind):
    def translate(tr, eqn, args):
        (x,) = args
        axes = set(int(a) for a in eqn.params["axes"])
        t = ir.RankedTensorType(x.type)
        dtype = eqn.invars[0].aval.dtype
        if not axes:
            return [x]
        out_shape = [s for i, s in enumerate(t.shape) if i not in axes]
        dims = tr.dims(t.rank)
        init = linalg.fill(_identity(tr, kind, dtype, t.element_type),
                           outs=[tr.empty(out_shape, t.element_type)])
        iters = ["reduction" if i in axes else "parallel" for i in range(t.rank)]
        out_map = [dims[i] for i in range(t.rank) if i not in axes]
        return tr.generic([x], [dims], [init], [out_map], iters,
                          lambda a, acc: [_combine(kind, dtype, acc, a)])
    return translate


for _kind in ("sum", "max", "min", "prod", "and", "or", "xor"):
    rule(f"reduce_{_kind}")(_reduction(_kind))


def _arg_reduction(better):
    def translate(tr, eqn, args):
        (x,) = args
        (axis,) = [int(a) for a in eqn.params["axes"]]
        t = ir.RankedTensorType(x.type)
        dtype = eqn.invars[0].aval.dtype
        index_dtype = eqn.params["index_dtype"]
        index_type = element_type(index_dtype)
        out_shape = [s for i, s in enumerate(t.shape) if i != axis]
        dims = tr.dims(t.rank)
        floating = is_float(dtype)
        if floating:
            start = float("-inf") if better == "gt" else float("inf")
        elif is_bool(dtype):
            start = 0 if better == "gt" else 1
        else:
            info = np.iinfo(np.dtype(dtype))
            start = info.min if better == "gt" else info.max
        value_init = linalg.fill(tr.const(start, t.element_type),
                                 outs=[tr.empty(out_shape, t.element_type)])
        index_init = linalg.fill(tr.const(0, index_type), outs=[tr.empty(out_shape, index_type)])
        iters = ["reduction" if i == axis else "parallel" for i in range(t.rank)]
        out_map = [dims[i] for i in range(t.rank) if i != axis]

        def body(a, best, best_index):
            if floating:
                pred = arith.CmpFPredicate.OGT if better == "gt" else arith.CmpFPredicate.OLT
                take = arith.CmpFOp(pred, a, best).result
                a_nan = arith.CmpFOp(arith.CmpFPredicate.UNO, a, a).result
                best_ok = arith.CmpFOp(arith.CmpFPredicate.ORD, best, best).result
                take = arith.OrIOp(take, arith.AndIOp(a_nan, best_ok).result).result
            else:
                unsigned = is_bool(dtype) or is_unsigned(dtype)
                table = {"gt": "ugt" if unsigned else "sgt", "lt": "ult" if unsigned else "slt"}
                take = arith.CmpIOp(getattr(arith.CmpIPredicate, table[better]), a, best).result
            i = arith.IndexCastOp(index_type, linalg.IndexOp(axis).result).result
            return [arith.SelectOp(take, a, best).result,
                    arith.SelectOp(take, i, best_index).result]

        results = tr.generic([x], [dims], [value_init, index_init], [out_map, out_map],
                             iters, body)
        return [results[1]]
    return translate


rule("argmax")(_arg_reduction("gt"))
rule("argmin")(_arg_reduction("lt"))


@rule("dot_general")
def _dot_general(tr, eqn, args):
    lhs, rhs = args
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    lc, rc, lb, rb = (tuple(int(d) for d in v) for v in (lc, rc, lb, rb))
    lt, rt = ir.RankedTensorType(lhs.type), ir.RankedTensorType(rhs.type)
    lfree = [i for i in range(lt.rank) if i not in lc and i not in lb]
    rfree = [i for i in range(rt.rank) if i not in rc and i not in rb]
    # Loop order batch, lhs free, contracting, rhs free: the innermost loop
    # walks the rhs and the result contiguously and vectorizes. A float rhs
    # laid out [batch, free, contracting] (the attention scores
    # q @ k_cache^T, whose rhs is [heads, seq, head_dim]; x @ w.T) instead
    # reduces innermost over its contiguous contracting dimensions, with
    # `reassoc` on the sum so LLVM vectorizes the reduction (partial sums,
    # as XLA does): no transpose of the rhs. Any other rhs layout is
    # transposed to [batch, contracting, free] first.
    perm = tuple(rb) + tuple(rc) + tuple(rfree)
    identity = tuple(range(rt.rank))
    inner_reduce = (is_float(eqn.outvars[0].aval.dtype) and bool(rfree) and perm != identity
                    and tuple(rb) + tuple(rfree) + tuple(rc) == identity)
    if rfree and perm != identity and not inner_reduce:
        # A named linalg.transpose, not a generic: elementwise fusion would
        # fold a generic transpose back into the contraction, whose
        # innermost loop would then gather the rhs with a stride.
        init = tr.empty([rt.shape[p] for p in perm], rt.element_type)
        rhs = linalg.transpose(rhs, outs=[init], permutation=list(perm)).results[0]
        rt = ir.RankedTensorType(rhs.type)
        nb_, nc_ = len(rb), len(rc)
        rb, rc = tuple(range(nb_)), tuple(range(nb_, nb_ + nc_))
        rfree = list(range(nb_ + nc_, rt.rank))
    aval = eqn.outvars[0].aval
    out_dtype = aval.dtype
    etype = element_type(out_dtype)
    nb, nl, nc, nr = len(lb), len(lfree), len(lc), len(rfree)
    rank = nb + nl + nc + nr
    d = tr.dims(rank)
    # loop order: batch, lhs free, contracting, rhs free
    b_dims, l_dims = d[:nb], d[nb:nb + nl]
    c_dims, r_dims = d[nb + nl:nb + nl + nc], d[nb + nl + nc:]
    if inner_reduce:
        r_dims, c_dims = d[nb + nl:nb + nl + nr], d[nb + nl + nr:]
    lhs_map = []
    for i in range(lt.rank):
        if i in lb:
            lhs_map.append(b_dims[lb.index(i)])
        elif i in lc:
            lhs_map.append(c_dims[lc.index(i)])
        else:
            lhs_map.append(l_dims[lfree.index(i)])
    rhs_map = []
    for i in range(rt.rank):
        if i in rb:
            rhs_map.append(b_dims[rb.index(i)])
        elif i in rc:
            rhs_map.append(c_dims[rc.index(i)])
        else:
            rhs_map.append(r_dims[rfree.index(i)])
    out_map = b_dims + l_dims + r_dims
    iters = ["parallel"] * (nb + nl) + ["reduction"] * nc + ["parallel"] * nr
    if inner_reduce:
        iters = ["parallel"] * (nb + nl + nr) + ["reduction"] * nc
    ldtype, rdtype = eqn.invars[0].aval.dtype, eqn.invars[1].aval.dtype
    init = linalg.fill(_identity(tr, "sum", out_dtype, etype),
                       outs=[tr.empty(tuple(aval.shape), etype)])

    body = multiply_accumulate(tr, ldtype, rdtype, out_dtype, reassociate=inner_reduce)
    return tr.generic([lhs, rhs], [lhs_map, rhs_map], [init], [out_map], iters, body)


def multiply_accumulate(tr, ldtype, rdtype, acc_dtype, reassociate: bool = False):
    """The body of a contraction (``dot_general``, a convolution):
    ``acc + a * b`` with both operands converted to ``acc_dtype`` (``acc |
    a & b`` for bool); ``reassociate`` marks float ops ``reassoc,contract``
    (an innermost reduction LLVM may then vectorize)."""
    fm = ir.Attribute.parse("#arith.fastmath<reassoc,contract>") if reassociate else None

    def body(a, b, acc):
        a = convert_scalar(tr, a, ldtype, acc_dtype)
        b = convert_scalar(tr, b, rdtype, acc_dtype)
        if is_bool(acc_dtype):
            return [arith.OrIOp(acc, arith.AndIOp(a, b).result).result]
        if is_float(acc_dtype):
            return [arith.AddFOp(acc, arith.MulFOp(a, b, fastmath=fm).result, fastmath=fm).result]
        return [arith.AddIOp(acc, arith.MulIOp(a, b).result).result]

    return body
