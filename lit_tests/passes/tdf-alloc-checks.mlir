// RUN: tdf-opt %s --split-input-file --tdf-alloc-checks | FileCheck %s

// Every allocation that may allocate bytes is tested for NULL right after it.
// CHECK-LABEL: func.func @static_alloc_tested_for_null
// CHECK: %[[BUF:.*]] = memref.alloc() : memref<1000000000000xf32>
// CHECK-NEXT: %[[PTR:.*]] = memref.extract_aligned_pointer_as_index %[[BUF]]
// CHECK: %[[NULL:.*]] = arith.cmpi eq, %[[PTR]], %{{.*}} : index
// CHECK: %[[BYTES:.*]] = arith.constant 4000000000000 : index
// CHECK: scf.if %[[NULL]] {
// CHECK: func.call @tdf_rt_alloc_error(
// CHECK: func.func private @tdf_rt_alloc_error(i64, i64)
func.func @static_alloc_tested_for_null() -> memref<1000000000000xf32> {
  %buf = memref.alloc() : memref<1000000000000xf32>
  return %buf : memref<1000000000000xf32>
}

// -----

// A dynamic size multiplies into the byte count.
// CHECK-LABEL: func.func @dynamic_alloc_counts_bytes
// CHECK-SAME: (%[[N:.*]]: index)
// CHECK: %[[BUF:.*]] = memref.alloc(%[[N]]) : memref<?x4xf64>
// CHECK: %[[STATIC:.*]] = arith.constant 32 : index
// CHECK: arith.muli %[[STATIC]], %[[N]] : index
// CHECK: func.call @tdf_rt_alloc_error(
func.func @dynamic_alloc_counts_bytes(%n: index) -> memref<?x4xf64> {
  %buf = memref.alloc(%n) : memref<?x4xf64>
  return %buf : memref<?x4xf64>
}

// -----

// Nothing to test in an empty allocation, nor in a stack one.
// CHECK-LABEL: func.func @negative_empty_and_stack
// CHECK-NOT: tdf_rt_alloc_error
func.func @negative_empty_and_stack() -> memref<0xf32> {
  %buf = memref.alloc() : memref<0xf32>
  %stack = memref.alloca() : memref<4xf32>
  return %buf : memref<0xf32>
}
