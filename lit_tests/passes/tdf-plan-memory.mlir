// RUN: tdf-opt %s --split-input-file --tdf-plan-memory | FileCheck %s
// RUN: tdf-opt %s --split-input-file --tdf-plan-memory=remarks=true 2>&1 >/dev/null | FileCheck %s --check-prefix=REMARK

// A chain: the first temporary lives inside the result's bytes (the result is
// not live yet), the second in the arena; one allocation each.
// CHECK-LABEL: func.func @chain
// CHECK-SAME: tdf.memory_plan = {arena = 256 : i64, {{.*}}hosted = 1 : i64, hosts = 256 : i64, kept = 1 : i64, {{.*}}lower_bound = 512 : i64, planned = 2 : i64
// CHECK: %[[HOST:.*]] = memref.alloc() {alignment = 64 : i64, tdf.arena} : memref<256xi8>
// CHECK: %[[ARENA:.*]] = memref.alloc() {alignment = 64 : i64, tdf.arena} : memref<256xi8>
// CHECK: %[[A:.*]] = memref.view %[[HOST]][%{{.*}}][] : memref<256xi8> to memref<64xf32>
// CHECK: linalg.exp ins(%{{.*}} : memref<64xf32>) outs(%[[A]] : memref<64xf32>)
// CHECK: %[[B:.*]] = memref.view %[[ARENA]][%{{.*}}][] : memref<256xi8> to memref<64xf32>
// CHECK: linalg.exp ins(%[[A]] : memref<64xf32>) outs(%[[B]] : memref<64xf32>)
// CHECK: %[[C:.*]] = memref.view %[[HOST]][%{{.*}}][] : memref<256xi8> to memref<64xf32>
// CHECK: linalg.exp ins(%[[B]] : memref<64xf32>) outs(%[[C]] : memref<64xf32>)
// CHECK: return %[[C]]
// REMARK: remark: %alloc: 256 bytes, live [0, 3]: result %alloc_1 + 0
// REMARK: remark: %alloc_0: 256 bytes, live [2, 5]: arena + 0
// REMARK: remark: %alloc_1: 256 bytes, live [4, 7]: own allocation (returned)
func.func @chain(%x: memref<64xf32>) -> memref<64xf32> {
  %a = memref.alloc() {alignment = 64 : i64} : memref<64xf32>
  linalg.exp ins(%x : memref<64xf32>) outs(%a : memref<64xf32>)
  %b = memref.alloc() {alignment = 64 : i64} : memref<64xf32>
  linalg.exp ins(%a : memref<64xf32>) outs(%b : memref<64xf32>)
  %c = memref.alloc() {alignment = 64 : i64} : memref<64xf32>
  linalg.exp ins(%b : memref<64xf32>) outs(%c : memref<64xf32>)
  return %c : memref<64xf32>
}

// -----

// Temporaries live at once never share bytes; dead ones do. %a dies when %c
// is written, so %d (allocated after) takes %a's offset, not %b's or %c's.
// CHECK-LABEL: func.func @reuse_after_last_use
// CHECK-SAME: arena = 192 : i64
// CHECK: %[[ARENA:.*]] = memref.alloc() {alignment = 64 : i64, tdf.arena} : memref<192xi8>
// CHECK-COUNT-4: memref.view %[[ARENA]]
// REMARK: tdf-plan-memory.mlir:[[# @LINE + 5]]:{{.*}}: 64 bytes, live [0, 5]: arena + 0
// REMARK: tdf-plan-memory.mlir:[[# @LINE + 6]]:{{.*}}: 64 bytes, live [2, 7]: arena + 64
// REMARK: tdf-plan-memory.mlir:[[# @LINE + 7]]:{{.*}}: 64 bytes, live [4, 7]: arena + 128
// REMARK: tdf-plan-memory.mlir:[[# @LINE + 8]]:{{.*}}: 64 bytes, live [6, 8]: arena + 0
func.func @reuse_after_last_use(%x: memref<16xf32>, %out: memref<16xf32>) {
  %a = memref.alloc() : memref<16xf32>
  linalg.exp ins(%x : memref<16xf32>) outs(%a : memref<16xf32>)
  %b = memref.alloc() : memref<16xf32>
  linalg.exp ins(%x : memref<16xf32>) outs(%b : memref<16xf32>)
  %c = memref.alloc() : memref<16xf32>
  linalg.add ins(%a, %b : memref<16xf32>, memref<16xf32>) outs(%c : memref<16xf32>)
  %d = memref.alloc() : memref<16xf32>
  linalg.add ins(%b, %c : memref<16xf32>, memref<16xf32>) outs(%d : memref<16xf32>)
  memref.copy %d, %out : memref<16xf32> to memref<16xf32>
  return
}

