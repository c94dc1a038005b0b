"""tdf-widen-i1-memrefs widens i1 memref.globals (non-splat constants) with
their initial values; the JAX frontend emits bool constants as i1 directly."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tdf
import tdf.jax

XOR = """
func.func @f(%a: tensor<{shape}xi1>) -> tensor<{shape}xi1> {{
  %c = arith.constant dense<{value}> : tensor<{shape}xi1>
  %e = tensor.empty() : tensor<{shape}xi1>
  %r = linalg.generic {{indexing_maps = [{maps}], iterator_types = [{iters}]}}
      ins(%a, %c : tensor<{shape}xi1>, tensor<{shape}xi1>) outs(%e : tensor<{shape}xi1>) {{
  ^bb0(%x: i1, %y: i1, %o: i1):
    %z = arith.xori %x, %y : i1
    linalg.yield %z : i1
  }} -> tensor<{shape}xi1>
  return %r : tensor<{shape}xi1>
}}
"""


def _mlir_bool(array):
    if array.ndim == 0:
        return "true" if array else "false"
    return "[" + ", ".join(_mlir_bool(a) for a in array) + "]"


@pytest.mark.parametrize("shape", [(3,), (2, 3), (1,), (4, 1, 2)])
@pytest.mark.parametrize("seed", [0, 1])
def test_non_splat_i1_constant_compiles_and_runs(shape, seed):
    rng = np.random.default_rng(seed)
    const = rng.random(shape) < 0.5
    const.flat[0], const.flat[-1] = True, False if const.size > 1 else True
    x = rng.random(shape) < 0.5
    rank = len(shape)
    dims = ", ".join(f"d{i}" for i in range(rank))
    amap = f"affine_map<({dims}) -> ({dims})>"
    src = XOR.format(shape="x".join(map(str, shape)), value=_mlir_bool(const),
                     maps=", ".join([amap] * 3), iters=", ".join(['"parallel"'] * rank))
    out = tdf.compile(src).f(x)
    np.testing.assert_array_equal(out, x ^ const)


def test_jax_bool_constant_mask():
    mask = np.array([[True, False, True, True], [False, False, True, False]])

    def fn(x):
        return jnp.where(mask, x, -x), jnp.logical_and(mask, x > 0)

    x = np.arange(-4, 4, dtype=np.float32).reshape(2, 4)
    got = tdf.jax.jit(fn)(x)
    ref = jax.jit(fn)(x)
    for a, b in zip(got, ref):
        np.testing.assert_array_equal(a, np.asarray(b))
