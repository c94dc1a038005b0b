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

// -----

// Origins: memory the function allocates itself (here through the alignment
// arithmetic of an aligned malloc) never shares a byte with what its
// arguments point to. The load of the argument and the store to the fresh
// buffer get the two scopes of a "tdf.origin" domain, each the other's as
// noalias; the access to the fresh buffer's second slice keeps its slice
// scopes too.
// CHECK: #[[$OD:.*]] = #llvm.alias_scope_domain<{{.*}}description = "tdf.origin">
// CHECK: #[[$ARG:alias_scope[0-9]*]] = #llvm.alias_scope<id = {{.*}}, domain = #[[$OD]]>
// CHECK: #[[$FRESH:alias_scope[0-9]*]] = #llvm.alias_scope<id = {{.*}}, domain = #[[$OD]]>
// CHECK-LABEL: llvm.func @origins
// CHECK: llvm.load %{{.*}} {alias_scopes = [#[[$ARG]]], noalias_scopes = [#[[$FRESH]]]}
// CHECK: llvm.store %{{.*}}, %{{.*}} {alias_scopes = [#[[$FRESH]]], noalias_scopes = [#[[$ARG]]]}
// CHECK: llvm.store %{{.*}}, %{{.*}} {alias_scopes = [#{{.*}}, #[[$FRESH]]], noalias_scopes = [#{{.*}}, #[[$ARG]]]}
llvm.func @malloc(i64) -> !llvm.ptr
llvm.func @origins(%x: !llvm.ptr, %i: i64) {
  %align = llvm.mlir.constant(64 : i64) : i64
  %one = llvm.mlir.constant(1 : i64) : i64
  %size = llvm.mlir.constant(192 : i64) : i64
  %c0 = llvm.mlir.constant(0 : i64) : i64
  %c64 = llvm.mlir.constant(64 : i64) : i64
  %raw = llvm.call @malloc(%size) : (i64) -> !llvm.ptr
  %int = llvm.ptrtoint %raw : !llvm.ptr to i64
  %pad = llvm.sub %align, %one : i64
  %up = llvm.add %int, %pad : i64
  %rem = llvm.urem %up, %align : i64
  %down = llvm.sub %up, %rem : i64
  %buf = llvm.inttoptr %down : i64 to !llvm.ptr
  %px = llvm.getelementptr inbounds %x[%i] : (!llvm.ptr, i64) -> !llvm.ptr, f32
  %v = llvm.load %px : !llvm.ptr -> f32
  %pb = llvm.getelementptr inbounds %buf[%i] : (!llvm.ptr, i64) -> !llvm.ptr, f32
  llvm.store %v, %pb : f32, !llvm.ptr
  %s0 = llvm.getelementptr %buf[%c0] : (!llvm.ptr, i64) -> !llvm.ptr, i8 loc("tdf.slice:64"("a.py":1:1))
  %s1 = llvm.getelementptr %buf[%c64] : (!llvm.ptr, i64) -> !llvm.ptr, i8 loc("tdf.slice:64"("a.py":2:1))
  %ps1 = llvm.getelementptr inbounds %s1[%i] : (!llvm.ptr, i64) -> !llvm.ptr, f32
  llvm.store %v, %ps1 : f32, !llvm.ptr
  %ps0 = llvm.getelementptr inbounds %s0[%i] : (!llvm.ptr, i64) -> !llvm.ptr, f32
  llvm.store %v, %ps0 : f32, !llvm.ptr
  llvm.return
}

// -----

