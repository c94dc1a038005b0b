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

// -----

// An element-wise op over a concatenation (its only use) runs on each part:
// log(concat(x, x + 1)) is concat(log(x), log(x + 1)), the second part fused
// with its producer; the other input %y is sliced to each part.
// CHECK-LABEL: func.func @over_concat
// CHECK-SAME: (%[[X:.*]]: tensor<16xf32>, %[[YARG:.*]]: tensor<32xf32>)
// CHECK: %[[Y0:.*]] = tensor.extract_slice %[[YARG]][0] [16] [1]
// CHECK: %[[P0:.*]] = linalg.generic {{.*}} ins(%[[X]], %[[Y0]] : tensor<16xf32>, tensor<16xf32>)
// CHECK-NOT: arith.addf
// CHECK: math.log
// CHECK: %[[Y1:.*]] = tensor.extract_slice %[[YARG]][16] [16] [1]
// CHECK: %[[P1:.*]] = linalg.generic {{.*}} ins(%[[X]], %[[Y1]] : tensor<16xf32>, tensor<16xf32>)
// CHECK: arith.addf
// CHECK: math.log
// CHECK: %[[C:.*]] = tensor.concat dim(0) %[[P0]], %[[P1]] : (tensor<16xf32>, tensor<16xf32>) -> tensor<32xf32>
// CHECK: return %[[C]]
#map = affine_map<(d0) -> (d0)>
func.func @over_concat(%x: tensor<16xf32>, %y: tensor<32xf32>) -> tensor<32xf32> {
  %cst = arith.constant 1.0 : f32
  %e = tensor.empty() : tensor<16xf32>
  %x1 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]}
      ins(%x : tensor<16xf32>) outs(%e : tensor<16xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = arith.addf %a, %cst : f32
    linalg.yield %v : f32
  } -> tensor<16xf32>
  %c = tensor.concat dim(0) %x, %x1 : (tensor<16xf32>, tensor<16xf32>) -> tensor<32xf32>
  %e2 = tensor.empty() : tensor<32xf32>
  %r = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel"]}
      ins(%c, %y : tensor<32xf32>, tensor<32xf32>) outs(%e2 : tensor<32xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %l = math.log %a : f32
    %m = arith.mulf %l, %b : f32
    linalg.yield %m : f32
  } -> tensor<32xf32>
  return %r : tensor<32xf32>
}

// -----

// Along dimension 1 of a 2-D concatenation: each part keeps its shape.
// CHECK-LABEL: func.func @over_concat_dim1
// CHECK: %[[P0:.*]] = linalg.generic {{.*}} ins(%{{.*}} : tensor<4x3xf32>) outs(%{{.*}} : tensor<4x3xf32>)
// CHECK: math.exp
// CHECK: %[[P1:.*]] = linalg.generic {{.*}} ins(%{{.*}} : tensor<4x5xf32>) outs(%{{.*}} : tensor<4x5xf32>)
// CHECK: math.exp
// CHECK: tensor.concat dim(1) %[[P0]], %[[P1]] : (tensor<4x3xf32>, tensor<4x5xf32>) -> tensor<4x8xf32>
#map2 = affine_map<(d0, d1) -> (d0, d1)>
func.func @over_concat_dim1(%a: tensor<4x3xf32>, %b: tensor<4x5xf32>) -> tensor<4x8xf32> {
  %c = tensor.concat dim(1) %a, %b : (tensor<4x3xf32>, tensor<4x5xf32>) -> tensor<4x8xf32>
  %e = tensor.empty() : tensor<4x8xf32>
  %r = linalg.generic {indexing_maps = [#map2, #map2], iterator_types = ["parallel", "parallel"]}
      ins(%c : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%v: f32, %o: f32):
    %x = math.exp %v : f32
    linalg.yield %x : f32
  } -> tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}

// -----

// negative_concat_used_twice: the concatenation is also returned; the op
// stays on the whole concatenation.
// CHECK-LABEL: func.func @negative_concat_used_twice
// CHECK: %[[C:.*]] = tensor.concat dim(0)
// CHECK: linalg.generic {{.*}} ins(%[[C]] : tensor<32xf32>)
// CHECK-NOT: tensor.concat
#map = affine_map<(d0) -> (d0)>
func.func @negative_concat_used_twice(%x: tensor<16xf32>, %y: tensor<16xf32>) -> (tensor<32xf32>, tensor<32xf32>) {
  %c = tensor.concat dim(0) %x, %y : (tensor<16xf32>, tensor<16xf32>) -> tensor<32xf32>
  %e = tensor.empty() : tensor<32xf32>
  %r = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]}
      ins(%c : tensor<32xf32>) outs(%e : tensor<32xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = math.exp %a : f32
    linalg.yield %v : f32
  } -> tensor<32xf32>
  return %r, %c : tensor<32xf32>, tensor<32xf32>
}

