"""Property-based differential test of tdf.jax.jit: hypothesis generates
random JAX programs from the supported primitives (element-wise math,
comparisons/select, integer arithmetic, reductions, argmax, dot_general,
shape ops, dynamic slices with out-of-range starts, gathers and scatters
with out-of-range indices, fori_loop, cond, sort/argsort/top_k, cumulative
ops, unsigned ints, PRNG keys and samplers, convolutions, pooling, refs),
runs each through
``tdf.jax.jit`` (with a random argument donated) and ``jax.jit``, and
compares every result (dtype, shape, values); tdf with its memory planner
off (``plan_memory=False``) must give the same bits.

Discontinuous ops (floor, round, sign, comparisons, argmax, float → int)
are only applied to values computed exactly (inputs, neg/abs/max/min, shape
ops), so that a last-bit difference of a transcendental function between
XLA and libm cannot flip them.

Default: a short run for CI (``TDF_JAX_PROPERTY_EXAMPLES``, default 25).
``TDF_LONG=1`` runs 2,000 programs (or ``TDF_JAX_PROPERTY_EXAMPLES``).
"""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jax import lax

import tdf.jax

LONG = os.environ.get("TDF_LONG") == "1"
EXAMPLES = int(os.environ.get("TDF_JAX_PROPERTY_EXAMPLES", "2000" if LONG else "25"))

R, C = 3, 4  # the shape of the float inputs


def _smooth(x):
    return jnp.clip(x, -4.0, 4.0)


UNARY = {
    "exp": lambda x: jnp.exp(_smooth(x)), "tanh": jnp.tanh, "sin": jnp.sin, "cos": jnp.cos,
    "sqrt": lambda x: jnp.sqrt(jnp.abs(x)), "log": lambda x: jnp.log(jnp.abs(x) + 1.0),
    "log1p": lambda x: jnp.log1p(jnp.abs(x)), "sigmoid": jax.nn.sigmoid,
    "rsqrt": lambda x: lax.rsqrt(jnp.abs(x) + 1.0), "erf": lax.erf, "square": jnp.square,
    "exp2": lambda x: jnp.exp2(_smooth(x)), "cube": lambda x: x ** 3, "silu": jax.nn.silu,
    "gelu": jax.nn.gelu, "softmax": lambda x: jax.nn.softmax(x, axis=-1),
    "asinh": jnp.arcsinh, "sinh": lambda x: jnp.sinh(_smooth(x)),
    "asin": lambda x: jnp.arcsin(jnp.tanh(x)), "atanh": lambda x: jnp.arctanh(jnp.tanh(x) * 0.9),
    "erfinv": lambda x: jax.scipy.special.erfinv(jnp.tanh(x) * 0.99),
    "lgamma": lambda x: lax.lgamma(jnp.abs(x) + 0.5), "digamma": lambda x: lax.digamma(x + 9.0),
}
EXACT_UNARY = {"neg": jnp.negative, "abs": jnp.abs, "floor": jnp.floor, "ceil": jnp.ceil,
               "round": jnp.round, "sign": jnp.sign, "halve": lambda x: x * 0.5,
               "relu": jax.nn.relu, "reduce_precision": lambda x: lax.reduce_precision(x, 5, 10),
               "nextafter": lambda x: jnp.nextafter(x, jnp.float32(0.0)),
               "bitcast": lambda x: lax.bitcast_convert_type(
                   lax.bitcast_convert_type(x, jnp.uint32) ^ jnp.uint32(1), jnp.float32)}
BINARY = {"add": jnp.add, "sub": jnp.subtract, "mul": jnp.multiply,
          "div": lambda a, b: a / (jnp.abs(b) + 0.5),
          "pow": lambda a, b: jnp.power(jnp.abs(a) + 0.5, jnp.clip(b, -2.0, 2.0)),
          "rem": lambda a, b: jnp.fmod(a, jnp.abs(b) + 0.5), "atan2_free": lambda a, b: a * b + a}
EXACT_BINARY = {"max": jnp.maximum, "min": jnp.minimum,
                "where": lambda a, b: jnp.where(a > b, a, b - 1.0)}


def _op_names():
    return (list(UNARY) + list(EXACT_UNARY) + list(BINARY) + list(EXACT_BINARY)
            + ["sum", "max_reduce", "argmax", "dot", "transpose", "reverse", "slice_pad",
               "concat", "cumsum", "dyn_slice", "dyn_update", "gather", "scatter_set",
               "scatter_add", "int_ops", "fori", "cond", "reshape", "broadcast_row", "scan",
               "while", "lax_pad", "batched_dot", "cummax", "take_fill", "select3", "bf16_round",
               "loop_updates", "split", "uint_ops", "uint_index", "cumlogsumexp", "sort",
               "argsort", "top_k", "cumprod", "cummin", "uint16_ops", "random", "random_float",
               "conv", "max_pool", "sum_pool", "refs"])


