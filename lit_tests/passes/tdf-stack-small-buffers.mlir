// RUN: tdf-opt %s --split-input-file --tdf-stack-small-buffers | FileCheck %s

// A small entry-block buffer freed in the same block: on the stack, no free.
// CHECK-LABEL: func.func @small_flags
// CHECK: %[[F:.*]] = memref.alloca() : memref<2xi1>
// CHECK: memref.store %{{.*}}, %[[F]]
// CHECK-NOT: memref.dealloc
// CHECK: return
func.func @small_flags(%b: i1) -> i1 {
  %c0 = arith.constant 0 : index
  %f = memref.alloc() : memref<2xi1>
  memref.store %b, %f[%c0] : memref<2xi1>
  %v = memref.load %f[%c0] : memref<2xi1>
  memref.dealloc %f : memref<2xi1>
  return %v : i1
}

// -----

// negative_: inside a loop (the stack would grow per iteration), larger than
// max-bytes, returned, or the planner's arena: left on the heap.
// CHECK-LABEL: func.func @negative_kept
// CHECK-NOT: memref.alloca
// CHECK: memref.alloc() : memref<4xf32>
// CHECK: memref.alloc() : memref<1024xf32>
// CHECK: memref.alloc() {tdf.arena} : memref<64xi8>
// CHECK: memref.alloc() : memref<2xf32>
// CHECK: return
func.func @negative_kept(%n: index) -> memref<2xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    %t = memref.alloc() : memref<4xf32>
    memref.dealloc %t : memref<4xf32>
  }
  %big = memref.alloc() : memref<1024xf32>
  memref.dealloc %big : memref<1024xf32>
  %arena = memref.alloc() {tdf.arena} : memref<64xi8>
  memref.dealloc %arena : memref<64xi8>
  %r = memref.alloc() : memref<2xf32>
  return %r : memref<2xf32>
}
