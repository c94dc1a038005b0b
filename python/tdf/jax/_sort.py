"""Sorting: ``sort`` (several operands, any ``dimension``, ``num_keys``,
stable or not) and ``top_k`` (so ``jnp.sort``, ``jnp.argsort``,
``lax.sort_key_val``, ``lax.top_k`` and ``jax.random.permutation``).

Each key operand becomes an ``i64`` whose signed order is JAX's order of
its values (one ``linalg.generic``, the sort dimension moved innermost):

- floats (f16/bf16/f32/f64) as ``jax.lax.sort`` compares them: the bits with
  the magnitude bits of negative values flipped (a total order), after
  JAX's canonicalization (``-0.0`` is ``+0.0``, every NaN the positive quiet
  NaN): ``-inf < ... < -0.0 == 0.0 < ... < inf < NaN``, equal keys tied;
- signed integers sign-extended, unsigned ones with their top bit flipped
  (then sign-extended: the same order, and a 32-bit key stays 32 bits),
  ``bool`` as 0/1;
- ``top_k`` orders descending by the raw total order, as XLA's TopK does
  (``NaN`` first, ``+0.0`` before ``-0.0``, ``-NaN`` last), the key negated
  bitwise.

The runtime's ``tdf_rt_sort`` (``python/src/Sort.cpp``, declared in the
module as a kernel on memrefs and called with ``tdf.call``) computes each
row's stable lexicographic permutation (ties keep index order: jax.jit's
result for stable sorts, and XLA's ``top_k`` tie rule, lower index first),
in linear time (an LSD radix sort; ``top_k`` of a few of many elements a
partial sort, O(n log k)). Every operand is then gathered along the sort dimension with it
(one ``linalg.generic`` each). The kernel is a CPU function: the GPU target
refuses a program that calls it. An unstable ``sort`` is sorted stably
(one of the orders it allows). Sorts of rows of one element and of empty
arrays are the identity, with no call.
"""

from __future__ import annotations

import numpy as np
from mlir import ir
from mlir.dialects import arith, func, linalg

from ..dialects import tdf as tdf_d
from ..vocabulary import SORT
from ._builder import bits, is_bool, is_float, is_unsigned, rule


def _i64():
    return ir.IntegerType.get_signless(64)


def _int(width: int):
    return ir.IntegerType.get_signless(width)


def _float_key(tr, x, width, canonical):
    """The total-order integer of float scalar ``x`` (``width`` bits)."""
    itype = _int(width)
    v = arith.BitcastOp(itype, x).result
    magnitude_mask = (1 << (width - 1)) - 1
    mag = arith.AndIOp(v, tr.const(magnitude_mask, itype)).result
    if canonical:
        exponent_bits = {16: 5 if isinstance(x.type, ir.F16Type) else 8, 32: 8, 64: 11}[width]
        inf = ((1 << exponent_bits) - 1) << (width - 1 - exponent_bits)
        zero = arith.CmpIOp(arith.CmpIPredicate.eq, mag, tr.const(0, itype)).result
        nan = arith.CmpIOp(arith.CmpIPredicate.ugt, mag, tr.const(inf, itype)).result
        v = arith.SelectOp(zero, tr.const(0, itype), v).result
        v = arith.SelectOp(nan, tr.const(inf + 1, itype), v).result
    sign = arith.ShRSIOp(v, tr.const(width - 1, itype)).result
    v = arith.XOrIOp(v, arith.AndIOp(sign, tr.const(magnitude_mask, itype)).result).result
    return arith.ExtSIOp(_i64(), v).result if width < 64 else v


def _key_fn(tr, dtype, descending=False, canonical=True):
    """The scalar function mapping an element of ``dtype`` to its ``i64``
    sort key (see the module docstring)."""
    width = bits(dtype)
    i64 = _i64()

    def key(x):
        if is_float(dtype):
            k = _float_key(tr, x, width, canonical)
        elif is_bool(dtype):
            k = arith.ExtUIOp(i64, x).result
        else:
            if is_unsigned(dtype):  # unsigned order as signed: the top bit flipped
                x = arith.XOrIOp(x, tr.const(1 << (width - 1), x.type)).result
            k = arith.ExtSIOp(i64, x).result if width < 64 else x
        return arith.XOrIOp(k, tr.const(-1, i64)).result if descending else k

    return key


def _order(rank, dim):
    """Loop position of each operand dimension: the others in order, then
    ``dim`` innermost."""
    others = [d for d in range(rank) if d != dim]
    pos = {d: i for i, d in enumerate(others)}
    pos[dim] = rank - 1
    return others, pos


def _keys(tr, x, dim, key):
    """``key`` of every element of ``x``, shaped [others..., n] (``i64``)."""
    t = ir.RankedTensorType(x.type)
    rank = t.rank
    others, pos = _order(rank, dim)
    shape = [t.shape[d] for d in others] + [t.shape[dim]]
    dims = tr.dims(rank)
    init = tr.empty(shape, _i64())
    return tr.generic([x], [[dims[pos[a]] for a in range(rank)]], [init], [dims],
                      ["parallel"] * rank, lambda v, _o: [key(v)])[0]