// -----

// negative_ (the hazard of planners that follow SSA values only): %a is
// written in place, then read again through a view after %b is written. %b is
// allocated after %a's last *direct* use, but the view keeps %a live: they must
// not share bytes.
// CHECK-LABEL: func.func @negative_view_extends_lifetime
// CHECK-SAME: arena = 128 : i64
// REMARK: tdf-plan-memory.mlir:[[# @LINE + 3]]:{{.*}}: 64 bytes, live [0, 7]: arena + 0
// REMARK: tdf-plan-memory.mlir:[[# @LINE + 6]]:{{.*}}: 64 bytes, live [4, 7]: arena + 64
func.func @negative_view_extends_lifetime(%x: memref<16xf32>, %out: memref<8xf32>) {
  %a = memref.alloc() : memref<16xf32>
  linalg.exp ins(%x : memref<16xf32>) outs(%a : memref<16xf32>)
  linalg.exp ins(%a : memref<16xf32>) outs(%a : memref<16xf32>)
  %head = memref.subview %a[0] [8] [1] : memref<16xf32> to memref<8xf32, strided<[1]>>
  %b = memref.alloc() : memref<16xf32>
  linalg.exp ins(%x : memref<16xf32>) outs(%b : memref<16xf32>)
  %bh = memref.subview %b[8] [8] [1] : memref<16xf32> to memref<8xf32, strided<[1], offset: 8>>
  linalg.add ins(%head, %bh : memref<8xf32, strided<[1]>>, memref<8xf32, strided<[1], offset: 8>>) outs(%out : memref<8xf32>)
  return
}

// -----

// A per-iteration buffer of a loop body moves into the arena, allocated once
// at function entry.
// CHECK-LABEL: func.func @loop_body_buffer
// CHECK: %[[ARENA:.*]] = memref.alloc() {alignment = 64 : i64, tdf.arena} : memref<64xi8>
// CHECK: scf.for
// CHECK-NOT: memref.alloc
// CHECK: memref.view %[[ARENA]]
// CHECK: linalg.exp
func.func @loop_body_buffer(%x: memref<16xf32>, %out: memref<16xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    %t = memref.alloc() : memref<16xf32>
    linalg.exp ins(%x : memref<16xf32>) outs(%t : memref<16xf32>)
    linalg.add ins(%t, %out : memref<16xf32>, memref<16xf32>) outs(%out : memref<16xf32>)
  }
  return
}

// -----

// A buffer yielded to the next iteration is copied into the iteration's own
// carried buffer at the end of the body (the loop starts from %init, which
// nothing reads after the loop starts): the per-iteration buffer is then a
// temporary of the arena, and the carried state lives in %init all along.
// CHECK-LABEL: func.func @loop_carried_in_one_buffer
// CHECK-SAME: carried = 1 : i64
// CHECK: %[[ARENA:.*]] = memref.alloc() {alignment = 64 : i64, tdf.arena} : memref<128xi8>
// CHECK: %[[INIT:.*]] = memref.view %[[ARENA]]
// CHECK: scf.for {{.*}} iter_args(%[[H:.*]] = %[[INIT]])
// CHECK: %[[NEW:.*]] = memref.view %[[ARENA]]
// CHECK: linalg.exp ins(%[[H]] : memref<16xf32>) outs(%[[NEW]] : memref<16xf32>)
// CHECK: memref.copy %[[NEW]], %[[H]]
// CHECK: scf.yield %[[H]]
func.func @loop_carried_in_one_buffer(%x: memref<16xf32>, %n: index, %out: memref<16xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %init = memref.alloc() : memref<16xf32>
  memref.copy %x, %init : memref<16xf32> to memref<16xf32>
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%h = %init) -> (memref<16xf32>) {
    %t = memref.alloc() : memref<16xf32>
    linalg.exp ins(%h : memref<16xf32>) outs(%t : memref<16xf32>)
    scf.yield %t : memref<16xf32>
  }
  memref.copy %r, %out : memref<16xf32> to memref<16xf32>
  return
}

// -----

