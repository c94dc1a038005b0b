"""JAX's PRNG through tdf.jax.jit: typed and raw keys as arguments, results
and constants, the key primitives and threefry2x32, the distributions and
dropout, every result compared bit for bit with jax.jit (float16 samplers
built on ``uniform(minval=tiny)`` within a bound: see docs/Frontend.md),
non-donated inputs unchanged."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import tdf
import tdf.jax

KEY = jax.random.key(11)
RAW = np.asarray(jax.random.PRNGKey(5))


def _leaves(tree):
    return jax.tree_util.tree_leaves(tree)


def _as_array(x):
    if not hasattr(x, "dtype"):
        x = np.asarray(x)
    if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
        return np.asarray(jax.random.key_data(x)), str(x.dtype)
    return np.asarray(x), str(x.dtype)


def _run(fn, *args, donate=()):
    """(tdf.jax.jit's result, jax.jit's result); the non-donated arguments
    are checked unchanged."""
    before = [_as_array(a)[0].copy() for a in _leaves(args)]
    got = tdf.jax.jit(fn, donate_argnums=donate)(*args)
    for i, (a, b) in enumerate(zip(_leaves(args), before)):
        if i not in donate:
            np.testing.assert_array_equal(_as_array(a)[0], b)
    return got, jax.jit(fn)(*args)


def assert_same_bits(got, want):
    got, want = _leaves(got), _leaves(want)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        (ga, gd), (wa, wd) = _as_array(g), _as_array(w)
        assert gd == wd and ga.shape == wa.shape, (gd, wd, ga.shape, wa.shape)
        assert ga.tobytes() == wa.tobytes(), np.argwhere(ga != wa)[:5]


def check(fn, *args):
    got, want = _run(fn, *args)
    assert_same_bits(got, want)
    return got


def ulps(a, b):
    a, b = np.asarray(a), np.asarray(b)
    it = {2: np.int16, 4: np.int32, 8: np.int64}[a.dtype.itemsize]
    ai, bi = a.view(it).astype(np.int64), b.view(it).astype(np.int64)
    # both sides of zero: distance in representable numbers
    ai = np.where(ai < 0, -(ai & np.iinfo(it).max), ai)
    bi = np.where(bi < 0, -(bi & np.iinfo(it).max), bi)
    return np.abs(ai - bi)


# ------------------------------------------------------------ key primitives


@pytest.mark.parametrize("shape", [(), (1,), (7,), (2, 5), (0,), (3, 0, 2)])
def test_bits_split_fold_in(shape):
    def fn(k):
        return (jax.random.bits(k, shape), jax.random.bits(k, shape, jnp.uint8),
                jax.random.bits(k, shape, jnp.uint16), jax.random.split(k, 3),
                jax.random.fold_in(k, 7), jax.random.split(k, (2, 2)))
    check(fn, KEY)
    check(fn, RAW)


def test_large_bits_cross_parallel_chunks():
    # more than tdf-parallelize's 256K iterations: each chunk's counters
    # start at its own offset
    check(lambda k: jax.random.bits(k, (600, 1000)), KEY)
    check(lambda k: jax.random.uniform(k, (300001,)), KEY)


def test_seed_wrap_unwrap_and_key_data():
    check(lambda s: (jax.random.key(s), jax.random.PRNGKey(s)), np.int32(-7))
    check(lambda s: jax.random.key_data(jax.random.key(s)), 123)
    check(lambda d: jax.random.wrap_key_data(d), RAW)
    check(lambda k: jax.random.key_data(k), KEY)
    check(lambda k: jax.random.clone(k), KEY)
    check(lambda s: jax.vmap(jax.random.key)(s), np.arange(4, dtype=np.int32))


def test_split_and_fold_in_chains():
    def chain(k, n):
        def body(i, carry):
            k, acc = carry
            k, sub = jax.random.split(k)
            sub = jax.random.fold_in(sub, i)
            return k, acc + jax.random.uniform(sub, (3,))
        return lax.fori_loop(0, n, body, (k, jnp.zeros(3)))
    check(chain, KEY, 5)
    check(chain, RAW, 5)

    def scanned(k):
        def step(k, x):
            k, sub = jax.random.split(k)
            return k, jax.random.normal(sub, (2,), jnp.bfloat16) + x
        return lax.scan(step, k, jnp.arange(4, dtype=jnp.bfloat16))
    check(scanned, KEY)


def test_batched_keys_and_key_shape_ops():
    keys = jax.random.split(KEY, 6)

    def fn(keys, i):
        grid = keys.reshape(2, 3)
        picked = grid[1, 2]
        dyn = keys[i]
        stacked = jnp.stack([picked, dyn, keys[0]])
        chosen = jnp.where(jnp.arange(3) % 2 == 0, stacked, stacked[::-1])
        return (jax.vmap(lambda k: jax.random.bits(k, (2,)))(keys),
                jax.vmap(jax.random.fold_in)(grid[0], jnp.arange(3, dtype=jnp.uint32)),
                jax.vmap(jax.vmap(jax.random.fold_in, (0, None)), (0, None))(grid, i),
                jnp.concatenate([keys[:2], grid.T.reshape(-1)]),
                jnp.broadcast_to(picked, (2, 2)), chosen, keys.at[1].set(picked),
                lax.cond(i > 2, lambda: keys[::2], lambda: keys[1::2]))
    check(fn, keys, np.int32(4))


def test_keys_as_results_constants_and_donated():
    const_key = jax.random.key(99)
    const_raw = jax.random.PRNGKey(98)

    def fn(x):
        return (jax.random.split(const_key), jax.random.normal(const_raw, (3,)) + x, const_key,
                jax.random.uniform(jax.random.fold_in(const_key, 1), x.shape))
    check(fn, np.ones(3, np.float32))
    # a donated raw key is updated (a fresh result when it is not in place)
    raw = RAW.copy()
    got = tdf.jax.jit(lambda k: jax.random.split(k)[0], donate_argnums=0)(raw)
    assert_same_bits(got, jax.jit(lambda k: jax.random.split(k)[0])(RAW))
    # typed keys passed through are returned as typed keys
    got = tdf.jax.jit(lambda k, x: (k, x + 1))(KEY, np.ones(2, np.float32))
    assert_same_bits(got[0], KEY)


def test_threefry_partitionable_flag():
    fn = tdf.jax.jit(lambda k: (jax.random.bits(k, (5,)), jax.random.split(k, 3),
                                jax.random.bits(k, (3,), jnp.uint8)))
    assert jax.config.jax_threefry_partitionable
    assert_same_bits(fn(KEY), jax.jit(fn.fun)(KEY))
    with jax.threefry_partitionable(False):
        want = jax.jit(fn.fun)(KEY)
        assert_same_bits(fn(KEY), want)
    assert _as_array(want[0])[0].tobytes() != _as_array(fn(KEY)[0])[0].tobytes()


def test_64_bit_seeds_bits_and_uniform_with_x64():
    with jax.enable_x64(True):
        check(lambda s: (jax.random.key(s), jax.random.PRNGKey(s)), np.int64(2**40 + 5))
        check(lambda k: (jax.random.bits(k, (9,), jnp.uint64),
                         jax.random.uniform(k, (9,), jnp.float64),
                         jax.random.randint(k, (9,), -2**40, 2**40, jnp.int64)), KEY)


# ------------------------------------------------------------ distributions


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16, jnp.float16])
@pytest.mark.parametrize("shape", [(5,), (3, 4), (0,)])
def test_uniform_is_bit_identical(dtype, shape):
    check(lambda k: (jax.random.uniform(k, shape, dtype),
                     jax.random.uniform(k, shape, dtype, -3.0, 5.0)), KEY)


@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float16])
def test_half_precision_normal_is_bit_identical(dtype):
    check(lambda k: jax.random.normal(k, (64, 16), dtype), KEY)


KEYS = [jax.random.key(s) for s in (0, 11, 2**31 - 1)]
SAMPLERS = {
    "normal": lambda k, s, dt: jax.random.normal(k, s, dt),
    "uniform": lambda k, s, dt: jax.random.uniform(k, s, dt, -1.3, 7.1),
    "truncated_normal": lambda k, s, dt: jax.random.truncated_normal(k, -0.5, 2.0, s, dt),
    "truncated_normal_tail": lambda k, s, dt: jax.random.truncated_normal(k, -3.0, -1.0, s, dt),
    "exponential": lambda k, s, dt: jax.random.exponential(k, s, dt),
    "gumbel": lambda k, s, dt: jax.random.gumbel(k, s, dt),
    "logistic": lambda k, s, dt: jax.random.logistic(k, s, dt),
    "laplace": lambda k, s, dt: jax.random.laplace(k, s, dt),
    "cauchy": lambda k, s, dt: jax.random.cauchy(k, s, dt),
    "categorical": lambda k, s, dt: jax.random.categorical(
        k, jnp.linspace(-3, 3, 40, dtype=dt).reshape(4, 10), shape=s + (4,)),
}
@pytest.mark.parametrize("name, dtype", [
    (name, dtype) for dtype in (jnp.float32, jnp.bfloat16, jnp.float16) for name in SAMPLERS])
def test_distributions_are_bit_identical(name, dtype):
    # log/log1p/erf/erf_inv are XLA:CPU's own algorithms, a multiply feeding
    # an add is fused as XLA:CPU fuses it, and chains of constant additions
    # are reassociated as XLA's algebraic simplifier does (float16
    # gumbel/logistic/categorical: uniform's ``(bits - 1) + tiny`` is
    # ``bits + (-1 + tiny)`` = ``bits - 1``): jax.jit's bits
    sampler = SAMPLERS[name]
    for key, shape in zip(KEYS, [(4099,), (3, 7, 5), (1,)]):
        check(lambda k, shape=shape: sampler(k, shape, dtype), key)
    check(lambda k: sampler(k, (0,), dtype), RAW)
    check(lambda k: sampler(k, (2, 513), dtype), RAW)


def test_float16_tiny_minval_uniform_is_bit_identical():
    tiny = float(jnp.finfo(jnp.float16).tiny)
    for key in KEYS:
        check(lambda k: jax.random.uniform(k, (4099,), jnp.float16, tiny, 1.0), key)


@pytest.mark.parametrize("p", [0.0, 0.3, 1.0])
def test_bernoulli(p):
    check(lambda k: jax.random.bernoulli(k, p, (7, 9)), KEY)
    check(lambda k, q: jax.random.bernoulli(k, q), KEY, np.linspace(0, 1, 11, dtype=np.float32))


def test_randint_categorical_permutation_choice():
    check(lambda k: (jax.random.randint(k, (100,), -5, 1000),
                     jax.random.randint(k, (3, 4), 0, 200, jnp.uint8),
                     jax.random.randint(k, (50,), jnp.iinfo(jnp.int32).min,
                                        jnp.iinfo(jnp.int32).max)), KEY)
    logits = np.random.default_rng(0).standard_normal((50, 10)).astype(np.float32)
    check(lambda k, l: (jax.random.categorical(k, l), jax.random.categorical(k, l, axis=0)),
          KEY, logits)
    check(lambda k: (jax.random.permutation(k, 1000), jax.random.permutation(k, 1)), KEY)
    check(lambda k: jax.random.permutation(k, 300_000), RAW)  # two rounds of sorts
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    check(lambda k, x: (jax.random.permutation(k, x), jax.random.permutation(k, x, axis=1),
                        jax.random.permutation(k, x, axis=1, independent=True)), KEY, x)
    check(lambda k: (jax.random.choice(k, 100, (10,), replace=False),
                     jax.random.choice(k, 100, (10,), p=jnp.linspace(0.0, 1.0, 100) / 50.0)),
          KEY)


def test_dropout_in_an_mlp():
    rng = np.random.default_rng(1)
    params = {"w1": rng.standard_normal((16, 32)).astype(np.float32) * 0.1,
              "b1": np.zeros(32, np.float32),
              "w2": rng.standard_normal((32, 4)).astype(np.float32) * 0.1}

    def dropout(key, x, rate):
        keep = jax.random.bernoulli(key, 1.0 - rate, x.shape)
        return jnp.where(keep, x / (1.0 - rate), 0.0), keep

    def mlp(params, x, key):
        k1, k2 = jax.random.split(key)
        h = jax.nn.gelu(x @ params["w1"] + params["b1"])
        h, keep1 = dropout(k1, h, 0.1)
        out, keep2 = dropout(k2, h @ params["w2"], 0.5)
        return out, keep1, keep2

    x = rng.standard_normal((8, 16)).astype(np.float32)
    (out, keep1, keep2), (w_out, w_keep1, w_keep2) = _run(mlp, params, x, KEY)
    assert_same_bits((keep1, keep2), (w_keep1, w_keep2))
    np.testing.assert_allclose(out, w_out, rtol=2e-5, atol=1e-6)  # gelu's tanh: libm's
    # dropout itself: the same bits
    for rate, key in ((0.1, KEY), (0.5, RAW), (0.9, jax.random.key(3))):
        check(lambda k, x, rate=rate: dropout(k, x, rate), key, x)
        check(lambda k, x, rate=rate: dropout(k, x, rate), key, x.astype(jnp.bfloat16))


# ------------------------------------------------------------ errors


def test_other_key_implementations_and_primitives_are_refused():
    line = test_other_key_implementations_and_primitives_are_refused.__code__.co_firstlineno
    with pytest.raises(tdf.jax.UnsupportedPrimitiveError, match=r"dtype key<rbg>") as info:
        tdf.jax.jit(lambda k: jax.random.uniform(k, (2,)))(jax.random.key(0, impl="rbg"))
    assert f"{__file__}:{line + 3}:" in str(info.value)
    with pytest.raises(tdf.jax.UnsupportedPrimitiveError, match=r"'random_gamma'") as info:
        tdf.jax.jit(lambda k: jax.random.gamma(k, 2.0, (3,)))(KEY)
    assert f"{__file__}:{line + 6}:" in str(info.value)
    with pytest.raises(tdf.jax.UnsupportedPrimitiveError, match=r"'eq' \(dtype key<fry>"):
        tdf.jax.jit(lambda a, b: a == b)(KEY, KEY)