// negative_origins: no origin claims where the memory's source is unknown:
// a pointer loaded from memory, the result of a call that is no allocator,
// a pointer computed from an integer argument; and none in a function whose
// accesses are all to its arguments' memory (nothing to tell apart).
// CHECK-LABEL: llvm.func @negative_origins
// CHECK-NOT: tdf.origin
// CHECK-NOT: alias_scopes
// CHECK: llvm.return
// CHECK-LABEL: llvm.func @negative_arguments_only
// CHECK-NOT: alias_scopes
// CHECK: llvm.return
// CHECK-LABEL: llvm.func @negative_half_precision
// CHECK-NOT: alias_scopes
// CHECK: llvm.return
llvm.func @other(i64) -> !llvm.ptr
llvm.func @negative_origins(%x: !llvm.ptr, %n: i64, %i: i64) {
  %loaded = llvm.load %x : !llvm.ptr -> !llvm.ptr
  %v = llvm.load %loaded : !llvm.ptr -> f32
  %p = llvm.call @other(%n) : (i64) -> !llvm.ptr
  llvm.store %v, %p : f32, !llvm.ptr
  %q = llvm.inttoptr %n : i64 to !llvm.ptr
  llvm.store %v, %q : f32, !llvm.ptr
  llvm.return
}
llvm.func @negative_arguments_only(%x: !llvm.ptr, %y: !llvm.ptr) {
  %v = llvm.load %x : !llvm.ptr -> f32
  llvm.store %v, %y : f32, !llvm.ptr
  llvm.return
}
// A function with bf16 accesses keeps LLVM's own view (LLVM 22.1.8's x86
// back end aborts on some bf16 loops vectorized without alias checks).
llvm.func @malloc(i64) -> !llvm.ptr
llvm.func @negative_half_precision(%x: !llvm.ptr, %i: i64) {
  %size = llvm.mlir.constant(64 : i64) : i64
  %buf = llvm.call @malloc(%size) : (i64) -> !llvm.ptr
  %px = llvm.getelementptr inbounds %x[%i] : (!llvm.ptr, i64) -> !llvm.ptr, bf16
  %v = llvm.load %px : !llvm.ptr -> bf16
  %pb = llvm.getelementptr inbounds %buf[%i] : (!llvm.ptr, i64) -> !llvm.ptr, bf16
  llvm.store %v, %pb : bf16, !llvm.ptr
  llvm.return
}

// -----

// Through calls: the parameters %in and %out of @body (private, only called
// directly) get scopes of a "tdf.parameters" domain, each the other's as
// noalias, because every call passes memory that never shares a byte: the
// caller's argument and a slice of its arena; two byte-disjoint slices of the
// arena; and, through @relay's own parameters, the caller's argument and
// arena again.
// CHECK: #[[$PD:.*]] = #llvm.alias_scope_domain<{{.*}}description = "tdf.parameters">
// CHECK: #[[$IN:alias_scope[0-9]*]] = #llvm.alias_scope<id = {{.*}}, domain = #[[$PD]]>
// CHECK: #[[$OUT:alias_scope[0-9]*]] = #llvm.alias_scope<id = {{.*}}, domain = #[[$PD]]>
// CHECK-LABEL: llvm.func @caller
// CHECK-LABEL: llvm.func @relay
// CHECK-NOT: alias_scopes
// CHECK-LABEL: llvm.func @body
// CHECK: llvm.load %{{.*}} {alias_scopes = [#[[$IN]]], noalias_scopes = [#[[$OUT]]]}
// CHECK: llvm.store %{{.*}}, %{{.*}} {alias_scopes = [#[[$OUT]]], noalias_scopes = [#[[$IN]]]}
llvm.func @aligned_alloc(i64, i64) -> !llvm.ptr
llvm.func @caller(%x: !llvm.ptr, %i: i64) {
  %align = llvm.mlir.constant(64 : i64) : i64
  %size = llvm.mlir.constant(128 : i64) : i64
  %c0 = llvm.mlir.constant(0 : i64) : i64
  %c64 = llvm.mlir.constant(64 : i64) : i64
  %arena = llvm.call @aligned_alloc(%align, %size) : (i64, i64) -> !llvm.ptr
  %a = llvm.getelementptr %arena[%c0] : (!llvm.ptr, i64) -> !llvm.ptr, i8 loc("tdf.slice:64"("a.py":1:1))
  %b = llvm.getelementptr %arena[%c64] : (!llvm.ptr, i64) -> !llvm.ptr, i8 loc("tdf.slice:64"("a.py":2:1))
  llvm.call @body(%x, %b, %i) : (!llvm.ptr, !llvm.ptr, i64) -> ()
  llvm.call @body(%a, %b, %c0) : (!llvm.ptr, !llvm.ptr, i64) -> ()
  llvm.call @relay(%x, %a, %i) : (!llvm.ptr, !llvm.ptr, i64) -> ()
  llvm.return
}
llvm.func @relay(%in: !llvm.ptr, %out: !llvm.ptr, %i: i64) attributes {sym_visibility = "private"} {
  llvm.call @body(%in, %out, %i) : (!llvm.ptr, !llvm.ptr, i64) -> ()
  llvm.return
}
llvm.func @body(%in: !llvm.ptr, %out: !llvm.ptr, %i: i64) attributes {sym_visibility = "private"} {
  %px = llvm.getelementptr inbounds %in[%i] : (!llvm.ptr, i64) -> !llvm.ptr, f32
  %v = llvm.load %px : !llvm.ptr -> f32
  %po = llvm.getelementptr inbounds %out[%i] : (!llvm.ptr, i64) -> !llvm.ptr, f32
  llvm.store %v, %po : f32, !llvm.ptr
  llvm.return
}

