// RUN: tdf-opt %s --tdf-split-reductions --mlir-pass-statistics 2>%t.stats | FileCheck %s
// RUN: FileCheck %s --check-prefix=STATS < %t.stats

// STATS: 4 split

// 4096 = 16 blocks of 256: the input is viewed as [16, 16, 16], partials
// P[b, j] over 16 lanes (j innermost and parallel), then the 256 partials
// reduced into the original init (short: not split again).
// CHECK-DAG:   #[[$IN:.*]] = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
// CHECK-DAG:   #[[$PART:.*]] = affine_map<(d0, d1, d2) -> (d0, d2)>
// CHECK-LABEL: func.func @sum_of_squares
// CHECK-SAME:    (%[[X:[^:]+]]: tensor<4096xf32>)
// CHECK:         %[[INIT:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<f32>)
// CHECK:         %[[P0:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<16x16xf32>)
// CHECK:         %[[E:.*]] = tensor.expand_shape %[[X]] {{\[\[}}0, 1, 2]] output_shape [16, 16, 16]
// CHECK:         %[[P:.*]] = linalg.generic {indexing_maps = [#[[$IN]], #[[$PART]]], iterator_types = ["parallel", "reduction", "parallel"]} ins(%[[E]] : tensor<16x16x16xf32>) outs(%[[P0]] : tensor<16x16xf32>)
// CHECK:           arith.mulf
// CHECK:           arith.addf
// CHECK:         %[[C:.*]] = tensor.collapse_shape %[[P]] {{\[\[}}0, 1]] : tensor<16x16xf32> into tensor<256xf32>
// CHECK:         %[[S:.*]] = linalg.generic {{.*}} iterator_types = ["reduction"]} ins(%[[C]] : tensor<256xf32>) outs(%[[INIT]] : tensor<f32>)
// CHECK:           arith.addf
// CHECK:         return %[[S]]
func.func @sum_of_squares(%x: tensor<4096xf32>) -> tensor<f32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<f32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<f32>) -> tensor<f32>
  %s = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> ()>], iterator_types = ["reduction"]}
      ins(%x : tensor<4096xf32>) outs(%z : tensor<f32>) {
  ^bb0(%a: f32, %acc: f32):
    %sq = arith.mulf %a, %a : f32
    %r = arith.addf %acc, %sq : f32
    linalg.yield %r : f32
  } -> tensor<f32>
  return %s : tensor<f32>
}

// Rows of 1100 = 4 blocks of 256 + a tail of 76: the tail is reduced into
// the init first by a copy of the op over the slice [1024, 1100), then the
// 256 partials of each row on top of it. max: partials start at -inf, and
// (exact in any order) 64 lanes per block, 4 steps each.
// CHECK-LABEL: func.func @row_max_with_tail
// CHECK-SAME:    (%[[X:[^:]+]]: tensor<3x1100xf32>, %[[I:[^:]+]]: tensor<3xf32>)
// CHECK:         %[[NINF:.*]] = arith.constant 0xFF800000 : f32
// CHECK:         %[[P0:.*]] = linalg.fill ins(%[[NINF]] : f32) outs(%{{.*}} : tensor<3x4x64xf32>)
// CHECK:         %[[TAILX:.*]] = tensor.extract_slice %[[X]][0, 1024] [3, 76] [1, 1]
// CHECK:         %[[T:.*]] = linalg.generic {{.*}} ins(%[[TAILX]] : tensor<3x76xf32>) outs(%[[I]] : tensor<3xf32>)
// CHECK:         %[[MAINX:.*]] = tensor.extract_slice %[[X]][0, 0] [3, 1024] [1, 1]
// CHECK:         tensor.expand_shape %[[MAINX]] {{\[\[}}0], [1, 2, 3]] output_shape [3, 4, 4, 64]
// CHECK:         linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction", "parallel"]
// CHECK:         tensor.collapse_shape {{.*}} : tensor<3x4x64xf32> into tensor<3x256xf32>
// CHECK:         linalg.generic {{.*}} outs(%[[T]] : tensor<3xf32>)
// CHECK:           arith.maximumf
func.func @row_max_with_tail(%x: tensor<3x1100xf32>, %init: tensor<3xf32>) -> tensor<3xf32> {
  %m = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>],
                       iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<3x1100xf32>) outs(%init : tensor<3xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %r = arith.maximumf %acc, %a : f32
    linalg.yield %r : f32
  } -> tensor<3xf32>
  return %m : tensor<3xf32>
}

// 70000 elements: split twice (70000 -> 4368 partials + tail 112 -> 272
// partials + tail 16): a 16-ary tree.
// CHECK-LABEL: func.func @two_levels
// CHECK-COUNT-2: tensor.expand_shape
// CHECK-NOT:     tensor.expand_shape
func.func @two_levels(%x: tensor<70000xf64>, %init: tensor<f64>) -> tensor<f64> {
  %s = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> ()>], iterator_types = ["reduction"]}
      ins(%x : tensor<70000xf64>) outs(%init : tensor<f64>) {
  ^bb0(%a: f64, %acc: f64):
    %r = arith.addf %acc, %a : f64
    linalg.yield %r : f64
  } -> tensor<f64>
  return %s : tensor<f64>
}

// Left alone: short, integer, dynamic, the reduction not innermost, a body
// that reads the accumulator twice, linalg.index.
// CHECK-LABEL: func.func @left_alone
// CHECK-NOT:     tensor.expand_shape
func.func @left_alone(%s: tensor<512xf32>, %i: tensor<4096xi32>, %d: tensor<?xf32>,
                      %c: tensor<4096x4xf32>, %x: tensor<4096xf32>, %f: tensor<f32>, %n: tensor<i32>,
                      %v: tensor<4xf32>) -> (tensor<f32>, tensor<i32>, tensor<f32>, tensor<4xf32>, tensor<f32>) {
  %r0 = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> ()>], iterator_types = ["reduction"]}
      ins(%s : tensor<512xf32>) outs(%f : tensor<f32>) {
  ^bb0(%a: f32, %acc: f32):
    %r = arith.addf %acc, %a : f32
    linalg.yield %r : f32
  } -> tensor<f32>
  %r1 = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> ()>], iterator_types = ["reduction"]}
      ins(%i : tensor<4096xi32>) outs(%n : tensor<i32>) {
  ^bb0(%a: i32, %acc: i32):
    %r = arith.addi %acc, %a : i32
    linalg.yield %r : i32
  } -> tensor<i32>
  %r2 = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> ()>], iterator_types = ["reduction"]}
      ins(%d : tensor<?xf32>) outs(%f : tensor<f32>) {
  ^bb0(%a: f32, %acc: f32):
    %r = arith.addf %acc, %a : f32
    linalg.yield %r : f32
  } -> tensor<f32>
  %r3 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>],
                        iterator_types = ["reduction", "parallel"]}
      ins(%c : tensor<4096x4xf32>) outs(%v : tensor<4xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %r = arith.addf %acc, %a : f32
    linalg.yield %r : f32
  } -> tensor<4xf32>
  %r4 = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> ()>], iterator_types = ["reduction"]}
      ins(%x : tensor<4096xf32>) outs(%f : tensor<f32>) {
  ^bb0(%a: f32, %acc: f32):
    %w = arith.mulf %acc, %a : f32
    %r = arith.addf %acc, %w : f32
    linalg.yield %r : f32
  } -> tensor<f32>
  return %r0, %r1, %r2, %r3, %r4 : tensor<f32>, tensor<i32>, tensor<f32>, tensor<4xf32>, tensor<f32>
}
