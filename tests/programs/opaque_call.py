"""A program with an opaque call: its operand escapes (never reused in place
afterwards) and its result is treated as possibly aliased."""

import numpy as np

from tdf.oracle import OracleProgram

from ._kernels import binary

S = "16xf32"
M = f"memref<{S}>"
SOURCE = binary("add", "add", S) + f"""
func.func private @twice(%a: {M}) -> {M} {{
  %out = memref.alloc() : {M}
  linalg.add ins(%a, %a : {M}, {M}) outs(%out : {M})
  return %out : {M}
}}
func.func @main(%x: tensor<{S}> {{tdf.donate}}, %y: tensor<{S}>) -> (tensor<{S}>, tensor<{S}>) {{
  %t = tdf.call_opaque @twice(%x) : (tensor<{S}>) -> tensor<{S}>
  %r = tdf.call @add(%t, %x) : (tensor<{S}>, tensor<{S}>) -> tensor<{S}>
  %q = tdf.call @add(%r, %y) : (tensor<{S}>, tensor<{S}>) -> tensor<{S}>
  return %q, %t : tensor<{S}>, tensor<{S}>
}}
"""

PROGRAM = OracleProgram(
    "opaque_call", SOURCE, "main",
    lambda x, y: (3 * x + y, 2 * x),
    lambda rng: (rng.standard_normal(16).astype(np.float32),
                 rng.standard_normal(16).astype(np.float32)),
)