// -----

// negative_calls: no parameter scopes when code outside the module may call
// the function (@negative_public), when its address is taken
// (@negative_address_taken), or when one of its calls passes memory that may
// overlap (@negative_disagree: the same array twice).
// CHECK-LABEL: llvm.func @negative_public
// CHECK-NOT: alias_scopes
// CHECK: llvm.return
// CHECK-LABEL: llvm.func @negative_address_taken
// CHECK-NOT: alias_scopes
// CHECK: llvm.return
// CHECK-LABEL: llvm.func @negative_disagree
// CHECK-NOT: alias_scopes
// CHECK: llvm.return
llvm.func @malloc(i64) -> !llvm.ptr
llvm.func @negative_caller(%x: !llvm.ptr, %i: i64) -> !llvm.ptr {
  %size = llvm.mlir.constant(64 : i64) : i64
  %buf = llvm.call @malloc(%size) : (i64) -> !llvm.ptr
  llvm.call @negative_public(%x, %buf, %i) : (!llvm.ptr, !llvm.ptr, i64) -> ()
  llvm.call @negative_address_taken(%x, %buf, %i) : (!llvm.ptr, !llvm.ptr, i64) -> ()
  llvm.call @negative_disagree(%x, %buf, %i) : (!llvm.ptr, !llvm.ptr, i64) -> ()
  llvm.call @negative_disagree(%x, %x, %i) : (!llvm.ptr, !llvm.ptr, i64) -> ()
  %f = llvm.mlir.addressof @negative_address_taken : !llvm.ptr
  llvm.return %f : !llvm.ptr
}
llvm.func @negative_public(%x: !llvm.ptr, %out: !llvm.ptr, %i: i64) {
  %px = llvm.getelementptr inbounds %x[%i] : (!llvm.ptr, i64) -> !llvm.ptr, f32
  %v = llvm.load %px : !llvm.ptr -> f32
  %po = llvm.getelementptr inbounds %out[%i] : (!llvm.ptr, i64) -> !llvm.ptr, f32
  llvm.store %v, %po : f32, !llvm.ptr
  llvm.return
}
llvm.func @negative_address_taken(%x: !llvm.ptr, %out: !llvm.ptr, %i: i64) attributes {sym_visibility = "private"} {
  %px = llvm.getelementptr inbounds %x[%i] : (!llvm.ptr, i64) -> !llvm.ptr, f32
  %v = llvm.load %px : !llvm.ptr -> f32
  %po = llvm.getelementptr inbounds %out[%i] : (!llvm.ptr, i64) -> !llvm.ptr, f32
  llvm.store %v, %po : f32, !llvm.ptr
  llvm.return
}
llvm.func @negative_disagree(%x: !llvm.ptr, %out: !llvm.ptr, %i: i64) attributes {sym_visibility = "private"} {
  %px = llvm.getelementptr inbounds %x[%i] : (!llvm.ptr, i64) -> !llvm.ptr, f32
  %v = llvm.load %px : !llvm.ptr -> f32
  %po = llvm.getelementptr inbounds %out[%i] : (!llvm.ptr, i64) -> !llvm.ptr, f32
  llvm.store %v, %po : f32, !llvm.ptr
  llvm.return
}

