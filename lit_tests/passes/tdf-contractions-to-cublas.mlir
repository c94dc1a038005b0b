// RUN: tdf-opt %s --tdf-contractions-to-cublas | FileCheck %s
// RUN: tdf-opt %s --tdf-contractions-to-cublas=remarks --verify-diagnostics > /dev/null
// RUN: tdf-opt %s --tdf-contractions-to-cublas | tdf-opt | FileCheck %s

// A matmul into a fresh device buffer filled with zero: the fill is dropped
// and the call overwrites the buffer (flags: f32 A, B, C, no accumulate
// bit, kinds M, N, K = 1 | 2 << 2 | 3 << 4 at bit 16: 0x390000 = 3735552).
// CHECK-LABEL: func.func @matmul
// CHECK-SAME:    (%[[A:[^:]+]]: memref<8x4xf32>, %[[B:[^:]+]]: memref<4x16xf32>)
// CHECK:         %[[C:.*]] = gpu.alloc () : memref<8x16xf32>
// CHECK-NOT:     linalg.fill
// CHECK:         memref.extract_aligned_pointer_as_index %[[A]]
// CHECK:         memref.extract_aligned_pointer_as_index %[[B]]
// CHECK:         memref.extract_aligned_pointer_as_index %[[C]]
// CHECK:         %[[FLAGS:[^ ]+]] = arith.constant 3735552 : i64
// CHECK:         call @tdf_gpu_contract(%[[FLAGS]],
// CHECK-NOT:     linalg.matmul
// CHECK:         return %[[C]]
func.func @matmul(%a: memref<8x4xf32>, %b: memref<4x16xf32>) -> memref<8x16xf32> {
  %zero = arith.constant 0.0 : f32
  %c = gpu.alloc () : memref<8x16xf32>
  linalg.fill ins(%zero : f32) outs(%c : memref<8x16xf32>)
  linalg.matmul ins(%a, %b : memref<8x4xf32>, memref<4x16xf32>) outs(%c : memref<8x16xf32>)
  return %c : memref<8x16xf32>
}

