// RUN: tdf-opt %s --tdf-split-scf-blocks | FileCheck %s
// RUN: tdf-opt %s --tdf-split-scf-blocks --convert-scf-to-cf | FileCheck %s --check-prefix=CF

// Each function-body block is split after every scf op that something other
// than the terminator follows, in order, chained with cf.br; ops nested in
// scf regions (single-block) are left in place.
// CHECK-LABEL: func.func @three_ifs
// CHECK:         %[[X:.*]] = scf.if %{{.*}} -> (f32) {
// CHECK:         cf.br ^[[B1:bb[0-9]+]]
// CHECK:       ^[[B1]]:
// CHECK-NEXT:    %[[Y:.*]] = arith.addf %[[X]], %{{.*}} : f32
// CHECK-NEXT:    %[[Z:.*]] = scf.for {{.*}} iter_args(%[[ACC:.*]] = %[[Y]]) -> (f32) {
// CHECK-NEXT:      %[[T:.*]] = scf.if
// CHECK:           arith.mulf %[[T]], %[[ACC]] : f32
// CHECK-NOT:       cf.br
// CHECK:           scf.yield
// CHECK-NEXT:    }
// CHECK-NEXT:    cf.br ^[[B2:bb[0-9]+]]
// CHECK:       ^[[B2]]:
// CHECK-NEXT:    %[[W:.*]] = arith.addf %[[Z]], %[[Y]] : f32
// CHECK-NEXT:    %[[Q:.*]] = scf.if
// CHECK-NOT:     cf.br
// CHECK:         return %[[Q]] : f32
// CHECK-NEXT:  }
// CF-LABEL: func.func @three_ifs
// CF-NOT:   scf.
// CF:       return
func.func @three_ifs(%c: i1, %a: f32, %n: index) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %x = scf.if %c -> f32 {
    scf.yield %a : f32
  } else {
    %s = arith.addf %a, %a : f32
    scf.yield %s : f32
  }
  %y = arith.addf %x, %a : f32
  %z = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %y) -> f32 {
    %t = scf.if %c -> f32 {
      scf.yield %acc : f32
    } else {
      scf.yield %a : f32
    }
    %u = arith.mulf %t, %acc : f32
    scf.yield %u : f32
  }
  %w = arith.addf %z, %y : f32
  %q = scf.if %c -> f32 {
    scf.yield %w : f32
  } else {
    scf.yield %a : f32
  }
  return %q : f32
}

// An scf op followed only by the terminator, and a function without scf
// ops, are not split.
// CHECK-LABEL: func.func @negative_last_before_return
// CHECK-NOT:     cf.br
// CHECK:         return
func.func @negative_last_before_return(%c: i1) {
  scf.if %c {
    scf.yield
  }
  return
}

// CHECK-LABEL: func.func @negative_no_scf
// CHECK-NOT:     cf.br
// CHECK:         return
func.func @negative_no_scf(%a: f32) -> f32 {
  %b = arith.addf %a, %a : f32
  return %b : f32
}

// A body that already has several blocks: each is split on its own, and
// the existing successors stay the successors of the last piece.
// CHECK-LABEL: func.func @multi_block
// CHECK:         scf.if
// CHECK:         cf.br ^[[N:bb[0-9]+]]
// CHECK:       ^[[N]]:
// CHECK-NEXT:    memref.store
// CHECK-NEXT:    cf.br ^[[EXIT:bb[0-9]+]]
// CHECK:       ^[[EXIT]]:
// CHECK-NEXT:    return
func.func @multi_block(%c: i1, %m: memref<f32>, %a: f32) {
  scf.if %c {
    memref.store %a, %m[] : memref<f32>
  }
  memref.store %a, %m[] : memref<f32>
  cf.br ^exit
^exit:
  return
}
