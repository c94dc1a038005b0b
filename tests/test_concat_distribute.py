"""An element-wise op over a concatenation runs on each part
(``tdf-fuse-elementwise``: ``f(concat(a, b))`` -> ``concat(f(a), f(b))``).

Random JAX programs -- 1 to 5 parts along a random axis, each part an input
or an element-wise function of one, then one or two element-wise ops over
the concatenation, some with a second full-size operand, some with the
concatenation also returned (left whole) -- compiled by ``tdf.jax.jit``
with in-place on and off, and by ``jax.jit``: the two tdf builds agree bit
for bit, both match JAX, the inputs are unchanged. The distributed form is
checked in the buffer IR (no whole-result loop reading the concatenation).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tdf.jax

PARTS = [lambda a: a, lambda a: a + 1.5, lambda a: a * -0.5, jnp.tanh,
         lambda a: jnp.exp(-a * a)]
CONSUMERS = [lambda c, y: jnp.log(jnp.abs(c) + 1.0), lambda c, y: c * y,
             lambda c, y: jnp.sin(c) + y, lambda c, y: jnp.maximum(c, 0.25)]


def _program(seed: int):
    rng = np.random.default_rng(seed)
    rank = int(rng.integers(1, 4))
    axis = int(rng.integers(0, rank))
    base = [int(rng.integers(1, 5)) for _ in range(rank)]
    count = int(rng.integers(1, 6))
    shapes = []
    for _ in range(count):
        shape = list(base)
        shape[axis] = int(rng.integers(1, 8))
        shapes.append(tuple(shape))
    parts = [int(rng.integers(0, len(PARTS))) for _ in range(count)]
    consumers = [int(rng.integers(0, len(CONSUMERS))) for _ in range(int(rng.integers(1, 3)))]
    returns_concat = bool(rng.random() < 0.25)
    total = list(base)
    total[axis] = sum(s[axis] for s in shapes)
    xs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    y = rng.standard_normal(total).astype(np.float32)

    def fn(y, *xs):
        c = jnp.concatenate([PARTS[p](x) for p, x in zip(parts, xs)], axis=axis)
        r = c
        for k in consumers:
            r = CONSUMERS[k](r, y)
        return (r, c) if returns_concat else r

    return fn, (y, *xs), returns_concat


@pytest.mark.parametrize("seed", range(24))
def test_matches_jax_and_inplace_off(seed):
    fn, args, returns_concat = _program(seed)
    before = [a.copy() for a in args]
    want = jax.tree_util.tree_leaves(jax.jit(fn)(*args))
    on = jax.tree_util.tree_leaves(tdf.jax.jit(fn)(*args))
    off = jax.tree_util.tree_leaves(tdf.jax.jit(fn, inplace=False)(*args))
    for a, b in zip(args, before):
        np.testing.assert_array_equal(a, b)  # inputs unchanged
    for got, ref, other in zip(on, want, off):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(other))
        np.testing.assert_allclose(np.asarray(got), np.asarray(ref), rtol=2e-5, atol=1e-6)


def test_concatenation_is_not_read_whole():
    """log(concat(x, x + 1, ...)): each part's loop writes its slice of the
    result; no loop reads the whole concatenated buffer."""
    def fn(x):
        return jnp.log(jnp.concatenate([x, x + 1.0, x + 2.0, x + 3.0]))

    x = np.random.default_rng(0).random(4096).astype(np.float32) + 0.5
    jitted = tdf.jax.jit(fn)
    ir = jitted.program(x).buffer_ir
    assert "memref<16384xf32>) outs" not in ir  # no loop over the whole result
    assert ir.count("math.log") + ir.count("arith.shrui") >= 4  # one log per part
    np.testing.assert_allclose(jitted(x), jax.jit(fn)(x), rtol=1e-6)


def test_integer_parts():
    def fn(a, b):
        return jnp.concatenate([a, b * 3], axis=1) + 7

    a = np.arange(12, dtype=np.int32).reshape(3, 4)
    b = np.arange(6, dtype=np.int32).reshape(3, 2)
    np.testing.assert_array_equal(tdf.jax.jit(fn)(a, b), jax.jit(fn)(a, b))


@pytest.mark.parametrize("axis", [0, 1])
def test_positions_read_after_the_concatenation(axis):
    """Ops that read positions in the concatenated result (an iota, a mask
    of indices) give the same as jax.jit: a part's loop counts from 0, so
    an op reading its loop index stays on the whole concatenation."""
    def fn(a, b):
        c = jnp.concatenate([jnp.tanh(a), b * 2.0], axis=axis)
        idx = jax.lax.broadcasted_iota(jnp.float32, c.shape, axis)
        return jnp.where(idx < 3, c, c + idx)

    rng = np.random.default_rng(5)
    a = rng.standard_normal((4, 5)).astype(np.float32)
    b = rng.standard_normal((4, 5) if axis == 0 else (4, 3)).astype(np.float32)
    b = b if axis == 1 else rng.standard_normal((2, 5)).astype(np.float32)
    want = jax.jit(fn)(a, b)
    np.testing.assert_allclose(tdf.jax.jit(fn)(a, b), want, rtol=2e-6, atol=1e-6)
    np.testing.assert_allclose(tdf.jax.jit(fn, inplace=False)(a, b), want, rtol=2e-6,
                               atol=1e-6)
