// RUN: tdf-opt %s --split-input-file --tdf-accumulate-contractions | FileCheck %s

// tanh(a + h @ w): the matmul accumulates into a (its init), the generic
// reads the matmul's result instead of adding a (the input a is left unread,
// for canonicalization to drop).
// CHECK-LABEL: func.func @addend
// CHECK: %[[A:.*]] = linalg.exp
// CHECK: %[[B:.*]] = linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<4x8xf32>, tensor<8x8xf32>) outs(%[[A]] : tensor<4x8xf32>)
// CHECK: linalg.generic {{.*}} ins(%[[A]], %[[B]] : tensor<4x8xf32>, tensor<4x8xf32>)
// CHECK-NEXT: ^bb0(%{{.*}}: f32, %[[Y:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT: math.tanh %[[Y]] : f32
#map = affine_map<(d0, d1) -> (d0, d1)>
func.func @addend(%x: tensor<4x8xf32>, %h: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
  %cst = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x8xf32>
  %a = linalg.exp ins(%x : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) -> tensor<4x8xf32>
  %e1 = tensor.empty() : tensor<4x8xf32>
  %z = linalg.fill ins(%cst : f32) outs(%e1 : tensor<4x8xf32>) -> tensor<4x8xf32>
  %b = linalg.matmul ins(%h, %w : tensor<4x8xf32>, tensor<8x8xf32>) outs(%z : tensor<4x8xf32>) -> tensor<4x8xf32>
  %e2 = tensor.empty() : tensor<4x8xf32>
  %r = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel", "parallel"]}
      ins(%a, %b : tensor<4x8xf32>, tensor<4x8xf32>) outs(%e2 : tensor<4x8xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %s = arith.addf %p, %q : f32
    %t = math.tanh %s : f32
    linalg.yield %t : f32
  } -> tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}

// -----

// negative_: the addend is used again (it would be overwritten), the init is
// not a zero fill (the contraction already accumulates), or the sum also
// feeds another op: nothing changes.
// CHECK-LABEL: func.func @negative_kept
// CHECK-COUNT-2: arith.addf
// CHECK-NOT: outs(%{{.*}}exp
#map = affine_map<(d0, d1) -> (d0, d1)>
func.func @negative_kept(%x: tensor<4x8xf32>, %h: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %cst = arith.constant 1.0 : f32
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x8xf32>
  %a = linalg.exp ins(%x : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) -> tensor<4x8xf32>
  %e1 = tensor.empty() : tensor<4x8xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e1 : tensor<4x8xf32>) -> tensor<4x8xf32>
  %b = linalg.matmul ins(%h, %w : tensor<4x8xf32>, tensor<8x8xf32>) outs(%z : tensor<4x8xf32>) -> tensor<4x8xf32>
  %e2 = tensor.empty() : tensor<4x8xf32>
  %r = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel", "parallel"]}
      ins(%a, %b : tensor<4x8xf32>, tensor<4x8xf32>) outs(%e2 : tensor<4x8xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %s = arith.addf %p, %q : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  %e3 = tensor.empty() : tensor<4x8xf32>
  %one = linalg.fill ins(%cst : f32) outs(%e3 : tensor<4x8xf32>) -> tensor<4x8xf32>
  %b2 = linalg.matmul ins(%h, %w : tensor<4x8xf32>, tensor<8x8xf32>) outs(%one : tensor<4x8xf32>) -> tensor<4x8xf32>
  %e4 = tensor.empty() : tensor<4x8xf32>
  %r2 = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel", "parallel"]}
      ins(%x, %b2 : tensor<4x8xf32>, tensor<4x8xf32>) outs(%e4 : tensor<4x8xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %s = arith.addf %p, %q : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  return %r, %r2, %a : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}