@st.composite
def programs(draw):
    n = draw(st.integers(1, 6))
    ops = []
    for _ in range(n):
        ops.append((draw(st.sampled_from(_op_names())), draw(st.integers(0, 10 ** 6)),
                    draw(st.integers(0, 10 ** 6)), draw(st.integers(-6, 6))))
    donate = draw(st.sampled_from([(), (0,), (1,)]))
    seed = draw(st.integers(0, 2 ** 31 - 1))
    return ops, donate, seed


def _value_op(name, a, b, e, e2, s, k, idx, a_exact, b_exact):
    """One op of the first group (element-wise, reductions, shape ops): (value, exact) or None."""
    if name in UNARY:
        r, ex = UNARY[name](a), False
    elif name in EXACT_UNARY:
        r, ex = EXACT_UNARY[name](e), True
    elif name in BINARY:
        r, ex = BINARY[name](a, b), False
    elif name in EXACT_BINARY:
        r, ex = EXACT_BINARY[name](e, e2), True
    elif name == "sum":
        r, ex = a + jnp.sum(a, axis=s % 2, keepdims=True), False
    elif name == "max_reduce":
        r, ex = jnp.broadcast_to(jnp.max(e, axis=s % 2, keepdims=True), (R, C)), True
    elif name == "argmax":
        am = jnp.argmax(e, axis=1).astype(jnp.float32)
        r, ex = e + am[:, None], True
    elif name == "dot":
        r, ex = (a @ b.T) @ a * 0.25, False
    elif name == "transpose":
        r, ex = jnp.tile(a.T, (1, 2))[:R, :C] if R <= C else a, a_exact
    elif name == "reverse":
        r, ex = a[::-1, ::-1], a_exact
    elif name == "slice_pad":
        r, ex = jnp.pad(a[1:, : C - 1], ((0, 1), (1, 0)), constant_values=s), a_exact
    elif name == "concat":
        r, ex = jnp.concatenate([a[:, :2], b[:, 1:3]], axis=1), a_exact and b_exact
    else:
        return None
    return r, ex


def _indexing_op(name, a, b, e, e2, s, k, idx, a_exact, b_exact):
    """One op of the indexing group (dynamic slices and updates, gathers, scatters, takes, selects): (value, exact) or None."""
    if name == "dyn_slice":
        piece = lax.dynamic_slice(a, (k + s, s), (2, 2))
        r, ex = jnp.tile(piece, (2, 2))[:R, :C], a_exact
    elif name == "dyn_update":
        r, ex = lax.dynamic_update_slice(a, b[:2, :3], (k, s)), a_exact and b_exact
    elif name == "gather":
        rows = a[idx % 7 - 2]  # out-of-range and negative rows (clamped)
        r, ex = jnp.resize(rows, (R, C)), a_exact
    elif name == "scatter_set":
        r, ex = a.at[idx[:2] + s].set(b[:2], mode="drop"), a_exact and b_exact
    elif name == "scatter_add":
        r, ex = a.at[idx[:R] + s].add(b, mode="drop"), False
    elif name == "take_fill":
        r = jnp.take(e, idx[:R] + s, axis=0, mode="fill", fill_value=-7.0)
        ex = True
    elif name == "select3":
        which = jnp.clip(idx[:R] + s, 0, 2)[:, None] * jnp.ones((R, C), jnp.int32)
        r, ex = lax.select_n(which, a, b, a * b), a_exact and b_exact
    elif name == "loop_updates":
        r = lax.fori_loop(0, R, lambda t, v: v.at[t, (t + s) % C].set(b[t, 0]), a)
        ex = a_exact and b_exact
    else:
        return None
    return r, ex


def _loop_op(name, a, b, e, e2, s, k, idx, a_exact, b_exact):
    """One op of the loop group (scans, cumulative ops, fori/while loops, cond): (value, exact) or None."""
    if name == "cumsum":
        r, ex = jnp.cumsum(a, axis=s % 2), False
    elif name == "fori":
        r = lax.fori_loop(0, abs(s) + 1, lambda t, v: v * 0.5 + b[t % R], a)
        ex = False
    elif name == "cond":
        r = lax.cond(k > s, lambda v: v + 1.0, lambda v: v * 2.0, a)
        ex = a_exact
    elif name == "scan":
        def row(c, x_row):
            c = jnp.tanh(c * 0.5 + x_row)
            return c, c * 2.0
        _, ys = lax.scan(row, a[0], b, reverse=s % 2 == 1)
        r, ex = ys, False
    elif name == "while":
        def cond(st):
            return jnp.logical_and(st[0] < 5, jnp.max(jnp.abs(st[1])) < 50.0)
        r = lax.while_loop(cond, lambda st: (st[0] + 1, st[1] * 1.5 + 0.25),
                           (0, e))[1]
        ex = False
    elif name == "cummax":
        r, ex = lax.cummax(e, axis=s % 2, reverse=s < 0), True
    elif name == "cumlogsumexp":
        r, ex = lax.cumlogsumexp(a, axis=s % 2, reverse=s < 0), False
    else:
        return None
    return r, ex


