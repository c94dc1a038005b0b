"""The seed's concat: three computed parts written in place into one buffer
with ``concat_update`` (``tdf.call_inplace`` on a ``tensor.empty``)."""

import jax.numpy as jnp
import numpy as np

from tdf.oracle import OracleProgram

from ._kernels import unary

R = "tensor<1x8xf32>"
X = "tensor<3x8xf32>"
SOURCE = unary("log", "log", "1x8xf32") + f"""
func.func private @concat_update(%x: memref<3x8xf32>, %y: memref<1x8xf32>, %offset: index) {{
  %dst = memref.subview %x[%offset, 0] [1, 8] [1, 1]
      : memref<3x8xf32> to memref<1x8xf32, strided<[8, 1], offset: ?>>
  memref.copy %y, %dst : memref<1x8xf32> to memref<1x8xf32, strided<[8, 1], offset: ?>>
  return
}}
func.func @main(%y0: {R}, %y1: {R}, %y2: {R}) -> {X} {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %z0 = tdf.call @log(%y0) : ({R}) -> {R}
  %z1 = tdf.call @log(%y1) : ({R}) -> {R}
  %z2 = tdf.call @log(%y2) : ({R}) -> {R}
  %x0 = tensor.empty() : {X}
  %x1 = tdf.call_inplace @concat_update(%x0, %z0, %c0) inplace [0] : ({X}, {R}, index) -> {X}
  %x2 = tdf.call_inplace @concat_update(%x1, %z1, %c1) inplace [0] : ({X}, {R}, index) -> {X}
  %x3 = tdf.call_inplace @concat_update(%x2, %z2, %c2) inplace [0] : ({X}, {R}, index) -> {X}
  return %x3 : {X}
}}
"""


def _inputs(rng):
    return tuple(rng.uniform(0.5, 2.0, (1, 8)).astype(np.float32) for _ in range(3))


PROGRAM = OracleProgram(
    "seed_concat", SOURCE, "main",
    lambda y0, y1, y2: jnp.concatenate([jnp.log(y0), jnp.log(y1), jnp.log(y2)], axis=0),
    _inputs,
)
