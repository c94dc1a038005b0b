// RUN: tdf-opt %s --tdf-insert-inplace=remarks --verify-diagnostics | FileCheck %s
// RUN: tdf-opt %s --tdf-insert-inplace=remarks=false --mlir-pass-statistics 2>&1 | FileCheck %s --check-prefix=STATS

// One remark per rejected candidate, naming the rule and the blocking value.

func.func private @addone(%x: memref<4xf32>, %out: memref<4xf32>) {
  linalg.add ins(%x, %x : memref<4xf32>, memref<4xf32>) outs(%out : memref<4xf32>)
  return
}
func.func private @exp(%x: memref<4xf32>, %out: memref<4xf32>) {
  linalg.exp ins(%x : memref<4xf32>) outs(%out : memref<4xf32>)
  return
}
func.func private @mystery(memref<4xf32>, memref<4xf32>)
func.func private @keep(memref<4xf32>) -> memref<4xf32>
func.func private @sum(memref<4xf32>, memref<1xf32>)

// CHECK-LABEL: func.func @negative_dead(
// CHECK: tdf.call @exp
// CHECK: tdf.call_inplace @addone_inplace
func.func @negative_dead(%z: tensor<4xf32> {tdf.donate}) -> (tensor<4xf32>, tensor<4xf32>) {
  // expected-remark@+1 {{in-place rejected (dead): operand #0 (%arg0) is still used by %1 (tdf.call_inplace)}}
  %q = tdf.call @exp(%z) : (tensor<4xf32>) -> tensor<4xf32>
  %r = tdf.call @addone(%z) : (tensor<4xf32>) -> tensor<4xf32>
  return %q, %r : tensor<4xf32>, tensor<4xf32>
}

// CHECK-LABEL: func.func @negative_returned(
func.func @negative_returned(%z: tensor<4xf32> {tdf.donate}) -> (tensor<4xf32>, tensor<4xf32>) {
  // expected-remark@+1 {{in-place rejected (dead): operand #0 (%arg0) is still used by func.return (a function result)}}
  %q = tdf.call @exp(%z) : (tensor<4xf32>) -> tensor<4xf32>
  return %q, %z : tensor<4xf32>, tensor<4xf32>
}

// CHECK-LABEL: func.func @negative_owned(
func.func @negative_owned(%z: tensor<4xf32>) -> tensor<4xf32> {
  // expected-remark@+1 {{in-place rejected (owned): operand #0 (%arg0) is a function argument that is not donated}}
  %q = tdf.call @exp(%z) : (tensor<4xf32>) -> tensor<4xf32>
  return %q : tensor<4xf32>
}

// CHECK-LABEL: func.func @negative_owned_view(
func.func @negative_owned_view(%z: tensor<2x2xf32>) -> tensor<4xf32> {
  %v = tensor.collapse_shape %z [[0, 1]] : tensor<2x2xf32> into tensor<4xf32>
  // expected-remark@+1 {{in-place rejected (owned): operand #0 (%collapsed) may share storage with %arg0, a function argument that is not donated}}
  %q = tdf.call @exp(%v) : (tensor<4xf32>) -> tensor<4xf32>
  return %q : tensor<4xf32>
}

// CHECK-LABEL: func.func @negative_constant(
func.func @negative_constant() -> tensor<4xf32> {
  %c = arith.constant dense<2.0> : tensor<4xf32>
  // expected-remark@+1 {{in-place rejected (owned): operand #0 (%cst) is a constant}}
  %q = tdf.call @exp(%c) : (tensor<4xf32>) -> tensor<4xf32>
  return %q : tensor<4xf32>
}

// CHECK-LABEL: func.func @negative_view_alias(
func.func @negative_view_alias(%z: tensor<4xf32> {tdf.donate}) -> (tensor<4xf32>, tensor<2x2xf32>) {
  %v = tensor.expand_shape %z [[0, 1]] output_shape [2, 2] : tensor<4xf32> into tensor<2x2xf32>
  // expected-remark@+1 {{in-place rejected (unaliased): operand #0 (%arg0) may share storage with %expanded, which is still used by func.return (a function result)}}
  %q = tdf.call @exp(%z) : (tensor<4xf32>) -> tensor<4xf32>
  return %q, %v : tensor<4xf32>, tensor<2x2xf32>
}

// CHECK-LABEL: func.func @negative_escaped(
func.func @negative_escaped(%z: tensor<4xf32> {tdf.donate}) -> (tensor<4xf32>, tensor<4xf32>) {
  %k = tdf.call_opaque @keep(%z) : (tensor<4xf32>) -> tensor<4xf32>
  // expected-remark@+1 {{in-place rejected (unaliased): operand #0 (%arg0) may alias a value passed to an opaque call}}
  %q = tdf.call @exp(%z) : (tensor<4xf32>) -> tensor<4xf32>
  return %k, %q : tensor<4xf32>, tensor<4xf32>
}

// CHECK-LABEL: func.func @negative_kernel(
func.func @negative_kernel(%z: tensor<4xf32> {tdf.donate}) -> tensor<4xf32> {
  // expected-remark@+1 {{in-place rejected (kernel): @mystery is not known to be element-wise on operand #0 and result #0 (mark it tdf.elementwise or tdf.inplace_ok)}}
  %q = tdf.call @mystery(%z) : (tensor<4xf32>) -> tensor<4xf32>
  return %q : tensor<4xf32>
}

// CHECK-LABEL: func.func @negative_fits(
func.func @negative_fits(%z: tensor<4xf32> {tdf.donate}) -> tensor<1xf32> {
  // expected-remark@+1 {{in-place rejected (fits): operand #0 (%arg0) has type tensor<4xf32>, result #0 needs tensor<1xf32>}}
  %q = tdf.call @sum(%z) : (tensor<4xf32>) -> tensor<1xf32>
  return %q : tensor<1xf32>
}

// CHECK-LABEL: func.func @negative_loop(
func.func @negative_loop(%z: tensor<4xf32> {tdf.donate}) -> tensor<4xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %e = tensor.empty() : tensor<4xf32>
  %r = scf.for %i = %c0 to %c1 step %c1 iter_args(%acc = %e) -> tensor<4xf32> {
    // expected-remark@+1 {{in-place rejected (dead): operand #0 (%arg0) is defined outside the enclosing scf.for and read again by its next iteration}}
    %n = tdf.call @exp(%z) : (tensor<4xf32>) -> tensor<4xf32>
    %m = arith.addf %n, %acc : tensor<4xf32>
    scf.yield %m : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}

// CHECK-LABEL: func.func @negative_linalg_broadcast(
func.func @negative_linalg_broadcast(%x: tensor<4x4xf32> {tdf.donate}) -> tensor<4x4xf32> {
  %e = tensor.empty() : tensor<4x4xf32>
  // expected-remark@+1 {{in-place rejected (fits): operand #0 (%arg0) is not read with the identity map (broadcast or permuted)}}
  %t = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d1, d0)>, affine_map<(d0, d1) -> (d0, d1)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%a: f32, %b: f32):
    linalg.yield %a : f32
  } -> tensor<4x4xf32>
  return %t : tensor<4x4xf32>
}

// STATS: tdf-insert-inplace
// STATS-DAG: (S) 0 concats
// STATS-DAG: (S) 1 inplace-results
// STATS-DAG: (S) 3 rejected-dead
// STATS-DAG: (S) 2 rejected-fits
// STATS-DAG: (S) 1 rejected-kernel
// STATS-DAG: (S) 3 rejected-owned
// STATS-DAG: (S) 2 rejected-unaliased
// STATS-DAG: (S) 1 rewrites
