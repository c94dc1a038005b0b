// RUN: tdf-opt %s --tdf-insert-inplace --verify-diagnostics | FileCheck %s
// RUN: tdf-opt %s --tdf-insert-inplace --tdf-verify-inplace=strict | FileCheck %s

// Which kernel bodies keep the in-place promise: iteration i of one
// parallel loop reads index i of each input, then writes index i of each
// output. A body with a scalar operand, a transposed input, an op that
// reads an input after the output was written in its storage, a reduction
// or an op the analysis does not know is never run in place; a
// tdf.elementwise / tdf.inplace_ok attribute the body contradicts gets a
// warning naming the offending op.

#id = affine_map<(d0, d1) -> (d0, d1)>
#tr = affine_map<(d0, d1) -> (d1, d0)>
#sc = affine_map<(d0, d1) -> ()>

// Regression: with a scalar (rank-0 map) operand first, the maps were looked
// up one position off and the transposed %x passed as identity.
func.func private @scalar_then_transposed(%a: memref<4x4xf32>, %x: memref<4x4xf32>, %b: memref<4x4xf32>, %out: memref<4x4xf32>) {
  %s = arith.constant 1.0 : f32
  linalg.generic {indexing_maps = [#sc, #id, #tr, #id, #id], iterator_types = ["parallel", "parallel"]}
     ins(%s, %a, %x, %b : f32, memref<4x4xf32>, memref<4x4xf32>, memref<4x4xf32>) outs(%out : memref<4x4xf32>) {
  ^bb0(%vs: f32, %va: f32, %vx: f32, %vb: f32, %o: f32):
    %u = arith.addf %va, %vx : f32
    %w = arith.addf %u, %vb : f32
    linalg.yield %w : f32
  }
  return
}

// CHECK-LABEL: func.func @negative_transposed_next_to_scalar(
// CHECK: tdf.call @scalar_then_transposed
// CHECK-NOT: tdf.call_inplace
func.func @negative_transposed_next_to_scalar(%a: tensor<4x4xf32>, %x: tensor<4x4xf32> {tdf.donate}, %b: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %r = tdf.call @scalar_then_transposed(%a, %x, %b) : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %r : tensor<4x4xf32>
}

// The same kernel is element-wise on %a (identity map, scalar beside it).
// CHECK-LABEL: func.func @identity_next_to_scalar(
// CHECK-SAME: %[[A:[^:]*]]: tensor<4x4xf32> {tdf.donate}
// CHECK: tdf.call_inplace @scalar_then_transposed_inplace(%[[A]], %{{.*}}, %{{.*}}) inplace [0]
func.func @identity_next_to_scalar(%a: tensor<4x4xf32> {tdf.donate}, %x: tensor<4x4xf32>, %b: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %r = tdf.call @scalar_then_transposed(%a, %x, %b) : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %r : tensor<4x4xf32>
}

// Regression: every output element depends only on same-index inputs, but
// the second op reads %a after the first wrote %out: with %out in %a's
// storage, a = 2, b = 1 gives 9 instead of 6.
func.func private @add_then_mul(%a: memref<8xf32>, %b: memref<8xf32>, %out: memref<8xf32>) attributes {tdf.elementwise} {
  linalg.add ins(%a, %b : memref<8xf32>, memref<8xf32>) outs(%out : memref<8xf32>)
  // expected-warning@+1 {{@add_then_mul is marked tdf.elementwise but its body does not keep the promise for operand #0 and result #0: linalg.mul reads an input parameter of @add_then_mul (its operand #1) after linalg.add wrote output parameter #2 in its storage; not computed in place}}
  linalg.mul ins(%out, %a : memref<8xf32>, memref<8xf32>) outs(%out : memref<8xf32>)
  return
}

// CHECK-LABEL: func.func @negative_input_read_after_output_written(
// CHECK: tdf.call @add_then_mul
// CHECK-NOT: tdf.call_inplace
func.func @negative_input_read_after_output_written(%a: tensor<8xf32> {tdf.donate}, %b: tensor<8xf32>) -> tensor<8xf32> {
  %r = tdf.call @add_then_mul(%a, %b) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %r : tensor<8xf32>
}

// %b is read only by the first op: in place in %b is fine (and the op
// reading the output written earlier reads it through %out's name).
// CHECK-LABEL: func.func @second_input_read_once(
// CHECK-SAME: %[[A:[^:]*]]: tensor<8xf32>, %[[B:[^:]*]]: tensor<8xf32> {tdf.donate}
// CHECK: tdf.call_inplace @add_then_mul_inplace_1(%[[A]], %[[B]]) inplace [1]
func.func @second_input_read_once(%a: tensor<8xf32>, %b: tensor<8xf32> {tdf.donate}) -> tensor<8xf32> {
  %r = tdf.call @add_then_mul(%a, %b) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %r : tensor<8xf32>
}

// A reduction over the output is not element-wise.
func.func private @row_sum(%a: memref<4x4xf32>, %out: memref<4x4xf32>) attributes {tdf.inplace_ok = [[0, 0]]} {
  // expected-warning@+1 {{@row_sum is marked tdf.inplace_ok but its body does not keep the promise for operand #0 and result #0: linalg.generic writes output parameter #1 of @row_sum and is not element-wise (a reduction or a non-parallel loop)}}
  linalg.generic {indexing_maps = [#id, affine_map<(d0, d1) -> (d0, 0)>], iterator_types = ["parallel", "reduction"]}
     ins(%a : memref<4x4xf32>) outs(%out : memref<4x4xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %s = arith.addf %x, %acc : f32
    linalg.yield %s : f32
  }
  return
}

// CHECK-LABEL: func.func @negative_reduction(
// CHECK-NOT: tdf.call_inplace
func.func @negative_reduction(%a: tensor<4x4xf32> {tdf.donate}) -> tensor<4x4xf32> {
  %r = tdf.call @row_sum(%a) : (tensor<4x4xf32>) -> tensor<4x4xf32>
  return %r : tensor<4x4xf32>
}

// Explicit loops are not analysed: the attribute cannot be checked.
func.func private @loop(%a: memref<8xf32>, %out: memref<8xf32>) attributes {tdf.elementwise} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  scf.for %i = %c0 to %c8 step %c1 {
    %j = arith.subi %c8, %i : index
    %k = arith.subi %j, %c1 : index
    // expected-warning@+1 {{@loop is marked tdf.elementwise but its body does not keep the promise for operand #0 and result #0: memref.load uses input parameter #0 of @loop, and only linalg ops directly in the kernel's block are analysed; not computed in place}}
    %v = memref.load %a[%k] : memref<8xf32>
    memref.store %v, %out[%i] : memref<8xf32>
  }
  return
}

// CHECK-LABEL: func.func @negative_unanalysed_body(
// CHECK-NOT: tdf.call_inplace
func.func @negative_unanalysed_body(%a: tensor<8xf32> {tdf.donate}) -> tensor<8xf32> {
  %r = tdf.call @loop(%a) : (tensor<8xf32>) -> tensor<8xf32>
  return %r : tensor<8xf32>
}

// Reading the input any way before the output is first written is fine:
// the storage still holds the input then.
func.func private @sum_then_scale(%a: memref<4x4xf32>, %tmp: memref<4x4xf32>, %out: memref<4x4xf32>) {
  linalg.transpose ins(%a : memref<4x4xf32>) outs(%tmp : memref<4x4xf32>) permutation = [1, 0]
  linalg.add ins(%a, %tmp : memref<4x4xf32>, memref<4x4xf32>) outs(%out : memref<4x4xf32>)
  return
}

// CHECK-LABEL: func.func @transposed_read_before_first_write(
// CHECK-SAME: %[[A:[^:]*]]: tensor<4x4xf32> {tdf.donate}
// CHECK: tdf.call_inplace @sum_then_scale_inplace(%[[A]], %{{.*}}) inplace [0]
func.func @transposed_read_before_first_write(%a: tensor<4x4xf32> {tdf.donate}, %t: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %r = tdf.call @sum_then_scale(%a, %t) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %r : tensor<4x4xf32>
}

// The first writer must not read the output's old contents (its payload
// uses the output's block argument).
func.func private @accumulate(%a: memref<8xf32>, %out: memref<8xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
     ins(%a : memref<8xf32>) outs(%out : memref<8xf32>) {
  ^bb0(%x: f32, %o: f32):
    %s = arith.addf %x, %o : f32
    linalg.yield %s : f32
  }
  return
}

// CHECK-LABEL: func.func @negative_reads_old_output(
// CHECK-NOT: tdf.call_inplace
func.func @negative_reads_old_output(%a: tensor<8xf32> {tdf.donate}) -> tensor<8xf32> {
  %r = tdf.call @accumulate(%a) : (tensor<8xf32>) -> tensor<8xf32>
  return %r : tensor<8xf32>
}

// The in-place operand's storage read by the same call through another view
// (not the same value): the kernel reads it reversed while writing it.
func.func private @add_reversed(%a: memref<8xf32>, %b: memref<8xf32>, %out: memref<8xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (7 - d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
     ins(%a, %b : memref<8xf32>, memref<8xf32>) outs(%out : memref<8xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %s = arith.addf %x, %y : f32
    linalg.yield %s : f32
  }
  return
}

// CHECK-LABEL: func.func @negative_view_of_inplace_operand_read_by_same_call(
// CHECK: tdf.call @add_reversed
// CHECK-NOT: tdf.call_inplace
func.func @negative_view_of_inplace_operand_read_by_same_call(%x: tensor<8xf32> {tdf.donate}) -> tensor<8xf32> {
  %v = tensor.cast %x : tensor<8xf32> to tensor<8xf32>
  %r = tdf.call @add_reversed(%x, %v) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %r : tensor<8xf32>
}
