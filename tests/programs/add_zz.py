"""add(z, z) on a dead intermediate: w = (x + y) + (x + y)."""

import numpy as np

from tdf.oracle import OracleProgram

from ._kernels import binary

S = "32xf32"
SOURCE = binary("add", "add", S) + f"""
func.func @main(%x: tensor<{S}>, %y: tensor<{S}>) -> tensor<{S}> {{
  %z = tdf.call @add(%x, %y) : (tensor<{S}>, tensor<{S}>) -> tensor<{S}>
  %w = tdf.call @add(%z, %z) : (tensor<{S}>, tensor<{S}>) -> tensor<{S}>
  return %w : tensor<{S}>
}}
"""

PROGRAM = OracleProgram(
    "add_zz", SOURCE, "main",
    lambda x, y: (x + y) + (x + y),
    lambda rng: (rng.standard_normal(32).astype(np.float32),
                 rng.standard_normal(32).astype(np.float32)),
)
