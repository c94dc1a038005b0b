// RUN: tdf-opt %s --split-input-file --tdf-outline-parallel | FileCheck %s

// The body of a one-dimensional scf.parallel becomes a private function of
// the task number and the values the body uses from outside (a constant is
// copied in, not passed); the loop becomes a call of a private launch
// declaration naming the body, with the iteration count first.
// CHECK-LABEL: func.func @chunks
// CHECK-SAME:    (%[[X:[^:]+]]: memref<8xf32>, %[[S:[^:]+]]: f32)
// CHECK:         %[[TWO:.*]] = arith.constant 2 : index
// CHECK:         call @[[LAUNCH:tdf_parallel_[0-9]+]](%[[TWO]], %[[X]], %[[S]]) : (index, memref<8xf32>, f32) -> ()
// CHECK-NOT:     scf.parallel
// CHECK:       func.func private @[[BODY:tdf_parallel_body_[0-9]+]](%[[T:.*]]: index, %[[BX:.*]]: memref<8xf32>, %[[BS:.*]]: f32)
// CHECK:         %[[FOUR:.*]] = arith.constant 4 : index
// CHECK:         %[[LO:.*]] = arith.muli %[[T]], %[[FOUR]] : index
// CHECK:         %[[V:.*]] = memref.subview %[[BX]][%[[LO]]] [4] [1]
// CHECK:         linalg.fill ins(%[[BS]] : f32) outs(%[[V]] :
// CHECK:         return
// CHECK:       func.func private @[[LAUNCH]](index, memref<8xf32>, f32) attributes {tdf.parallel_body = @[[BODY]]}
func.func @chunks(%x: memref<8xf32>, %s: f32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  scf.parallel (%t) = (%c0) to (%c2) step (%c1) {
    %lo = arith.muli %t, %c4 : index
    %v = memref.subview %x[%lo] [4] [1] : memref<8xf32> to memref<4xf32, strided<[1], offset: ?>>
    linalg.fill ins(%s : f32) outs(%v : memref<4xf32, strided<[1], offset: ?>>)
    scf.reduce
  }
  return
}

// -----

// Bounds other than 0 and 1: the count is ceil((ub - lb) / step) and the
// body computes its iteration from the task number.
// CHECK-LABEL: func.func @bounds
// CHECK-SAME:    (%[[X:[^:]+]]: memref<16xf32>, %[[LB:[^:]+]]: index, %[[UB:[^:]+]]: index)
// CHECK:         %[[THREE:.*]] = arith.constant 3 : index
// CHECK:         %[[SPAN:.*]] = arith.subi %[[UB]], %[[LB]] : index
// CHECK:         %[[N:.*]] = arith.ceildivsi %[[SPAN]], %[[THREE]] : index
// CHECK:         call @[[LAUNCH:tdf_parallel_[0-9]+]](%[[N]], %[[X]], %[[LB]])
// CHECK:       func.func private @[[BODY:tdf_parallel_body_[0-9]+]](%[[T:.*]]: index, %[[BX:.*]]: memref<16xf32>, %[[BLB:.*]]: index)
// CHECK-DAG:     %[[STEP:.*]] = arith.constant 3 : index
// CHECK:         %[[M:.*]] = arith.muli %[[T]], %[[STEP]] : index
// CHECK:         %[[I:.*]] = arith.addi %[[BLB]], %[[M]] : index
// CHECK:         memref.store %{{.*}}, %[[BX]][%[[I]]]
func.func @bounds(%x: memref<16xf32>, %lb: index, %ub: index) {
  %c3 = arith.constant 3 : index
  %one = arith.constant 1.0 : f32
  scf.parallel (%i) = (%lb) to (%ub) step (%c3) {
    memref.store %one, %x[%i] : memref<16xf32>
    scf.reduce
  }
  return
}

// -----

// negative_: two dimensions, a reduction and a loop nested in another
// parallel loop stay as they are (the nested one goes with its outer loop).
// CHECK-LABEL: func.func @negative_left_alone
// CHECK:         scf.parallel (%{{.*}}, %{{.*}}) =
// CHECK:         scf.parallel (%{{.*}}) = {{.*}} init
// CHECK:         call @tdf_parallel_
// CHECK-LABEL: func.func private @tdf_parallel_body_
// CHECK:         scf.parallel
func.func @negative_left_alone(%x: memref<4x4xf32>, %v: memref<4xf32>) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %zero = arith.constant 0.0 : f32
  scf.parallel (%i, %j) = (%c0, %c0) to (%c4, %c4) step (%c1, %c1) {
    memref.store %zero, %x[%i, %j] : memref<4x4xf32>
    scf.reduce
  }
  %sum = scf.parallel (%i) = (%c0) to (%c4) step (%c1) init (%zero) -> f32 {
    %e = memref.load %v[%i] : memref<4xf32>
    scf.reduce(%e : f32) {
    ^bb0(%a: f32, %b: f32):
      %s = arith.addf %a, %b : f32
      scf.reduce.return %s : f32
    }
  }
  scf.parallel (%i) = (%c0) to (%c4) step (%c1) {
    scf.parallel (%j) = (%c0) to (%c4) step (%c1) {
      memref.store %zero, %x[%i, %j] : memref<4x4xf32>
      scf.reduce
    }
    scf.reduce
  }
  return %sum : f32
}
