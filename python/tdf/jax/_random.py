"""JAX's PRNG: typed key arrays, the key primitives and the threefry2x32 hash.

A key array ``key<fry>[S]`` is carried as its key data, a ``uint32[S, 2]``
tensor (what ``jax.random.key_data`` returns): arguments, results and
constants cross the boundary as key data (see ``_api``), raw
``jax.random.PRNGKey`` keys are plain ``uint32[2]`` arrays.

The key primitives are translated from JAX's own definitions, as
``jax.jit`` lowers them: ``random_seed``, ``random_split``,
``random_fold_in`` and ``random_bits`` trace the key implementation's
``seed``/``split``/``fold_in``/``random_bits`` (vmapped over the key
array's shape, as ``jax._src.random.prng``'s lowering rules do) with
``jax.make_jaxpr`` on the key data and translate that jaxpr; the
``threefry2x32`` hash it contains is translated from JAX's lax-level
lowering (``_threefry2x32_lowering``, unrolled) the same way, and
``iota_2x32_shape`` (the 64-bit counters) directly. Both branches of
``jax_threefry_partitionable`` follow, since the implementation reads the
flag when it is traced. ``random_wrap``/``random_unwrap``/``random_clone``
are the identity on key data.

Primitives that move keys (slices, reshapes, broadcasts, gathers and
scatters, ``select_n``, calls, loops) run their ordinary rule on the key
data: the equation is rewritten with the key data's avals and the trailing
key dimension added to its parameters. Keys of another PRNG implementation
(``rbg``, ``unsafe_rbg``, ``philox*``, ``threefry4x32``) and any other
primitive on keys raise :class:`UnsupportedPrimitiveError`.
"""

from __future__ import annotations

import threading
from functools import partial

import numpy as np
from mlir import ir
from mlir.dialects import arith, linalg

from ._builder import KEY_IMPLS, KEY_RULES, RULES, is_key, physical_aval, rule

_TRACES: dict = {}
_TRACES_LOCK = threading.Lock()


def _key_impl(tr, aval):
    """The PRNG implementation of key aval ``aval`` (refused unless it is
    one of ``KEY_IMPLS``)."""
    impl = aval.dtype._impl
    if impl.name not in KEY_IMPLS:
        raise tr.unsupported(f"dtype {aval.dtype}: PRNG implementation {impl.name}; "
                             f"tdf.jax translates {', '.join(KEY_IMPLS)} keys")
    return impl


def _traced(name, params, in_avals, make_fn):
    """The closed jaxpr of ``make_fn()`` applied to arrays of ``in_avals``
    (physical avals), cached per primitive, parameters, avals and the flags
    the implementation reads when traced (threefry_partitionable, x64)."""
    import jax
    from jax._src import config
    flags = (bool(config.threefry_partitionable.value), bool(config.enable_x64.value))
    key = (name, params, tuple((tuple(a.shape), str(a.dtype)) for a in in_avals), flags)
    closed = _TRACES.get(key)
    if closed is None:
        specs = [jax.ShapeDtypeStruct(tuple(a.shape), a.dtype) for a in in_avals]
        closed = jax.make_jaxpr(make_fn())(*specs)
        with _TRACES_LOCK:
            _TRACES[key] = closed
    return closed


def _inline(tr, eqn, args, make_fn, params=()):
    in_avals = [physical_aval(v.aval) for v in eqn.invars]
    closed = _traced(eqn.primitive.name, params, in_avals, make_fn)
    return tr.inline(closed, list(args))


def _vmapped(n, f):
    from jax._src.random import prng
    return prng.iterated_vmap_unary(n, f)


def _key_primitive(name):
    """Registers a key primitive's rule as the rule of its key arrays too."""
    def register(fn):
        rule(name)(fn)
        KEY_RULES[name] = fn
        return fn
    return register


@_key_primitive("random_seed")
def _random_seed(tr, eqn, args):
    impl = _key_impl(tr, eqn.outvars[0].aval)
    ndim = len(eqn.invars[0].aval.shape)
    return _inline(tr, eqn, args, lambda: _vmapped(ndim, impl.seed), (impl.name,))


@_key_primitive("random_wrap")
def _random_wrap(tr, eqn, args):
    _key_impl(tr, eqn.outvars[0].aval)
    return list(args)


@_key_primitive("random_unwrap")
def _random_unwrap(tr, eqn, args):
    _key_impl(tr, eqn.invars[0].aval)
    return list(args)


@_key_primitive("random_clone")
def _random_clone(tr, eqn, args):
    if is_key(eqn.invars[0].aval.dtype):
        _key_impl(tr, eqn.invars[0].aval)
    return list(args)


@_key_primitive("random_split")
def _random_split(tr, eqn, args):
    aval = eqn.invars[0].aval
    impl = _key_impl(tr, aval)
    shape = tuple(int(s) for s in eqn.params["shape"])
    return _inline(tr, eqn, args,
                   lambda: _vmapped(len(aval.shape), lambda k: impl.split(k, shape)),
                   (impl.name, shape))


