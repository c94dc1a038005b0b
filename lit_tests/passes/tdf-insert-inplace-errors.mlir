// RUN: tdf-opt %s --split-input-file --tdf-insert-inplace --verify-diagnostics

// A malformed 'tdf.inplace_ok' (an array of integers, not of pairs) is an
// error at the kernel, not a failure inside the pass.
// expected-error@+1 {{@add: 'tdf.inplace_ok' must be a list of [operand, result] pairs of integers, e.g. [[0, 0]], got array<i64: 0>}}
func.func private @add(%a: memref<16xf32>, %b: memref<16xf32>, %out: memref<16xf32>) attributes {tdf.inplace_ok = array<i64: 0>}

func.func @f(%x: tensor<16xf32>, %y: tensor<16xf32>) -> tensor<16xf32> {
  %r = tdf.call @add(%x, %y) : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  return %r : tensor<16xf32>
}

// -----

// A pair with three entries.
// expected-error@+1 {{@add: 'tdf.inplace_ok' must be a list of [operand, result] pairs of integers, e.g. [[0, 0]], got [[0, 0, 1]]}}
func.func private @add(%a: memref<16xf32>, %b: memref<16xf32>, %out: memref<16xf32>) attributes {tdf.inplace_ok = [[0, 0, 1]]}

func.func @f(%x: tensor<16xf32>, %y: tensor<16xf32>) -> tensor<16xf32> {
  %r = tdf.call @add(%x, %y) : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  return %r : tensor<16xf32>
}
