"""Concat of computed parts with ``tensor.concat`` and with insert_slice
into a ``tensor.empty`` (the form the in-place rewrite keeps copy-free)."""

import jax.numpy as jnp
import numpy as np

from tdf.oracle import OracleProgram

from ._kernels import binary

P = "tensor<4x8xf32>"
SOURCE = binary("add", "add", "4x8xf32") + binary("mul", "mul", "4x8xf32") + f"""
func.func @main(%a: {P}, %b: {P}) -> (tensor<12x8xf32>, tensor<8x8xf32>) {{
  %s = tdf.call @add(%a, %b) : ({P}, {P}) -> {P}
  %p = tdf.call @mul(%a, %b) : ({P}, {P}) -> {P}
  %c = tensor.concat dim(0) %s, %p, %a : ({P}, {P}, {P}) -> tensor<12x8xf32>
  %e = tensor.empty() : tensor<8x8xf32>
  %e1 = tensor.insert_slice %p into %e[0, 0] [4, 8] [1, 1] : {P} into tensor<8x8xf32>
  %e2 = tensor.insert_slice %s into %e1[4, 0] [4, 8] [1, 1] : {P} into tensor<8x8xf32>
  return %c, %e2 : tensor<12x8xf32>, tensor<8x8xf32>
}}
"""

PROGRAM = OracleProgram(
    "concat_parts", SOURCE, "main",
    lambda a, b: (jnp.concatenate([a + b, a * b, a], axis=0), jnp.concatenate([a * b, a + b], axis=0)),
    lambda rng: (rng.standard_normal((4, 8)).astype(np.float32),
                 rng.standard_normal((4, 8)).astype(np.float32)),
)