// A transposed operand (B stored as N x K, unit stride along K: cuBLAS's
// transpose flag) and an init that is a parameter: accumulate (bit 12).
// CHECK-LABEL: func.func @transposed_operand
// CHECK:         arith.constant 3739648 : i64
// CHECK:         call @tdf_gpu_contract
// CHECK-NOT:     linalg.matmul
#tb = affine_map<(m, n, k) -> (n, k)>
#ta = affine_map<(m, n, k) -> (m, k)>
#tc = affine_map<(m, n, k) -> (m, n)>
func.func @transposed_operand(%a: memref<8x4xf32>, %bt: memref<16x4xf32>, %c: memref<8x16xf32>) {
  linalg.matmul indexing_maps = [#ta, #tb, #tc]
      ins(%a, %bt : memref<8x4xf32>, memref<16x4xf32>) outs(%c : memref<8x16xf32>)
  return
}

// batch_matmul: one strided batch (kinds batch, M, N, K: 0 | 1 << 2 |
// 2 << 4 | 3 << 6 at bit 16, f64: types 1, 1, 1 = 0x111, accumulate 0x1000).
// CHECK-LABEL: func.func @batch_matmul
// CHECK:         arith.constant 14946577 : i64
// CHECK:         %[[RANK:[^ ]+]] = arith.constant 4 : i64
// CHECK:         call @tdf_gpu_contract({{.*}}, %[[RANK]],
// CHECK-NOT:     linalg.batch_matmul
func.func @batch_matmul(%a: memref<3x8x4xf64>, %b: memref<3x4x16xf64>, %c: memref<3x8x16xf64>) {
  linalg.batch_matmul ins(%a, %b : memref<3x8x4xf64>, memref<3x4x16xf64>) outs(%c : memref<3x8x16xf64>)
  return
}

// bf16 inputs of an f32 result (types 2, 2, 0: 0x22, accumulate):
// cublasGemmEx with CUDA_R_16BF inputs, CUBLAS_COMPUTE_32F.
// CHECK-LABEL: func.func @bf16_to_f32
// CHECK:         arith.constant 3739682 : i64
// CHECK:         call @tdf_gpu_contract
// CHECK-NOT:     linalg.matmul
func.func @bf16_to_f32(%a: memref<8x4xbf16>, %b: memref<4x16xbf16>, %c: memref<8x16xf32>) {
  linalg.matmul ins(%a, %b : memref<8x4xbf16>, memref<4x16xbf16>) outs(%c : memref<8x16xf32>)
  return
}

// Operands in tdf-plan-memory's arena, at disjoint byte ranges: no overlap,
// and the zero-filled output's fill is dropped (no accumulate bit).
// CHECK-LABEL: func.func @arena_views_disjoint
// CHECK-NOT:     linalg.fill
// CHECK:         arith.constant 3735552 : i64
// CHECK:         call @tdf_gpu_contract
func.func @arena_views_disjoint(%b: memref<4x16xf32>) {
  %zero = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : index
  %c128 = arith.constant 128 : index
  %arena = gpu.alloc () {tdf.arena} : memref<640xi8>
  %a = memref.view %arena[%c0][] : memref<640xi8> to memref<8x4xf32>
  %c = memref.view %arena[%c128][] : memref<640xi8> to memref<8x16xf32>
  linalg.fill ins(%zero : f32) outs(%c : memref<8x16xf32>)
  linalg.matmul ins(%a, %b : memref<8x4xf32>, memref<4x16xf32>) outs(%c : memref<8x16xf32>)
  return
}

// Layouts no cuBLAS call describes: an operand with no unit stride along
// either matrix dimension (a gather), and two M dimensions that do not merge.
// CHECK-LABEL: func.func @negative_layouts
// CHECK-NOT:     call @tdf_gpu_contract
// CHECK:         linalg.matmul
// CHECK:         linalg.generic
func.func @negative_layouts(%a: memref<8x4xf32, strided<[8, 2]>>, %b: memref<4x16xf32>,
                            %c: memref<8x16xf32>, %a3: memref<2x8x4xf32, strided<[4, 8, 1]>>,
                            %c3: memref<2x8x16xf32>) {
  // expected-remark @below {{not a cuBLAS contraction: operand A has no unit stride along M and K (or a leading dimension out of range)}}
  linalg.matmul ins(%a, %b : memref<8x4xf32, strided<[8, 2]>>, memref<4x16xf32>) outs(%c : memref<8x16xf32>)
  // expected-remark @below {{not a cuBLAS contraction: two M dimensions that no single GEMM dimension describes}}
  linalg.generic {indexing_maps = [affine_map<(i, m, n, k) -> (i, m, k)>,
                                   affine_map<(i, m, n, k) -> (k, n)>,
                                   affine_map<(i, m, n, k) -> (i, m, n)>],
                  iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%a3, %b : memref<2x8x4xf32, strided<[4, 8, 1]>>, memref<4x16xf32>) outs(%c3 : memref<2x8x16xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// Integer and mixed element types, and a dynamic shape (the layout cannot
// be decided at compile time): kernels.
// CHECK-LABEL: func.func @negative_types_and_dynamic
// CHECK-NOT:     call @tdf_gpu_contract
// CHECK:         linalg.matmul
// CHECK:         linalg.matmul
// CHECK:         linalg.matmul
func.func @negative_types_and_dynamic(%ai: memref<4x4xi32>, %ci: memref<4x4xi32>,
                                      %ab: memref<4x4xbf16>, %bh: memref<4x4xf16>, %c: memref<4x4xf32>,
                                      %ad: memref<?x4xf32>, %cd: memref<?x4xf32>, %b: memref<4x4xf32>) {
  // expected-remark @below {{not a cuBLAS contraction: element types i32, i32 -> i32}}
  linalg.matmul ins(%ai, %ai : memref<4x4xi32>, memref<4x4xi32>) outs(%ci : memref<4x4xi32>)
  // expected-remark @below {{not a cuBLAS contraction: element types bf16, f16 -> f32 are no cuBLAS GEMM}}
  linalg.matmul ins(%ab, %bh : memref<4x4xbf16>, memref<4x4xf16>) outs(%c : memref<4x4xf32>)
  // expected-remark @below {{not a cuBLAS contraction: a dynamic size or stride}}
  linalg.matmul ins(%ad, %b : memref<?x4xf32>, memref<4x4xf32>) outs(%cd : memref<?x4xf32>)
  return
}

// A slice at a dynamic offset (a scan step's x[t]): the layout is static,
// the offset is passed at run time (extract_strided_metadata), so one
// cuBLAS call runs it. A dynamic-offset slice of the result's own buffer
// is refused as a possible overlap (@negative_overlapping_output).
// CHECK-LABEL: func.func @dynamic_offset_slice
// CHECK:         %{{[^,]+}}, %[[OFF:[^,]+]], {{.*}} = memref.extract_strided_metadata %{{.*}} : memref<4x8xf32, strided<[8, 1], offset: ?>>
// CHECK:         %[[PTR:.*]] = memref.extract_aligned_pointer_as_index
// CHECK:         %[[PTR64:.*]] = arith.index_cast %[[PTR]] : index to i64
// CHECK:         %[[OFF64:.*]] = arith.index_cast %[[OFF]] : index to i64
// CHECK:         call @tdf_gpu_contract(%{{[^,]+}}, %[[PTR64]], %[[OFF64]],
// CHECK-NOT:     linalg.matmul
func.func @dynamic_offset_slice(%xs: memref<16x4x8xf32>, %w: memref<8x16xf32>, %c: memref<4x16xf32>, %t: index) {
  %x = memref.subview %xs[%t, 0, 0] [1, 4, 8] [1, 1, 1] : memref<16x4x8xf32> to memref<4x8xf32, strided<[8, 1], offset: ?>>
  linalg.matmul ins(%x, %w : memref<4x8xf32, strided<[8, 1], offset: ?>>, memref<8x16xf32>) outs(%c : memref<4x16xf32>)
  return
}

// The result overlaps an input: views of one device buffer whose byte
// ranges meet (or cannot be compared). cuBLAS is never handed them.
// CHECK-LABEL: func.func @negative_overlapping_output
// CHECK-NOT:     call @tdf_gpu_contract
// CHECK:         linalg.matmul
// CHECK:         linalg.matmul
func.func @negative_overlapping_output(%b: memref<4x4xf32>, %shift: index) {
  %c0 = arith.constant 0 : index
  %c32 = arith.constant 32 : index
  %buffer = gpu.alloc () : memref<256xi8>
  %a = memref.view %buffer[%c0][] : memref<256xi8> to memref<4x4xf32>
  %c = memref.view %buffer[%c32][] : memref<256xi8> to memref<4x4xf32>
  // expected-remark @below {{not a cuBLAS contraction: the result may overlap operand A (views of one buffer)}}
  linalg.matmul ins(%a, %b : memref<4x4xf32>, memref<4x4xf32>) outs(%c : memref<4x4xf32>)
  %d = memref.view %buffer[%shift][] : memref<256xi8> to memref<4x4xf32>
  // expected-remark @below {{not a cuBLAS contraction: the result may overlap operand A (views of one buffer)}}
  linalg.matmul ins(%a, %b : memref<4x4xf32>, memref<4x4xf32>) outs(%d : memref<4x4xf32>)
  return
}