// -----

// Through a parallel launch: a call of tdf-outline-parallel's launch
// declaration counts as a call of the body it names (same parameters, the
// count in the task number's place), so the body's parameters %in and %out
// get the parameter scopes when the launch passes the caller's argument and
// its own allocation.
// CHECK: #[[$PD:.*]] = #llvm.alias_scope_domain<{{.*}}description = "tdf.parameters">
// CHECK: #[[$IN:alias_scope[0-9]*]] = #llvm.alias_scope<id = {{.*}}, domain = #[[$PD]]>
// CHECK: #[[$OUT:alias_scope[0-9]*]] = #llvm.alias_scope<id = {{.*}}, domain = #[[$PD]]>
// CHECK-LABEL: llvm.func @body
// CHECK: llvm.load %{{.*}} {alias_scopes = [#[[$IN]]], noalias_scopes = [#[[$OUT]]]}
// CHECK: llvm.store %{{.*}}, %{{.*}} {alias_scopes = [#[[$OUT]]], noalias_scopes = [#[[$IN]]]}
llvm.func @aligned_alloc(i64, i64) -> !llvm.ptr
llvm.func @launch(i64, !llvm.ptr, !llvm.ptr) attributes {sym_visibility = "private", tdf.parallel_body = @body}
llvm.func @caller(%x: !llvm.ptr, %n: i64) {
  %align = llvm.mlir.constant(64 : i64) : i64
  %size = llvm.mlir.constant(128 : i64) : i64
  %out = llvm.call @aligned_alloc(%align, %size) : (i64, i64) -> !llvm.ptr
  llvm.call @launch(%n, %x, %out) : (i64, !llvm.ptr, !llvm.ptr) -> ()
  llvm.return
}
llvm.func @body(%t: i64, %in: !llvm.ptr, %out: !llvm.ptr) attributes {sym_visibility = "private"} {
  %px = llvm.getelementptr inbounds %in[%t] : (!llvm.ptr, i64) -> !llvm.ptr, f32
  %v = llvm.load %px : !llvm.ptr -> f32
  %po = llvm.getelementptr inbounds %out[%t] : (!llvm.ptr, i64) -> !llvm.ptr, f32
  llvm.store %v, %po : f32, !llvm.ptr
  llvm.return
}

// -----

// negative_: the same launch passing one array twice: no parameter scopes.
// CHECK-LABEL: llvm.func @body
// CHECK-NOT: alias_scopes
llvm.func @launch(i64, !llvm.ptr, !llvm.ptr) attributes {sym_visibility = "private", tdf.parallel_body = @body}
llvm.func @caller(%x: !llvm.ptr, %n: i64) {
  llvm.call @launch(%n, %x, %x) : (i64, !llvm.ptr, !llvm.ptr) -> ()
  llvm.return
}
llvm.func @body(%t: i64, %in: !llvm.ptr, %out: !llvm.ptr) attributes {sym_visibility = "private"} {
  %px = llvm.getelementptr inbounds %in[%t] : (!llvm.ptr, i64) -> !llvm.ptr, f32
  %v = llvm.load %px : !llvm.ptr -> f32
  %po = llvm.getelementptr inbounds %out[%t] : (!llvm.ptr, i64) -> !llvm.ptr, f32
  llvm.store %v, %po : f32, !llvm.ptr
  llvm.return
}
