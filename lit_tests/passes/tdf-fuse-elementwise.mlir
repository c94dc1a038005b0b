// RUN: tdf-opt %s --split-input-file --tdf-fuse-elementwise | FileCheck %s
// RUN: tdf-opt %s --split-input-file --tdf-fuse-elementwise=max-body-ops=2 | FileCheck %s --check-prefix=BOUND

// Two chained element-wise generics (one use each): one loop computing
// log(exp(x)), as upstream linalg-fuse-elementwise-ops does.
// CHECK-LABEL: func.func @chain
// CHECK: linalg.generic
// CHECK: math.exp
// CHECK-NEXT: math.log
// CHECK-NOT: linalg.generic
// CHECK: return
// negative_bound: fused, the body would have 3 ops (exp, log, yield), over
// max-body-ops=2: both loops stay.
// BOUND-LABEL: func.func @chain
// BOUND: linalg.generic
// BOUND: math.exp
// BOUND: linalg.generic
// BOUND: math.log
// BOUND: return
#map = affine_map<(d0) -> (d0)>
func.func @chain(%x: tensor<16xf32>) -> tensor<16xf32> {
  %e = tensor.empty() : tensor<16xf32>
  %t = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]}
      ins(%x : tensor<16xf32>) outs(%e : tensor<16xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = math.exp %a : f32
    linalg.yield %v : f32
  } -> tensor<16xf32>
  %r = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]}
      ins(%t : tensor<16xf32>) outs(%e : tensor<16xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = math.log %a : f32
    linalg.yield %v : f32
  } -> tensor<16xf32>
  return %r : tensor<16xf32>
}

// -----

// negative_two_uses: a producer read twice is not fused (upstream's rule).
// CHECK-LABEL: func.func @negative_two_uses
// CHECK-COUNT-3: linalg.generic
#map = affine_map<(d0) -> (d0)>
func.func @negative_two_uses(%x: tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>) {
  %e = tensor.empty() : tensor<16xf32>
  %t = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]}
      ins(%x : tensor<16xf32>) outs(%e : tensor<16xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = math.exp %a : f32
    linalg.yield %v : f32
  } -> tensor<16xf32>
  %r = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]}
      ins(%t : tensor<16xf32>) outs(%e : tensor<16xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = math.log %a : f32
    linalg.yield %v : f32
  } -> tensor<16xf32>
  %s = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]}
      ins(%t : tensor<16xf32>) outs(%e : tensor<16xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = math.sin %a : f32
    linalg.yield %v : f32
  } -> tensor<16xf32>
  return %r, %s : tensor<16xf32>, tensor<16xf32>
}

// -----

// A linalg.contract (a BLAS contraction, tdf-specialize-contractions) takes
// part in no fusion and no reshape folding: the collapse of its input stays
// a view, the scale before it stays its own loop, and it stays a
// linalg.contract.
// CHECK-LABEL: func.func @contract_kept_whole
// CHECK: linalg.generic
// CHECK: arith.mulf
// CHECK: tensor.collapse_shape
// CHECK: linalg.contract
// CHECK-NOT: linalg.generic
// CHECK: return
#id4 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
func.func @contract_kept_whole(%x: tensor<4x2x2x8xf32>, %w: tensor<32x10xf32>) -> tensor<4x10xf32> {
  %q = arith.constant 0.25 : f32
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x2x2x8xf32>
  %s = linalg.generic {indexing_maps = [#id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%x : tensor<4x2x2x8xf32>) outs(%e : tensor<4x2x2x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = arith.mulf %a, %q : f32
    linalg.yield %v : f32
  } -> tensor<4x2x2x8xf32>
  %flat = tensor.collapse_shape %s [[0], [1, 2, 3]] : tensor<4x2x2x8xf32> into tensor<4x32xf32>
  %ce = tensor.empty() : tensor<4x10xf32>
  %c = linalg.fill ins(%z : f32) outs(%ce : tensor<4x10xf32>) -> tensor<4x10xf32>
  %r = linalg.contract indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (k, n)>, affine_map<(m, n, k) -> (m, n)>]
      ins(%flat, %w : tensor<4x32xf32>, tensor<32x10xf32>) outs(%c : tensor<4x10xf32>) -> tensor<4x10xf32>
  return %r : tensor<4x10xf32>
}

// -----

// negative_: the same program with a linalg.generic contraction: the
// reshape is folded into it (upstream's expansion) and the scale fused into
// its body.
// CHECK-LABEL: func.func @negative_generic_contraction_fused
// CHECK-NOT: tensor.collapse_shape
// CHECK: linalg.generic
// CHECK-SAME: "reduction"
// CHECK: arith.mulf
// CHECK: arith.mulf
// CHECK: arith.addf
// CHECK-NOT: linalg.generic
// CHECK: return
#id4n = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
func.func @negative_generic_contraction_fused(%x: tensor<4x2x2x8xf32>, %w: tensor<32x10xf32>) -> tensor<4x10xf32> {
  %q = arith.constant 0.25 : f32
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x2x2x8xf32>
  %s = linalg.generic {indexing_maps = [#id4n, #id4n], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%x : tensor<4x2x2x8xf32>) outs(%e : tensor<4x2x2x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = arith.mulf %a, %q : f32
    linalg.yield %v : f32
  } -> tensor<4x2x2x8xf32>
  %flat = tensor.collapse_shape %s [[0], [1, 2, 3]] : tensor<4x2x2x8xf32> into tensor<4x32xf32>
  %ce = tensor.empty() : tensor<4x10xf32>
  %c = linalg.fill ins(%z : f32) outs(%ce : tensor<4x10xf32>) -> tensor<4x10xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (k, n)>, affine_map<(m, n, k) -> (m, n)>],
                       iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%flat, %w : tensor<4x32xf32>, tensor<32x10xf32>) outs(%c : tensor<4x10xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    %v = arith.addf %o, %m : f32
    linalg.yield %v : f32
  } -> tensor<4x10xf32>
  return %r : tensor<4x10xf32>
}
