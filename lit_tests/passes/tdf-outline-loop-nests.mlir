// RUN: tdf-opt %s --split-input-file --tdf-outline-loop-nests="min-ops=2 chunk=2" | FileCheck %s

// Runs of compute ops become private functions; the values they use from
// outside are parameters, constants are cloned in (loop bounds stay constant).
// CHECK-LABEL: func.func @main
// CHECK-SAME: (%[[X:.*]]: memref<64xf32>, %[[Y:.*]]: memref<64xf32>, %[[N:.*]]: index)
// CHECK: call @__tdf_part_main_0(%[[X]], %[[Y]], %[[N]])
// CHECK: call @__tdf_part_main_1(%[[Y]])
// CHECK: %[[T:.*]] = arith.addi %[[N]]
// CHECK: call @__tdf_part_main_2(%[[X]], %[[Y]])
// CHECK: return
// CHECK: func.func private @__tdf_part_main_0(%[[A:.*]]: memref<64xf32>, %[[B:.*]]: memref<64xf32>, %[[M:.*]]: index)
// CHECK-DAG: %[[TWO:.*]] = arith.constant 2.000000e+00 : f32
// CHECK-DAG: %[[ZERO:.*]] = arith.constant 0 : index
// CHECK: linalg.exp ins(%[[A]] : memref<64xf32>) outs(%[[B]] : memref<64xf32>)
// CHECK: scf.for %{{.*}} = %[[ZERO]] to %[[M]]
// CHECK: arith.mulf %{{.*}}, %[[TWO]]
// CHECK: func.func private @__tdf_part_main_1(%[[C:.*]]: memref<64xf32>)
// CHECK: linalg.generic {{.*}} outs(%[[C]] : memref<64xf32>)
// CHECK: func.func private @__tdf_part_main_2(
// CHECK: memref.copy
func.func @main(%x: memref<64xf32>, %y: memref<64xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %s = arith.constant 2.0 : f32
  linalg.exp ins(%x : memref<64xf32>) outs(%y : memref<64xf32>)
  scf.for %i = %c0 to %n step %c1 {
    %v = memref.load %y[%i] : memref<64xf32>
    %w = arith.mulf %v, %s : f32
    memref.store %w, %x[%i] : memref<64xf32>
  }
  linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} outs(%y : memref<64xf32>) {
  ^bb0(%o: f32):
    %r = arith.addf %o, %s : f32
    linalg.yield %r : f32
  }
  %t = arith.addi %n, %c1 : index
  memref.copy %x, %y : memref<64xf32> to memref<64xf32>
  return
}

// -----

// negative_: fewer compute ops than min-ops: the function is left alone.
// CHECK-LABEL: func.func @small
// CHECK-NOT: call
// CHECK: linalg.exp
// CHECK-NOT: __tdf_part
func.func @small(%x: memref<64xf32>, %y: memref<64xf32>) {
  linalg.exp ins(%x : memref<64xf32>) outs(%y : memref<64xf32>)
  return
}
