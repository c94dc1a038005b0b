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
