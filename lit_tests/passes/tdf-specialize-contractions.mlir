// RUN: tdf-opt %s --tdf-specialize-contractions --mlir-pass-statistics 2>%t.stats | FileCheck %s
// RUN: FileCheck %s --check-prefix=STATS < %t.stats

// STATS: 3 folded-transposes
// STATS: 3 specialized

// The folded maps (defined at the top of the output; see @scores, @bf16_permuted).
// CHECK-DAG:   #[[$KMAP:.*]] = affine_map<(d0, d1, d2, d3) -> (d2, d0, d3)>
// CHECK-DAG:   #[[$AMAP:.*]] = affine_map<(d0, d1, d2) -> (d1, d2, d0)>

// A named linalg.transpose feeding a matmul's B is folded into the map:
// the contraction reads %w as (n, k).
// CHECK-LABEL: func.func @x_wT
// CHECK-SAME:    (%[[X:[^:]+]]: tensor<4x8xf32>, %[[W:[^:]+]]: tensor<16x8xf32>
// CHECK:         %[[Y:.*]] = linalg.contract indexing_maps = [#[[MA:.*]], #[[MB:.*]], #[[MC:.*]]] ins(%[[X]], %[[W]] :
// CHECK-NOT:     linalg.matmul
// CHECK:         return %[[Y]]
func.func @x_wT(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>, %z: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %e = tensor.empty() : tensor<8x16xf32>
  %wt = linalg.transpose ins(%w : tensor<16x8xf32>) outs(%e : tensor<8x16xf32>) permutation = [1, 0]
  %y = linalg.matmul ins(%x, %wt : tensor<4x8xf32>, tensor<8x16xf32>) outs(%z : tensor<4x16xf32>) -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// A generic transpose (what fusion would otherwise fold into the loop as a
// strided read) of a 3-d operand, feeding a contraction generic: both become
// one linalg.contract over the untransposed operand. A 3-d permutation
// checks the direction of the fold: %k is [s, h, d], the contraction reads
// it as [h, s, d].
// CHECK-LABEL: func.func @scores
// CHECK-SAME:    (%[[Q:[^:]+]]: tensor<2x3x4xf32>, %[[K:[^:]+]]: tensor<5x2x4xf32>
// CHECK:         linalg.contract indexing_maps = [#{{.*}}, #[[$KMAP]], #{{.*}}] ins(%[[Q]], %[[K]] :
// CHECK-NOT:     linalg.generic
func.func @scores(%q: tensor<2x3x4xf32>, %k: tensor<5x2x4xf32>, %z: tensor<2x3x5xf32>) -> tensor<2x3x5xf32> {
  %e = tensor.empty() : tensor<2x5x4xf32>
  %kt = linalg.generic {indexing_maps = [affine_map<(h, s, d) -> (s, h, d)>, affine_map<(h, s, d) -> (h, s, d)>],
                        iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%k : tensor<5x2x4xf32>) outs(%e : tensor<2x5x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  } -> tensor<2x5x4xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(h, q, s, d) -> (h, q, d)>,
                                        affine_map<(h, q, s, d) -> (h, s, d)>,
                                        affine_map<(h, q, s, d) -> (h, q, s)>],
                       iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %kt : tensor<2x3x4xf32>, tensor<2x5x4xf32>) outs(%z : tensor<2x3x5xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %p : f32
    linalg.yield %r : f32
  } -> tensor<2x3x5xf32>
  return %s : tensor<2x3x5xf32>
}

// bf16 inputs of an f32 contraction generic, both inputs transposed by a
// 3-d linalg.transpose (permutation [2, 0, 1]: result dim i is input dim
// perm[i]).
// CHECK-LABEL: func.func @bf16_permuted
// CHECK:         linalg.contract indexing_maps = [#[[$AMAP]],
func.func @bf16_permuted(%a: tensor<5x2x3xbf16>, %b: tensor<5x2xbf16>, %z: tensor<3xf32>) -> tensor<3xf32> {
  %e = tensor.empty() : tensor<3x5x2xbf16>
  %at = linalg.transpose ins(%a : tensor<5x2x3xbf16>) outs(%e : tensor<3x5x2xbf16>) permutation = [2, 0, 1]
  %r = linalg.generic {indexing_maps = [affine_map<(m, k1, k2) -> (m, k1, k2)>,
                                        affine_map<(m, k1, k2) -> (k1, k2)>,
                                        affine_map<(m, k1, k2) -> (m)>],
                       iterator_types = ["parallel", "reduction", "reduction"]}
      ins(%at, %b : tensor<3x5x2xbf16>, tensor<5x2xbf16>) outs(%z : tensor<3xf32>) {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %xf = arith.extf %x : bf16 to f32
    %yf = arith.extf %y : bf16 to f32
    %p = arith.mulf %xf, %yf : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<3xf32>
  return %r : tensor<3xf32>
}

// Left alone: a named matmul with no transpose, integer contractions, a
// generic whose body is not C + A * B, ops on memrefs.
// CHECK-LABEL: func.func @left_alone
// CHECK:         linalg.matmul
// CHECK:         linalg.matmul
// CHECK:         linalg.generic
// CHECK-NOT:     linalg.contract
func.func @left_alone(%a: tensor<4x4xf32>, %i: tensor<4x4xi32>, %m: memref<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xi32>, tensor<4x4xf32>) {
  %r = linalg.matmul ins(%a, %a : tensor<4x4xf32>, tensor<4x4xf32>) outs(%a : tensor<4x4xf32>) -> tensor<4x4xf32>
  %ri = linalg.matmul ins(%i, %i : tensor<4x4xi32>, tensor<4x4xi32>) outs(%i : tensor<4x4xi32>) -> tensor<4x4xi32>
  %g = linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (k, n)>,
                                        affine_map<(m, n, k) -> (m, n)>],
                       iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %a : tensor<4x4xf32>, tensor<4x4xf32>) outs(%a : tensor<4x4xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.maximumf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<4x4xf32>
  return %r, %ri, %g : tensor<4x4xf32>, tensor<4x4xi32>, tensor<4x4xf32>
}
