"""``tdf-unroll-innermost-loops``: loops holding loops reach LLVM with
``llvm.loop.unroll.disable``; what the programs compute does not change.

Random reductions and softmaxes over 2-D and 3-D arrays (their loop nests
are what LLVM's full unroller used to copy whole) compiled with and without
the pass give the same bits, and match ``jax.jit``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tdf.jax
from tdf.passes import pipelines

PASS = "tdf-unroll-innermost-loops"
OPS = [lambda a, ax: jnp.max(a, axis=ax), lambda a, ax: jnp.sum(a * a, axis=ax),
       lambda a, ax: jnp.min(a, axis=ax) + 1.0, lambda a, ax: jax.nn.softmax(a, axis=ax)]


def _without_pass(monkeypatch):
    monkeypatch.setattr(pipelines, "LOWER_TO_LLVM",
                        [p for p in pipelines.LOWER_TO_LLVM if p != PASS])


@pytest.mark.parametrize("seed", range(12))
def test_same_bits_with_and_without(seed, monkeypatch):
    rng = np.random.default_rng(seed)
    rank = int(rng.integers(2, 4))
    shape = tuple(int(rng.choice([2, 3, 4, 8, 64, 512])) for _ in range(rank))
    axis = int(rng.integers(0, rank))
    op = OPS[int(rng.integers(0, len(OPS)))]
    x = rng.standard_normal(shape).astype(np.float32)

    def fn(a):
        return op(a, axis)

    on = tdf.jax.jit(fn, num_threads=1).program(x)
    with monkeypatch.context() as patch:
        _without_pass(patch)
        off = tdf.jax.jit(fn, num_threads=1).program(x)
    assert "loop_annotation" not in off.llvm_ir
    got, other = np.asarray(on.main(x)), np.asarray(off.main(x))
    np.testing.assert_array_equal(got, other)
    np.testing.assert_allclose(got, np.asarray(jax.jit(fn)(x)), rtol=2e-5, atol=1e-6)


def test_nested_loops_reach_llvm_annotated():
    """A row max over 2 x 4 x 512 floats (Llama decode's softmax shape):
    its outer loops' back edges carry the annotation."""
    x = np.random.default_rng(0).standard_normal((2, 4, 512)).astype(np.float32)
    prog = tdf.jax.jit(lambda a: jnp.max(a, axis=-1), num_threads=1).program(x)
    assert "{loop_annotation = #loop_annotation" in prog.llvm_ir
    assert "#llvm.loop_unroll<disable = true>" in prog.llvm_ir
    np.testing.assert_array_equal(prog.main(x), x.max(axis=-1))
