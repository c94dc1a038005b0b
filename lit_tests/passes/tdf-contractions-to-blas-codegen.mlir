// Which contractions tdf-contractions-to-blas leaves to compiled code
// (tdf-vectorize-contractions): GEMMs that pass vectorizes, of at most
// codegen-flops flops (default 2^23) with A and B in at most 3 MiB and rows
// of at most 1024 columns.
// RUN: tdf-opt %s --tdf-contractions-to-blas | FileCheck %s
// RUN: tdf-opt %s --pass-pipeline="builtin.module(tdf-contractions-to-blas{codegen-flops=0})" | FileCheck %s --check-prefix=NONE
// RUN: tdf-opt %s --pass-pipeline="builtin.module(tdf-contractions-to-blas{codegen-flops=1000000000})" | FileCheck %s --check-prefix=MORE
// RUN: tdf-opt %s --pass-pipeline="builtin.module(tdf-contractions-to-blas, tdf-vectorize-contractions)" | FileCheck %s --check-prefix=VECTOR
// RUN: not tdf-opt %s --pass-pipeline="builtin.module(tdf-contractions-to-blas{codegen-flops=-1})" 2>&1 | FileCheck %s --check-prefix=BADOPT

// BADOPT: error: codegen-flops must be at least 0, got -1

// 16x64x256 (2^19 flops): compiled, as a matmul, as the frontend's
// contraction on a row of a larger buffer (a dynamic offset), and with an
// odd number of rows.
// CHECK-LABEL: func.func @small_gemms
// CHECK-NOT:     tdf_rt_contract
// CHECK:         linalg.matmul
// CHECK:         linalg.matmul
// CHECK:         linalg.contract
// CHECK-NOT:     tdf_rt_contract
// NONE-LABEL:  func.func @small_gemms
// NONE-COUNT-3:  call @tdf_rt_contract
// VECTOR-LABEL: func.func @small_gemms
// VECTOR-NOT:    linalg.
// VECTOR-COUNT-3: vector.fma {{.*}} : vector<32xf32>
func.func @small_gemms(%a: memref<16x64xf32>, %b: memref<64x256xf32>, %c: memref<16x256xf32>,
                       %odd: memref<5x64xf32>, %codd: memref<5x256xf32>,
                       %xs: memref<8x16x64xf32>, %t: index) {
  linalg.matmul ins(%a, %b : memref<16x64xf32>, memref<64x256xf32>) outs(%c : memref<16x256xf32>)
  linalg.matmul ins(%odd, %b : memref<5x64xf32>, memref<64x256xf32>) outs(%codd : memref<5x256xf32>)
  %x = memref.subview %xs[%t, 0, 0] [1, 16, 64] [1, 1, 1]
      : memref<8x16x64xf32> to memref<16x64xf32, strided<[64, 1], offset: ?>>
  linalg.contract indexing_maps = [affine_map<(m, n, k) -> (m, k)>,
                                   affine_map<(m, n, k) -> (k, n)>,
                                   affine_map<(m, n, k) -> (m, n)>]
      ins(%x, %b : memref<16x64xf32, strided<[64, 1], offset: ?>>, memref<64x256xf32>)
      outs(%c : memref<16x256xf32>)
  return
}

// 512x512x512 (2^28 flops), 4x1024x1024 (2^23 flops, but B is 4 MiB) and
// 16x256x2048 (rows of 2048 columns) go to the library; a larger
// codegen-flops keeps the first.
// CHECK-LABEL: func.func @negative_large_gemms
// CHECK-COUNT-3: call @tdf_rt_contract
// CHECK-NOT:     linalg.matmul
// MORE-LABEL:  func.func @negative_large_gemms
// MORE:          linalg.matmul
// MORE-COUNT-2:  call @tdf_rt_contract
func.func @negative_large_gemms(%a: memref<512x512xf32>, %c: memref<512x512xf32>,
                                %x: memref<4x1024xf32>, %w: memref<1024x1024xf32>,
                                %y: memref<4x1024xf32>, %h: memref<16x256xf32>,
                                %u: memref<256x2048xf32>, %o: memref<16x2048xf32>) {
  linalg.matmul ins(%a, %a : memref<512x512xf32>, memref<512x512xf32>) outs(%c : memref<512x512xf32>)
  linalg.matmul ins(%x, %w : memref<4x1024xf32>, memref<1024x1024xf32>) outs(%y : memref<4x1024xf32>)
  linalg.matmul ins(%h, %u : memref<16x256xf32>, memref<256x2048xf32>) outs(%o : memref<16x2048xf32>)
  return
}

// Small contractions the vectorizer does not take go to the library: a
// transposed B, a dynamic size, bf16 inputs, a batch.
// CHECK-LABEL: func.func @negative_not_vectorizable
// CHECK-COUNT-4: call @tdf_rt_contract
// CHECK-NOT:     linalg.
func.func @negative_not_vectorizable(%a: memref<16x64xf32>, %bt: memref<256x64xf32>,
                                     %c: memref<16x256xf32>, %b: memref<64x256xf32>,
                                     %dyn: memref<?x64xf32>, %cdyn: memref<?x256xf32>,
                                     %ha: memref<16x64xbf16>, %hb: memref<64x256xbf16>,
                                     %ba: memref<2x16x64xf32>, %bb: memref<2x64x256xf32>,
                                     %bc: memref<2x16x256xf32>) {
  linalg.contract indexing_maps = [affine_map<(m, n, k) -> (m, k)>,
                                   affine_map<(m, n, k) -> (n, k)>,
                                   affine_map<(m, n, k) -> (m, n)>]
      ins(%a, %bt : memref<16x64xf32>, memref<256x64xf32>) outs(%c : memref<16x256xf32>)
  linalg.matmul ins(%dyn, %b : memref<?x64xf32>, memref<64x256xf32>) outs(%cdyn : memref<?x256xf32>)
  linalg.matmul ins(%ha, %hb : memref<16x64xbf16>, memref<64x256xbf16>) outs(%c : memref<16x256xf32>)
  linalg.batch_matmul ins(%ba, %bb : memref<2x16x64xf32>, memref<2x64x256xf32>)
      outs(%bc : memref<2x16x256xf32>)
  return
}
