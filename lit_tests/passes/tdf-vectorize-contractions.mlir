// RUN: tdf-opt %s --pass-pipeline="builtin.module(tdf-vectorize-contractions{vector-bits=512})" | FileCheck %s
// RUN: tdf-opt %s --pass-pipeline="builtin.module(tdf-vectorize-contractions{vector-bits=256 rows=4})" | FileCheck %s --check-prefix=AVX2
// RUN: tdf-opt %s --pass-pipeline="builtin.module(tdf-vectorize-contractions{vector-bits=512 remarks})" --verify-diagnostics > /dev/null
// RUN: not tdf-opt %s --pass-pipeline="builtin.module(tdf-vectorize-contractions{vector-bits=100})" 2>&1 | FileCheck %s --check-prefix=BADBITS
// RUN: not tdf-opt %s --pass-pipeline="builtin.module(tdf-vectorize-contractions{rows=33})" 2>&1 | FileCheck %s --check-prefix=BADROWS

// BADBITS: error: vector-bits must be 0, 128, 256 or 512, got 100
// BADROWS: error: rows must be in 0..32, got 33

// 16x64 by 64x64: blocks of 8 rows x 32 columns (two 512-bit registers of
// f32), each loaded once, accumulated over k in 8 vectors, stored once.
// CHECK-LABEL: func.func @matmul_full_blocks
// CHECK-SAME:    (%[[A:[^:]+]]: memref<16x64xf32>, %[[B:[^:]+]]: memref<64x64xf32>, %[[C:[^:]+]]: memref<16x64xf32>)
// CHECK:         scf.for %[[I:[^ ]+]] =
// CHECK:           scf.for %[[J:[^ ]+]] =
// CHECK-COUNT-8:     vector.load %[[C]]{{.*}} : memref<16x64xf32>, vector<32xf32>
// CHECK:             scf.for %[[K:[^ ]+]] = {{.*}} iter_args
// CHECK:               vector.load %[[B]][%[[K]], %[[J]]] : memref<64x64xf32>, vector<32xf32>
// CHECK:               memref.load %[[A]][%[[I]], %[[K]]]
// CHECK:               vector.broadcast {{.*}} : f32 to vector<32xf32>
// CHECK-COUNT-8:       vector.fma {{.*}} : vector<32xf32>
// CHECK:               scf.yield
// CHECK-COUNT-8:     vector.store {{.*}}, %[[C]]{{.*}} : memref<16x64xf32>, vector<32xf32>
// CHECK-NOT:   linalg.matmul
// AVX2-LABEL:  func.func @matmul_full_blocks
// AVX2-COUNT-4:  vector.fma {{.*}} : vector<16xf32>
// AVX2-NOT:      linalg.matmul
func.func @matmul_full_blocks(%a: memref<16x64xf32>, %b: memref<64x64xf32>, %c: memref<16x64xf32>) {
  linalg.matmul ins(%a, %b : memref<16x64xf32>, memref<64x64xf32>) outs(%c : memref<16x64xf32>)
  return
}

// Sizes that no block divides: 11 rows are a block of 8 and one of 3, 40
// columns a block of 32 and one of 8 (no masks, no scalar loops); one
// block needs no loop.
// CHECK-LABEL: func.func @matmul_rest_blocks
// AVX2-LABEL:  func.func @matmul_rest_blocks
// CHECK-NOT:     linalg.matmul
// CHECK-COUNT-8: vector.fma {{.*}} : vector<32xf32>
// CHECK-COUNT-8: vector.fma {{.*}} : vector<8xf32>
// CHECK-COUNT-3: vector.fma {{.*}} : vector<32xf32>
// CHECK-COUNT-3: vector.fma {{.*}} : vector<8xf32>
// CHECK-NOT:     vector.fma
func.func @matmul_rest_blocks(%a: memref<11x5xf32>, %b: memref<5x40xf32>, %c: memref<11x40xf32>) {
  linalg.matmul ins(%a, %b : memref<11x5xf32>, memref<5x40xf32>) outs(%c : memref<11x40xf32>)
  return
}

// f64: 16 columns per block (two registers of 8).
// CHECK-LABEL: func.func @matmul_f64
// CHECK-COUNT-8: vector.fma {{.*}} : vector<16xf64>
func.func @matmul_f64(%a: memref<8x4xf64>, %b: memref<4x16xf64>, %c: memref<8x16xf64>) {
  linalg.matmul ins(%a, %b : memref<8x4xf64>, memref<4x16xf64>) outs(%c : memref<8x16xf64>)
  return
}

