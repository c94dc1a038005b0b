// RUN: tdf-opt %s --tdf-vectorize-contractions | FileCheck %s
// RUN: tdf-opt %s --tdf-vectorize-contractions=remarks --verify-diagnostics > /dev/null
// RUN: not tdf-opt %s --pass-pipeline="builtin.module(tdf-vectorize-contractions{tile-sizes=4,x,2})" 2>&1 | FileCheck %s --check-prefix=BADOPT

// BADOPT: error: tile-sizes must be three positive integers 'm,n,k', got '4,x,2'

// Full 8x32x8 tiles: loops over tiles, the 8x32 block of C read once per
// tile, 8 outer products of 8 rows = 64 FMAs on vector<32xf32>.
// CHECK-LABEL: func.func @matmul_full_tiles
// CHECK:       scf.for
// CHECK:         scf.for
// CHECK:           scf.for
// CHECK-COUNT-64:    vector.fma {{.*}} : vector<32xf32>
// CHECK-NOT:   linalg.matmul
func.func @matmul_full_tiles(%a: memref<16x64xf32>, %b: memref<64x64xf32>, %c: memref<16x64xf32>) {
  linalg.matmul ins(%a, %b : memref<16x64xf32>, memref<64x64xf32>) outs(%c : memref<16x64xf32>)
  return
}

// Sizes are divided by the largest tile that fits: 6 rows → 2, 12 columns →
// 4, 3 → 1.
// CHECK-LABEL: func.func @matmul_small_tiles
// CHECK-COUNT-2: vector.fma {{.*}} : vector<4xf32>
// CHECK-NOT:   linalg.matmul
func.func @matmul_small_tiles(%a: memref<6x3xf32>, %b: memref<3x12xf32>, %c: memref<6x12xf32>) {
  linalg.matmul ins(%a, %b : memref<6x3xf32>, memref<3x12xf32>) outs(%c : memref<6x12xf32>)
  return
}

// An odd number of rows, integers, tensors and batch matmuls stay as they are.
// CHECK-LABEL: func.func @negative_not_vectorized
// CHECK:       linalg.matmul
// CHECK:       linalg.matmul
// CHECK:       linalg.matmul
// CHECK:       linalg.batch_matmul
func.func @negative_not_vectorized(%a: memref<5x8xf32>, %b: memref<8x8xf32>, %c: memref<5x8xf32>,
                                   %ia: memref<8x8xi32>, %ic: memref<8x8xi32>,
                                   %t: tensor<8x8xf32>,
                                   %ba: memref<2x8x8xf32>, %bc: memref<2x8x8xf32>) -> tensor<8x8xf32> {
  // expected-remark@+1 {{not vectorized: operands are not static f32/f64 memrefs whose sizes have full tiles (the op stays loops)}}
  linalg.matmul ins(%a, %b : memref<5x8xf32>, memref<8x8xf32>) outs(%c : memref<5x8xf32>)
  // expected-remark@+1 {{not vectorized}}
  linalg.matmul ins(%ia, %ia : memref<8x8xi32>, memref<8x8xi32>) outs(%ic : memref<8x8xi32>)
  // expected-remark@+1 {{not vectorized}}
  %r = linalg.matmul ins(%t, %t : tensor<8x8xf32>, tensor<8x8xf32>) outs(%t : tensor<8x8xf32>) -> tensor<8x8xf32>
  linalg.batch_matmul ins(%ba, %ba : memref<2x8x8xf32>, memref<2x8x8xf32>) outs(%bc : memref<2x8x8xf32>)
  return %r : tensor<8x8xf32>
}
