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

// A dynamic size is checked before the allocation (>= 0, and the byte count
// fits in int64); its byte count is the one the NULL test reports.
// CHECK-LABEL: func.func @dynamic_alloc_counts_bytes
// CHECK-SAME: (%[[N:.*]]: index)
// CHECK-DAG: %[[ZERO:.*]] = arith.constant 0 : index
// CHECK-DAG: %[[ONE:.*]] = arith.constant 1 : index
// CHECK-DAG: %[[TOP:.*]] = arith.constant 9223372036854775807 : index
// CHECK-DAG: %[[BYTES:.*]] = arith.constant 32 : index
// CHECK: %[[NEG:.*]] = arith.cmpi slt, %[[N]], %[[ZERO]] : index
// CHECK: %[[POS:.*]] = arith.cmpi sgt, %[[N]], %[[ZERO]] : index
// CHECK: %[[DIV:.*]] = arith.select %[[POS]], %[[N]], %[[ONE]] : index
// CHECK: %[[LIMIT:.*]] = arith.divsi %[[TOP]], %[[DIV]] : index
// CHECK: %[[BIG:.*]] = arith.cmpi sgt, %[[BYTES]], %[[LIMIT]] : index
// CHECK: %[[OVER:.*]] = arith.andi %[[POS]], %[[BIG]] : i1
// CHECK: %[[BAD:.*]] = arith.ori %[[NEG]], %[[OVER]] : i1
// CHECK: %[[SIZE:.*]] = arith.index_cast %[[N]] : index to i64
// CHECK: scf.if %[[BAD]] {
// CHECK-NEXT: func.call @tdf_rt_alloc_error(%{{.*}}, %[[SIZE]])
// CHECK: %[[TOTAL:.*]] = arith.muli %[[BYTES]], %[[N]] : index
// CHECK: %[[BUF:.*]] = memref.alloc(%[[N]]) : memref<?x4xf64>
// CHECK: %[[TOTAL64:.*]] = arith.index_cast %[[TOTAL]] : index to i64
// CHECK: func.call @tdf_rt_alloc_error(%{{.*}}, %[[TOTAL64]])
func.func @dynamic_alloc_counts_bytes(%n: index) -> memref<?x4xf64> {
  %buf = memref.alloc(%n) : memref<?x4xf64>
  return %buf : memref<?x4xf64>
}

// -----

// Two dynamic sizes: the second is checked against the bytes of the first
// times the static part.
// CHECK-LABEL: func.func @two_dynamic_sizes
// CHECK-SAME: (%[[M:.*]]: index, %[[N:.*]]: index)
// CHECK-DAG: %[[BYTES:.*]] = arith.constant 4 : index
// CHECK: arith.cmpi sgt, %[[BYTES]], %{{.*}} : index
// CHECK: func.call @tdf_rt_alloc_error(%{{.*}}, %{{.*}})
// CHECK: %[[SO_FAR:.*]] = arith.muli %[[BYTES]], %[[M]] : index
// CHECK: arith.cmpi slt, %[[N]], %{{.*}} : index
// CHECK: arith.cmpi sgt, %[[SO_FAR]], %{{.*}} : index
// CHECK: func.call @tdf_rt_alloc_error(%{{.*}}, %{{.*}})
// CHECK: memref.alloc(%[[M]], %[[N]]) : memref<?x?xf32>
func.func @two_dynamic_sizes(%m: index, %n: index) -> memref<?x?xf32> {
  %buf = memref.alloc(%m, %n) : memref<?x?xf32>
  return %buf : memref<?x?xf32>
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
