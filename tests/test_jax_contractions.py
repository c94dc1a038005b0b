"""dot_general forms through tdf.jax.jit against JAX and numpy (float64):
matvec, vecmat, matmul, batched, x @ w.T and attention scores (an rhs whose
contracting dimensions are innermost: reduced innermost with a `reassoc`
sum, no transpose), other rhs layouts (a named linalg.transpose first),
integer and bool contractions (exact, no reassociation). The inner-reduce
form is also checked against itself switched off: the same product with the
rhs handed over pre-transposed takes the transpose-free
contracting-then-free loop order."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import tdf.jax

FLOAT_CASES = {
    "matvec": ("ij,j->i", (24, 40), (40,)),
    "vecmat": ("i,ij->j", (40,), (40, 24)),
    "row_matmul": ("ij,jk->ik", (1, 64), (64, 48)),
    "matmul": ("ij,jk->ik", (6, 20), (20, 13)),
    "x_wT": ("ij,kj->ik", (3, 33), (17, 33)),
    "scores": ("kgd,ksd->kgs", (2, 3, 16), (2, 37, 16)),
    "values": ("kgs,ksd->kgd", (2, 3, 37), (2, 37, 16)),
    "batch_matmul": ("bij,bjk->bik", (3, 5, 7), (3, 7, 9)),
    "rhs_cbf": ("bij,jbk->bik", (3, 5, 7), (7, 3, 9)),
    "rhs_fcb": ("bij,kjb->bik", (3, 5, 7), (9, 7, 3)),
    "two_contracting": ("ijk,ljk->il", (4, 5, 6), (3, 5, 6)),
}


def _ops(eq, a_shape, b_shape, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(a_shape).astype(np.float32)
    b = rng.standard_normal(b_shape).astype(np.float32)
    return a, b


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("name", sorted(FLOAT_CASES))
def test_float_contractions_match_jax_and_numpy(name, seed):
    eq, a_shape, b_shape = FLOAT_CASES[name]
    a, b = _ops(eq, a_shape, b_shape, seed)
    fn = lambda x, y: jnp.einsum(eq, x, y)  # noqa: E731
    got = np.asarray(tdf.jax.jit(fn)(a, b))
    ref = np.asarray(jax.jit(fn)(a, b))
    exact = np.einsum(eq, a.astype(np.float64), b.astype(np.float64))
    assert got.shape == ref.shape and got.dtype == ref.dtype
    np.testing.assert_allclose(got, exact, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-4)


def test_inner_reduce_matches_transposed_layout():
    """scores with the cache as [k, s, d] (inner reduce, reassoc) vs the same
    product with the cache handed over as [k, d, s] (no reassoc)."""
    rng = np.random.default_rng(3)
    q = rng.standard_normal((2, 4, 32)).astype(np.float32)
    cache = rng.standard_normal((2, 64, 32)).astype(np.float32)
    inner = tdf.jax.jit(lambda q, c: jnp.einsum("kgd,ksd->kgs", q, c))
    outer = tdf.jax.jit(lambda q, c: jnp.einsum("kgd,kds->kgs", q, c))
    text = inner.lower(q, cache).as_text()
    assert "reassoc" in text and "linalg.transpose" not in text
    assert "reassoc" not in outer.lower(q, cache.transpose(0, 2, 1).copy()).as_text()
    np.testing.assert_allclose(inner(q, cache), outer(q, np.ascontiguousarray(cache.transpose(0, 2, 1))),
                               rtol=1e-5, atol=1e-5)


def test_other_rhs_layout_is_a_named_transpose():
    eq, a_shape, b_shape = FLOAT_CASES["rhs_cbf"]
    a, b = _ops(eq, a_shape, b_shape, 0)
    text = tdf.jax.jit(lambda x, y: jnp.einsum(eq, x, y)).lower(a, b).as_text()
    assert "linalg.transpose" in text and "reassoc" not in text


def test_special_values_propagate_through_inner_reduce():
    q = np.ones((1, 1, 8), np.float32)
    cache = np.ones((1, 3, 8), np.float32)
    cache[0, 0, 5] = np.nan
    cache[0, 1, 2] = np.inf
    cache[0, 2, 1], cache[0, 2, 6] = np.inf, -np.inf
    fn = lambda q, c: jnp.einsum("kgd,ksd->kgs", q, c)  # noqa: E731
    got = np.asarray(tdf.jax.jit(fn)(q, cache))
    np.testing.assert_array_equal(np.isnan(got), [[[True, False, True]]])
    assert got[0, 0, 1] == np.inf


@pytest.mark.parametrize("dtype", [np.int32, np.bool_])
def test_integer_and_bool_contractions_are_exact(dtype):
    rng = np.random.default_rng(5)
    a = rng.integers(-3, 4, (2, 3, 9)).astype(dtype)
    b = rng.integers(-3, 4, (2, 11, 9)).astype(dtype)
    fn = lambda x, y: lax.dot_general(x, y, (((2,), (2,)), ((0,), (0,))))  # noqa: E731
    got = np.asarray(tdf.jax.jit(fn)(a, b))
    np.testing.assert_array_equal(got, np.asarray(jax.jit(fn)(a, b)))
    assert "reassoc" not in tdf.jax.jit(fn).lower(a, b).as_text()
