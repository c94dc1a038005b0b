// The library route of every contraction (codegen-flops=0: the small GEMMs
// below would otherwise stay for tdf-vectorize-contractions, see
// tdf-contractions-to-blas-codegen.mlir).
// RUN: tdf-opt %s --pass-pipeline="builtin.module(tdf-contractions-to-blas{codegen-flops=0})" | FileCheck %s
// RUN: tdf-opt %s --pass-pipeline="builtin.module(tdf-contractions-to-blas{codegen-flops=0 remarks})" --verify-diagnostics > /dev/null
// RUN: tdf-opt %s --pass-pipeline="builtin.module(tdf-contractions-to-blas{threads=3 codegen-flops=0})" | FileCheck %s --check-prefix=THREADS
// RUN: not tdf-opt %s --pass-pipeline="builtin.module(tdf-contractions-to-blas{threads=-1})" 2>&1 | FileCheck %s --check-prefix=BADOPT

// BADOPT: error: threads must be in 0..65535, got -1

// A matmul whose init was just filled with zero: the fill is dropped and the
// call overwrites the buffer. flags = f32 A, B, C (0), no accumulate bit,
// kinds M, N, K = 1 | 2 << 2 | 3 << 4 at bit 16: 0x390000 = 3735552.
// Per dimension: its size, then A's, B's and C's stride (0 where absent).
// CHECK-LABEL: func.func @matmul_zero_init
// CHECK-SAME:    (%[[A:[^:]+]]: memref<8x4xf32>, %[[B:[^:]+]]: memref<4x16xf32>)
// CHECK-NOT:     linalg.fill
// CHECK:         memref.extract_strided_metadata %[[A]]
// CHECK:         memref.extract_aligned_pointer_as_index %[[A]]
// CHECK:         memref.extract_strided_metadata %[[B]]
// CHECK:         %[[ZERO:[^ ]+]] = arith.constant 0 : i64
// CHECK:         %[[FLAGS:[^ ]+]] = arith.constant 3735552 : i64
// CHECK:         %[[RANK:[^ ]+]] = arith.constant 3 : i64
// CHECK:         call @tdf_rt_contract(%[[FLAGS]], {{.*}}, %[[RANK]], %{{[^,]+}}, %{{[^,]+}}, %[[ZERO]],
// CHECK-NOT:     linalg.matmul
// THREADS-LABEL: func.func @matmul_zero_init
// THREADS:       arith.constant 12888637440 : i64
func.func @matmul_zero_init(%a: memref<8x4xf32>, %b: memref<4x16xf32>) -> memref<8x16xf32> {
  %zero = arith.constant 0.0 : f32
  %c = memref.alloc() : memref<8x16xf32>
  linalg.fill ins(%zero : f32) outs(%c : memref<8x16xf32>)
  linalg.matmul ins(%a, %b : memref<8x4xf32>, memref<4x16xf32>) outs(%c : memref<8x16xf32>)
  return %c : memref<8x16xf32>
}

// An init that is an argument accumulates (bit 12: 3735552 + 4096), and so
// does one filled with a non-zero value (the fill stays).
// CHECK-LABEL: func.func @accumulate
// CHECK:         arith.constant 3739648 : i64
// CHECK:         call @tdf_rt_contract
// CHECK:         linalg.fill
// CHECK:         arith.constant 3739648 : i64
// CHECK:         call @tdf_rt_contract
func.func @accumulate(%a: memref<8x4xf32>, %b: memref<4x16xf32>, %c: memref<8x16xf32>) {
  linalg.matmul ins(%a, %b : memref<8x4xf32>, memref<4x16xf32>) outs(%c : memref<8x16xf32>)
  %one = arith.constant 1.0 : f32
  %d = memref.alloc() : memref<8x16xf32>
  linalg.fill ins(%one : f32) outs(%d : memref<8x16xf32>)
  linalg.matmul ins(%a, %b : memref<8x4xf32>, memref<4x16xf32>) outs(%d : memref<8x16xf32>)
  memref.dealloc %d : memref<8x16xf32>
  return
}

