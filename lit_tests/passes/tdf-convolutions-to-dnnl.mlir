// RUN: tdf-opt %s --tdf-convolutions-to-dnnl | FileCheck %s
// RUN: tdf-opt %s --tdf-convolutions-to-dnnl=remarks --verify-diagnostics > /dev/null
// RUN: tdf-opt %s --pass-pipeline="builtin.module(tdf-convolutions-to-dnnl{threads=3})" | FileCheck %s --check-prefix=THREADS
// RUN: not tdf-opt %s --pass-pipeline="builtin.module(tdf-convolutions-to-dnnl{threads=-1})" 2>&1 | FileCheck %s --check-prefix=BADOPT

// BADOPT: error: threads must be in 0..65535, got -1

// A channels-last 2-d convolution whose output was just zeroed: the fill is
// dropped; the descriptor (42 words) holds each operand's pointer, offset,
// sizes and strides, then the window strides and dilations. flags = spatial
// rank 2, channels last (bit 2 clear).
// CHECK-LABEL: func.func @nhwc_zero_init
// CHECK-NOT:     linalg.fill
// CHECK:         %[[DESC:.+]] = memref.alloca() : memref<42xi64>
// CHECK:         memref.extract_strided_metadata %arg0
// CHECK:         memref.extract_aligned_pointer_as_index %arg0
// CHECK:         %[[FLAGS:.+]] = arith.constant 2 : i64
// CHECK:         %[[PTR:.+]] = memref.extract_aligned_pointer_as_index %[[DESC]]
// CHECK:         %[[ADDR:.+]] = arith.index_cast %[[PTR]] : index to i64
// CHECK:         call @tdf_rt_conv(%[[FLAGS]], %[[ADDR]]) : (i64, i64) -> ()
// CHECK-NOT:     linalg.conv_2d_nhwc_hwcf
// THREADS-LABEL: func.func @nhwc_zero_init
// THREADS:       arith.constant 12884901890 : i64
func.func @nhwc_zero_init(%x: memref<2x9x9x4xf32>, %w: memref<3x3x4x8xf32>) -> memref<2x4x4x8xf32> {
  %zero = arith.constant 0.0 : f32
  %y = memref.alloc() : memref<2x4x4x8xf32>
  linalg.fill ins(%zero : f32) outs(%y : memref<2x4x4x8xf32>)
  linalg.conv_2d_nhwc_hwcf {strides = dense<2> : tensor<2xi64>, dilations = dense<1> : tensor<2xi64>}
    ins(%x, %w : memref<2x9x9x4xf32>, memref<3x3x4x8xf32>) outs(%y : memref<2x4x4x8xf32>)
  return %y : memref<2x4x4x8xf32>
}

// Channels first, 1-d: flags = 1 | 1 << 2.
// CHECK-LABEL: func.func @ncw
// CHECK:         arith.constant 5 : i64
// CHECK:         call @tdf_rt_conv
func.func @ncw(%x: memref<2x4x9xf32>, %w: memref<8x4x3xf32>) -> memref<2x8x7xf32> {
  %zero = arith.constant 0.0 : f32
  %y = memref.alloc() : memref<2x8x7xf32>
  linalg.fill ins(%zero : f32) outs(%y : memref<2x8x7xf32>)
  linalg.conv_1d_ncw_fcw ins(%x, %w : memref<2x4x9xf32>, memref<8x4x3xf32>) outs(%y : memref<2x8x7xf32>)
  return %y : memref<2x8x7xf32>
}

// negative_accumulates: the output is not zeroed right before: the
// convolution adds to it, which the call does not do; it stays loops.
// CHECK-LABEL: func.func @negative_accumulates
// CHECK-NOT:     call @tdf_rt_conv
// CHECK:         linalg.conv_2d_nhwc_hwcf
func.func @negative_accumulates(%x: memref<2x9x9x4xf32>, %w: memref<3x3x4x8xf32>, %y: memref<2x7x7x8xf32>) {
  // expected-remark @below {{not a oneDNN convolution: its output is not filled with zero right before (it accumulates)}}
  linalg.conv_2d_nhwc_hwcf ins(%x, %w : memref<2x9x9x4xf32>, memref<3x3x4x8xf32>) outs(%y : memref<2x7x7x8xf32>)
  return
}

// negative_f64: only float32 goes to oneDNN.
// CHECK-LABEL: func.func @negative_f64
// CHECK-NOT:     call @tdf_rt_conv
// CHECK:         linalg.conv_1d_nwc_wcf
func.func @negative_f64(%x: memref<2x9x4xf64>, %w: memref<3x4x8xf64>) -> memref<2x7x8xf64> {
  %zero = arith.constant 0.0 : f64
  %y = memref.alloc() : memref<2x7x8xf64>
  linalg.fill ins(%zero : f64) outs(%y : memref<2x7x8xf64>)
  // expected-remark @below {{not a oneDNN convolution: not float32}}
  linalg.conv_1d_nwc_wcf ins(%x, %w : memref<2x9x4xf64>, memref<3x4x8xf64>) outs(%y : memref<2x7x8xf64>)
  return %y : memref<2x7x8xf64>
}

// negative_on_tensors: before bufferization nothing happens (no remark).
// CHECK-LABEL: func.func @negative_on_tensors
// CHECK:         linalg.conv_2d_nhwc_hwcf
// CHECK:         func.func private @tdf_rt_conv(i64, i64)
func.func @negative_on_tensors(%x: tensor<2x9x9x4xf32>, %w: tensor<3x3x4x8xf32>, %y: tensor<2x7x7x8xf32>) -> tensor<2x7x7x8xf32> {
  %r = linalg.conv_2d_nhwc_hwcf ins(%x, %w : tensor<2x9x9x4xf32>, tensor<3x3x4x8xf32>) outs(%y : tensor<2x7x7x8xf32>) -> tensor<2x7x7x8xf32>
  return %r : tensor<2x7x7x8xf32>
}
