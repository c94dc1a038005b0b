// RUN: not tdf-opt %s --tdf-launch-parallel 2>&1 | FileCheck %s

// negative_: a body that something else calls too is not made a task.
// CHECK: error: launch declaration @tdf_parallel_0 needs a body function @tdf_parallel_body_0 that only its calls run, taking what they pass
llvm.func @tdf_parallel_0(i64, !llvm.ptr) attributes {sym_visibility = "private", tdf.parallel_body = @tdf_parallel_body_0}
llvm.func @tdf_parallel_body_0(%t: i64, %x: !llvm.ptr) attributes {sym_visibility = "private"} {
  llvm.return
}
llvm.func @caller(%x: !llvm.ptr, %n: i64) {
  llvm.call @tdf_parallel_0(%n, %x) : (i64, !llvm.ptr) -> ()
  llvm.call @tdf_parallel_body_0(%n, %x) : (i64, !llvm.ptr) -> ()
  llvm.return
}
