"""tdf.jax.jit against jax.jit on the corpus in tests/jax_programs."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from jax_programs import PROGRAMS

import tdf.jax


def _compare(ours, ref, name):
    ours_leaves, ours_tree = jax.tree_util.tree_flatten(ours)
    ref_leaves, ref_tree = jax.tree_util.tree_flatten(ref)
    assert ours_tree == ref_tree, name
    for a, b in zip(ours_leaves, ref_leaves):
        b = np.asarray(b)
        assert isinstance(a, np.ndarray)
        assert a.dtype == b.dtype and a.shape == b.shape, (name, a.dtype, b.dtype, a.shape, b.shape)
        if np.issubdtype(a.dtype, np.floating):
            tol = 2e-3 if a.dtype == np.float16 else 1e-5
            np.testing.assert_allclose(a, b, rtol=tol, atol=tol, err_msg=name)
        else:
            np.testing.assert_array_equal(a, b, err_msg=name)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_corpus_matches_jax(name):
    fun, make_args, donate, static = PROGRAMS[name]
    ref = jax.jit(fun, static_argnums=static)(*make_args(np.random.default_rng(0)))
    args = make_args(np.random.default_rng(0))
    ours = tdf.jax.jit(fun, donate_argnums=donate, static_argnums=static)(*args)
    _compare(ours, ref, name)
