// RUN: tdf-opt %s --tdf-gpu-pooled-alloc | FileCheck %s
// RUN: tdf-opt %s --tdf-gpu-pooled-alloc | tdf-opt | FileCheck %s

// The host code's mgpuMemAlloc / mgpuMemFree (what gpu-lower-to-nvvm-pipeline
// emits for gpu.alloc / gpu.dealloc) become tdf's pool functions: the
// declarations are renamed, every call follows, the arguments stay.
// CHECK-LABEL: llvm.func @step
// CHECK:         %[[P:.*]] = llvm.call @tdf_gpu_mem_alloc(%{{.*}}, %{{.*}}, %{{.*}}) : (i64, !llvm.ptr, i8) -> !llvm.ptr
// CHECK:         llvm.call @mgpuMemcpy(
// CHECK:         llvm.call @tdf_gpu_mem_free(%[[P]], %{{.*}}) : (!llvm.ptr, !llvm.ptr) -> ()
// CHECK-NOT:     @mgpuMemAlloc
// CHECK-NOT:     @mgpuMemFree
// CHECK-DAG:   llvm.func @tdf_gpu_mem_alloc(i64, !llvm.ptr, i8) -> !llvm.ptr
// CHECK-DAG:   llvm.func @tdf_gpu_mem_free(!llvm.ptr, !llvm.ptr)
// CHECK-DAG:   llvm.func @mgpuMemcpy(!llvm.ptr, !llvm.ptr, i64, !llvm.ptr)
llvm.func @step(%host: !llvm.ptr, %stream: !llvm.ptr) {
  %size = llvm.mlir.constant(4096 : i64) : i64
  %false = llvm.mlir.constant(0 : i8) : i8
  %p = llvm.call @mgpuMemAlloc(%size, %stream, %false) : (i64, !llvm.ptr, i8) -> !llvm.ptr
  llvm.call @mgpuMemcpy(%p, %host, %size, %stream) : (!llvm.ptr, !llvm.ptr, i64, !llvm.ptr) -> ()
  llvm.call @mgpuMemFree(%p, %stream) : (!llvm.ptr, !llvm.ptr) -> ()
  llvm.return
}
llvm.func @mgpuMemAlloc(i64, !llvm.ptr, i8) -> !llvm.ptr
llvm.func @mgpuMemFree(!llvm.ptr, !llvm.ptr)
llvm.func @mgpuMemcpy(!llvm.ptr, !llvm.ptr, i64, !llvm.ptr)

// negative_: other runtime calls and an indirect call stay as they are.
// CHECK-LABEL: llvm.func @negative_other_calls
// CHECK:         llvm.call @mgpuMemcpy(
// CHECK:         llvm.call %{{.*}}(
llvm.func @negative_other_calls(%a: !llvm.ptr, %b: !llvm.ptr, %f: !llvm.ptr) {
  %size = llvm.mlir.constant(16 : i64) : i64
  llvm.call @mgpuMemcpy(%a, %b, %size, %a) : (!llvm.ptr, !llvm.ptr, i64, !llvm.ptr) -> ()
  llvm.call %f(%a) : !llvm.ptr, (!llvm.ptr) -> ()
  llvm.return
}
