// RUN: tdf-opt %s --split-input-file --tdf-check-copy-before-write --verify-diagnostics | FileCheck %s
// RUN: tdf-opt %s --split-input-file --tdf-bufferize="copy-before-write" --verify-diagnostics

// One-Shot Bufferize's copy-before-write mode crashes the process on a
// func.call with tensor operands or results (MLIR 22, upstream too): the
// pass refuses each such call with a located error before it runs, in
// tdf-bufferize{copy-before-write} too.
func.func private @g(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  return %x, %x : tensor<4xf32>, tensor<4xf32>
}
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{func.call @g has tensor operands or results: copy-before-write bufferization cannot handle such a call (One-Shot Bufferize crashes on it); inline @g or bufferize without copy-before-write}}
  %r:2 = func.call @g(%x) : (tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  return %r#0 : tensor<4xf32>
}

// -----

// negative_: a call without tensors and a program's other ops are left
// alone (and copy-before-write bufferizes them).
// CHECK-LABEL: func.func @negative_scalar_call
// CHECK:         call @h
func.func private @h(%i: index) -> index {
  return %i : index
}
func.func @negative_scalar_call(%x: tensor<4xf32>, %i: index) -> tensor<4xf32> {
  %j = func.call @h(%i) : (index) -> index
  %c = arith.constant 1.0 : f32
  %y = tensor.insert %c into %x[%j] : tensor<4xf32>
  return %y : tensor<4xf32>
}
