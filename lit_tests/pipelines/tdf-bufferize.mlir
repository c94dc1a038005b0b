// RUN: tdf-opt %s --tdf-bufferize | FileCheck %s
// RUN: tdf-opt %s --pass-pipeline='builtin.module(tdf-bufferize{dealloc=false})' | FileCheck %s --check-prefix=NODEALLOC
// RUN: tdf-opt %s --pass-pipeline='builtin.module(tdf-bufferize{copy-before-write=true})' | FileCheck %s --check-prefix=CBW
// RUN: tdf-opt %s --pass-pipeline='builtin.module(tdf-lower-to-cpu{copy-before-write=true count-allocations=true})' | FileCheck %s --check-prefix=COUNT
// RUN: tdf-opt %s --pass-pipeline='builtin.module(tdf-lower-to-cpu)' | FileCheck %s --check-prefix=NOCOUNT

func.func private @add(%a: memref<16xf32>, %b: memref<16xf32>, %out: memref<16xf32>) attributes {tdf.elementwise} {
  linalg.add ins(%a, %b : memref<16xf32>, memref<16xf32>) outs(%out : memref<16xf32>)
  return
}
func.func private @keeps(memref<16xf32>) -> memref<16xf32>

// A donated cache updated in place: no allocation, no copy of the cache, no
// clone at the return; the result is dropped and recorded.
// CHECK-LABEL: func.func @inplace_row_update
// CHECK-SAME: (%[[CACHE:.*]]: memref<8x4xf32>, %[[ROW:.*]]: memref<1x4xf32>, %{{.*}}: index)
// CHECK-SAME: tdf.returned_args = array<i64: 0>
// CHECK-NOT: memref.alloc
// CHECK-NOT: bufferization.clone
// CHECK: %[[SLOT:.*]] = memref.subview %[[CACHE]]
// CHECK: memref.copy %[[ROW]], %[[SLOT]]
// CHECK-NOT: memref.alloc
// CHECK: return{{$}}
// The copy-before-write baseline copies the whole donated cache first and
// returns the copy: nothing is updated in place.
// CBW-LABEL: func.func @inplace_row_update
// CBW-SAME: (%[[CACHE:.*]]: memref<8x4xf32>, %[[ROW:.*]]: memref<1x4xf32>, %{{.*}}: index) -> memref<8x4xf32>
// CBW-NOT: tdf.returned_args
// CBW: %[[COPY:.*]] = memref.alloc
// CBW: memref.copy %[[CACHE]], %[[COPY]]
// CBW: %[[SLOT:.*]] = memref.subview %[[COPY]]
// CBW: memref.copy %[[ROW]], %[[SLOT]]
// CBW: return %[[COPY]]
// Allocation counting: allocations go through the generic (counted)
// functions; the normal lowering calls malloc and free directly.
// COUNT-LABEL: llvm.func @inplace_row_update
// COUNT: llvm.call @_mlir_memref_to_llvm_aligned_alloc
// COUNT-NOT: llvm.call @malloc
// NOCOUNT-NOT: _mlir_memref_to_llvm_
func.func @inplace_row_update(%cache: tensor<8x4xf32> {tdf.donate}, %row: tensor<1x4xf32>, %pos: index) -> tensor<8x4xf32> {
  %new = tensor.insert_slice %row into %cache[%pos, 0] [1, 4] [1, 1] : tensor<1x4xf32> into tensor<8x4xf32>
  return %new : tensor<8x4xf32>
}

// Not donated: the cache is read-only, the update goes to a fresh copy.
// CHECK-LABEL: func.func @negative_row_update_not_donated
// CHECK-SAME: (%[[CACHE:.*]]: memref<8x4xf32>, %[[ROW:.*]]: memref<1x4xf32>, %{{.*}}: index) -> memref<8x4xf32>
// CHECK-NOT: tdf.returned_args
// CHECK: %[[COPY:.*]] = memref.alloc
// CHECK: memref.copy %[[CACHE]], %[[COPY]]
// CHECK: return %[[COPY]]
func.func @negative_row_update_not_donated(%cache: tensor<8x4xf32>, %row: tensor<1x4xf32>, %pos: index) -> tensor<8x4xf32> {
  %new = tensor.insert_slice %row into %cache[%pos, 0] [1, 4] [1, 1] : tensor<1x4xf32> into tensor<8x4xf32>
  return %new : tensor<8x4xf32>
}

// An intermediate (in the call's arena, tdf-plan-memory) is freed, the
// returned result is not (the caller owns it).
// CHECK-LABEL: func.func @fresh_result_no_leak
// CHECK: %[[ARENA:.*]] = memref.alloc() {alignment = 64 : i64, tdf.arena} : memref<64xi8>
// CHECK: %[[T:.*]] = memref.view %[[ARENA]]
// CHECK: call @add(%{{.*}}, %{{.*}}, %[[T]])
// CHECK: %[[R:.*]] = memref.alloc
// CHECK: call @add(%[[T]], %[[T]], %[[R]])
// CHECK: memref.dealloc %[[ARENA]]
// CHECK-NOT: memref.dealloc %[[R]]
// CHECK: return %[[R]]
// NODEALLOC-LABEL: func.func @fresh_result_no_leak
// NODEALLOC-NOT: memref.dealloc
// NODEALLOC: return
func.func @fresh_result_no_leak(%x: tensor<16xf32>, %y: tensor<16xf32>) -> tensor<16xf32> {
  %t = tdf.call @add(%x, %y) : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  %r = tdf.call @add(%t, %t) : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  return %r : tensor<16xf32>
}

// An opaque call's result may be the callee's own buffer: it is copied into
// an owned buffer right after the call and never deallocated.
// CHECK-LABEL: func.func @opaque_result_snapshot
// CHECK: %[[KEPT:.*]] = call @keeps(
// CHECK-NEXT: %[[OWNED:.*]] = memref.alloc() : memref<16xf32>
// CHECK-NEXT: memref.copy %[[KEPT]], %[[OWNED]]
// CHECK-NOT: memref.dealloc %[[KEPT]]
// CHECK: return %[[OWNED]]
func.func @opaque_result_snapshot(%x: tensor<16xf32> {tdf.donate}) -> tensor<16xf32> {
  %k = tdf.call_opaque @keeps(%x) : (tensor<16xf32>) -> tensor<16xf32>
  return %k : tensor<16xf32>
}
