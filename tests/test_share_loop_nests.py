"""tdf-share-loop-nests against itself switched off and jax.jit: programs
that repeat layers (a Python loop over layers, as models are written), with
donated state, reductions, parallel loop nests and loops; the shared
functions exist and are called from every layer; inputs stay unchanged."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tdf
import tdf.jax
from tdf.passes import pipelines


@pytest.fixture
def run(monkeypatch):
    """``run(fn, args, shared, **jit_options)``: ``(outputs, program)`` of
    ``tdf.jax.jit(fn, **jit_options)(*args)``, with tdf-share-loop-nests on
    or off."""
    original = pipelines.lower_to_llvm

    def without(*args, **kwargs):
        return [p for p in original(*args, **kwargs) if p != "tdf-share-loop-nests"]

    def run_(fn, args, shared: bool, **options):
        with monkeypatch.context() as m:
            if not shared:
                m.setattr(pipelines, "lower_to_llvm", without)
            jitted = tdf.jax.jit(fn, **options)
            program = jitted.program(*args)
            return jitted(*args), program

    return run_


def _layer_norm(x, g):
    mu = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean((x - mu) ** 2, axis=-1, keepdims=True)
    return (x - mu) * jax.lax.rsqrt(var + 1e-5) * g


def _model(layers):
    def model(x, ws, gs):
        for i in range(layers):
            h = _layer_norm(x, gs[i])
            x = x + jax.nn.gelu(h @ ws[i])
        return jax.nn.softmax(x, axis=-1), jnp.sum(x * x)
    return model


def _arguments(rng, layers, rows, dim):
    x = rng.standard_normal((rows, dim)).astype(np.float32)
    ws = [(rng.standard_normal((dim, dim)) / np.sqrt(dim)).astype(np.float32)
          for _ in range(layers)]
    gs = [(1 + 0.1 * rng.standard_normal(dim)).astype(np.float32) for _ in range(layers)]
    return x, ws, gs


def _shared_functions(program) -> int:
    return program.llvm_ir.count("llvm.func @tdf_shared_")


def test_layers_share_their_loop_nests_and_match_unshared_and_jax(run):
    rng = np.random.default_rng(0)
    args = _arguments(rng, 4, 32, 128)
    before = [np.copy(a) for a in jax.tree_util.tree_leaves(args)]
    fn = _model(4)
    got, shared = run(fn, args, True)
    base, plain = run(fn, args, False)
    assert _shared_functions(shared) >= 3
    assert _shared_functions(plain) == 0
    ref = jax.jit(fn)(*args)
    for a, b, c in zip(got, base, ref):
        np.testing.assert_allclose(np.asarray(a), np.asarray(c), rtol=2e-5, atol=2e-5)
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    for a, b in zip(before, jax.tree_util.tree_leaves(args)):
        assert np.array_equal(a, b)


def test_donated_state_updated_in_place_through_shared_nests(run):
    """Adam on two parameters of one shape: every update is the same loop
    nest on other buffers, written in place into the donated state."""
    def adam(p, g, m, v):
        out = []
        for k in sorted(p):
            mk = 0.9 * m[k] + 0.1 * g[k]
            vk = 0.999 * v[k] + 0.001 * g[k] * g[k]
            out.append((p[k] - 1e-3 * mk / (jnp.sqrt(vk) + 1e-8), mk, vk))
        return ({k: o[0] for k, o in zip(sorted(p), out)},
                {k: o[1] for k, o in zip(sorted(p), out)},
                {k: o[2] for k, o in zip(sorted(p), out)})

    rng = np.random.default_rng(1)
    tree = lambda: {k: rng.standard_normal(4096).astype(np.float32) for k in "abc"}  # noqa: E731
    p, g, m, v = tree(), tree(), tree(), tree()
    ref = jax.jit(adam)(p, g, m, v)
    g0 = {k: np.copy(a) for k, a in g.items()}
    for shared in (True, False):
        state = [{k: np.copy(a) for k, a in t.items()} for t in (p, m, v)]
        addresses = [t["a"].ctypes.data for t in state]
        got, program = run(adam, (state[0], g, state[1], state[2]), shared,
                           donate_argnums=(0, 2, 3))
        for a, b in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(ref)):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6, atol=1e-7)
        assert [np.asarray(t["a"]).ctypes.data for t in got] == addresses
        assert (_shared_functions(program) >= 1) == shared
    for k in g:
        assert np.array_equal(g[k], g0[k])


def test_parallel_nests_and_scan_bodies_share(run):
    """Nests large enough to run on several threads, and nests inside a
    scan's loop body, shared: same bits as unshared, jax.jit's within
    rounding."""
    def fn(x, xs):
        for _ in range(3):
            x = jnp.tanh(x * 1.5 - jnp.mean(x, axis=-1, keepdims=True))

        def step(h, xt):
            for _ in range(2):
                h = jnp.tanh(h * 0.5 + xt)
                h = h - jnp.max(h)
            return h, jnp.sum(h)
        return x, jax.lax.scan(step, xs[0], xs)

    rng = np.random.default_rng(2)
    x = rng.standard_normal((600, 512)).astype(np.float32)
    xs = rng.standard_normal((6, 256)).astype(np.float32)
    got, shared = run(fn, (x, xs), True, num_threads=2)
    base, _ = run(fn, (x, xs), False, num_threads=2)
    assert _shared_functions(shared) >= 2
    ref = jax.jit(fn)(x, xs)
    for a, b, c in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(base),
                       jax.tree_util.tree_leaves(ref)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
        np.testing.assert_allclose(np.asarray(a), np.asarray(c), rtol=1e-5, atol=1e-5)


_OPS = {
    "tanh": jnp.tanh,
    "scale": lambda x: x * 1.25 - 0.5,
    "square": lambda x: x * x,
    "max": lambda x: jnp.maximum(x, 0.1),
    "row_sum": lambda x: x - jnp.sum(x, axis=-1, keepdims=True) / x.shape[-1],
    "transpose": lambda x: (x.T * 0.5).T,
}


@settings(max_examples=20, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(ops=st.lists(st.sampled_from(sorted(_OPS)), min_size=1, max_size=4),
       layers=st.integers(1, 3), rows=st.sampled_from([1, 8, 24]),
       cols=st.sampled_from([8, 64, 130]), inplace=st.booleans(), seed=st.integers(0, 2**16))
def test_property_shared_equals_unshared_and_jax(run, ops, layers, rows, cols, inplace,
                                                 seed):
    def fn(x, y):
        for _ in range(layers):
            for name in ops:
                x = _OPS[name](x)
                y = _OPS[name](y)
        return x, y

    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    y = rng.standard_normal((rows, cols)).astype(np.float32)
    x0, y0 = np.copy(x), np.copy(y)
    donate = (0,) if inplace else ()
    ref = jax.jit(fn)(x, y)
    got, _ = run(fn, (np.copy(x), y), True, donate_argnums=donate)
    base, _ = run(fn, (np.copy(x), y), False, donate_argnums=donate)
    for a, b, c in zip(got, base, ref):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
        # Against JAX the summation orders differ: row_sum's centering
        # (x - mean) then cancels an error proportional to the row's
        # magnitude (after squares, up to ~100), not to the element's.
        scale = max(1.0, float(np.max(np.abs(np.asarray(c)))))
        np.testing.assert_allclose(np.asarray(a), np.asarray(c), rtol=2e-5, atol=2e-6 * scale)
    assert np.array_equal(y, y0) and np.array_equal(x, x0)


def test_option_turns_the_pass_off_in_the_pipeline():
    on = pipelines.lower_to_cpu_pipeline({})
    off = pipelines.lower_to_cpu_pipeline({"share-loop-nests": False})
    assert "tdf-share-loop-nests" in on and "tdf-share-loop-nests" not in off
    assert on.index("tdf-share-loop-nests") < on.index("convert-linalg-to-loops")
    parallel = pipelines.lower_to_cpu_pipeline({"parallel": True, "threads": 2})
    assert parallel.index("tdf-outline-parallel") < parallel.index("tdf-share-loop-nests")
