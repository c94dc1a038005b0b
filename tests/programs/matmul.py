"""Matmul kernel followed by an element-wise kernel: relu(a @ b)."""

import jax.numpy as jnp
import numpy as np

from tdf.oracle import OracleProgram

from ._kernels import relu

SOURCE = relu("relu", "8x4xf32") + """
func.func private @matmul(%a: memref<8x16xf32>, %b: memref<16x4xf32>, %c: memref<8x4xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<8x4xf32>)
  linalg.matmul ins(%a, %b : memref<8x16xf32>, memref<16x4xf32>) outs(%c : memref<8x4xf32>)
  return
}
func.func @main(%a: tensor<8x16xf32>, %b: tensor<16x4xf32>) -> tensor<8x4xf32> {
  %c = tdf.call @matmul(%a, %b) : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  %r = tdf.call @relu(%c) : (tensor<8x4xf32>) -> tensor<8x4xf32>
  return %r : tensor<8x4xf32>
}
"""

PROGRAM = OracleProgram(
    "matmul", SOURCE, "main",
    lambda a, b: jnp.maximum(a @ b, 0),
    lambda rng: (rng.standard_normal((8, 16)).astype(np.float32),
                 rng.standard_normal((16, 4)).astype(np.float32)),
    rtol=1e-4, atol=1e-5,
)
