// RUN: tdf-opt %s --test-tdf-alias | FileCheck %s

// tdf.alias_class: one class number per result (numbered in order of first
// appearance, function arguments first); tdf.arg_alias_class for block
// arguments; tdf.escaped when a result may alias an escaped value.

func.func private @exp(memref<4xf32>, memref<4xf32>)
func.func private @addone(memref<4xf32>) attributes {tdf.elementwise}
func.func private @keep(memref<4xf32>) -> memref<4xf32>

// CHECK-LABEL: func.func @views(
// CHECK-SAME: tdf.arg_alias_class = array<i64: 0>
// CHECK: tensor.expand_shape {{.*}} {tdf.alias_class = array<i64: 0>}
// CHECK: tensor.collapse_shape {{.*}} {tdf.alias_class = array<i64: 0>}
// CHECK: tensor.extract_slice {{.*}} {tdf.alias_class = array<i64: 0>}
// CHECK: tensor.cast {{.*}} {tdf.alias_class = array<i64: 0>}
// CHECK: tensor.bitcast {{.*}} {tdf.alias_class = array<i64: 0>}
// CHECK: tdf.call @exp({{.*}}) {tdf.alias_class = array<i64: [[FRESH:[0-9]+]]>}
// CHECK-NOT: array<i64: 0>
func.func @views(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<2xf32>, tensor<?xf32>, tensor<4xi32>, tensor<4xf32>) {
  %e = tensor.expand_shape %x [[0, 1]] output_shape [2, 2] : tensor<4xf32> into tensor<2x2xf32>
  %c = tensor.collapse_shape %e [[0, 1]] : tensor<2x2xf32> into tensor<4xf32>
  %s = tensor.extract_slice %c[0] [2] [1] : tensor<4xf32> to tensor<2xf32>
  %d = tensor.cast %x : tensor<4xf32> to tensor<?xf32>
  %b = tensor.bitcast %x : tensor<4xf32> to tensor<4xi32>
  %f = tdf.call @exp(%c) : (tensor<4xf32>) -> tensor<4xf32>
  return %c, %s, %d, %b, %f : tensor<4xf32>, tensor<2xf32>, tensor<?xf32>, tensor<4xi32>, tensor<4xf32>
}

// scf.for: init, iter_arg, yielded value and result are one class.
// CHECK-LABEL: func.func @loop(
// CHECK: tensor.empty() {tdf.alias_class = array<i64: [[E:[0-9]+]]>}
// CHECK: scf.for
// CHECK: tdf.call_inplace @addone({{.*}}tdf.alias_class = array<i64: [[E]]>}
// CHECK: } {tdf.alias_class = array<i64: [[E]]>, tdf.arg_alias_class = array<i64: -1, [[E]]>}
func.func @loop() -> tensor<4xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %e = tensor.empty() : tensor<4xf32>
  %r = scf.for %i = %c0 to %c1 step %c1 iter_args(%acc = %e) -> tensor<4xf32> {
    %n = tdf.call_inplace @addone(%acc) inplace [0] : (tensor<4xf32>) -> tensor<4xf32>
    scf.yield %n : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}