def _declare_sort(tr):
    """``func.func private @tdf_rt_sort(memref<?x?x?xi64>, memref<?x?xi64>)``
    in the module being built (once)."""
    op = ir.InsertionPoint.current.block.owner
    while op.name != "builtin.module":
        op = op.parent
    body = op.regions[0].blocks[0]
    for existing in body.operations:
        if existing.operation.name == "func.func" and \
                ir.StringAttr(existing.attributes["sym_name"]).value == SORT:
            return
    dyn = ir.ShapedType.get_dynamic_size()
    ftype = ir.FunctionType.get([ir.MemRefType.get([dyn] * 3, _i64()),
                                 ir.MemRefType.get([dyn] * 2, _i64())], [])
    with ir.InsertionPoint.at_block_begin(body), ir.Location.unknown():
        func.FuncOp(SORT, ftype, visibility="private")


def _permutation(tr, keys, count):
    """The first ``count`` positions of each row's stable lexicographic
    order of ``keys`` (tensors [others..., n]), shaped [others..., count]."""
    t = ir.RankedTensorType(keys[0].type)
    shape = list(t.shape)
    rows = int(np.prod(shape[:-1], dtype=np.int64))
    n = shape[-1]
    k = len(keys)
    if k == 1:
        stacked = tr.reshape(keys[0], (1, rows, n))
    else:
        stacked = tr.empty((k, rows, n), _i64())
        for j, key in enumerate(keys):
            stacked = tr.insert_slice(tr.reshape(key, (rows, n)), stacked, [j, 0, 0], [1, rows, n])
    _declare_sort(tr)
    perm_type = ir.RankedTensorType.get((rows, count), _i64())
    perm = tdf_d.CallOp([perm_type], ir.FlatSymbolRefAttr.get(SORT), [stacked]).results[0]
    return tr.reshape(perm, tuple(shape[:-1]) + (count,))


def _gather(tr, x, perm, dim):
    """``x`` with its ``dim`` positions taken from ``perm`` ([others...,
    count], ``i64``): ``out[..., i, ...] = x[..., perm[..., i], ...]``."""
    t = ir.RankedTensorType(x.type)
    rank = t.rank
    others, _ = _order(rank, dim)
    count = ir.RankedTensorType(perm.type).shape[-1]
    shape = [count if d == dim else t.shape[d] for d in range(rank)]
    dims = tr.dims(rank)
    init = tr.empty(shape, t.element_type)

    def body(p, _o):
        where = [linalg.IndexOp(d).result for d in range(rank)]
        where[dim] = arith.IndexCastOp(ir.IndexType.get(), p).result
        return [tr.extract(x, where)]

    return tr.generic([perm], [[dims[d] for d in others] + [dims[dim]]], [init], [dims],
                      ["parallel"] * rank, body)[0]


@rule("sort")
def _sort(tr, eqn, args):
    dim = int(eqn.params["dimension"])
    num_keys = int(eqn.params["num_keys"])
    shape = [int(s) for s in eqn.invars[0].aval.shape]
    if not 1 <= num_keys <= len(args):
        raise tr.unsupported(f"num_keys={num_keys} with {len(args)} operand(s)")
    if 0 in shape or shape[dim] == 1:
        return list(args)
    keys = [_keys(tr, args[j], dim, _key_fn(tr, eqn.invars[j].aval.dtype))
            for j in range(num_keys)]
    perm = _permutation(tr, keys, shape[dim])
    return [_gather(tr, x, perm, dim) for x in args]


@rule("top_k")
def _top_k(tr, eqn, args):
    (x,) = args
    aval = eqn.invars[0].aval
    shape = [int(s) for s in aval.shape]
    axis = int(eqn.params.get("axis", len(shape) - 1))
    k = int(eqn.params["k"])
    out_shape = [k if d == axis else s for d, s in enumerate(shape)]
    index_et = _int(bits(eqn.outvars[1].aval.dtype))
    if 0 in out_shape:
        return [tr.empty(out_shape, ir.RankedTensorType(x.type).element_type),
                tr.empty(out_shape, index_et)]
    key = _key_fn(tr, aval.dtype, descending=True, canonical=False)
    perm = _permutation(tr, [_keys(tr, x, axis, key)], k)
    values = _gather(tr, x, perm, axis)
    # the indices: perm (laid out [others..., k]) moved back to the axis
    others, _ = _order(len(shape), axis)
    dims = tr.dims(len(shape))
    init = tr.empty(out_shape, index_et)
    indices = tr.generic([perm], [[dims[d] for d in others] + [dims[axis]]], [init], [dims],
                         ["parallel"] * len(shape),
                         lambda p, _o: [arith.TruncIOp(index_et, p).result])[0]
    return [values, indices]


def _total_order(predicate):
    """``eq_to``/``le_to``/``lt_to``: comparisons in the total order the
    sort keys define (floats: ``-NaN < -inf < ... < -0.0 < +0.0 < ... < inf
    < NaN``, NaN payloads ordered), as ``searchsorted`` uses them."""
    def translate(tr, eqn, args):
        key = _key_fn(tr, eqn.invars[0].aval.dtype, canonical=False)
        return [tr.elementwise(eqn.outvars[0].aval, args,
                               lambda x, y: arith.CmpIOp(predicate, key(x), key(y)).result)]
    return translate


for _name, _predicate in (("eq_to", arith.CmpIPredicate.eq), ("le_to", arith.CmpIPredicate.sle),
                          ("lt_to", arith.CmpIPredicate.slt)):
    rule(_name)(_total_order(_predicate))
