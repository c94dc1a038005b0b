// RUN: tdf-opt %s --tdf-lower-to-cpu=inplace=false | FileCheck %s
// RUN: tdf-opt %s --tdf-lower-to-cpu | FileCheck %s --check-prefix=INPLACE
// RUN: not tdf-opt %s --tdf-lower-to-cpu=bogus=1 2>&1 | FileCheck %s --check-prefix=BADOPT

// Everything is in the LLVM dialect: no memref, tensor or cast left.
// CHECK-NOT: builtin.unrealized_conversion_cast
// CHECK-NOT: memref<
// CHECK-NOT: tensor<
// BADOPT: 'tdf-lower-to-cpu' has no option 'bogus'

func.func private @add(%a: memref<16xf32>, %b: memref<16xf32>, %out: memref<16xf32>) attributes {tdf.elementwise} {
  linalg.add ins(%a, %b : memref<16xf32>, memref<16xf32>) outs(%out : memref<16xf32>)
  return
}

// The donated cache is updated through its own pointer: no malloc; the row
// copy into the strided slot is a loop, not the generic memrefCopy.
// CHECK-LABEL: llvm.func @row_update
// CHECK-NOT: llvm.call @malloc
// CHECK-NOT: llvm.call @memrefCopy
// CHECK: llvm.return
func.func @row_update(%cache: tensor<8x4xf32> {tdf.donate}, %row: tensor<1x4xf32>, %pos: index) -> tensor<8x4xf32> {
  %new = tensor.insert_slice %row into %cache[%pos, 0] [1, 4] [1, 1] : tensor<1x4xf32> into tensor<8x4xf32>
  return %new : tensor<8x4xf32>
}

// Without the in-place rewrite, each call gets a fresh buffer; with it, the
// dead intermediate %t is reused for %r (one malloc: the result %t).
// CHECK-LABEL: llvm.func @chain
// CHECK-COUNT-2: llvm.call @malloc
// CHECK: llvm.return
// INPLACE-LABEL: llvm.func @chain
// INPLACE-COUNT-1: llvm.call @malloc
// INPLACE-NOT: llvm.call @malloc
// INPLACE: llvm.return
func.func @chain(%x: tensor<16xf32>, %y: tensor<16xf32>) -> tensor<16xf32> {
  %t = tdf.call @add(%x, %y) : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  %r = tdf.call @add(%t, %y) : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  return %r : tensor<16xf32>
}

// i1 memrefs are stored as bytes (finalize-memref-to-llvm aborts on i1 stores).
// CHECK-LABEL: llvm.func @mask_update
// CHECK: llvm.store %{{.*}} : i8, !llvm.ptr
func.func @mask_update(%mask: tensor<8xi1> {tdf.donate}, %pos: index) -> tensor<8xi1> {
  %true = arith.constant true
  %new = tensor.insert %true into %mask[%pos] : tensor<8xi1>
  return %new : tensor<8xi1>
}
