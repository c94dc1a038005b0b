"""One decode step: write one token's row into a donated KV cache [heads, seq, dim]."""

import numpy as np
from jax import lax

from tdf.oracle import OracleProgram

SOURCE = """
func.func @step(%cache: tensor<2x8x4xf32> {tdf.donate}, %row: tensor<2x1x4xf32>, %pos: index)
    -> tensor<2x8x4xf32> {
  %new = tensor.insert_slice %row into %cache[0, %pos, 0] [2, 1, 4] [1, 1, 1]
      : tensor<2x1x4xf32> into tensor<2x8x4xf32>
  return %new : tensor<2x8x4xf32>
}
"""

PROGRAM = OracleProgram(
    "kv_row_update", SOURCE, "step",
    lambda cache, row, pos: lax.dynamic_update_slice(cache, row, (0, pos, 0)),
    lambda rng: (rng.standard_normal((2, 8, 4)).astype(np.float32),
                 rng.standard_normal((2, 1, 4)).astype(np.float32),
                 int(rng.integers(0, 8))),
    rtol=0, atol=0,
)
