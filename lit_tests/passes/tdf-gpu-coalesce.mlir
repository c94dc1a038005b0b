// RUN: tdf-opt %s --split-input-file --tdf-gpu-coalesce | FileCheck %s
// RUN: tdf-opt %s --tdf-gpu-coalesce --mlir-pass-statistics 2>&1 >/dev/null | FileCheck %s --check-prefix=STATS

// The dimensions of every outermost scf.parallel without reductions are
// reversed (bounds, steps and induction variables), so that the contiguous
// last dimension comes first and is mapped to threadIdx.x.

// CHECK-LABEL: func.func @two_dims
// CHECK-SAME:  (%[[A:.*]]: memref<64x128xf32>, %[[B:.*]]: memref<64x128xf32>)
// CHECK-DAG:   %[[C0:.*]] = arith.constant 0 : index
// CHECK-DAG:   %[[C1:.*]] = arith.constant 1 : index
// CHECK-DAG:   %[[C2:.*]] = arith.constant 2 : index
// CHECK-DAG:   %[[C64:.*]] = arith.constant 64 : index
// CHECK-DAG:   %[[C128:.*]] = arith.constant 128 : index
// CHECK:       scf.parallel (%[[J:.*]], %[[I:.*]]) = (%[[C1]], %[[C0]]) to (%[[C128]], %[[C64]]) step (%[[C2]], %[[C1]]) {
// CHECK-NEXT:    %[[V:.*]] = memref.load %[[A]][%[[I]], %[[J]]] : memref<64x128xf32>
// CHECK-NEXT:    memref.store %[[V]], %[[B]][%[[I]], %[[J]]] : memref<64x128xf32>
func.func @two_dims(%a: memref<64x128xf32>, %b: memref<64x128xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c64 = arith.constant 64 : index
  %c128 = arith.constant 128 : index
  scf.parallel (%i, %j) = (%c0, %c1) to (%c64, %c128) step (%c1, %c2) {
    %v = memref.load %a[%i, %j] : memref<64x128xf32>
    memref.store %v, %b[%i, %j] : memref<64x128xf32>
    scf.reduce
  }
  return
}

// -----

// Three dimensions: (i, j, k) becomes (k, j, i); a nested scf.parallel
// inside the outermost one is left as it is.
// CHECK-LABEL: func.func @three_dims_nested
// CHECK-SAME:  (%[[A:.*]]: memref<2x3x4xf32>)
// CHECK-DAG:   %[[C0:.*]] = arith.constant 0 : index
// CHECK-DAG:   %[[C1:.*]] = arith.constant 1 : index
// CHECK-DAG:   %[[C2:.*]] = arith.constant 2 : index
// CHECK-DAG:   %[[C3:.*]] = arith.constant 3 : index
// CHECK-DAG:   %[[C4:.*]] = arith.constant 4 : index
// CHECK:       scf.parallel (%[[K:.*]], %[[J:.*]], %[[I:.*]]) = (%[[C0]], %[[C0]], %[[C0]]) to (%[[C4]], %[[C3]], %[[C2]])
// CHECK-NEXT:    %[[V:.*]] = memref.load %[[A]][%[[I]], %[[J]], %[[K]]]
// CHECK-NEXT:    scf.parallel (%[[P:.*]], %[[Q:.*]]) = (%[[C0]], %[[C0]]) to (%[[C2]], %[[C3]])
// CHECK-NEXT:      memref.store %[[V]], %[[A]][%[[P]], %[[Q]], %[[K]]]
func.func @three_dims_nested(%a: memref<2x3x4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  scf.parallel (%i, %j, %k) = (%c0, %c0, %c0) to (%c2, %c3, %c4) step (%c1, %c1, %c1) {
    %v = memref.load %a[%i, %j, %k] : memref<2x3x4xf32>
    scf.parallel (%p, %q) = (%c0, %c0) to (%c2, %c3) step (%c1, %c1) {
      memref.store %v, %a[%p, %q, %k] : memref<2x3x4xf32>
      scf.reduce
    }
    scf.reduce
  }
  return
}

// -----

// Not reversed: a loop with a reduction (its results), and a 1-D loop.
// CHECK-LABEL: func.func @negative_reduction_and_one_dim
// CHECK-SAME:  (%[[A:.*]]: memref<4x8xf32>)
// CHECK-DAG:   %[[C0:.*]] = arith.constant 0 : index
// CHECK-DAG:   %[[C4:.*]] = arith.constant 4 : index
// CHECK-DAG:   %[[C8:.*]] = arith.constant 8 : index
// CHECK:       %[[S:.*]] = scf.parallel (%[[I:.*]], %[[J:.*]]) = (%[[C0]], %[[C0]]) to (%[[C4]], %[[C8]])
// CHECK:         memref.load %[[A]][%[[I]], %[[J]]]
// CHECK:       scf.parallel (%[[R:.*]]) = (%[[C0]]) to (%[[C4]])
// CHECK:         memref.store %[[S]], %[[A]][%[[R]], %[[C0]]]
func.func @negative_reduction_and_one_dim(%a: memref<4x8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %zero = arith.constant 0.0 : f32
  %sum = scf.parallel (%i, %j) = (%c0, %c0) to (%c4, %c8) step (%c1, %c1) init (%zero) -> f32 {
    %v = memref.load %a[%i, %j] : memref<4x8xf32>
    scf.reduce(%v : f32) {
    ^bb0(%x: f32, %y: f32):
      %s = arith.addf %x, %y : f32
      scf.reduce.return %s : f32
    }
  }
  scf.parallel (%r) = (%c0) to (%c4) step (%c1) {
    memref.store %sum, %a[%r, %c0] : memref<4x8xf32>
    scf.reduce
  }
  return
}

// One per outermost loop without results (the 1-D loop counts; reversing
// one dimension changes nothing).
// STATS: (S) 3 reversed