// The state is read (into %t) before the new state's buffer is first used:
// the new state is computed in the carried buffer itself, with no copy.
// CHECK-LABEL: func.func @loop_carried_no_copy
// CHECK-SAME: carried = 1 : i64
// CHECK: scf.for {{.*}} iter_args(%[[H:.*]] = %{{.*}})
// CHECK: %[[T:.*]] = memref.view
// CHECK: linalg.exp ins(%[[H]] : memref<16xf32>) outs(%[[T]] : memref<16xf32>)
// CHECK: linalg.exp ins(%[[T]] : memref<16xf32>) outs(%[[H]] : memref<16xf32>)
// CHECK-NOT: memref.copy
// CHECK: scf.yield %[[H]]
func.func @loop_carried_no_copy(%x: memref<16xf32>, %n: index, %out: memref<16xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %init = memref.alloc() : memref<16xf32>
  memref.copy %x, %init : memref<16xf32> to memref<16xf32>
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%h = %init) -> (memref<16xf32>) {
    %t = memref.alloc() : memref<16xf32>
    linalg.exp ins(%h : memref<16xf32>) outs(%t : memref<16xf32>)
    %new = memref.alloc() : memref<16xf32>
    linalg.exp ins(%t : memref<16xf32>) outs(%new : memref<16xf32>)
    scf.yield %new : memref<16xf32>
  }
  memref.copy %r, %out : memref<16xf32> to memref<16xf32>
  return
}

// -----

// The new state's buffer is in use before the state's last read (an
// in-place chain t = exp(x); t = t + h), but its final contents come from one
// op that overwrites all of it after that read (t = tanh(t)): that op writes
// the carried buffer instead, and there is no copy; %t stays a temporary.
#id = affine_map<(d0) -> (d0)>
// CHECK-LABEL: func.func @loop_carried_last_writer
// CHECK-SAME: carried = 1 : i64
// CHECK: scf.for {{.*}} iter_args(%[[H:.*]] = %{{.*}})
// CHECK: %[[T:.*]] = memref.view
// CHECK: linalg.add ins(%[[T]], %[[H]] : memref<16xf32>, memref<16xf32>) outs(%[[T]] : memref<16xf32>)
// CHECK: linalg.generic {{.*}} ins(%[[T]] : memref<16xf32>) outs(%[[H]] : memref<16xf32>)
// CHECK-NOT: memref.copy
// CHECK: scf.yield %[[H]]
func.func @loop_carried_last_writer(%x: memref<16xf32>, %n: index, %out: memref<16xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %init = memref.alloc() : memref<16xf32>
  memref.copy %x, %init : memref<16xf32> to memref<16xf32>
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%h = %init) -> (memref<16xf32>) {
    %t = memref.alloc() : memref<16xf32>
    linalg.exp ins(%x : memref<16xf32>) outs(%t : memref<16xf32>)
    linalg.add ins(%t, %h : memref<16xf32>, memref<16xf32>) outs(%t : memref<16xf32>)
    linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
        ins(%t : memref<16xf32>) outs(%t : memref<16xf32>) {
    ^bb0(%a: f32, %o: f32):
      %v = math.tanh %a : f32
      linalg.yield %v : f32
    }
    scf.yield %t : memref<16xf32>
  }
  memref.copy %r, %out : memref<16xf32> to memref<16xf32>
  return
}

// -----

// negative_: the state is read by the last writer itself (h = tanh(t + h)):
// the copy stays.
#id = affine_map<(d0) -> (d0)>
// CHECK-LABEL: func.func @negative_last_writer_reads_state
// CHECK: linalg.generic {{.*}} outs(%[[T:.*]] : memref<16xf32>)
// CHECK: memref.copy %[[T]]
func.func @negative_last_writer_reads_state(%x: memref<16xf32>, %n: index, %out: memref<16xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %init = memref.alloc() : memref<16xf32>
  memref.copy %x, %init : memref<16xf32> to memref<16xf32>
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%h = %init) -> (memref<16xf32>) {
    %t = memref.alloc() : memref<16xf32>
    linalg.exp ins(%x : memref<16xf32>) outs(%t : memref<16xf32>)
    linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
        ins(%t, %h : memref<16xf32>, memref<16xf32>) outs(%t : memref<16xf32>) {
    ^bb0(%a: f32, %b: f32, %o: f32):
      %s = arith.addf %a, %b : f32
      %v = math.tanh %s : f32
      linalg.yield %v : f32
    }
    scf.yield %t : memref<16xf32>
  }
  memref.copy %r, %out : memref<16xf32> to memref<16xf32>
  return
}

// -----