// scf.if results alias what both branches yield.
// CHECK-LABEL: func.func @branch(
// CHECK-SAME: tdf.arg_alias_class = array<i64: -1, 0, 0>
// CHECK: scf.if
// CHECK: } {tdf.alias_class = array<i64: 0>}
func.func @branch(%c: i1, %x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  %r = scf.if %c -> tensor<4xf32> {
    scf.yield %x : tensor<4xf32>
  } else {
    scf.yield %y : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}

// The opaque call is a black hole: its operand and every opaque result share
// one escaped class (with %y, which escapes later); assume_unaliased starts
// a fresh one.
// CHECK-LABEL: func.func @opaque(
// CHECK-SAME: %[[X:[^:]+]]: {{[^%]*}}%[[Y:[^:]+]]:
// CHECK-SAME: tdf.arg_alias_class = array<i64: 0, 0>
// CHECK: tdf.call_opaque @keep(%[[X]]) {tdf.alias_class = array<i64: 0>, tdf.escaped}
// CHECK: tdf.assume_unaliased %{{[^ ]*}} {tdf.alias_class = array<i64: 1>} :
// CHECK: tdf.call_opaque @keep(%[[Y]]) {tdf.alias_class = array<i64: 0>, tdf.escaped}
func.func @opaque(%x: tensor<4xf32>, %y: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %k = tdf.call_opaque @keep(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %u = tdf.assume_unaliased %k : tensor<4xf32>
  %l = tdf.call_opaque @keep(%y) : (tensor<4xf32>) -> tensor<4xf32>
  return %k, %u, %l : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// tdf.call_inplace result i aliases operand inplace[i]; -1 is fresh;
// destination-style results alias their destination.
// CHECK-LABEL: func.func @inplace_and_dest(
// CHECK-SAME: tdf.arg_alias_class = array<i64: 0, 1>
// CHECK: tdf.call_inplace {{.*}}tdf.alias_class = array<i64: 0>}
// CHECK: tensor.insert_slice {{.*}} {tdf.alias_class = array<i64: 1>}
// CHECK: tensor.empty() {tdf.alias_class = array<i64: [[E:[0-9]+]]>}
// CHECK: linalg.exp {tdf.alias_class = array<i64: [[E]]>}
func.func @inplace_and_dest(%x: tensor<4xf32>, %y: tensor<8xf32>) -> (tensor<4xf32>, tensor<8xf32>, tensor<4xf32>) {
  %a = tdf.call_inplace @addone(%x) inplace [0] : (tensor<4xf32>) -> tensor<4xf32>
  %b = tensor.insert_slice %a into %y[0] [4] [1] : tensor<4xf32> into tensor<8xf32>
  %e = tensor.empty() : tensor<4xf32>
  %c = linalg.exp ins(%a : tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  return %a, %b, %c : tensor<4xf32>, tensor<8xf32>, tensor<4xf32>
}

// scf.forall: the shared_outs block argument aliases its init and the loop
// result; tensor.parallel_insert_slice (no result) writes into it. A
// tdf.call_inplace on a row view stays in that class. Regression: the
// analysis indexed the missing result of parallel_insert_slice (IndexError).
// CHECK-LABEL: func.func @forall_call_inplace(
// CHECK-SAME: tdf.arg_alias_class = array<i64: 0, 1>
// CHECK: tensor.extract_slice {{.*}} {tdf.alias_class = array<i64: 0>}
// CHECK: tdf.call_inplace @addone({{.*}}) inplace [0] {tdf.alias_class = array<i64: 0>}
// CHECK: tensor.parallel_insert_slice
// CHECK: } {tdf.alias_class = array<i64: 0>, tdf.arg_alias_class = array<i64: -1, 0>}
func.func @forall_call_inplace(%rows: tensor<8x4xf32> {tdf.donate}, %other: tensor<4xf32>) -> tensor<8x4xf32> {
  %r = scf.forall (%i) in (8) shared_outs(%out = %rows) -> (tensor<8x4xf32>) {
    %row = tensor.extract_slice %out[%i, 0] [1, 4] [1, 1] : tensor<8x4xf32> to tensor<4xf32>
    %new = tdf.call_inplace @addone(%row) inplace [0] : (tensor<4xf32>) -> tensor<4xf32>
    scf.forall.in_parallel {
      tensor.parallel_insert_slice %new into %out[%i, 0] [1, 4] [1, 1] : tensor<4xf32> into tensor<8x4xf32>
    }
  }
  return %r : tensor<8x4xf32>
}

// func.call of a function with a body: each result joins the classes of the
// arguments the callee may return (its own analysis), a fresh result starts
// a class, and the operands stay apart.
func.func private @first_and_fresh(%t: tensor<4xf32>, %u: tensor<4xf32>) -> (tensor<2xf32>, tensor<4xf32>) {
  %s = tensor.extract_slice %t[0] [2] [1] : tensor<4xf32> to tensor<2xf32>
  %e = tensor.empty() : tensor<4xf32>
  %f = linalg.add ins(%t, %u : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  return %s, %f : tensor<2xf32>, tensor<4xf32>
}
// CHECK-LABEL: func.func @call_defined(
// CHECK-SAME: tdf.arg_alias_class = array<i64: 0, 1>
// CHECK: call @first_and_fresh({{.*}}) {tdf.alias_class = array<i64: 0, 2>}
func.func @call_defined(%x: tensor<4xf32>, %y: tensor<4xf32>) -> (tensor<2xf32>, tensor<4xf32>) {
  %r:2 = func.call @first_and_fresh(%x, %y) : (tensor<4xf32>, tensor<4xf32>) -> (tensor<2xf32>, tensor<4xf32>)
  return %r#0, %r#1 : tensor<2xf32>, tensor<4xf32>
}

// A declaration says nothing: its results and operands are one class.
func.func private @declared(tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// CHECK-LABEL: func.func @call_declared(
// CHECK-SAME: tdf.arg_alias_class = array<i64: 0, 0>
// CHECK: call @declared({{.*}}) {tdf.alias_class = array<i64: 0>}
func.func @call_declared(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  %r = func.call @declared(%x, %y) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}
