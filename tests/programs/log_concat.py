"""The seed's fused-log concat: ``log_concat_update`` computes log straight
into the slice of the concatenated buffer (no intermediate tensors)."""

import jax.numpy as jnp
import numpy as np

from tdf.oracle import OracleProgram

R = "tensor<1x8xf32>"
X = "tensor<3x8xf32>"
V = "memref<1x8xf32, strided<[8, 1], offset: ?>>"
SOURCE = f"""
func.func private @log_concat_update(%x: memref<3x8xf32>, %y: memref<1x8xf32>, %offset: index) {{
  %dst = memref.subview %x[%offset, 0] [1, 8] [1, 1] : memref<3x8xf32> to {V}
  linalg.log ins(%y : memref<1x8xf32>) outs(%dst : {V})
  return
}}
func.func @main(%y0: {R}, %y1: {R}, %y2: {R}) -> {X} {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %x0 = tensor.empty() : {X}
  %x1 = tdf.call_inplace @log_concat_update(%x0, %y0, %c0) inplace [0] : ({X}, {R}, index) -> {X}
  %x2 = tdf.call_inplace @log_concat_update(%x1, %y1, %c1) inplace [0] : ({X}, {R}, index) -> {X}
  %x3 = tdf.call_inplace @log_concat_update(%x2, %y2, %c2) inplace [0] : ({X}, {R}, index) -> {X}
  return %x3 : {X}
}}
"""

PROGRAM = OracleProgram(
    "log_concat", SOURCE, "main",
    lambda y0, y1, y2: jnp.log(jnp.concatenate([y0, y1, y2], axis=0)),
    lambda rng: tuple(rng.uniform(0.5, 2.0, (1, 8)).astype(np.float32) for _ in range(3)),
)