// The frontend's contractions: a linalg.generic with the loops in the order
// (m, k, n) and a linalg.contract reading a strided row block (a dynamic
// offset) of a larger buffer are GEMMs too.
// CHECK-LABEL: func.func @contraction_generic_and_contract
// CHECK-NOT:     linalg.generic
// CHECK-NOT:     linalg.contract
// CHECK-COUNT-8: vector.fma {{.*}} : vector<32xf32>
// CHECK:         memref.load {{.*}} : memref<8x64xf32, strided<[64, 1], offset: ?>>
// CHECK-COUNT-8: vector.fma {{.*}} : vector<32xf32>
func.func @contraction_generic_and_contract(%a: memref<8x64xf32>, %b: memref<64x32xf32>,
                                            %c: memref<8x32xf32>, %xs: memref<4x8x64xf32>,
                                            %t: index) {
  linalg.generic {indexing_maps = [affine_map<(m, k, n) -> (m, k)>,
                                   affine_map<(m, k, n) -> (k, n)>,
                                   affine_map<(m, k, n) -> (m, n)>],
                  iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%a, %b : memref<8x64xf32>, memref<64x32xf32>) outs(%c : memref<8x32xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  %row = memref.subview %xs[%t, 0, 0] [1, 8, 64] [1, 1, 1]
      : memref<4x8x64xf32> to memref<8x64xf32, strided<[64, 1], offset: ?>>
  linalg.contract indexing_maps = [affine_map<(m, n, k) -> (m, k)>,
                                   affine_map<(m, n, k) -> (k, n)>,
                                   affine_map<(m, n, k) -> (m, n)>]
      ins(%row, %b : memref<8x64xf32, strided<[64, 1], offset: ?>>, memref<64x32xf32>)
      outs(%c : memref<8x32xf32>)
  return
}

// Left alone: integers, tensors, a dynamic size, a transposed B, a column
// stride in C, C sharing its buffer with A, bf16 inputs of an f32 result,
// batch matmuls.
// CHECK-LABEL: func.func @negative_not_vectorized
// CHECK-NOT:   vector.fma
// CHECK:       linalg.matmul
// CHECK:       linalg.matmul
// CHECK:       linalg.matmul
// CHECK:       linalg.contract
// CHECK:       linalg.matmul
// CHECK:       linalg.matmul
// CHECK:       linalg.matmul
// CHECK:       linalg.batch_matmul
func.func @negative_not_vectorized(%ia: memref<8x8xi32>, %ic: memref<8x8xi32>,
                                   %t: tensor<8x8xf32>,
                                   %d: memref<?x8xf32>, %b: memref<8x8xf32>, %dc: memref<?x8xf32>,
                                   %bt: memref<8x8xf32>, %c: memref<8x8xf32>,
                                   %ct: memref<8x8xf32, strided<[1, 8]>>,
                                   %sq: memref<8x8xf32>,
                                   %h: memref<8x8xbf16>,
                                   %ba: memref<2x8x8xf32>, %bc: memref<2x8x8xf32>) -> tensor<8x8xf32> {
  // expected-remark@+1 {{not vectorized: not a GEMM on static f32/f64 memrefs with contiguous rows of B and C (the op stays loops)}}
  linalg.matmul ins(%ia, %ia : memref<8x8xi32>, memref<8x8xi32>) outs(%ic : memref<8x8xi32>)
  // expected-remark@+1 {{not vectorized}}
  %r = linalg.matmul ins(%t, %t : tensor<8x8xf32>, tensor<8x8xf32>) outs(%t : tensor<8x8xf32>) -> tensor<8x8xf32>
  // expected-remark@+1 {{not vectorized}}
  linalg.matmul ins(%d, %b : memref<?x8xf32>, memref<8x8xf32>) outs(%dc : memref<?x8xf32>)
  linalg.contract indexing_maps = [affine_map<(m, n, k) -> (m, k)>,
                                   affine_map<(m, n, k) -> (n, k)>,
                                   affine_map<(m, n, k) -> (m, n)>]
      ins(%b, %bt : memref<8x8xf32>, memref<8x8xf32>) outs(%c : memref<8x8xf32>)
  // expected-remark@+1 {{not vectorized}}
  linalg.matmul ins(%b, %b : memref<8x8xf32>, memref<8x8xf32>) outs(%ct : memref<8x8xf32, strided<[1, 8]>>)
  // expected-remark@+1 {{not vectorized}}
  linalg.matmul ins(%sq, %b : memref<8x8xf32>, memref<8x8xf32>) outs(%sq : memref<8x8xf32>)
  // expected-remark@+1 {{not vectorized}}
  linalg.matmul ins(%h, %h : memref<8x8xbf16>, memref<8x8xbf16>) outs(%c : memref<8x8xf32>)
  linalg.batch_matmul ins(%ba, %ba : memref<2x8x8xf32>, memref<2x8x8xf32>) outs(%bc : memref<2x8x8xf32>)
  return %r : tensor<8x8xf32>
}

// Two slots of one planned arena: disjoint bytes (A at 0, C at 16384) are a
// GEMM; overlapping ones (C at 8192 overlaps A's 16 KiB) are left alone.
// CHECK-LABEL: func.func @arena_slots
// CHECK-COUNT-8: vector.fma {{.*}} : vector<32xf32>
// CHECK:         linalg.matmul
// CHECK-NOT:     vector.fma
func.func @arena_slots(%b: memref<256x256xf32>) {
  %arena = memref.alloc() : memref<32768xi8>
  %c0 = arith.constant 0 : index
  %c8192 = arith.constant 8192 : index
  %c16384 = arith.constant 16384 : index
  %a = memref.view %arena[%c0][] : memref<32768xi8> to memref<16x256xf32>
  %c = memref.view %arena[%c16384][] : memref<32768xi8> to memref<16x256xf32>
  linalg.matmul ins(%a, %b : memref<16x256xf32>, memref<256x256xf32>) outs(%c : memref<16x256xf32>)
  %d = memref.view %arena[%c8192][] : memref<32768xi8> to memref<16x256xf32>
  // expected-remark@+1 {{not vectorized}}
  linalg.matmul ins(%a, %b : memref<16x256xf32>, memref<256x256xf32>) outs(%d : memref<16x256xf32>)
  return
}