@_key_primitive("random_fold_in")
def _random_fold_in(tr, eqn, args):
    from jax._src.random import prng
    keys, msgs = eqn.invars[0].aval, eqn.invars[1].aval
    impl = _key_impl(tr, keys)
    return _inline(tr, eqn, args,
                   lambda: prng.iterated_vmap_binary_bcast(tuple(keys.shape), tuple(msgs.shape),
                                                           impl.fold_in),
                   (impl.name, tuple(keys.shape)))


@_key_primitive("random_bits")
def _random_bits(tr, eqn, args):
    aval = eqn.invars[0].aval
    impl = _key_impl(tr, aval)
    width = int(eqn.params["bit_width"])
    shape = tuple(int(s) for s in eqn.params["shape"])
    return _inline(tr, eqn, args,
                   lambda: _vmapped(len(aval.shape),
                                    lambda k: impl.random_bits(k, width, shape)),
                   (impl.name, width, shape))


@rule("threefry2x32")
def _threefry2x32(tr, eqn, args):
    """The hash as JAX's lax-level lowering computes it (its unrolled form:
    straight-line element-wise ops that fuse into one loop)."""
    def make():
        from jax._src.random import threefry2x32 as fry
        return partial(fry._threefry2x32_lowering, use_rolled_loops=False)
    return _inline(tr, eqn, args, make)


@rule("iota_2x32_shape")
def _iota_2x32_shape(tr, eqn, args):
    """The row-major position of every element of ``shape`` as a 64-bit
    count, split into its high and low 32 bits (``prng.iota_2x32_shape``)."""
    shape = tuple(int(s) for s in eqn.params["shape"])
    rank = len(shape)
    i32, i64 = ir.IntegerType.get_signless(32), ir.IntegerType.get_signless(64)
    dims = tr.dims(rank)
    strides = [int(np.prod(shape[d + 1:], dtype=np.int64)) for d in range(rank)]

    def body(_hi, _lo):
        count = None
        for d in range(rank):
            i = arith.IndexCastOp(i64, linalg.IndexOp(d).result).result
            if strides[d] != 1:
                i = arith.MulIOp(i, tr.const(strides[d], i64)).result
            count = i if count is None else arith.AddIOp(count, i).result
        if count is None:
            count = tr.const(0, i64)
        hi = arith.TruncIOp(i32, arith.ShRUIOp(count, tr.const(32, i64)).result).result
        return [hi, arith.TruncIOp(i32, count).result]

    inits = [tr.empty(shape, i32), tr.empty(shape, i32)]
    if rank == 0:
        zero = tr.from_scalar(tr.const(0, i32))
        return [zero, zero]
    return tr.generic([], [], inits, [dims, dims], ["parallel"] * rank, body)


# ------------------------------------------------- primitives that move keys


def _physical_eqn(eqn, invars=None, **params):
    """``eqn`` with the key data's avals for its key values (and ``params``
    replaced)."""
    from jax._src import core

    def convert(var):
        if isinstance(var, core.Literal) or not is_key(var.aval.dtype):
            return var
        aval = physical_aval(var.aval)
        return core.DropVar(aval) if isinstance(var, core.DropVar) else core.Var(aval)

    return eqn.replace(invars=[convert(v) for v in (eqn.invars if invars is None else invars)],
                       outvars=[convert(v) for v in eqn.outvars],
                       params={**eqn.params, **params})


def _key_dims(eqn) -> int:
    """The number of trailing dimensions of the key data (1: ``(2,)``)."""
    for var in list(eqn.invars) + list(eqn.outvars):
        if is_key(var.aval.dtype):
            return len(physical_aval(var.aval).shape) - len(var.aval.shape)
    return 0  # pragma: no cover - only called for equations on keys


def _moves_keys(*names):
    """Registers the key rule of primitives whose parameters ``adapt(eqn,
    extra)`` rewrites for ``extra`` trailing key dimensions (None: the
    ordinary rule on the key data as is)."""
    def register(adapt):
        for name in names:
            KEY_RULES[name] = partial(_moved, name, adapt)
        return adapt
    return register


def _moved(name, adapt, tr, eqn, args):
    for var in list(eqn.invars) + list(eqn.outvars):
        if is_key(var.aval.dtype):
            _key_impl(tr, var.aval)
    extra = _key_dims(eqn)
    params = adapt(eqn, extra) if adapt is not None else {}
    return RULES[name](tr, _physical_eqn(eqn, **params), args)


_moves_keys("squeeze", "expand_dims", "concatenate", "rev", "split", "stack", "unstack", "tile",
            "copy", "copy_p",
            "optimization_barrier", "pjit", "jit", "closed_call", "core_call", "custom_jvp_call",
            "custom_vjp_call", "remat", "checkpoint", "scan", "while", "cond")(None)


