"""Mixed ``inplace [0, -1]``: one result in the donated operand, one fresh."""

import numpy as np

from tdf.oracle import OracleProgram

from ._kernels import binary

S = "8x8xf32"
M = f"memref<{S}>"
MAP = "affine_map<(d0, d1) -> (d0, d1)>"
SOURCE = binary("mul", "mul", S) + f"""
func.func private @addsub_ip(%a: {M}, %b: {M}, %diff: {M}) attributes {{tdf.elementwise}} {{
  linalg.generic {{indexing_maps = [{MAP}, {MAP}, {MAP}, {MAP}],
                  iterator_types = ["parallel", "parallel"]}}
      ins(%a, %b : {M}, {M}) outs(%a, %diff : {M}, {M}) {{
  ^bb0(%x: f32, %y: f32, %o0: f32, %o1: f32):
    %s = arith.addf %x, %y : f32
    %d = arith.subf %x, %y : f32
    linalg.yield %s, %d : f32, f32
  }}
  return
}}
func.func @main(%x: tensor<{S}> {{tdf.donate}}, %y: tensor<{S}>) -> (tensor<{S}>, tensor<{S}>, tensor<{S}>) {{
  %sum, %diff = tdf.call_inplace @addsub_ip(%x, %y) inplace [0, -1]
      : (tensor<{S}>, tensor<{S}>) -> (tensor<{S}>, tensor<{S}>)
  %prod = tdf.call @mul(%sum, %diff) : (tensor<{S}>, tensor<{S}>) -> tensor<{S}>
  return %sum, %diff, %prod : tensor<{S}>, tensor<{S}>, tensor<{S}>
}}
"""

PROGRAM = OracleProgram(
    "mixed_results", SOURCE, "main",
    lambda x, y: (x + y, x - y, (x + y) * (x - y)),
    lambda rng: (rng.standard_normal((8, 8)).astype(np.float32),
                 rng.standard_normal((8, 8)).astype(np.float32)),
)