// negative_: the previous state is also yielded (at position 1), so it must
// survive the iteration: the new state keeps a buffer per iteration.
// CHECK-LABEL: func.func @negative_loop_carried
// CHECK-SAME: carried = 0 : i64
// CHECK: scf.for
// CHECK: memref.alloc() : memref<16xf32>
// CHECK: scf.yield
// REMARK: remark: %alloc: 64 bytes, live [{{.*}}]: own allocation (carried from one loop iteration to the next)
func.func @negative_loop_carried(%x: memref<16xf32>, %n: index, %out: memref<16xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r:2 = scf.for %i = %c0 to %n step %c1 iter_args(%h = %x, %prev = %x) -> (memref<16xf32>, memref<16xf32>) {
    %t = memref.alloc() : memref<16xf32>
    linalg.exp ins(%h : memref<16xf32>) outs(%t : memref<16xf32>)
    scf.yield %t, %h : memref<16xf32>, memref<16xf32>
  }
  linalg.add ins(%r#0, %r#1 : memref<16xf32>, memref<16xf32>) outs(%out : memref<16xf32>)
  return
}

// -----

// negative_: dynamic sizes and buffers passed to an opaque callee (a
// body-less function returning memrefs may keep them) are left alone; an i1
// buffer is planned (as bytes).
// CHECK-LABEL: func.func @negative_kept
// CHECK-SAME: dynamic = 1 : i64
// CHECK-SAME: kept = 2 : i64
// CHECK-SAME: planned = 1 : i64
// CHECK: memref.view {{.*}} to memref<4xi1>
// CHECK-NOT: memref.view
// CHECK: return
func.func private @keep(memref<4xf32>) -> memref<4xf32>
func.func @negative_kept(%n: index, %x: memref<4xf32>) -> memref<4xf32> {
  %d = memref.alloc(%n) : memref<?xf32>
  %b = memref.alloc() : memref<4xi1>
  %o = memref.alloc() : memref<4xf32>
  memref.copy %x, %o : memref<4xf32> to memref<4xf32>
  %r = func.call @keep(%o) : (memref<4xf32>) -> memref<4xf32>
  return %r : memref<4xf32>
}

// -----

// A buffer yielded by an scf.if lives until the last use of the if's result:
// %v, written while %r is read, gets bytes of its own. (The two branches'
// buffers could share bytes; the plan does not look at that yet.)
// CHECK-LABEL: func.func @branch_result_extends_lifetime
// CHECK: %[[ARENA:.*]] = memref.alloc() {alignment = 64 : i64, tdf.arena} : memref<192xi8>
// CHECK: scf.if
// CHECK: memref.view %[[ARENA]]
// CHECK: } else {
// CHECK: memref.view %[[ARENA]]
// CHECK: memref.view %[[ARENA]]
// REMARK: tdf-plan-memory.mlir:[[# @LINE + 5]]:{{.*}}: 64 bytes, live [0, 2]: arena + 0
// REMARK: tdf-plan-memory.mlir:[[# @LINE + 8]]:{{.*}}: 64 bytes, live [0, 2]: arena + 64
// REMARK: tdf-plan-memory.mlir:[[# @LINE + 11]]:{{.*}}: 64 bytes, live [1, 3]: arena + 128
func.func @branch_result_extends_lifetime(%c: i1, %x: memref<16xf32>, %out: memref<16xf32>) {
  %r = scf.if %c -> memref<16xf32> {
    %t = memref.alloc() : memref<16xf32>
    linalg.exp ins(%x : memref<16xf32>) outs(%t : memref<16xf32>)
    scf.yield %t : memref<16xf32>
  } else {
    %u = memref.alloc() : memref<16xf32>
    linalg.abs ins(%x : memref<16xf32>) outs(%u : memref<16xf32>)
    scf.yield %u : memref<16xf32>
  }
  %v = memref.alloc() : memref<16xf32>
  linalg.exp ins(%r : memref<16xf32>) outs(%v : memref<16xf32>)
  memref.copy %v, %out : memref<16xf32> to memref<16xf32>
  return
}

// -----

// The input's own views of one buffer share bytes while live (%a is read
// while %d, 64 KiB into it, is written): the function is not planned (no
// tdf.memory_plan, the buffer keeps its own allocation) rather than
// reported as a bad plan.
// CHECK-LABEL: func.func @negative_input_views_overlap
// CHECK-NOT:     tdf.memory_plan
// CHECK:         memref.alloc() : memref<262144xi8>
// REMARK: remark: not planned: views of one buffer in the input share bytes while live
func.func @negative_input_views_overlap(%b: memref<512x512xf32>) {
  %arena = memref.alloc() : memref<262144xi8>
  %c0 = arith.constant 0 : index
  %c65536 = arith.constant 65536 : index
  %a = memref.view %arena[%c0][] : memref<262144xi8> to memref<64x512xf32>
  %d = memref.view %arena[%c65536][] : memref<262144xi8> to memref<64x512xf32>
  linalg.matmul ins(%a, %b : memref<64x512xf32>, memref<512x512xf32>) outs(%d : memref<64x512xf32>)
  memref.dealloc %arena : memref<262144xi8>
  return
}