@_moves_keys("slice")
def _slice_params(eqn, extra):
    p = eqn.params
    trailing = tuple(physical_aval(eqn.invars[0].aval).shape[-extra:])
    out = {"start_indices": tuple(p["start_indices"]) + (0,) * extra,
           "limit_indices": tuple(p["limit_indices"]) + trailing}
    if p.get("strides") is not None:
        out["strides"] = tuple(p["strides"]) + (1,) * extra
    return out


@_moves_keys("broadcast_in_dim")
def _broadcast_params(eqn, extra):
    shape = tuple(eqn.params["shape"])
    trailing = tuple(physical_aval(eqn.outvars[0].aval).shape[len(shape):])
    return {"shape": shape + trailing,
            "broadcast_dimensions": tuple(eqn.params["broadcast_dimensions"])
            + tuple(range(len(shape), len(shape) + extra))}


@_moves_keys("transpose")
def _transpose_params(eqn, extra):
    perm = tuple(eqn.params["permutation"])
    return {"permutation": perm + tuple(range(len(perm), len(perm) + extra))}


@_moves_keys("reshape")
def _reshape_params(eqn, extra):
    trailing = tuple(physical_aval(eqn.outvars[0].aval).shape[-extra:])
    dims = eqn.params.get("dimensions")
    out = {"new_sizes": tuple(eqn.params["new_sizes"]) + trailing}
    if dims is not None:
        out["dimensions"] = tuple(dims) + tuple(range(len(dims), len(dims) + extra))
    return out


@_moves_keys("gather")
def _gather_params(eqn, extra):
    dn = eqn.params["dimension_numbers"]
    rank = len(eqn.outvars[0].aval.shape)
    trailing = tuple(physical_aval(eqn.invars[0].aval).shape[-extra:])
    return {"dimension_numbers": dn._replace(
                offset_dims=tuple(dn.offset_dims) + tuple(range(rank, rank + extra))),
            "slice_sizes": tuple(eqn.params["slice_sizes"]) + trailing}


@_moves_keys("scatter")
def _scatter_params(eqn, extra):
    dn = eqn.params["dimension_numbers"]
    rank = len(eqn.invars[2].aval.shape)
    return {"dimension_numbers": dn._replace(
        update_window_dims=tuple(dn.update_window_dims) + tuple(range(rank, rank + extra)))}


def _zero_indices(tr, eqn, args, extra):
    """``eqn``/``args`` with ``extra`` zero start indices appended (the key
    data's trailing dimensions of ``dynamic_slice``/``dynamic_update_slice``)."""
    from jax._src import core
    zero = np.zeros((), np.int32)
    aval = core.ShapedArray((), np.dtype(np.int32))
    invars = list(eqn.invars) + [core.Literal(zero, aval) for _ in range(extra)]
    args = list(args) + [tr.constant(zero, aval) for _ in range(extra)]
    return invars, args


def _dynamic_slice_key(tr, eqn, args):
    _key_impl(tr, eqn.invars[0].aval)
    extra = _key_dims(eqn)
    invars, args = _zero_indices(tr, eqn, args, extra)
    trailing = tuple(physical_aval(eqn.invars[0].aval).shape[-extra:])
    phys = _physical_eqn(eqn, invars,
                         slice_sizes=tuple(eqn.params["slice_sizes"]) + trailing)
    return RULES["dynamic_slice"](tr, phys, args)


def _dynamic_update_slice_key(tr, eqn, args):
    _key_impl(tr, eqn.invars[0].aval)
    invars, args = _zero_indices(tr, eqn, args, _key_dims(eqn))
    return RULES["dynamic_update_slice"](tr, _physical_eqn(eqn, invars), args)


def _select_n_key(tr, eqn, args):
    """``select_n`` of key arrays: the predicate broadcast over the key
    data's trailing dimension."""
    from jax._src import core
    for var in eqn.invars[1:]:
        _key_impl(tr, var.aval)
    pred, cases = args[0], list(args[1:])
    pred_aval = eqn.invars[0].aval
    out = physical_aval(eqn.outvars[0].aval)
    invars = list(eqn.invars)
    if pred_aval.shape:
        t = ir.RankedTensorType(pred.type)
        dims = tr.dims(len(out.shape))
        init = tr.empty(out.shape, t.element_type)
        pred = tr.generic([pred], [dims[:t.rank]], [init], [dims], ["parallel"] * len(dims),
                          lambda a, _o: [a])[0]
        invars[0] = core.Var(core.ShapedArray(out.shape, pred_aval.dtype))
    return RULES["select_n"](tr, _physical_eqn(eqn, invars), [pred] + cases)


KEY_RULES["dynamic_slice"] = _dynamic_slice_key
KEY_RULES["dynamic_update_slice"] = _dynamic_update_slice_key
KEY_RULES["select_n"] = _select_n_key
