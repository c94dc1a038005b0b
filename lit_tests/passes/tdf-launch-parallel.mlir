// RUN: tdf-opt %s --tdf-launch-parallel | FileCheck %s

// The body becomes the task function: a new entry block loads what the body
// uses from the context (not %unused) and branches to the body's blocks; the
// launch call stores those values into a context on the caller's stack
// (allocated in its entry block) and calls the thread pool with the task.
// CHECK-LABEL: llvm.func @tdf_rt_parallel_for(!llvm.ptr, !llvm.ptr, i64)
// CHECK-LABEL: llvm.func internal @tdf_parallel_body_0_task
// CHECK-SAME:    (%[[C:[^:]+]]: !llvm.ptr, %[[T:[^:]+]]: i64)
// CHECK:         %[[G0:.*]] = llvm.getelementptr %[[C]][0, 0] : (!llvm.ptr) -> !llvm.ptr, !llvm.struct<(ptr, f32)>
// CHECK:         %[[BX:.*]] = llvm.load %[[G0]] : !llvm.ptr -> !llvm.ptr
// CHECK:         %[[G1:.*]] = llvm.getelementptr %[[C]][0, 1] : (!llvm.ptr) -> !llvm.ptr, !llvm.struct<(ptr, f32)>
// CHECK:         %[[BS:.*]] = llvm.load %[[G1]] : !llvm.ptr -> f32
// CHECK:         llvm.br ^bb1(%[[T]], %[[BX]], %[[BS]] : i64, !llvm.ptr, f32)
// CHECK:       ^bb1(%[[I:.*]]: i64, %[[P:.*]]: !llvm.ptr, %[[V:.*]]: f32):
// CHECK:         %[[E:.*]] = llvm.getelementptr %[[P]][%[[I]]] : (!llvm.ptr, i64) -> !llvm.ptr, f32
// CHECK:         llvm.store %[[V]], %[[E]] : f32, !llvm.ptr
// CHECK-LABEL: llvm.func @caller
// CHECK-SAME:    (%[[X:[^:]+]]: !llvm.ptr, %[[S:[^:]+]]: f32, %[[U:[^:]+]]: i64, %[[N:[^:]+]]: i64)
// CHECK:         %[[ONE:.*]] = llvm.mlir.constant(1 : i64) : i64
// CHECK:         %[[CTX:.*]] = llvm.alloca %[[ONE]] x !llvm.struct<(ptr, f32)> : (i64) -> !llvm.ptr
// CHECK:         llvm.br ^bb1
// CHECK:       ^bb1:
// CHECK:         %[[F0:.*]] = llvm.getelementptr %[[CTX]][0, 0] : (!llvm.ptr) -> !llvm.ptr, !llvm.struct<(ptr, f32)>
// CHECK:         llvm.store %[[X]], %[[F0]] : !llvm.ptr, !llvm.ptr
// CHECK:         %[[F1:.*]] = llvm.getelementptr %[[CTX]][0, 1] : (!llvm.ptr) -> !llvm.ptr, !llvm.struct<(ptr, f32)>
// CHECK:         llvm.store %[[S]], %[[F1]] : f32, !llvm.ptr
// CHECK:         %[[TASK:.*]] = llvm.mlir.addressof @tdf_parallel_body_0_task : !llvm.ptr
// CHECK:         llvm.call @tdf_rt_parallel_for(%[[TASK]], %[[CTX]], %[[N]]) : (!llvm.ptr, !llvm.ptr, i64) -> ()
// CHECK-NOT:     @tdf_parallel_0
// CHECK-NOT:   llvm.func @tdf_parallel_body_0(
llvm.func @tdf_parallel_0(i64, !llvm.ptr, i64, f32) attributes {sym_visibility = "private", tdf.parallel_body = @tdf_parallel_body_0}
llvm.func @tdf_parallel_body_0(%t: i64, %x: !llvm.ptr, %unused: i64, %s: f32) attributes {sym_visibility = "private"} {
  %p = llvm.getelementptr %x[%t] : (!llvm.ptr, i64) -> !llvm.ptr, f32
  llvm.store %s, %p : f32, !llvm.ptr
  llvm.return
}
llvm.func @caller(%x: !llvm.ptr, %s: f32, %u: i64, %n: i64) {
  llvm.br ^bb1
^bb1:
  llvm.call @tdf_parallel_0(%n, %x, %u, %s) : (i64, !llvm.ptr, i64, f32) -> ()
  llvm.return
}