// A transposed, strided view of B: its strides go to the runtime as they are
// (no copy in the IR). bf16 inputs of an f32 result: types 2, 2, 0.
// CHECK-LABEL: func.func @strided_bf16
// CHECK-NOT:     memref.copy
// CHECK:         call @tdf_rt_contract
#bt = affine_map<(m, n, k) -> (n, k)>
#a = affine_map<(m, n, k) -> (m, k)>
#c = affine_map<(m, n, k) -> (m, n)>
func.func @strided_bf16(%a: memref<8x4xbf16>, %b: memref<16x4xbf16, strided<[8, 2]>>, %c: memref<8x16xf32>) {
  linalg.contract indexing_maps = [#a, #bt, #c]
      ins(%a, %b : memref<8x4xbf16>, memref<16x4xbf16, strided<[8, 2]>>) outs(%c : memref<8x16xf32>)
  return
}

// Batch, dynamic sizes, a generic with the contraction body.
// CHECK-LABEL: func.func @batched_generic
// CHECK:         call @tdf_rt_contract
// CHECK-NOT:     linalg.generic
func.func @batched_generic(%a: memref<?x?x?xf64>, %b: memref<?x?x?xf64>, %c: memref<?x?x?xf64>) {
  linalg.generic {indexing_maps = [affine_map<(b, m, n, k) -> (b, m, k)>,
                                   affine_map<(b, m, n, k) -> (b, k, n)>,
                                   affine_map<(b, m, n, k) -> (b, m, n)>],
                  iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<?x?x?xf64>, memref<?x?x?xf64>) outs(%c : memref<?x?x?xf64>) {
  ^bb0(%x: f64, %y: f64, %acc: f64):
    %p = arith.mulf %x, %y : f64
    %s = arith.addf %acc, %p : f64
    linalg.yield %s : f64
  }
  return
}

// Not contractions the BLAS takes: integers, a body that is not C + A * B,
// an f16 result, ops on tensors.
// CHECK-LABEL: func.func @left_alone
// CHECK-NOT:     call @tdf_rt_contract
// CHECK:         linalg.matmul
// CHECK:         linalg.generic
// CHECK:         linalg.matmul
// CHECK:         linalg.matmul
// CHECK:         return
func.func @left_alone(%ai: memref<4x4xi32>, %ci: memref<4x4xi32>, %a: memref<4x4xf32>,
                      %c: memref<4x4xf32>, %ah: memref<4x4xf16>, %ch: memref<4x4xf16>,
                      %t: tensor<4x4xf32>) -> tensor<4x4xf32> {
  // expected-remark @below {{not a BLAS contraction: element types i32, i32 -> i32}}
  linalg.matmul ins(%ai, %ai : memref<4x4xi32>, memref<4x4xi32>) outs(%ci : memref<4x4xi32>)
  // expected-remark @below {{not a BLAS contraction: the body is not C + A * B}}
  linalg.generic {indexing_maps = [#a, #bt, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %a : memref<4x4xf32>, memref<4x4xf32>) outs(%c : memref<4x4xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %e = math.exp %x : f32
    %p = arith.mulf %e, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  // expected-remark @below {{not a BLAS contraction: element types f16, f16 -> f16}}
  linalg.matmul ins(%ah, %ah : memref<4x4xf16>, memref<4x4xf16>) outs(%ch : memref<4x4xf16>)
  %r = linalg.matmul ins(%t, %t : tensor<4x4xf32>, tensor<4x4xf32>) outs(%t : tensor<4x4xf32>) -> tensor<4x4xf32>
  return %r : tensor<4x4xf32>
}

// An output in tdf-plan-memory's arena is a buffer of its own too: the zero
// fill before the contraction is dropped (beta = 0, bit 12 of the flags off).
// CHECK-LABEL: func.func @arena_output_drops_zero_fill
// CHECK-NOT: linalg.fill
// CHECK: call @tdf_rt_contract
func.func @arena_output_drops_zero_fill(%a: memref<8x4xf32>, %b: memref<4x16xf32>, %out: memref<8x16xf32>) {
  %z = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : index
  %arena = memref.alloc() {tdf.arena} : memref<512xi8>
  %c = memref.view %arena[%c0][] : memref<512xi8> to memref<8x16xf32>
  linalg.fill ins(%z : f32) outs(%c : memref<8x16xf32>)
  linalg.matmul ins(%a, %b : memref<8x4xf32>, memref<4x16xf32>) outs(%c : memref<8x16xf32>)
  memref.copy %c, %out : memref<8x16xf32> to memref<8x16xf32>
  memref.dealloc %arena : memref<512xi8>
  return
}


// negative_: an input that is a view of the output: the fill stays (the
// contraction must read the zeros it accumulates onto).
// CHECK-LABEL: func.func @negative_input_views_output
// CHECK: linalg.fill
// CHECK: call @tdf_rt_contract
func.func @negative_input_views_output(%b: memref<16x16xf32>, %out: memref<16x16xf32>) {
  %z = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : index
  %arena = memref.alloc() {tdf.arena} : memref<1024xi8>
  %c = memref.view %arena[%c0][] : memref<1024xi8> to memref<16x16xf32>
  %a = memref.subview %c[0, 0] [16, 16] [1, 1] : memref<16x16xf32> to memref<16x16xf32, strided<[16, 1]>>
  linalg.fill ins(%z : f32) outs(%c : memref<16x16xf32>)
  linalg.matmul ins(%a, %b : memref<16x16xf32, strided<[16, 1]>>, memref<16x16xf32>) outs(%c : memref<16x16xf32>)
  memref.copy %c, %out : memref<16x16xf32> to memref<16x16xf32>
  memref.dealloc %arena : memref<1024xi8>
  return
}

// A view of a fresh buffer that no input reads (a convolution's batch
// chunk: its rows of the result) drops its zero fill too.
// CHECK-LABEL: func.func @subview_of_fresh_output_drops_zero_fill
// CHECK-NOT: linalg.fill
// CHECK: call @tdf_rt_contract
// CHECK-NOT: linalg.fill
// CHECK: call @tdf_rt_contract
// CHECK-NOT: linalg.fill
// CHECK: return
func.func @subview_of_fresh_output_drops_zero_fill(%a: memref<16x4xf32>, %b: memref<4x16xf32>) -> memref<16x16xf32> {
  %z = arith.constant 0.0 : f32
  %out = memref.alloc() : memref<16x16xf32>
  %a0 = memref.subview %a[0, 0] [8, 4] [1, 1] : memref<16x4xf32> to memref<8x4xf32, strided<[4, 1]>>
  %a1 = memref.subview %a[8, 0] [8, 4] [1, 1] : memref<16x4xf32> to memref<8x4xf32, strided<[4, 1], offset: 32>>
  %c0 = memref.subview %out[0, 0] [8, 16] [1, 1] : memref<16x16xf32> to memref<8x16xf32, strided<[16, 1]>>
  linalg.fill ins(%z : f32) outs(%c0 : memref<8x16xf32, strided<[16, 1]>>)
  linalg.matmul ins(%a0, %b : memref<8x4xf32, strided<[4, 1]>>, memref<4x16xf32>) outs(%c0 : memref<8x16xf32, strided<[16, 1]>>)
  %c1 = memref.subview %out[8, 0] [8, 16] [1, 1] : memref<16x16xf32> to memref<8x16xf32, strided<[16, 1], offset: 128>>
  linalg.fill ins(%z : f32) outs(%c1 : memref<8x16xf32, strided<[16, 1], offset: 128>>)
  linalg.matmul ins(%a1, %b : memref<8x4xf32, strided<[4, 1], offset: 32>>, memref<4x16xf32>) outs(%c1 : memref<8x16xf32, strided<[16, 1], offset: 128>>)
  return %out : memref<16x16xf32>
}

// negative_: an input that views the same fresh buffer as the output (the
// first chunk's rows feeding the second's contraction): the fill stays.
// CHECK-LABEL: func.func @negative_input_views_output_buffer
// CHECK: call @tdf_rt_contract
// CHECK: linalg.fill
// CHECK: call @tdf_rt_contract
func.func @negative_input_views_output_buffer(%a: memref<8x16xf32>, %b: memref<16x16xf32>) -> memref<16x16xf32> {
  %z = arith.constant 0.0 : f32
  %out = memref.alloc() : memref<16x16xf32>
  %c0 = memref.subview %out[0, 0] [8, 16] [1, 1] : memref<16x16xf32> to memref<8x16xf32, strided<[16, 1]>>
  linalg.fill ins(%z : f32) outs(%c0 : memref<8x16xf32, strided<[16, 1]>>)
  linalg.matmul ins(%a, %b : memref<8x16xf32>, memref<16x16xf32>) outs(%c0 : memref<8x16xf32, strided<[16, 1]>>)
  %c1 = memref.subview %out[8, 0] [8, 16] [1, 1] : memref<16x16xf32> to memref<8x16xf32, strided<[16, 1], offset: 128>>
  linalg.fill ins(%z : f32) outs(%c1 : memref<8x16xf32, strided<[16, 1], offset: 128>>)
  linalg.matmul ins(%c0, %b : memref<8x16xf32, strided<[16, 1]>>, memref<16x16xf32>) outs(%c1 : memref<8x16xf32, strided<[16, 1], offset: 128>>)
  return %out : memref<16x16xf32>
}

// An operand with a non-strided layout map (no strides to pass) stays loops.
// CHECK-LABEL: func.func @non_strided
// CHECK-NOT:     call @tdf_rt_contract
// CHECK:         linalg.matmul
// The runtime function is declared once, at the end of the module.
// CHECK:       func.func private @tdf_rt_contract(i64{{(, i64)+}})
// CHECK-NOT:   @tdf_rt_contract(
func.func @non_strided(%a: memref<4x4xf32, affine_map<(d0, d1) -> (d1 floordiv 2, d0, d1 mod 2)>>,
                       %b: memref<4x4xf32>, %c: memref<4x4xf32>) {
  // expected-remark @below {{not a BLAS contraction: an operand's layout is not strided}}
  linalg.matmul ins(%a, %b : memref<4x4xf32, affine_map<(d0, d1) -> (d1 floordiv 2, d0, d1 mod 2)>>, memref<4x4xf32>)
                outs(%c : memref<4x4xf32>)
  return
}