def _shape_op(name, a, b, e, e2, s, k, idx, a_exact, b_exact):
    """One op of the remaining group (integer ops, reshapes, broadcasts, pads, dots, bf16): (value, exact) or None."""
    if name == "int_ops":
        ia = (e * 3).astype(jnp.int32)
        d = ia // (jnp.abs(ia) % 3 + 1) + ia % 3 - (ia >> 1) + jnp.argmin(ia, 1)[:, None]
        r, ex = d.astype(jnp.float32), True
    elif name == "reshape":
        r, ex = a.reshape(C, R).T.reshape(R, C), a_exact
    elif name == "broadcast_row":
        r, ex = jnp.broadcast_to(a[s % R], (R, C)) + jnp.float32(s), a_exact
    elif name == "lax_pad":
        r = lax.pad(a, jnp.float32(s), ((1, -1, 0), (-2, 1, 1)))
        r, ex = jnp.resize(r, (R, C)), a_exact
    elif name == "batched_dot":
        r = jnp.einsum("rc,rd->rcd", a, b).sum(-1) * 0.1 + jnp.einsum("rc,qc->rq", a, b)[:, :1]
        ex = False
    elif name == "bf16_round":
        r, ex = e.astype(jnp.bfloat16).astype(jnp.float32), True
    elif name == "split":
        left, right = jnp.split(a, [s % C], axis=1)
        r, ex = jnp.concatenate([right, left], axis=1), a_exact
    elif name == "uint_ops":
        u = (e * 7).astype(jnp.int32).astype(jnp.uint32)  # negatives wrap to large values
        v = (e2 * 5).astype(jnp.uint8)
        d = (u // (u % 5 + 1) + u % 3 - (u >> 2) + lax.clz(u) + lax.population_count(u)
             + jnp.maximum(u, v.astype(jnp.uint32)) + (u > jnp.uint32(2**31)) + jnp.cumsum(v, 1))
        r, ex = (d % jnp.uint32(1000)).astype(jnp.float32) + jnp.argmax(u, 1)[:, None], True
    elif name == "uint_index":
        rows = idx.astype(jnp.uint32)[:R] + jnp.uint32(s % 3)  # wrapped negatives: clamped
        r, ex = a[rows], a_exact
    else:
        return None
    return r, ex


def _sort_op(name, a, b, e, e2, s, k, idx, a_exact, b_exact):
    """One op of the sorting and cumulative group: (value, exact) or None."""
    if name == "sort":
        r, ex = jnp.sort(e, axis=s % 2, descending=s < 0), True
    elif name == "argsort":
        r, ex = jnp.argsort(e, axis=s % 2, stable=True).astype(jnp.float32) + e, True
    elif name == "top_k":
        vals, ids = lax.top_k(e, 2)
        r, ex = jnp.concatenate([vals, ids.astype(jnp.float32) - vals], axis=1), True
    elif name == "cumprod":
        r, ex = jnp.cumprod(jnp.tanh(a) * 1.5, axis=s % 2), False
    elif name == "cummin":
        r, ex = lax.cummin(e, axis=s % 2, reverse=s < 0), True
    elif name == "uint16_ops":
        u = (e * 300).astype(jnp.int32).astype(jnp.uint16)  # negatives wrap
        d = (u // (u % 7 + 1) + (u >> 3) - u * jnp.uint16(3) + jnp.cumsum(u, 0, dtype=jnp.uint16)
             + jnp.minimum(u, jnp.uint16(40000)))
        r, ex = d.astype(jnp.float32) + jnp.argmin(u, 1)[:, None], True
    else:
        return None
    return r, ex


