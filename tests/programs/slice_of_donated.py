"""A view of a donated argument is still read after an element-wise op that
could otherwise reuse the argument: the view keeps it alive."""

import numpy as np

from tdf.oracle import OracleProgram

from ._kernels import binary

SOURCE = binary("add8", "add", "8xf32") + """
func.func @slice_then_double(%x: tensor<16xf32> {tdf.donate}, %y: tensor<8xf32>)
    -> (tensor<8xf32>, tensor<16xf32>) {
  %head = tensor.extract_slice %x[0] [8] [1] : tensor<16xf32> to tensor<8xf32>
  %e = tensor.empty() : tensor<16xf32>
  %doubled = linalg.add ins(%x, %x : tensor<16xf32>, tensor<16xf32>) outs(%e : tensor<16xf32>) -> tensor<16xf32>
  %r = tdf.call @add8(%head, %y) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %r, %doubled : tensor<8xf32>, tensor<16xf32>
}
"""

PROGRAM = OracleProgram(
    "slice_of_donated", SOURCE, "slice_then_double",
    lambda x, y: (x[:8] + y, x + x),
    lambda rng: (rng.standard_normal(16).astype(np.float32),
                 rng.standard_normal(8).astype(np.float32)),
)