// -----

// negative_reads_init: the body reads its init (an accumulation into %acc):
// the op stays whole.
// CHECK-LABEL: func.func @negative_reads_init
// CHECK: %[[C:.*]] = tensor.concat dim(0)
// CHECK: linalg.generic {{.*}} ins(%[[C]] : tensor<32xf32>)
#map = affine_map<(d0) -> (d0)>
func.func @negative_reads_init(%x: tensor<16xf32>, %y: tensor<16xf32>, %acc: tensor<32xf32>) -> tensor<32xf32> {
  %c = tensor.concat dim(0) %x, %y : (tensor<16xf32>, tensor<16xf32>) -> tensor<32xf32>
  %r = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]}
      ins(%c : tensor<32xf32>) outs(%acc : tensor<32xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = arith.addf %a, %o : f32
    linalg.yield %v : f32
  } -> tensor<32xf32>
  return %r : tensor<32xf32>
}

// -----

// negative_broadcast: another input is broadcast (not the identity map): the
// op stays whole.
// CHECK-LABEL: func.func @negative_broadcast
// CHECK: %[[C:.*]] = tensor.concat dim(1)
// CHECK: linalg.generic {{.*}} ins(%[[C]], %{{.*}} : tensor<2x8xf32>, tensor<8xf32>)
#map2 = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>
func.func @negative_broadcast(%a: tensor<2x4xf32>, %b: tensor<2x4xf32>, %s: tensor<8xf32>) -> tensor<2x8xf32> {
  %c = tensor.concat dim(1) %a, %b : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x8xf32>
  %e = tensor.empty() : tensor<2x8xf32>
  %r = linalg.generic {indexing_maps = [#map2, #row, #map2], iterator_types = ["parallel", "parallel"]}
      ins(%c, %s : tensor<2x8xf32>, tensor<8xf32>) outs(%e : tensor<2x8xf32>) {
  ^bb0(%v: f32, %w: f32, %o: f32):
    %x = arith.mulf %v, %w : f32
    linalg.yield %x : f32
  } -> tensor<2x8xf32>
  return %r : tensor<2x8xf32>
}

// -----

// negative_index: the body reads its loop index (an iota added to the
// concatenation): each part's loop would count from 0, so the op stays whole.
// CHECK-LABEL: func.func @negative_index
// CHECK: %[[C:.*]] = tensor.concat dim(0)
// CHECK: linalg.generic {{.*}} ins(%[[C]] : tensor<32xf32>)
// CHECK: linalg.index 0
#map = affine_map<(d0) -> (d0)>
func.func @negative_index(%x: tensor<16xf32>, %y: tensor<16xf32>) -> tensor<32xf32> {
  %c = tensor.concat dim(0) %x, %y : (tensor<16xf32>, tensor<16xf32>) -> tensor<32xf32>
  %e = tensor.empty() : tensor<32xf32>
  %r = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]}
      ins(%c : tensor<32xf32>) outs(%e : tensor<32xf32>) {
  ^bb0(%a: f32, %o: f32):
    %i = linalg.index 0 : index
    %n = arith.index_cast %i : index to i32
    %f = arith.sitofp %n : i32 to f32
    %v = arith.addf %a, %f : f32
    linalg.yield %v : f32
  } -> tensor<32xf32>
  return %r : tensor<32xf32>
}
