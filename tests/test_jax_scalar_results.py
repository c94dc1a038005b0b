"""The JAX frontend on functions returning scalars / 0-d arrays (reductions,
element reads, comparisons, argmax, a Python literal), alone or with arrays:
same values, dtypes and shapes as jax.jit. The frontend emits rank-0 tensors
for 0-d outputs, so these come back as 0-d numpy arrays (like JAX), while
tdf.compile's scalar results (``-> f32``) are numpy scalars
(tests/test_scalar_results.py)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tdf.jax

RNG = np.random.default_rng(3)

FUNCTIONS = {
    "sum": lambda x: jnp.sum(x),
    "element": lambda x: x[1, 2],
    "any_positive": lambda x: jnp.any(x > 0.5),
    "argmax": lambda x: jnp.argmax(x),
    "mean_and_array": lambda x: (x * 2.0, jnp.mean(x)),
    "max_min_tuple": lambda x: (jnp.max(x), jnp.min(x), x.sum(axis=0)),
    "int_count": lambda x: jnp.sum((x > 0).astype(jnp.int32)),
    "literal": lambda x: (x + 1.0, 3.0),
    "dict_of_scalars": lambda x: {"s": jnp.sum(x), "first": x[0, 0], "pos": x[0, 0] > 0},
}


@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_scalar_outputs_match_jax(name):
    fun = FUNCTIONS[name]
    f = tdf.jax.jit(fun)
    ref = jax.jit(fun)
    for _ in range(3):
        x = RNG.standard_normal((3, 4)).astype(np.float32)
        got, want = f(x), ref(x)
        got_leaves, got_tree = jax.tree_util.tree_flatten(got)
        want_leaves, want_tree = jax.tree_util.tree_flatten(want)
        assert got_tree == want_tree
        for g, w in zip(got_leaves, want_leaves):
            w = np.asarray(w)
            g = np.asarray(g)
            assert g.shape == w.shape and g.dtype == w.dtype, (name, g, w)
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_scalar_output_with_donated_update():
    def step(cache, row, pos):
        return cache.at[pos].set(row), jnp.sum(row), cache[pos, 0]

    f = tdf.jax.jit(step, donate_argnums=(0,))
    cache = np.zeros((4, 3), np.float32)
    row = np.array([1.0, 2.0, 3.5], np.float32)
    want = jax.jit(step)(cache.copy(), row, 2)
    out, total, old = f(cache, row, 2)
    np.testing.assert_array_equal(out, want[0])
    assert total.shape == () and total.dtype == np.float32 and total == 6.5
    assert old.shape == () and old == 0.0 == want[2]
