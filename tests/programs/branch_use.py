"""A value read inside one branch of an scf.if after a call that could reuse
it: liveness must count uses in nested regions, in either branch."""

import jax.numpy as jnp
import numpy as np

from tdf.oracle import OracleProgram

from ._kernels import binary

SOURCE = binary("add", "add", "8xf32") + """
func.func @branch(%x: tensor<8xf32> {tdf.donate}, %y: tensor<8xf32>, %k: index)
    -> (tensor<8xf32>, tensor<8xf32>) {
  %t = tdf.call @add(%x, %y) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %u = tdf.call @add(%t, %y) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %c0 = arith.constant 0 : index
  %odd = arith.cmpi ne, %k, %c0 : index
  %r = scf.if %odd -> tensor<8xf32> {
    %v = tdf.call @add(%t, %t) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
    scf.yield %v : tensor<8xf32>
  } else {
    scf.yield %u : tensor<8xf32>
  }
  return %r, %u : tensor<8xf32>, tensor<8xf32>
}
"""


def reference(x, y, k):
    t = x + y
    u = t + y
    return jnp.where(k != 0, t + t, u), u


PROGRAM = OracleProgram(
    "branch_use", SOURCE, "branch", reference,
    lambda rng: (rng.standard_normal(8).astype(np.float32),
                 rng.standard_normal(8).astype(np.float32),
                 int(rng.integers(0, 2))),
)
