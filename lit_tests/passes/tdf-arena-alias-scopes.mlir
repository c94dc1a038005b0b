// RUN: tdf-opt %s --split-input-file --tdf-arena-alias-scopes | FileCheck %s

// Two slices of one arena with disjoint bytes ([0, 64) and [64, 128)): each
// access gets its slice's scope and the other slice's as noalias, also
// through a memref descriptor (insertvalue / extractvalue).
// CHECK: #[[$D:.*]] = #llvm.alias_scope_domain<{{.*}}description = "tdf.arena">
// CHECK: #[[$A:alias_scope[0-9]*]] = #llvm.alias_scope<id = {{.*}}, domain = #[[$D]]>
// CHECK: #[[$B:alias_scope[0-9]*]] = #llvm.alias_scope<id = {{.*}}, domain = #[[$D]]>
// CHECK-LABEL: llvm.func @disjoint
// CHECK: llvm.load %{{.*}} {alias_scopes = [#[[$A]]], noalias_scopes = [#[[$B]]]}
// CHECK: llvm.store %{{.*}}, %{{.*}} {alias_scopes = [#[[$B]]], noalias_scopes = [#[[$A]]]}
// CHECK: llvm.load %{{.*}} {alias_scopes = [#[[$B]]], noalias_scopes = [#[[$A]]]}
llvm.func @aligned_alloc(i64, i64) -> !llvm.ptr
llvm.func @disjoint(%i: i64) -> f32 {
  %align = llvm.mlir.constant(64 : i64) : i64
  %size = llvm.mlir.constant(128 : i64) : i64
  %c0 = llvm.mlir.constant(0 : i64) : i64
  %c64 = llvm.mlir.constant(64 : i64) : i64
  %arena = llvm.call @aligned_alloc(%align, %size) : (i64, i64) -> !llvm.ptr
  %a = llvm.getelementptr %arena[%c0] : (!llvm.ptr, i64) -> !llvm.ptr, i8 loc("tdf.slice:64"("a.py":1:1))
  %b = llvm.getelementptr %arena[%c64] : (!llvm.ptr, i64) -> !llvm.ptr, i8 loc("tdf.slice:64"("a.py":2:1))
  %pa = llvm.getelementptr inbounds %a[%i] : (!llvm.ptr, i64) -> !llvm.ptr, f32
  %x = llvm.load %pa : !llvm.ptr -> f32
  %pb = llvm.getelementptr inbounds %b[%i] : (!llvm.ptr, i64) -> !llvm.ptr, f32
  llvm.store %x, %pb : f32, !llvm.ptr
  %p = llvm.mlir.poison : !llvm.struct<(ptr, ptr, i64)>
  %d0 = llvm.insertvalue %arena, %p[0] : !llvm.struct<(ptr, ptr, i64)>
  %d1 = llvm.insertvalue %b, %d0[1] : !llvm.struct<(ptr, ptr, i64)>
  %d2 = llvm.insertvalue %c0, %d1[2] : !llvm.struct<(ptr, ptr, i64)>
  %aligned = llvm.extractvalue %d2[1] : !llvm.struct<(ptr, ptr, i64)>
  %pb2 = llvm.getelementptr inbounds %aligned[%c0] : (!llvm.ptr, i64) -> !llvm.ptr, f32
  %y = llvm.load %pb2 : !llvm.ptr -> f32
  llvm.return %y : f32
}

// -----

// negative_overlap: slices that share bytes ([0, 128) and [64, 128): the plan
// reused them at different times) stay may-alias: no metadata. Nor for an
// access through the base itself, a view at a run-time offset, or a
// getelementptr that is no slice of the plan (no tdf.slice location).
// CHECK-LABEL: llvm.func @negative_overlap
// CHECK-NOT: alias_scopes
// CHECK-NOT: noalias_scopes
// CHECK: llvm.return
llvm.func @aligned_alloc(i64, i64) -> !llvm.ptr
llvm.func @negative_overlap(%i: i64, %off: i64) -> f32 {
  %align = llvm.mlir.constant(64 : i64) : i64
  %size = llvm.mlir.constant(256 : i64) : i64
  %c0 = llvm.mlir.constant(0 : i64) : i64
  %c64 = llvm.mlir.constant(64 : i64) : i64
  %c192 = llvm.mlir.constant(192 : i64) : i64
  %arena = llvm.call @aligned_alloc(%align, %size) : (i64, i64) -> !llvm.ptr
  %a = llvm.getelementptr %arena[%c0] : (!llvm.ptr, i64) -> !llvm.ptr, i8 loc("tdf.slice:128"("a.py":1:1))
  %b = llvm.getelementptr %arena[%c64] : (!llvm.ptr, i64) -> !llvm.ptr, i8 loc("tdf.slice:64"("a.py":2:1))
  %pa = llvm.getelementptr inbounds %a[%i] : (!llvm.ptr, i64) -> !llvm.ptr, f32
  %x = llvm.load %pa : !llvm.ptr -> f32
  %pb = llvm.getelementptr inbounds %b[%i] : (!llvm.ptr, i64) -> !llvm.ptr, f32
  llvm.store %x, %pb : f32, !llvm.ptr
  %whole = llvm.getelementptr inbounds %arena[%i] : (!llvm.ptr, i64) -> !llvm.ptr, f32
  llvm.store %x, %whole : f32, !llvm.ptr
  %dyn = llvm.getelementptr %arena[%off] : (!llvm.ptr, i64) -> !llvm.ptr, i8 loc("tdf.slice:64"("a.py":3:1))
  llvm.store %x, %dyn : f32, !llvm.ptr
  %other = llvm.getelementptr %arena[%c192] : (!llvm.ptr, i64) -> !llvm.ptr, i8
  %y = llvm.load %other : !llvm.ptr -> f32
  llvm.return %y : f32
}
