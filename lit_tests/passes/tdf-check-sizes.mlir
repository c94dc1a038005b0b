// RUN: tdf-opt %s --split-input-file --tdf-check-sizes --verify-diagnostics
// RUN: not tdf-opt %s --split-input-file --tdf-bufferize 2>&1 | FileCheck %s --check-prefix=BUF
// RUN: not tdf-opt %s --split-input-file --tdf-lower-to-cpu 2>&1 | FileCheck %s --check-prefix=BUF
// RUN: not tdf-opt %s --split-input-file --tdf-lower-to-nvvm 2>&1 | FileCheck %s --check-prefix=BUF

// Static shapes whose size in bits overflows int64 are refused before
// bufferization (which aborts the process on them: "integer overflow in size
// computation"). Regression for every lowering.

// BUF: tdf-check-sizes.mlir:[[# @LINE + 3]]:1: error: the signature of 'func.func' has type tensor<4611686018427387904x4xf32> whose static size (590295810358705651712 bits) overflows int64
// BUF: tdf-check-sizes.mlir:[[# @LINE + 4]]:8: error: result of 'tensor.empty' has type tensor<4611686018427387904x4xf32>
// expected-error@+1 {{the signature of 'func.func' has type tensor<4611686018427387904x4xf32> whose static size (590295810358705651712 bits) overflows int64; tdf cannot allocate or address it}}
func.func @empty_result() -> tensor<4611686018427387904x4xf32> {
  // expected-error@+1 {{result of 'tensor.empty' has type tensor<4611686018427387904x4xf32> whose static size (590295810358705651712 bits) overflows int64; tdf cannot allocate or address it}}
  %e = tensor.empty() : tensor<4611686018427387904x4xf32>
  return %e : tensor<4611686018427387904x4xf32>
}

// -----

// A kernel declaration's signature.
// expected-error@+1 {{the signature of 'func.func' has type memref<2305843009213693952x2xi64> whose static size (295147905179352825856 bits) overflows int64; tdf cannot allocate or address it}}
func.func private @huge_kernel(memref<2305843009213693952x2xi64>)

// -----

// Inside a loop body; the element type counts (i1 is stored in a byte).
func.func @in_loop(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    // expected-error@+1 {{result of 'tensor.empty' has type tensor<1152921504606846976x2xi1> whose static size (18446744073709551616 bits) overflows int64; tdf cannot allocate or address it}}
    %e = tensor.empty() : tensor<1152921504606846976x2xi1>
  }
  return
}

// -----

// A type inside an attribute (tuple element).
// expected-error@+1 {{attribute 'shapes' of 'func.func' has type memref<4611686018427387904x2xf64> whose static size (590295810358705651712 bits) overflows int64; tdf cannot allocate or address it}}
func.func @attribute_type() attributes {shapes = [{t = tuple<i32, memref<4611686018427387904x2xf64>>}]} {
  return
}

// -----

// The largest shapes that fit are accepted (2^63 - 8 bits, dynamic sizes).
// BUF-NOT: error: {{.*}}1152921504606846975xi8
func.func private @fits(memref<1152921504606846975xi8>, memref<?x?xf64>)
