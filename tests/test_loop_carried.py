"""tdf-scalarize-loop-carried: rank-0 tensors carried by loops (fori_loop
counters, scalar state) become scalars. Programs with such loops against
jax.jit and against the pass switched off; the loop body of a fori_loop
allocates nothing for its counter; non-donated inputs unchanged."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import tdf.jax
from tdf.passes import pipelines

PROGRAMS = {
    "decay": lambda h, w: lax.fori_loop(0, 300, lambda i, h: h * w * w, h),
    "counter_used": lambda h, w: lax.fori_loop(0, 17, lambda i, h: h + i.astype(jnp.float32) * w,
                                               h),
    "scalar_state": lambda h, w: lax.fori_loop(
        0, 9, lambda i, c: (c[0] * 0.5 + jnp.sum(c[1]), c[1] * w), (jnp.float32(1.0), h))[0],
    "scan_sum": lambda h, w: lax.scan(lambda c, x: (c + jnp.sum(x * w), c), jnp.float32(0), h[None]
                                      * jnp.ones((5, 1), jnp.float32)),
}


@pytest.fixture
def unscalarized(monkeypatch):
    original = pipelines.inplace_stage

    def without(*args, **kwargs):
        return [p for p in original(*args, **kwargs) if p != "tdf-scalarize-loop-carried"]

    def compile_(fn, *args):
        with monkeypatch.context() as m:
            m.setattr(pipelines, "inplace_stage", without)
            return tdf.jax.jit(fn).lower(*args).compile()

    return compile_


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_matches_jax_and_switched_off(unscalarized, name):
    fn = PROGRAMS[name]
    rng = np.random.default_rng(1)
    h = rng.standard_normal(64).astype(np.float32)
    w = (rng.standard_normal(64) * 0.5).astype(np.float32)
    h0, w0 = h.copy(), w.copy()
    on = tdf.jax.jit(fn).lower(h, w).compile()
    off = unscalarized(fn, h, w)
    got = jax.tree_util.tree_leaves(on.main(h, w))
    base = jax.tree_util.tree_leaves(off.main(h, w))
    ref = jax.tree_util.tree_leaves(jax.jit(fn)(h, w))
    for g, b, r in zip(got, base, ref):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(b))
        np.testing.assert_allclose(np.asarray(g), np.asarray(r), rtol=1e-5, atol=1e-6)
    assert np.array_equal(h, h0) and np.array_equal(w, w0)


def test_counter_allocates_nothing_per_step():
    fn = PROGRAMS["decay"]
    x = np.ones(64, np.float32)
    ir_text = tdf.jax.jit(fn).lower(x, x).compile().buffer_ir
    loop = ir_text[ir_text.index("scf.for"):]
    body = loop[:loop.index("scf.yield")]
    assert not re.search(r"memref\.alloc\(\) .*: memref<i32>", body)
