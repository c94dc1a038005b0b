"""Regression: an scf.for whose body computes a fresh tensor from its
iter_arg and a value defined before the loop. The loop yields a new buffer
each step (One-Shot Bufferize needs ``allow-return-allocs-from-loops``), and
the value defined outside the loop must never be overwritten inside it."""

import numpy as np
from jax import lax

from tdf.oracle import OracleProgram

from ._kernels import binary

SOURCE = binary("add", "add", "8xf32") + """
func.func @accumulate(%x: tensor<8xf32> {tdf.donate}, %y: tensor<8xf32>, %n: index) -> tensor<8xf32> {
  %t = tdf.call @add(%x, %y) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %y) -> tensor<8xf32> {
    %next = tdf.call @add(%t, %acc) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
    scf.yield %next : tensor<8xf32>
  }
  return %r : tensor<8xf32>
}
"""


def reference(x, y, n):
    t = x + y
    return lax.fori_loop(0, n, lambda i, acc: t + acc, y)


PROGRAM = OracleProgram(
    "loop_fresh_accumulator", SOURCE, "accumulate", reference,
    lambda rng: (rng.standard_normal(8).astype(np.float32),
                 rng.standard_normal(8).astype(np.float32),
                 int(rng.integers(0, 5))),
)
