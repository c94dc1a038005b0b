// RUN: tdf-opt %s --split-input-file --tdf-gpu-host-scalars | FileCheck %s
// RUN: tdf-opt %s --split-input-file --tdf-gpu-host-scalars | tdf-opt --split-input-file | FileCheck %s
// RUN: tdf-opt %s --split-input-file --tdf-gpu-host-scalars --mlir-pass-statistics 2>&1 >/dev/null | FileCheck %s --check-prefix=STATS

// After tdf-gpu-device-memory: host code reads a small device buffer (a
// reduction's result, the start indices of an update): the buffer is copied
// whole into a host buffer (one alloca per buffer, at the function's entry)
// and read there. A one-element linalg op (the reduction to a scalar, a
// rank-0 fill) runs as a one-thread kernel: lowered to loops it would leave
// no parallel loop, so nothing of it would become a kernel.
// CHECK-LABEL: func.func @mean
// CHECK:         %[[H:.*]] = memref.alloca() : memref<f32>
// CHECK:         %[[D:.*]] = gpu.alloc () : memref<f32>
// CHECK:         gpu.launch blocks({{.*}}) in ({{.*}} = %{{.*}}, {{.*}} = %{{.*}}, {{.*}} = %{{.*}}) threads
// CHECK-NEXT:      linalg.fill
// CHECK-NEXT:      gpu.terminator
// CHECK:         gpu.launch
// CHECK-NEXT:      linalg.generic
// CHECK:           gpu.terminator
// CHECK:         gpu.memcpy  %[[H]], %[[D]] : memref<f32>, memref<f32> {tdf.transfer = "d2h"}
// CHECK-NEXT:    %[[V:.*]] = memref.load %[[H]][] : memref<f32>
// CHECK:         gpu.launch
// CHECK-NEXT:      linalg.fill ins(%[[V]] : f32) outs(%{{.*}} : memref<1xf32>)
// CHECK:         linalg.fill ins(%[[V]] : f32) outs(%{{.*}} : memref<4xf32>)
// CHECK-NEXT:    return %[[V]]
func.func @mean(%x: memref<256xf32>, %out: memref<4xf32>) -> f32 {
  %zero = arith.constant 0.0 : f32
  %d = gpu.alloc () : memref<f32>
  linalg.fill ins(%zero : f32) outs(%d : memref<f32>)
  linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> ()>],
                  iterator_types = ["reduction"]}
      ins(%x : memref<256xf32>) outs(%d : memref<f32>) {
  ^bb0(%in: f32, %acc: f32):
    %s = arith.addf %acc, %in : f32
    linalg.yield %s : f32
  }
  %v = memref.load %d[] : memref<f32>
  %one = gpu.alloc () : memref<1xf32>
  linalg.fill ins(%v : f32) outs(%one : memref<1xf32>)
  linalg.fill ins(%v : f32) outs(%out : memref<4xf32>)
  return %v : f32
}

// -----

// A host store into a small device buffer: copied down, stored into the
// host copy, copied back up. Two reads of one buffer share its host copy,
// each after a fresh copy down.
// CHECK-LABEL: func.func @indices
// CHECK:         %[[H:.*]] = memref.alloca() : memref<2xi32>
// CHECK:         %[[D:.*]] = gpu.alloc () : memref<2xi32>
// CHECK:         gpu.memcpy  %[[H]], %[[D]] {{.*}}"d2h"
// CHECK-NEXT:    memref.store %{{.*}}, %[[H]][%{{.*}}] : memref<2xi32>
// CHECK-NEXT:    gpu.memcpy  %[[D]], %[[H]] {{.*}}"h2d"
// CHECK:         gpu.memcpy  %[[H]], %[[D]] {{.*}}"d2h"
// CHECK-NEXT:    memref.load %[[H]][%{{.*}}] : memref<2xi32>
// CHECK:         gpu.memcpy  %[[H]], %[[D]] {{.*}}"d2h"
// CHECK-NEXT:    memref.load %[[H]][%{{.*}}] : memref<2xi32>
func.func @indices(%pos: i32) -> (i32, i32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %d = gpu.alloc () : memref<2xi32>
  memref.store %pos, %d[%c1] : memref<2xi32>
  %a = memref.load %d[%c0] : memref<2xi32>
  %b = memref.load %d[%c1] : memref<2xi32>
  return %a, %b : i32, i32
}

// -----