def _random_op(name, a, b, e, e2, s, k, idx, a_exact, b_exact):
    """One op of the PRNG, convolution, pooling and ref group: (value, exact) or None."""
    if name in ("random", "random_float"):
        key = jax.random.fold_in(jax.random.key(k), s + 6)  # fold_in takes a uint32: s >= -6
        k1, k2 = jax.random.split(key)
        if name == "random":
            bits = jax.random.bits(k1, (R, C)) % jnp.uint32(997)
            r = bits.astype(jnp.float32) + jax.random.randint(k2, (R, C), -5, 5) + e
        else:  # float samplers: jax.jit's bits too
            keep = jax.random.bernoulli(k2, 0.7, (R, C))
            r = jnp.where(keep, jax.random.normal(k1, (R, C)) + a, jax.random.uniform(k2, (R, C)))
        return r, name == "random"
    if name == "conv":
        kernel = b[:2, :3][None, None] * 0.5
        out = lax.conv_general_dilated(a[None, None], kernel, (1, 1), "SAME",
                                       rhs_dilation=(1, 1 + s % 2))
        return out[0, 0], False
    if name == "max_pool":
        return lax.reduce_window(e, -jnp.inf, lax.max, (2, 2), (1, 1), "SAME"), True
    if name == "sum_pool":
        return lax.reduce_window(a, 0.0, lax.add, (2, 3), (1, 1), "SAME"), False
    if name == "refs":
        ref = jax.new_ref(e)
        ref[s % R] = e2[0]
        jax.ref.addupdate(ref, ((s + 1) % R,), b[1])
        old = jax.ref.swap(ref, (slice(0, 1),), e2[1:2])
        return ref[...] + old, False
    return None


def _structured_op(*args):
    """One op of the second group (scans, loops, indexing, scatters): (value, exact) or None."""
    return (_indexing_op(*args) or _loop_op(*args) or _shape_op(*args) or _sort_op(*args)
            or _random_op(*args))

def _interpret(ops):
    """The JAX function of a program: a pool of (value, exact) pairs, each op
    appends one [R, C] float32 value built from earlier ones."""

    def fun(x, y, idx, k):
        pool = [(x, True), (y, True)]
        outs, exact = [], []
        for name, i, j, s in ops:
            a, a_exact = pool[i % len(pool)]
            b, b_exact = pool[j % len(pool)]
            exact_a = [v for v, e in pool if e]
            e = exact_a[i % len(exact_a)]
            e2 = exact_a[j % len(exact_a)]
            args = (name, a, b, e, e2, s, k, idx, a_exact, b_exact)
            got = _value_op(*args) or _structured_op(*args)
            if got is None:  # pragma: no cover
                raise AssertionError(name)
            r, ex = got
            r = r.astype(jnp.float32)
            pool.append((r, ex))
            outs.append(r)
            exact.append(ex)
        # which results must be the same bits (set when traced)
        fun.exact = (exact[-1], exact[len(outs) // 2], False)
        return outs[-1], outs[len(outs) // 2], jnp.sum(outs[0])

    return fun


def _arguments(seed):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((R, C)) * 2).astype(np.float32)
    y = (rng.standard_normal((R, C)) * 2).astype(np.float32)
    idx = rng.integers(-6, 9, 8).astype(np.int32)
    k = np.int32(rng.integers(-5, 6))
    return x, y, idx, k


def _check(ops, donate, seed):
    fun = _interpret(ops)
    ref = jax.jit(fun)(*_arguments(seed))
    args = _arguments(seed)
    kept = [a.copy() for a in args[:2]]
    ours = tdf.jax.jit(fun, donate_argnums=donate)(*args)
    for i in range(2):
        if i not in donate:
            np.testing.assert_array_equal(args[i], kept[i], err_msg="non-donated input changed")
    # The memory planner switched off computes the same bits (tdf-plan-memory
    # only moves buffers: a shared byte would show here).
    unplanned = tdf.jax.jit(fun, donate_argnums=donate, plan_memory=False)(*_arguments(seed))
    for a, u in zip(ours, unplanned):
        np.testing.assert_array_equal(a, u, err_msg=f"plan_memory on/off differ: {ops}")
    for a, b, exact in zip(ours, ref, fun.exact):
        b = np.asarray(b)
        assert a.dtype == b.dtype and a.shape == b.shape
        if exact:  # integer, PRNG and exactly computed values: the same bits
            np.testing.assert_array_equal(a, b, err_msg=f"program {ops} seed={seed}")
        scale = 1.0 + float(np.nanmax(np.abs(np.where(np.isfinite(b), b, 0))))
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4 * scale,
                                   err_msg=f"program {ops} donate={donate} seed={seed}")


@settings(max_examples=EXAMPLES, deadline=None, derandomize=not LONG,
          suppress_health_check=list(HealthCheck))
@given(programs())
def test_random_jax_programs_match_jax_jit(program):
    _check(*program)


def test_property_generator_covers_every_op():
    """Each op of the generator translates and matches on a fixed input."""
    for n, name in enumerate(_op_names()):
        _check([(name, 0, 1, 1), ("add", 2, n, -1)], (), n)
