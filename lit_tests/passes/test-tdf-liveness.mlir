// RUN: tdf-opt %s --test-tdf-liveness | FileCheck %s

// tdf.last_use lists the operand numbers whose tensor dies at the op;
// tdf.live_through names tensors from outside a region op that die inside it.

func.func private @exp(memref<4xf32>, memref<4xf32>)
func.func private @add(memref<4xf32>, memref<4xf32>, memref<4xf32>)

// CHECK-LABEL: func.func @straight_line(
// CHECK: %[[Y:.*]] = tdf.call @exp(%{{.*}}) : (tensor<4xf32>)
// CHECK: %[[Z:.*]] = tdf.call @add(%{{.*}}, %[[Y]]) {tdf.last_use = array<i64: 0, 1>}
// CHECK: tdf.call @add(%[[Z]], %[[Z]]) {tdf.last_use = array<i64: 0, 1>}
// CHECK: return {tdf.last_use = array<i64: 0>}
func.func @straight_line(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = tdf.call @exp(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %z = tdf.call @add(%x, %y) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %w = tdf.call @add(%z, %z) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %w : tensor<4xf32>
}

// A function result is a use: returning %x keeps it live past the call.
// CHECK-LABEL: func.func @negative_returned(
// CHECK: tdf.call @exp(%{{.*}}) : (tensor<4xf32>)
// CHECK: return {tdf.last_use = array<i64: 0, 1>}
func.func @negative_returned(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %y = tdf.call @exp(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %x, %y : tensor<4xf32>, tensor<4xf32>
}

// A use inside a loop keeps an outer value live for the whole loop; the
// iter_arg is its own value and dies at its last use in the body.
// CHECK-LABEL: func.func @loop(
// CHECK-SAME:  %[[X:[^:]+]]:
// CHECK: scf.for
// CHECK: tdf.call @add(%{{.*}}, %{{.*}}) {tdf.last_use = array<i64: 1>}
// CHECK: scf.yield {tdf.last_use = array<i64: 0>}
// CHECK: } {tdf.last_use = array<i64: 3>, tdf.live_through = ["%[[X]]"]}
func.func @loop(%x: tensor<4xf32>, %init: tensor<4xf32>) -> tensor<4xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %c1 step %c1 iter_args(%acc = %init) -> tensor<4xf32> {
    %n = tdf.call @add(%x, %acc) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    scf.yield %n : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}

// Used in the loop and after it: not live-through, not a last use in the body.
// CHECK-LABEL: func.func @negative_loop_then_later(
// CHECK: tdf.call @add(%{{.*}}, %{{.*}}) {tdf.last_use = array<i64: 1>}
// CHECK: } {tdf.last_use = array<i64: 3>}
// CHECK: tdf.call @add(%{{.*}}, %{{.*}}) {tdf.last_use = array<i64: 0, 1>}
func.func @negative_loop_then_later(%x: tensor<4xf32>, %init: tensor<4xf32>) -> tensor<4xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %c1 step %c1 iter_args(%acc = %init) -> tensor<4xf32> {
    %n = tdf.call @add(%x, %acc) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    scf.yield %n : tensor<4xf32>
  }
  %s = tdf.call @add(%x, %r) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %s : tensor<4xf32>
}

// scf.if: a use in the then-branch is the last one when nothing follows;
// %y is yielded by the else-branch but read after the if.
// CHECK-LABEL: func.func @branch(
// CHECK-SAME:  %{{[^:]+}}: {{[^%]*}}%[[X:[^:]+]]:
// CHECK: tdf.call @exp(%{{.*}}) {tdf.last_use = array<i64: 0>}
// CHECK: scf.yield {tdf.last_use = array<i64: 0>}
// CHECK: } else {
// CHECK-NEXT: scf.yield %{{.*}} : tensor<4xf32>
// CHECK: } {tdf.live_through = ["%[[X]]"]}
// CHECK: tdf.call @add(%{{.*}}, %{{.*}}) {tdf.last_use = array<i64: 0, 1>}
func.func @branch(%c: i1, %x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  %r = scf.if %c -> tensor<4xf32> {
    %a = tdf.call @exp(%x) : (tensor<4xf32>) -> tensor<4xf32>
    scf.yield %a : tensor<4xf32>
  } else {
    scf.yield %y : tensor<4xf32>
  }
  %s = tdf.call @add(%r, %y) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %s : tensor<4xf32>
}

// Several blocks: conservative. A value from another block is never dead
// in this block; values of the block itself (and its arguments) are.
// CHECK-LABEL: func.func @cfg(
// CHECK: ^bb1:
// CHECK-NEXT: %[[B:.*]] = tdf.call @exp(%{{.*}}) : (tensor<4xf32>)
// CHECK-NEXT: %[[B2:.*]] = tdf.call @exp(%[[B]]) {tdf.last_use = array<i64: 0>}
// CHECK-NEXT: cf.br ^bb3(%[[B2]] : tensor<4xf32>) {tdf.last_use = array<i64: 0>}
// CHECK: ^bb2:
// CHECK-NEXT: cf.br ^bb3(%{{.*}} : tensor<4xf32>){{$}}
// CHECK: ^bb3(
// CHECK-NEXT: return {tdf.last_use = array<i64: 0>}
func.func @cfg(%c: i1, %x: tensor<4xf32>) -> tensor<4xf32> {
  %a = tdf.call @exp(%x) : (tensor<4xf32>) -> tensor<4xf32>
  cf.cond_br %c, ^bb1, ^bb2
^bb1:
  %b = tdf.call @exp(%a) : (tensor<4xf32>) -> tensor<4xf32>
  %b2 = tdf.call @exp(%b) : (tensor<4xf32>) -> tensor<4xf32>
  cf.br ^bb3(%b2 : tensor<4xf32>)
^bb2:
  cf.br ^bb3(%a : tensor<4xf32>)
^bb3(%m: tensor<4xf32>):
  return %m : tensor<4xf32>
}
