// RUN: tdf-opt %s --tdf-verify-inplace=strict --split-input-file --verify-diagnostics
// RUN: not tdf-opt %s --tdf-verify-inplace=strict --split-input-file 2>&1 | FileCheck %s

// Strict mode: where a copy would be needed it is an error.
// CHECK: error: in-place operand #0 (%arg0) is still used by %1 (tdf.call) (dead); in-place call would need a copy

func.func private @addone(memref<4xf32>) attributes {tdf.elementwise}
func.func private @exp(memref<4xf32>, memref<4xf32>)

// %x is read again after the call that updates it in place.
func.func @negative_func_invalid(%x: tensor<4xf32> {tdf.donate}) -> (tensor<4xf32>, tensor<4xf32>) {
  // expected-error@+1 {{in-place operand #0 (%arg0) is still used by %1 (tdf.call) (dead); in-place call would need a copy}}
  %x1 = tdf.call_inplace @addone(%x) inplace [0] : (tensor<4xf32>) -> tensor<4xf32>
  %gv = tdf.call @exp(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %x1, %gv : tensor<4xf32>, tensor<4xf32>
}

// -----

func.func private @addone(memref<4xf32>) attributes {tdf.elementwise}
func.func private @exp(memref<4xf32>, memref<4xf32>)

// exp(%x) comes first, so the in-place call is fine.
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

// -----

func.func private @add_ip(%a: memref<8xf32>, %b: memref<8xf32>) attributes {tdf.elementwise} {
  linalg.add ins(%a, %b : memref<8xf32>, memref<8xf32>) outs(%a : memref<8xf32>)
  return
}
func.func private @add(memref<8xf32>, memref<8xf32>, memref<8xf32>)

// Regression (one meaning of strict): %x is read only in the other branch
// of the scf.if, which never runs after the in-place call; One-Shot
// Bufferize runs it in place with no copy, and strict accepts it.
func.func @use_in_other_branch(%x: tensor<8xf32> {tdf.donate}, %y: tensor<8xf32>, %p: i1) -> tensor<8xf32> {
  %r = scf.if %p -> tensor<8xf32> {
    %v = tdf.call_inplace @add_ip(%x, %y) inplace [0] : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
    scf.yield %v : tensor<8xf32>
  } else {
    %w = tdf.call @add(%x, %x) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
    scf.yield %w : tensor<8xf32>
  }
  return %r : tensor<8xf32>
}

// -----

func.func private @exp_into(%x: memref<4xf32>, %out: memref<4xf32, strided<[1], offset: ?>>) {
  linalg.exp ins(%x : memref<4xf32>) outs(%out : memref<4xf32, strided<[1], offset: ?>>)
  return
}

// Regression: what the insert_slice rewrite used to produce -- a call reading
// A[0..4) computed into A[1..5). One-Shot copies the read (not the in-place
// operand), tdf's rules see the overlap: strict rejects it.
func.func @negative_reads_overlapping_slice(%A: tensor<8xf32> {tdf.donate}) -> tensor<8xf32> {
  %r0 = tensor.extract_slice %A[0] [4] [1] : tensor<8xf32> to tensor<4xf32>
  %s = tensor.extract_slice %A[1] [4] [1] : tensor<8xf32> to tensor<4xf32>
  // expected-error@+1 {{in-place operand #1 (%extracted_slice_0) may share storage with operand #0 (%extracted_slice) of the same op (unaliased); in-place call would need a copy}}
  %z = tdf.call_inplace @exp_into(%r0, %s) inplace [1] : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %c = tensor.insert_slice %z into %A[1] [4] [1] : tensor<4xf32> into tensor<8xf32>
  return %c : tensor<8xf32>
}
