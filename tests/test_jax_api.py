"""tdf.jax.jit's public contract: donation in place, pytrees, scalars, the
imported text, report/strict, caching, and errors for unsupported input."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import tdf
import tdf.jax


def test_donated_cache_updated_in_place_shares_memory():
    def step(cache, row, pos):
        return cache.at[:, pos].set(row), jnp.sum(row)

    f = tdf.jax.jit(step, donate_argnums=(0,))
    cache = np.zeros((4, 8, 3), np.float32)
    row = np.arange(12, dtype=np.float32).reshape(4, 3)
    out, total = f(cache, row, 5)
    assert np.shares_memory(out, cache)
    np.testing.assert_array_equal(cache[:, 5], row)
    assert total.dtype == np.float32 and total.shape == ()
    ref = jax.jit(step)(np.zeros((4, 8, 3), np.float32), row, 5)[0]
    np.testing.assert_array_equal(out, ref)
    prog = f.lower(cache, row, 5).compile()
    assert not [c for c in prog.report().copies if (c.nbytes or 0) >= cache.nbytes]


def test_non_donated_argument_is_never_written():
    f = tdf.jax.jit(lambda c, r: c.at[0].set(r))
    cache = np.zeros((3, 2), np.float32)
    out = f(cache, np.ones(2, np.float32))
    assert not np.shares_memory(out, cache)
    assert not cache.any()
    np.testing.assert_array_equal(out[0], [1, 1])


def test_pytree_donation_and_structure():
    def fn(state, x):
        return {"k": state["k"].at[1].set(x), "v": state["v"] * 2}, [x + 1, (x,)]

    f = tdf.jax.jit(fn, donate_argnums=0)
    state = {"k": np.zeros((3, 2), np.float32), "v": np.ones((2,), np.float32)}
    x = np.array([5.0, 6.0], np.float32)
    new_state, rest = f(state, x)
    ref = jax.jit(fn)({"k": np.zeros((3, 2), np.float32), "v": np.ones(2, np.float32)}, x)
    assert jax.tree_util.tree_structure((new_state, rest)) == jax.tree_util.tree_structure(ref)
    assert np.shares_memory(new_state["k"], state["k"])
    for a, b in zip(jax.tree_util.tree_leaves((new_state, rest)), jax.tree_util.tree_leaves(ref)):
        np.testing.assert_array_equal(a, np.asarray(b))


def test_scalars_lists_and_jax_arrays_as_arguments():
    f = tdf.jax.jit(lambda a, b, c: a * b + c)
    out = f(np.float32(2.0), 3, jnp.arange(3.0))
    np.testing.assert_allclose(out, [6.0, 7.0, 8.0])
    assert out.dtype == np.float32
    out = f(np.float64(1.5), True, np.array(1, np.int64))  # converted to JAX's types
    assert out.dtype == np.float32 and float(out) == 2.5


def test_outputs_that_are_inputs_literals_or_duplicates():
    f = tdf.jax.jit(lambda x: (x, 3.0, x * 2, x * 2))
    x = np.arange(3, dtype=np.float32)
    a, b, c, d = f(x)
    assert not np.shares_memory(a, x)
    np.testing.assert_array_equal(a, x)
    assert float(b) == 3.0
    np.testing.assert_array_equal(c, d)


def test_static_argnums_and_cache_per_signature():
    calls = []

    def fn(x, n):
        calls.append(n)
        return x * n

    f = tdf.jax.jit(fn, static_argnums=(1,))
    x = np.ones(3, np.float32)
    np.testing.assert_array_equal(f(x, 2), 2 * x)
    np.testing.assert_array_equal(f(x, 2), 2 * x)
    assert len(calls) == 1
    np.testing.assert_array_equal(f(x, 3), 3 * x)
    assert len(calls) == 2
    f(np.ones(4, np.float32), 3)
    assert len(calls) == 3
    assert f.lower(x, 2) is f.lower(x, 2)


def test_as_text_marks_donated_arguments():
    f = tdf.jax.jit(lambda c, r: c.at[1].set(r), donate_argnums=(0,))
    text = f.lower(np.zeros((3, 2), np.float32), np.ones(2, np.float32)).as_text()
    assert "func.func @main(%arg0: tensor<3x2xf32> {tdf.donate}, %arg1: tensor<2xf32>)" in text
    assert "tensor.insert_slice" in text
    tdf.parse(text, tdf.Context())  # the imported program is valid tdf input


def test_report_maps_updates_to_the_source_line():
    def step(cache, row, pos):
        return cache.at[:, pos].set(row)  # the update

    line = step.__code__.co_firstlineno + 1
    f = tdf.jax.jit(step, donate_argnums=(0,))
    args = (np.zeros((2, 4, 3), np.float32), np.ones((2, 3), np.float32), np.int32(1))
    report = f.lower(*args).compile().report()
    updates = [d for d in report.decisions if d.op == "tensor.insert_slice"]
    assert updates and all(d.inplace for d in updates)
    assert all(d.location.startswith(f"{__file__}:{line}:") for d in updates), updates


def test_strict_rejects_out_of_place_update_with_source_line():
    def step(cache, row):
        new = cache.at[0].set(row)
        return new, cache  # the old cache is still returned: the update must copy

    line = step.__code__.co_firstlineno + 1
    args = (np.zeros((3, 2), np.float32), np.ones(2, np.float32))
    lowered = tdf.jax.jit(step, donate_argnums=(0,)).lower(*args)
    lowered.compile()  # not strict: fine
    with pytest.raises(tdf.jax.StrictInplaceError, match=f"{__file__}:{line}:"):
        lowered.compile(strict=True)
    assert issubclass(tdf.jax.StrictInplaceError, tdf.TDFError)


def test_xla_cpu_dynamic_update_slice_regression_gives_eager_answer():
    def fn(x):
        y = x + 1
        return lax.dynamic_update_slice(y, y[:3], (1,)).reshape(1, 4, 1)

    x = np.arange(4, dtype=np.float32)
    out = tdf.jax.jit(fn)(x)
    np.testing.assert_array_equal(out.reshape(-1), [1, 1, 2, 3])
    # donated: still the eager answer (the update is copied before the write)
    out = tdf.jax.jit(fn, donate_argnums=0)(x.copy())
    np.testing.assert_array_equal(out.reshape(-1), [1, 1, 2, 3])
    with jax.disable_jit():
        eager = np.asarray(fn(x))
    np.testing.assert_array_equal(out, eager)
    # (jax.jit on XLA:CPU returns [1, 1, 1, 1] here: its in-place fusion reads
    # its own output; tdf keeps the eager answer.)


@pytest.mark.parametrize("fun, args, primitive", [
    (lambda x: jnp.linalg.cholesky(x), (np.eye(3, dtype=np.float32),), "cholesky"),
    (lambda x: jnp.linalg.qr(x)[0], (np.eye(3, dtype=np.float32),), "qr"),
    (lambda x: lax.igamma(x, x), (np.ones(3, np.float32),), "igamma"),
    (lambda x: jnp.fft.fft(x).real, (np.ones(4, np.float32),), "complex64"),
    (lambda k: jax.random.gamma(k, 2.0, (3,)), (jax.random.key(0),), "random_gamma"),
    (lambda x: x.astype(jnp.complex64) * 1j, (np.ones(4, np.float32),), "complex"),
])
def test_unsupported_primitive_names_primitive_and_source_line(fun, args, primitive):
    line = fun.__code__.co_firstlineno
    with pytest.raises(tdf.TDFError, match=primitive) as info:
        tdf.jax.jit(fun)(*args)
    assert f"{__file__}:{line}:" in str(info.value)


def test_unsupported_dtype_is_a_tdf_error():
    with pytest.raises(tdf.TDFError, match="float8_e4m3fn"):
        tdf.jax.jit(lambda x: x + 1)(np.ones(3, jnp.float8_e4m3fn))


def test_unsupported_scatter_combiner_and_rules_list():
    assert {"dot_general", "scatter-add", "while", "scan", "cond", "gather"} <= set(
        tdf.jax.supported_primitives())
    with pytest.raises(tdf.TDFError, match="scatter"):
        tdf.jax.jit(lambda x, i: x.at[i].apply(jnp.sin))(np.ones(3, np.float32), 1)


def test_bad_arguments():
    with pytest.raises(TypeError):
        tdf.jax.jit(3)
    with pytest.raises(ValueError):
        tdf.jax.jit(lambda x: x, donate_argnums=0, static_argnums=0)
    f = tdf.jax.jit(lambda x: x * 2, donate_argnums=(3,))
    with pytest.raises(ValueError, match="out of range"):
        f(np.ones(2))


def test_while_loop_carries_donated_cache_in_place():
    def fill(cache, n):
        def body(state):
            i, c = state
            return i + 1, c.at[i].set(jnp.full(c.shape[1:], i, c.dtype))
        return lax.while_loop(lambda s: s[0] < n, body, (0, cache))[1]

    f = tdf.jax.jit(fill, donate_argnums=(0,))
    cache = np.zeros((6, 4), np.float32)
    out = f(cache, np.int32(4))
    assert np.shares_memory(out, cache)
    np.testing.assert_array_equal(out[:, 0], [0, 1, 2, 3, 0, 0])
    report = f.lower(cache, np.int32(4)).compile().report()
    assert not [c for c in report.copies if (c.nbytes or 0) >= cache.nbytes], report


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_precision_programs_match_jax(dtype):
    import ml_dtypes  # noqa: F401  (registers bfloat16 with numpy)

    def fn(x, y, w):
        h = jnp.tanh(x * 2 + y)
        return h, jnp.sum(h, -1), h @ w, h.astype(jnp.float32), jnp.argmax(x, -1), x.astype(jnp.float16)

    rng = np.random.default_rng(0)
    dt = jnp.dtype(dtype)
    args = [rng.standard_normal(s).astype(dt) for s in ((3, 8), (3, 8), (8, 4))]
    ours = tdf.jax.jit(fn)(*args)
    with jax.disable_jit():
        eager = fn(*args)
    ref = jax.jit(fn)(*args)
    eps = float(jnp.finfo(dt).eps)
    for a, b, c in zip(ours, eager, ref):
        b, c = np.asarray(b), np.asarray(c)
        assert a.dtype == b.dtype == c.dtype and a.shape == b.shape
        np.testing.assert_allclose(a.astype(np.float32), b.astype(np.float32), rtol=4 * eps, atol=4 * eps)
        np.testing.assert_allclose(a.astype(np.float32), c.astype(np.float32), rtol=8 * eps, atol=8 * eps)


def test_donated_half_precision_cache():
    import ml_dtypes

    f = tdf.jax.jit(lambda c, r, p: c.at[p].set(r), donate_argnums=0)
    cache = np.zeros((4, 3), ml_dtypes.bfloat16)
    out = f(cache, np.ones(3, ml_dtypes.bfloat16), 2)
    assert np.shares_memory(out, cache) and out.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(cache[2].astype(np.float32), [1, 1, 1])


def test_keyword_arguments_bind_to_positions():
    def fn(x, y, scale=2.0):
        return x * scale + y

    f = tdf.jax.jit(fn, donate_argnums=(0,))
    x = np.ones(3, np.float32)
    np.testing.assert_array_equal(f(x.copy(), y=np.ones(3, np.float32), scale=3.0), [4, 4, 4])
    np.testing.assert_array_equal(f(x.copy(), np.zeros(3, np.float32)), [2, 2, 2])
    with pytest.raises(TypeError):
        f(x, z=1)


def test_functions_without_arguments_or_results_and_returned_donated_argument():
    np.testing.assert_array_equal(tdf.jax.jit(lambda: jnp.ones(3) * 2)(), [2, 2, 2])
    assert tdf.jax.jit(lambda x: None)(np.ones(2)) is None
    cache = np.ones(3, np.float32)
    same, doubled = tdf.jax.jit(lambda c: (c, c * 2), donate_argnums=0)(cache)
    assert np.shares_memory(same, cache)
    np.testing.assert_array_equal(same, [1, 1, 1])
    np.testing.assert_array_equal(doubled, [2, 2, 2])
