"""Element-wise chain of kernel calls: exp(relu((x + y) * y)), x donated."""

import jax.numpy as jnp
import numpy as np

from tdf.oracle import OracleProgram

from ._kernels import binary, relu, unary

S = "16x8xf32"
SOURCE = binary("add", "add", S) + binary("mul", "mul", S) + relu("relu", S) + unary("exp", "exp", S) + f"""
func.func @main(%x: tensor<{S}> {{tdf.donate}}, %y: tensor<{S}>) -> tensor<{S}> {{
  %t1 = tdf.call @add(%x, %y) : (tensor<{S}>, tensor<{S}>) -> tensor<{S}>
  %t2 = tdf.call @mul(%t1, %y) : (tensor<{S}>, tensor<{S}>) -> tensor<{S}>
  %t3 = tdf.call @relu(%t2) : (tensor<{S}>) -> tensor<{S}>
  %t4 = tdf.call @exp(%t3) : (tensor<{S}>) -> tensor<{S}>
  return %t4 : tensor<{S}>
}}
"""

PROGRAM = OracleProgram(
    "ew_chain", SOURCE, "main",
    lambda x, y: jnp.exp(jnp.maximum((x + y) * y, 0)),
    lambda rng: (rng.standard_normal((16, 8)).astype(np.float32),
                 rng.standard_normal((16, 8)).astype(np.float32)),
    rtol=1e-5, atol=1e-6,
)
