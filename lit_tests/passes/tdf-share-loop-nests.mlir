// RUN: tdf-opt %s --split-input-file --tdf-share-loop-nests | FileCheck %s
// RUN: tdf-opt %s --split-input-file --tdf-share-loop-nests --mlir-pass-statistics 2>&1 >/dev/null | FileCheck %s --check-prefix=STATS

// Two identical loop nests on different buffers become two calls of one
// private function. The constant the body reads is copied into the function
// (it stays a constant to LLVM); the scalar %s it reads from outside becomes
// a parameter, after the op's operands.
// CHECK-LABEL: func.func @layers
// CHECK-SAME:  (%[[A:.*]]: memref<256xf32>, %[[B:.*]]: memref<256xf32>, %[[C:.*]]: memref<256xf32>, %[[S:.*]]: f32)
// CHECK:       call @tdf_shared_0(%[[A]], %[[B]], %[[S]]) : (memref<256xf32>, memref<256xf32>, f32) -> ()
// CHECK:       call @tdf_shared_0(%[[B]], %[[C]], %[[S]]) : (memref<256xf32>, memref<256xf32>, f32) -> ()
// CHECK-NOT:   linalg.generic
// CHECK:       return
// CHECK-LABEL: func.func private @tdf_shared_0
// CHECK-SAME:  (%[[X:.*]]: memref<256xf32>, %[[Y:.*]]: memref<256xf32>, %[[T:.*]]: f32)
// CHECK:       %[[TWO:.*]] = arith.constant 2.000000e+00 : f32
// CHECK:       linalg.generic {{.*}} ins(%[[X]] : memref<256xf32>) outs(%[[Y]] : memref<256xf32>)
// CHECK:         arith.mulf %{{.*}}, %[[TWO]]
// CHECK:         arith.addf %{{.*}}, %[[T]]
// CHECK:       return
// CHECK-NOT:   func.func private @tdf_shared_1
#id = affine_map<(d0) -> (d0)>
func.func @layers(%a: memref<256xf32>, %b: memref<256xf32>, %c: memref<256xf32>, %s: f32) {
  %two = arith.constant 2.0 : f32
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%a : memref<256xf32>) outs(%b : memref<256xf32>) {
  ^bb0(%x: f32, %y: f32):
    %m = arith.mulf %x, %two : f32
    %r = arith.addf %m, %s : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%b : memref<256xf32>) outs(%c : memref<256xf32>) {
  ^bb0(%x: f32, %y: f32):
    %m = arith.mulf %x, %two : f32
    %r = arith.addf %m, %s : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// negative_different: nothing is shared between ops that differ in a
// constant, in a type, or in which operands are the same value (an in-place
// op on one buffer is not a copy between two), nor for ops smaller than
// min-elements (64) or without a twin.
// CHECK-LABEL: func.func @negative_different
// CHECK-NOT:   call
// CHECK:       return
// CHECK-NOT:   func.func private @tdf_shared
#id = affine_map<(d0) -> (d0)>
func.func @negative_different(%a: memref<256xf32>, %b: memref<256xf32>, %d: memref<128xf32>,
                              %e: memref<128xf32>, %s0: memref<16xf32>, %s1: memref<16xf32>) {
  %two = arith.constant 2.0 : f32
  %three = arith.constant 3.0 : f32
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%a : memref<256xf32>) outs(%b : memref<256xf32>) {
  ^bb0(%x: f32, %y: f32):
    %m = arith.mulf %x, %two : f32
    linalg.yield %m : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%a : memref<256xf32>) outs(%b : memref<256xf32>) {
  ^bb0(%x: f32, %y: f32):
    %m = arith.mulf %x, %three : f32
    linalg.yield %m : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%d : memref<128xf32>) outs(%e : memref<128xf32>) {
  ^bb0(%x: f32, %y: f32):
    %m = arith.mulf %x, %x : f32
    linalg.yield %m : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%d : memref<128xf32>) outs(%d : memref<128xf32>) {
  ^bb0(%x: f32, %y: f32):
    %m = arith.mulf %x, %x : f32
    linalg.yield %m : f32
  }
  linalg.copy ins(%s0 : memref<16xf32>) outs(%s1 : memref<16xf32>)
  linalg.copy ins(%s1 : memref<16xf32>) outs(%s0 : memref<16xf32>)
  return
}

// Statistics per split: two ops shared through one function; none.
// STATS: (S) 1 functions - shared functions made
// STATS: (S) 2 shared - linalg ops replaced by a call of a shared function
// STATS: (S) 0 functions - shared functions made
// STATS: (S) 0 shared - linalg ops replaced by a call of a shared function
