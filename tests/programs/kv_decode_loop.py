"""A decode loop in one compiled function: scf.for writes T token rows into a
donated KV cache, one per iteration, starting at ``pos``."""

import numpy as np
from jax import lax

from tdf.oracle import OracleProgram

SOURCE = """
func.func @decode(%cache: tensor<2x16x4xf32> {tdf.donate}, %rows: tensor<2x4x4xf32>, %pos: index)
    -> tensor<2x16x4xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %steps = arith.constant 4 : index
  %out = scf.for %t = %c0 to %steps step %c1 iter_args(%acc = %cache) -> (tensor<2x16x4xf32>) {
    %row = tensor.extract_slice %rows[0, %t, 0] [2, 1, 4] [1, 1, 1]
        : tensor<2x4x4xf32> to tensor<2x1x4xf32>
    %at = arith.addi %pos, %t : index
    %next = tensor.insert_slice %row into %acc[0, %at, 0] [2, 1, 4] [1, 1, 1]
        : tensor<2x1x4xf32> into tensor<2x16x4xf32>
    scf.yield %next : tensor<2x16x4xf32>
  }
  return %out : tensor<2x16x4xf32>
}
"""

PROGRAM = OracleProgram(
    "kv_decode_loop", SOURCE, "decode",
    lambda cache, rows, pos: lax.dynamic_update_slice(cache, rows, (0, pos, 0)),
    lambda rng: (rng.standard_normal((2, 16, 4)).astype(np.float32),
                 rng.standard_normal((2, 4, 4)).astype(np.float32),
                 int(rng.integers(0, 13))),
    rtol=0, atol=0,
)
