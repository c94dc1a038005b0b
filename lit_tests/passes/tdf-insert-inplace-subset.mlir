// RUN: tdf-opt %s --tdf-verify-inplace --verify-diagnostics | FileCheck %s

// The dead rule for an in-place operand that is a slice %s of %d: writing
// %s's storage is no read of %d's old contents when the only other use of %d
// is an insert_slice overwriting exactly that region (what a concat of
// computed parts is rewritten to). Any other later read of %d still counts.

func.func private @log_strided(%x: memref<1x8xf32>, %out: memref<1x8xf32, strided<[8, 1], offset: ?>>) {
  linalg.log ins(%x : memref<1x8xf32>) outs(%out : memref<1x8xf32, strided<[8, 1], offset: ?>>)
  return
}

// CHECK-LABEL: func.func @slice_overwritten(
func.func @slice_overwritten(%y: tensor<1x8xf32>) -> tensor<2x8xf32> {
  %d = tensor.empty() : tensor<2x8xf32>
  %s = tensor.extract_slice %d[1, 0] [1, 8] [1, 1] : tensor<2x8xf32> to tensor<1x8xf32>
  %z = tdf.call_inplace @log_strided(%y, %s) inplace [1] : (tensor<1x8xf32>, tensor<1x8xf32>) -> tensor<1x8xf32>
  %r = tensor.insert_slice %z into %d[1, 0] [1, 8] [1, 1] : tensor<1x8xf32> into tensor<2x8xf32>
  return %r : tensor<2x8xf32>
}

// CHECK-LABEL: func.func @negative_slice_source_read_again(
func.func @negative_slice_source_read_again(%y: tensor<1x8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>) {
  %d = tensor.empty() : tensor<2x8xf32>
  %s = tensor.extract_slice %d[1, 0] [1, 8] [1, 1] : tensor<2x8xf32> to tensor<1x8xf32>
  // expected-warning@+1 {{in-place operand #1 (%extracted_slice) may share storage with %0, which is still used by func.return (a function result) (unaliased); a copy will be made}}
  %z = tdf.call_inplace @log_strided(%y, %s) inplace [1] : (tensor<1x8xf32>, tensor<1x8xf32>) -> tensor<1x8xf32>
  %r = tensor.insert_slice %z into %d[1, 0] [1, 8] [1, 1] : tensor<1x8xf32> into tensor<2x8xf32>
  return %r, %d : tensor<2x8xf32>, tensor<2x8xf32>
}

// CHECK-LABEL: func.func @negative_slice_other_region(
func.func @negative_slice_other_region(%y: tensor<1x8xf32>) -> tensor<2x8xf32> {
  %d = tensor.empty() : tensor<2x8xf32>
  %s = tensor.extract_slice %d[1, 0] [1, 8] [1, 1] : tensor<2x8xf32> to tensor<1x8xf32>
  // expected-warning@+1 {{in-place operand #1 (%extracted_slice) may share storage with %0, which is still used by %inserted_slice (tensor.insert_slice) (unaliased); a copy will be made}}
  %z = tdf.call_inplace @log_strided(%y, %s) inplace [1] : (tensor<1x8xf32>, tensor<1x8xf32>) -> tensor<1x8xf32>
  %r = tensor.insert_slice %z into %d[0, 0] [1, 8] [1, 1] : tensor<1x8xf32> into tensor<2x8xf32>
  return %r : tensor<2x8xf32>
}