// A scatter loop reads its indices on the host: the loop does not write
// them, so they are copied once, in front of the loop (2 KiB: over max-bytes,
// within max-hoisted-bytes), not once per index. The loop's kernel writes
// another buffer.
// CHECK-LABEL: func.func @scatter
// CHECK:         %[[H:.*]] = memref.alloca() : memref<512xi32>
// CHECK:         %[[IDS:.*]] = gpu.alloc () : memref<512xi32>
// CHECK:         gpu.memcpy  %[[H]], %[[IDS]] {{.*}}"d2h"
// CHECK-NEXT:    scf.for
// CHECK-NOT:       gpu.memcpy
// CHECK:           memref.load %[[H]][%{{.*}}] : memref<512xi32>
// CHECK:           linalg.fill
func.func @scatter(%table: memref<64x8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c512 = arith.constant 512 : index
  %one = arith.constant 1.0 : f32
  %ids = gpu.alloc () : memref<512xi32>
  scf.for %i = %c0 to %c512 step %c1 {
    %id = memref.load %ids[%i] : memref<512xi32>
    %row = arith.index_cast %id : i32 to index
    %view = memref.subview %table[%row, 0] [1, 8] [1, 1] : memref<64x8xf32> to memref<8xf32, strided<[1], offset: ?>>
    linalg.fill ins(%one : f32) outs(%view : memref<8xf32, strided<[1], offset: ?>>)
  }
  return
}

// -----

// negative_: a loop that writes the buffer it reads (a kernel's output, here
// through a view) reads a fresh copy each iteration; and a 2 KiB buffer is
// then over max-bytes, so a loop that writes it keeps its read on the
// device (left to tdf-gpu-check-host-access).
// CHECK-LABEL: func.func @negative_written_in_loop
// CHECK:         scf.for
// CHECK-NEXT:      linalg.fill
// CHECK-NEXT:      gpu.memcpy  %{{.*}}, %[[S:.*]] {{.*}}"d2h"
// CHECK-NEXT:      memref.load
// CHECK:         scf.for
// CHECK-NOT:       gpu.memcpy
// CHECK:           memref.load %[[BIG:.*]][%{{.*}}] : memref<512xi32>
func.func @negative_written_in_loop(%n: index) -> (f32, i32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %z = arith.constant 0 : i32
  %s = gpu.alloc () : memref<4xf32>
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %zero) -> f32 {
    linalg.fill ins(%acc : f32) outs(%s : memref<4xf32>)
    %v = memref.load %s[%c0] : memref<4xf32>
    %a = arith.addf %acc, %v : f32
    scf.yield %a : f32
  }
  %big = gpu.alloc () : memref<512xi32>
  %q = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %z) -> i32 {
    %view = memref.subview %big[0] [4] [1] : memref<512xi32> to memref<4xi32, strided<[1]>>
    linalg.fill ins(%acc : i32) outs(%view : memref<4xi32, strided<[1]>>)
    %v = memref.load %big[%i] : memref<512xi32>
    scf.yield %v : i32
  }
  return %r, %q : f32, i32
}

// -----

// negative_: what the pass leaves alone. Host memory (an entry point's
// argument); a device buffer over max-bytes; a view with an offset (no
// identity layout); a load inside a loop that becomes a kernel; a linalg
// op of several elements. tdf-gpu-check-host-access reports the device
// accesses left on the host.
// CHECK-LABEL: func.func @negative_left_alone
// CHECK-NOT:     memref.alloca
// CHECK-NOT:     gpu.memcpy
// CHECK-NOT:     gpu.launch
// CHECK:         return
func.func @negative_left_alone(%host: memref<i32>, %i: index) -> (i32, f32, f32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %zero = arith.constant 0.0 : f32
  %a = memref.load %host[] : memref<i32>
  %big = gpu.alloc () : memref<128xf32>
  %b = memref.load %big[%i] : memref<128xf32>
  %view = memref.subview %big[%i] [1] [1] : memref<128xf32> to memref<1xf32, strided<[1], offset: ?>>
  %c = memref.load %view[%c0] : memref<1xf32, strided<[1], offset: ?>>
  %small = gpu.alloc () : memref<4xf32>
  scf.parallel (%j) = (%c0) to (%c4) step (%c1) {
    %x = memref.load %small[%j] : memref<4xf32>
    memref.store %x, %small[%j] : memref<4xf32>
    scf.reduce
  }
  linalg.fill ins(%zero : f32) outs(%small : memref<4xf32>)
  return %a, %b, %c : i32, f32, f32
}

// Statistics of the first split (@mean): three one-element ops launched,
// one host read.
// STATS:      (S) 3 single-thread-kernels
// STATS-NEXT: (S) 1 transfers
