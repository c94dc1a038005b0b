"""Embedding rows update: ``table[ids[k]] += deltas[k]`` on a donated table,
one row per scf.for iteration (repeated ids accumulate, as in JAX's
``.at[ids].add``)."""

import numpy as np

from tdf.oracle import OracleProgram

from ._kernels import binary

SOURCE = binary("add_row", "add", "1x8xf32") + """
func.func @update(%table: tensor<32x8xf32> {tdf.donate}, %ids: tensor<3xi32>, %deltas: tensor<3x8xf32>)
    -> tensor<32x8xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = arith.constant 3 : index
  %out = scf.for %k = %c0 to %n step %c1 iter_args(%t = %table) -> (tensor<32x8xf32>) {
    %id32 = tensor.extract %ids[%k] : tensor<3xi32>
    %id = arith.index_cast %id32 : i32 to index
    %row = tensor.extract_slice %t[%id, 0] [1, 8] [1, 1] : tensor<32x8xf32> to tensor<1x8xf32>
    %d = tensor.extract_slice %deltas[%k, 0] [1, 8] [1, 1] : tensor<3x8xf32> to tensor<1x8xf32>
    %s = tdf.call @add_row(%row, %d) : (tensor<1x8xf32>, tensor<1x8xf32>) -> tensor<1x8xf32>
    %next = tensor.insert_slice %s into %t[%id, 0] [1, 8] [1, 1] : tensor<1x8xf32> into tensor<32x8xf32>
    scf.yield %next : tensor<32x8xf32>
  }
  return %out : tensor<32x8xf32>
}
"""

PROGRAM = OracleProgram(
    "embedding_update", SOURCE, "update",
    lambda table, ids, deltas: table.at[ids].add(deltas),
    lambda rng: (rng.standard_normal((32, 8)).astype(np.float32),
                 rng.integers(0, 32, 3).astype(np.int32),
                 rng.standard_normal((3, 8)).astype(np.float32)),
)
