// RUN: tdf-opt %s --tdf-verify-inplace=strict --split-input-file --verify-diagnostics
// RUN: not tdf-opt %s --tdf-verify-inplace=strict --split-input-file 2>&1 | FileCheck %s

// Strict mode (the seed's X1): a copy would be needed, so it is an error.
// CHECK: error: in-place operand #0 (%arg0) is still used by %1 (tdf.call) (dead); in-place call would need a copy

func.func private @addone(memref<4xf32>) attributes {tdf.elementwise}
func.func private @exp(memref<4xf32>, memref<4xf32>)

// The seed's func_invalid written with an explicit in-place call.
func.func @negative_func_invalid(%x: tensor<4xf32> {tdf.donate}) -> (tensor<4xf32>, tensor<4xf32>) {
  // expected-error@+1 {{in-place operand #0 (%arg0) is still used by %1 (tdf.call) (dead); in-place call would need a copy}}
  %x1 = tdf.call_inplace @addone(%x) inplace [0] : (tensor<4xf32>) -> tensor<4xf32>
  %gv = tdf.call @exp(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %x1, %gv : tensor<4xf32>, tensor<4xf32>
}

// -----

func.func private @addone(memref<4xf32>) attributes {tdf.elementwise}
func.func private @exp(memref<4xf32>, memref<4xf32>)

// The seed's func0: exp(%x) comes first, so the in-place call is fine.
func.func @func0(%x: tensor<4xf32> {tdf.donate}) -> (tensor<4xf32>, tensor<4xf32>) {
  %y = tdf.call @exp(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %x1 = tdf.call_inplace @addone(%x) inplace [0] : (tensor<4xf32>) -> tensor<4xf32>
  return %y, %x1 : tensor<4xf32>, tensor<4xf32>
}

// -----

func.func private @addone(memref<4xf32>) attributes {tdf.elementwise}

func.func @negative_parameter(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{in-place operand #0 (%arg0) is a function argument that is not donated (owned); in-place call would need a copy}}
  %x1 = tdf.call_inplace @addone(%x) inplace [0] : (tensor<4xf32>) -> tensor<4xf32>
  return %x1 : tensor<4xf32>
}

// -----

func.func private @addone(memref<4xf32>) attributes {tdf.elementwise}

func.func @negative_in_loop(%x: tensor<4xf32> {tdf.donate}) -> tensor<4xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %r = scf.for %i = %c0 to %c4 step %c1 iter_args(%acc = %x) -> tensor<4xf32> {
    // expected-error@+1 {{in-place operand #0 (%arg0) is defined outside the enclosing scf.for and read again by its next iteration (dead); in-place call would need a copy}}
    %n = tdf.call_inplace @addone(%x) inplace [0] : (tensor<4xf32>) -> tensor<4xf32>
    scf.yield %n : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}
