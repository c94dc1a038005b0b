"""Views aliasing an input: the second half of a donated x becomes twice its
first half, and the first-half view is also returned (it must still hold the
old values: the write must not clobber what the view reads)."""

import numpy as np

from tdf.oracle import OracleProgram

from ._kernels import binary

H = "tensor<8xf32>"
X = "tensor<16xf32>"
SOURCE = binary("add8", "add", "8xf32") + f"""
func.func @main(%x: {X} {{tdf.donate}}) -> ({X}, {H}, {H}) {{
  %head = tensor.extract_slice %x[0] [8] [1] : {X} to {H}
  %tail = tensor.extract_slice %x[8] [8] [1] : {X} to {H}
  %twice = tdf.call @add8(%head, %head) : ({H}, {H}) -> {H}
  %new = tensor.insert_slice %twice into %x[8] [8] [1] : {H} into {X}
  %sum = tdf.call @add8(%tail, %head) : ({H}, {H}) -> {H}
  return %new, %head, %sum : {X}, {H}, {H}
}}
"""

PROGRAM = OracleProgram(
    "views_alias", SOURCE, "main",
    lambda x: (x.at[8:].set(2 * x[:8]), x[:8], x[8:] + x[:8]),
    lambda rng: (rng.standard_normal(16).astype(np.float32),),
)
