// RUN: tdf-opt %s --split-input-file --tdf-inline-kernels | FileCheck %s
// RUN: tdf-opt %s --split-input-file --tdf-inline-kernels=remarks --verify-diagnostics > /dev/null
// RUN: tdf-opt %s --split-input-file --pass-pipeline="builtin.module(tdf-inline-kernels, linalg-fuse-elementwise-ops)" | FileCheck %s --check-prefix=FUSED

#id = affine_map<(i) -> (i)>
func.func private @scale(%in: memref<8xf32>, %out: memref<8xf32>) attributes {tdf.elementwise} {
  %c = arith.constant 2.0 : f32
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%in : memref<8xf32>) outs(%out : memref<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.mulf %a, %c : f32
    linalg.yield %r : f32
  }
  return
}
func.func private @add(%x: memref<8xf32>, %y: memref<8xf32>, %out: memref<8xf32>) {
  linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
      ins(%x, %y : memref<8xf32>, memref<8xf32>) outs(%out : memref<8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.addf %a, %b : f32
    linalg.yield %r : f32
  }
  return
}

// A chain of two kernel calls: both become linalg.generic on tensors (the
// kernel's constant cloned at the call site, fresh tensor.empty inits), and
// linalg-fuse-elementwise-ops fuses them into one.
// CHECK-LABEL: func.func @chain
// CHECK-SAME:  (%[[X:.*]]: tensor<8xf32>, %[[Y:.*]]: tensor<8xf32>)
// CHECK:       %[[C:.*]] = arith.constant 2.0
// CHECK:       %[[E0:.*]] = tensor.empty() : tensor<8xf32>
// CHECK:       %[[S:.*]] = linalg.generic {{.*}} ins(%[[X]] : tensor<8xf32>) outs(%[[E0]] : tensor<8xf32>)
// CHECK:         arith.mulf %{{.*}}, %[[C]]
// CHECK:       %[[E1:.*]] = tensor.empty() : tensor<8xf32>
// CHECK:       %[[A:.*]] = linalg.generic {{.*}} ins(%[[S]], %[[Y]] : tensor<8xf32>, tensor<8xf32>) outs(%[[E1]] : tensor<8xf32>)
// CHECK:       return %[[A]]
// CHECK-NOT:   tdf.call
// FUSED-LABEL: func.func @chain
// FUSED-COUNT-1: linalg.generic
// FUSED-NOT:   linalg.generic
// FUSED:       return
func.func @chain(%x: tensor<8xf32>, %y: tensor<8xf32>) -> tensor<8xf32> {
  %s = tdf.call @scale(%x) : (tensor<8xf32>) -> tensor<8xf32>
  %a = tdf.call @add(%s, %y) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %a : tensor<8xf32>
}

// A lone call has nothing to fuse with: it stays a call (tdf-insert-inplace
// decides its storage).
// CHECK-LABEL: func.func @negative_lone_call
// CHECK:       tdf.call @scale
func.func @negative_lone_call(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-remark@+1 {{tdf.call @scale kept as a call: no inlinable kernel call produces its operand or uses its result}}
  %s = tdf.call @scale(%x) : (tensor<8xf32>) -> tensor<8xf32>
  return %s : tensor<8xf32>
}

// A chain whose result is inserted into a larger tensor is inlined like any
// chain (tdf-insert-inplace computes the fused part in its slice).
// CHECK-LABEL: func.func @chain_into_insert_slice
// CHECK-NOT:   tdf.call
// CHECK-COUNT-2: linalg.generic
// CHECK:       tensor.insert_slice
func.func @chain_into_insert_slice(%x: tensor<8xf32>, %dest: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %s = tdf.call @scale(%x) : (tensor<8xf32>) -> tensor<8xf32>
  %t = tdf.call @scale(%s) : (tensor<8xf32>) -> tensor<8xf32>
  %row = tensor.expand_shape %t [[0, 1]] output_shape [1, 8] : tensor<8xf32> into tensor<1x8xf32>
  %r = tensor.insert_slice %row into %dest[0, 0] [1, 8] [1, 1] : tensor<1x8xf32> into tensor<2x8xf32>
  return %r : tensor<2x8xf32>
}

// -----

#id = affine_map<(i) -> (i)>
func.func private @decl(memref<8xf32>, memref<8xf32>)
func.func private @reads_out(%in: memref<8xf32>, %out: memref<8xf32>) {
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%in : memref<8xf32>) outs(%out : memref<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.addf %a, %o : f32
    linalg.yield %r : f32
  }
  return
}
func.func private @sum(%in: memref<8xf32>, %out: memref<1xf32>) {
  linalg.generic {indexing_maps = [#id, affine_map<(i) -> (0)>], iterator_types = ["reduction"]}
      ins(%in : memref<8xf32>) outs(%out : memref<1xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.addf %a, %o : f32
    linalg.yield %r : f32
  }
  return
}

// Declarations, kernels reading their output (the fresh output is
// undefined) and reductions stay calls.
// CHECK-LABEL: func.func @negative_not_inlinable
// CHECK:       tdf.call @decl
// CHECK:       tdf.call @reads_out
// CHECK:       tdf.call @sum
func.func @negative_not_inlinable(%x: tensor<8xf32>) -> tensor<1xf32> {
  // expected-remark@+1 {{tdf.call @decl kept as a call: the kernel has no body}}
  %a = tdf.call @decl(%x) : (tensor<8xf32>) -> tensor<8xf32>
  // expected-remark@+1 {{tdf.call @reads_out kept as a call: the kernel reads its output}}
  %b = tdf.call @reads_out(%a) : (tensor<8xf32>) -> tensor<8xf32>
  // expected-remark@+1 {{tdf.call @sum kept as a call: the kernel's linalg.generic is not all-parallel}}
  %c = tdf.call @sum(%b) : (tensor<8xf32>) -> tensor<1xf32>
  return %c : tensor<1xf32>
}
