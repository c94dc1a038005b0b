"""A KV-cache decode step whose new row is computed by a kernel: ``log`` of
a flat row, expanded to ``[1, dim]`` and inserted into a donated cache at a
dynamic position (``tdf-insert-inplace`` computes it straight into the
cache row)."""

import jax.numpy as jnp
import numpy as np
from jax import lax

from tdf.oracle import OracleProgram

SOURCE = """
func.func private @log(%x: memref<8xf32>, %out: memref<8xf32>) {
  linalg.log ins(%x : memref<8xf32>) outs(%out : memref<8xf32>)
  return
}
func.func @step(%cache: tensor<4x8xf32> {tdf.donate}, %y: tensor<8xf32>, %pos: index)
    -> tensor<4x8xf32> {
  %z = tdf.call @log(%y) : (tensor<8xf32>) -> tensor<8xf32>
  %row = tensor.expand_shape %z [[0, 1]] output_shape [1, 8] : tensor<8xf32> into tensor<1x8xf32>
  %new = tensor.insert_slice %row into %cache[%pos, 0] [1, 8] [1, 1]
      : tensor<1x8xf32> into tensor<4x8xf32>
  return %new : tensor<4x8xf32>
}
"""

PROGRAM = OracleProgram(
    "kv_row_kernel", SOURCE, "step",
    lambda cache, y, pos: lax.dynamic_update_slice(cache, jnp.log(y)[None, :], (pos, 0)),
    lambda rng: (rng.standard_normal((4, 8)).astype(np.float32),
                 rng.uniform(0.5, 2.0, (8,)).astype(np.float32),
                 int(rng.integers(0, 4))),
)
