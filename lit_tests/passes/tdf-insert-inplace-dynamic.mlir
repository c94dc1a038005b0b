// RUN: tdf-opt %s --tdf-insert-inplace=remarks --verify-diagnostics | FileCheck %s
// RUN: tdf-opt %s --tdf-insert-inplace --one-shot-bufferize="%one_shot_options" --canonicalize | FileCheck %s --check-prefix=BUF

// The in-place rules with dynamic shapes. A fresh dynamic result of a
// tdf.call takes its sizes from the shape operand (the first tensor operand of
// its rank); another operand of the same type fits it only when its sizes are
// provably the same (the same value, the same tensor.empty size values, or
// dimensions of the same value), never because the types are equal.

#id = affine_map<(d0) -> (d0)>
func.func private @add(%a: memref<?xf32>, %b: memref<?xf32>, %out: memref<?xf32>) {
  linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
     ins(%a, %b : memref<?xf32>, memref<?xf32>) outs(%out : memref<?xf32>) {
  ^bb0(%va: f32, %vb: f32, %o: f32):
    %w = arith.addf %va, %vb : f32
    linalg.yield %w : f32
  }
  return
}

// The shape operand itself fits.
// CHECK-LABEL: func.func @shape_operand_fits(
// CHECK-SAME: %[[X:[^:]*]]: tensor<?xf32> {tdf.donate}
// CHECK: tdf.call_inplace @add_inplace(%[[X]], %{{.*}}) inplace [0] : (tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32>
// BUF-LABEL: func.func @shape_operand_fits(
// BUF-SAME: %[[X:[^:]*]]: memref<?xf32>
// BUF-NOT: memref.alloc
// BUF-NOT: memref.copy
// BUF: return %[[X]]
func.func @shape_operand_fits(%x: tensor<?xf32> {tdf.donate}, %y: tensor<?xf32>) -> tensor<?xf32> {
  %r = tdf.call @add(%x, %y) : (tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32>
  return %r : tensor<?xf32>
}

// The second operand has the same type but maybe another size: the result
// (sized like %x) must not be written into %y's storage.
// CHECK-LABEL: func.func @negative_same_type_other_size(
// CHECK: tdf.call @add
// CHECK-NOT: tdf.call_inplace
func.func @negative_same_type_other_size(%x: tensor<?xf32>, %y: tensor<?xf32> {tdf.donate}) -> tensor<?xf32> {
  // expected-remark@+2 {{in-place rejected (owned): operand #0 (%arg0) is a function argument that is not donated}}
  // expected-remark@+1 {{in-place rejected (fits): operand #1 (%arg1) is not provably of the size of result #0, which takes its dynamic sizes from %arg0}}
  %r = tdf.call @add(%x, %y) : (tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32>
  return %r : tensor<?xf32>
}

// Provably equal: %y is the result of a call whose shape operand is %x.
// CHECK-LABEL: func.func @provably_equal_through_call(
// CHECK-SAME:  %[[X:[^:]+]]:
// CHECK: %[[T:.*]] = tdf.call @add(%[[X]], %[[X]])
// CHECK: tdf.call_inplace @add_inplace{{.*}}(%[[X]], %[[T]]) inplace [1]
func.func @provably_equal_through_call(%x: tensor<?xf32>) -> tensor<?xf32> {
  // expected-remark@+2 {{in-place rejected (owned): operand #0 (%arg0) is a function argument that is not donated}}
  // expected-remark@+1 {{in-place rejected (owned): operand #1 (%arg0) is a function argument that is not donated}}
  %t = tdf.call @add(%x, %x) : (tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32>
  // expected-remark@+1 {{in-place rejected (owned): operand #0 (%arg0) is a function argument that is not donated}}
  %r = tdf.call @add(%x, %t) : (tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32>
  return %r : tensor<?xf32>
}

// Provably equal: both sized by the same SSA value (tensor.empty) or by a
// tensor.dim of the same value.
func.func private @fill(%v: memref<?xf32>) attributes {tdf.elementwise} {
  %one = arith.constant 1.0 : f32
  linalg.fill ins(%one : f32) outs(%v : memref<?xf32>)
  return
}
// CHECK-LABEL: func.func @provably_equal_same_sizes(
// CHECK-SAME:  %[[X:[^:]+]]:
// CHECK: tdf.call_inplace @fill(
// CHECK: %[[B:.*]] = tdf.call_inplace @fill(
// CHECK: %[[R:.*]] = tdf.call_inplace @add_inplace{{.*}}(%[[X]], %[[B]]) inplace [1]
// CHECK: tdf.call_inplace @add_inplace{{.*}}(%[[R]], %{{.*}}) inplace [0]
func.func @provably_equal_same_sizes(%x: tensor<?xf32>) -> tensor<?xf32> {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %x, %c0 : tensor<?xf32>
  %a = tensor.empty(%n) : tensor<?xf32>
  %b0 = tensor.empty(%n) : tensor<?xf32>
  %fa = tdf.call_inplace @fill(%a) inplace [0] : (tensor<?xf32>) -> tensor<?xf32>
  %b = tdf.call_inplace @fill(%b0) inplace [0] : (tensor<?xf32>) -> tensor<?xf32>
  // expected-remark@+1 {{in-place rejected (owned): operand #0 (%arg0) is a function argument that is not donated}}
  %r = tdf.call @add(%x, %b) : (tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32>
  %s = tdf.call @add(%r, %fa) : (tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32>
  return %s : tensor<?xf32>
}

// Two unrelated size values: not provably equal.
// CHECK-LABEL: func.func @negative_different_size_values(
// CHECK: tdf.call @add
// CHECK-NOT: tdf.call_inplace @add_inplace
func.func @negative_different_size_values(%x: tensor<?xf32>, %m: index) -> tensor<?xf32> {
  %b0 = tensor.empty(%m) : tensor<?xf32>
  %b = tdf.call_inplace @fill(%b0) inplace [0] : (tensor<?xf32>) -> tensor<?xf32>
  // expected-remark@+2 {{in-place rejected (owned): operand #0 (%arg0) is a function argument that is not donated}}
  // expected-remark@+1 {{in-place rejected (fits): operand #1 (%1) is not provably of the size of result #0, which takes its dynamic sizes from %arg0}}
  %r = tdf.call @add(%x, %b) : (tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32>
  return %r : tensor<?xf32>
}

// A dynamic operand never fits a static result (nor the other way round).
func.func private @add_static(%a: memref<?xf32>, %b: memref<?xf32>, %out: memref<4xf32>) attributes {tdf.elementwise, tdf.inplace_ok = [[0, 0]]}
// CHECK-LABEL: func.func @negative_dynamic_operand_static_result(
// CHECK: tdf.call @add_static
// CHECK-NOT: tdf.call_inplace
func.func @negative_dynamic_operand_static_result(%x: tensor<?xf32> {tdf.donate}, %y: tensor<?xf32>) -> tensor<4xf32> {
  // expected-remark@+2 {{in-place rejected (fits): operand #0 (%arg0) has type tensor<?xf32>, result #0 needs tensor<4xf32>}}
  // expected-remark@+1 {{in-place rejected (fits): operand #1 (%arg1) has type tensor<?xf32>, result #0 needs tensor<4xf32>}}
  %r = tdf.call @add_static(%x, %y) : (tensor<?xf32>, tensor<?xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// The other rules hold as for static shapes: a non-donated dynamic argument
// is not owned.
// CHECK-LABEL: func.func @negative_dynamic_not_donated(
// CHECK: tdf.call @add
// CHECK-NOT: tdf.call_inplace
func.func @negative_dynamic_not_donated(%x: tensor<?xf32>, %y: tensor<?xf32>) -> tensor<?xf32> {
  // expected-remark@+2 {{in-place rejected (owned): operand #0 (%arg0) is a function argument that is not donated}}
  // expected-remark@+1 {{in-place rejected (fits): operand #1 (%arg1) is not provably of the size of result #0, which takes its dynamic sizes from %arg0}}
  %r = tdf.call @add(%x, %y) : (tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32>
  return %r : tensor<?xf32>
}

// ... and a dynamic operand read later is not dead.
// CHECK-LABEL: func.func @negative_dynamic_still_read(
// CHECK: tdf.call @add
// CHECK-NOT: tdf.call_inplace
func.func @negative_dynamic_still_read(%x: tensor<?xf32> {tdf.donate}, %y: tensor<?xf32>) -> (tensor<?xf32>, tensor<?xf32>) {
  // expected-remark@+2 {{in-place rejected (dead): operand #0 (%arg0) is still used by func.return (a function result)}}
  // expected-remark@+1 {{in-place rejected (fits): operand #1 (%arg1) is not provably of the size of result #0, which takes its dynamic sizes from %arg0}}
  %r = tdf.call @add(%x, %y) : (tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32>
  return %r, %x : tensor<?xf32>, tensor<?xf32>
}

// A kernel with a dynamic body is proven element-wise and gets an in-place
// variant.
func.func private @twice(%a: memref<?xf32>, %out: memref<?xf32>) {
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
     ins(%a : memref<?xf32>) outs(%out : memref<?xf32>) {
  ^bb0(%va: f32, %o: f32):
    %w = arith.addf %va, %va : f32
    linalg.yield %w : f32
  }
  return
}
// CHECK-LABEL: func.func @dynamic_body_inplace(
// CHECK-SAME:  %[[X:[^:]+]]:
// CHECK: tdf.call_inplace @twice_inplace(%[[X]]) inplace [0]
func.func @dynamic_body_inplace(%x: tensor<?xf32> {tdf.donate}) -> tensor<?xf32> {
  %r = tdf.call @twice(%x) : (tensor<?xf32>) -> tensor<?xf32>
  return %r : tensor<?xf32>
}
