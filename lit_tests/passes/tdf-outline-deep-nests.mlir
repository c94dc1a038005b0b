// RUN: tdf-opt %s --split-input-file --tdf-outline-deep-nests=depth=2 | FileCheck %s
// RUN: tdf-opt %s --split-input-file --tdf-outline-deep-nests=depth=0 | FileCheck %s --check-prefix=OFF

// Three levels with depth=2: the scf.if two levels deep moves into a private
// function, the constant it reads is copied in (it stays a constant), and its
// tensor parameter is donated: the operand is dead after the call.
// CHECK-LABEL: func.func @ifs
// CHECK: scf.if
// CHECK: scf.if
// CHECK-NEXT: %[[R:.*]] = func.call @tdf_nest_0(%{{.*}}, %arg0) : (i1, tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT: scf.yield %[[R]]
// CHECK: func.func private @tdf_nest_0(%[[C:.*]]: i1, %[[X:.*]]: tensor<4xf32> {tdf.donate}) -> tensor<4xf32> attributes {tdf.outlined}
// CHECK-NEXT: %[[ONE:.*]] = arith.constant dense<1.000000e+00>
// CHECK-NEXT: %[[T:.*]] = scf.if %[[C]]
// CHECK: linalg.add ins(%[[X]], %[[ONE]]
// CHECK: return %[[T]]
// OFF-LABEL: func.func @ifs
// OFF-NOT: func.call
// OFF-NOT: tdf_nest
func.func @ifs(%x: tensor<4xf32> {tdf.donate}, %a: i1, %b: i1, %c: i1) -> tensor<4xf32> {
  %one = arith.constant dense<1.0> : tensor<4xf32>
  %r = scf.if %a -> (tensor<4xf32>) {
    %s = scf.if %b -> (tensor<4xf32>) {
      %t = scf.if %c -> (tensor<4xf32>) {
        %e = tensor.empty() : tensor<4xf32>
        %y = linalg.add ins(%x, %one : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
        scf.yield %y : tensor<4xf32>
      } else {
        scf.yield %x : tensor<4xf32>
      }
      scf.yield %t : tensor<4xf32>
    } else {
      scf.yield %x : tensor<4xf32>
    }
    scf.yield %s : tensor<4xf32>
  } else {
    scf.yield %x : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}

// -----

// negative_ the operand is read again after the call (the second result):
// the outlined function must not write it, so its parameter is not donated.
// CHECK-LABEL: func.func @negative_read_after
// CHECK: func.call @tdf_nest_0
// CHECK: func.func private @tdf_nest_0(%{{.*}}: i1, %{{.*}}: tensor<4xf32>) -> tensor<4xf32>
// CHECK-NOT: tdf.donate
func.func @negative_read_after(%x: tensor<4xf32> {tdf.donate}, %a: i1, %b: i1, %c: i1)
    -> (tensor<4xf32>, tensor<4xf32>) {
  %r = scf.if %a -> (tensor<4xf32>) {
    %s = scf.if %b -> (tensor<4xf32>) {
      %t = scf.if %c -> (tensor<4xf32>) {
        %y = linalg.exp ins(%x : tensor<4xf32>) outs(%x : tensor<4xf32>) -> tensor<4xf32>
        scf.yield %y : tensor<4xf32>
      } else {
        scf.yield %x : tensor<4xf32>
      }
      scf.yield %t : tensor<4xf32>
    } else {
      scf.yield %x : tensor<4xf32>
    }
    scf.yield %s : tensor<4xf32>
  } else {
    scf.yield %x : tensor<4xf32>
  }
  return %r, %x : tensor<4xf32>, tensor<4xf32>
}

// -----

// negative_ a non-donated argument is not the caller's to give away.
// CHECK-LABEL: func.func @negative_not_owned
// CHECK: func.func private @tdf_nest_0(%{{.*}}: i1, %{{.*}}: tensor<4xf32>) -> tensor<4xf32>
// CHECK-NOT: tdf.donate
func.func @negative_not_owned(%x: tensor<4xf32>, %a: i1, %b: i1, %c: i1) -> tensor<4xf32> {
  %r = scf.if %a -> (tensor<4xf32>) {
    %s = scf.if %b -> (tensor<4xf32>) {
      %t = scf.if %c -> (tensor<4xf32>) {
        %y = linalg.exp ins(%x : tensor<4xf32>) outs(%x : tensor<4xf32>) -> tensor<4xf32>
        scf.yield %y : tensor<4xf32>
      } else {
        scf.yield %x : tensor<4xf32>
      }
      scf.yield %t : tensor<4xf32>
    } else {
      scf.yield %x : tensor<4xf32>
    }
    scf.yield %s : tensor<4xf32>
  } else {
    scf.yield %x : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}

// -----

// Loops five deep with depth=2: the loops at depth 2 and 4 move, deepest
// first (@tdf_nest_0 is the innermost, called from @tdf_nest_1); the
// loop-carried tensor defined in the caller's loop is donated at each call.
// CHECK-LABEL: func.func @loops
// CHECK-COUNT-2: scf.for
// CHECK: func.call @tdf_nest_1(
// CHECK-NOT: scf.for
// CHECK: return
// CHECK: func.func private @tdf_nest_0(
// CHECK-SAME: tensor<4xf32> {tdf.donate}
// CHECK: scf.for
// CHECK-NOT: func.call
// CHECK: return
// CHECK: func.func private @tdf_nest_1(
// CHECK-SAME: tensor<4xf32> {tdf.donate}
// CHECK-COUNT-2: scf.for
// CHECK: func.call @tdf_nest_0(
// CHECK: return
func.func @loops(%x: tensor<4xf32> {tdf.donate}, %n: index) -> tensor<4xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r0 = scf.for %i0 = %c0 to %n step %c1 iter_args(%t0 = %x) -> (tensor<4xf32>) {
    %r1 = scf.for %i1 = %c0 to %n step %c1 iter_args(%t1 = %t0) -> (tensor<4xf32>) {
      %r2 = scf.for %i2 = %c0 to %n step %c1 iter_args(%t2 = %t1) -> (tensor<4xf32>) {
        %r3 = scf.for %i3 = %c0 to %n step %c1 iter_args(%t3 = %t2) -> (tensor<4xf32>) {
          %r4 = scf.for %i4 = %c0 to %n step %c1 iter_args(%t4 = %t3) -> (tensor<4xf32>) {
            %y = linalg.exp ins(%t4 : tensor<4xf32>) outs(%t4 : tensor<4xf32>) -> tensor<4xf32>
            scf.yield %y : tensor<4xf32>
          }
          scf.yield %r4 : tensor<4xf32>
        }
        scf.yield %r3 : tensor<4xf32>
      }
      scf.yield %r2 : tensor<4xf32>
    }
    scf.yield %r1 : tensor<4xf32>
  }
  return %r0 : tensor<4xf32>
}

// -----

// negative_ two levels with depth=2: nothing moves.
// CHECK-LABEL: func.func @negative_shallow
// CHECK-NOT: func.call
// CHECK-NOT: tdf_nest
func.func @negative_shallow(%x: tensor<4xf32>, %a: i1, %b: i1) -> tensor<4xf32> {
  %r = scf.if %a -> (tensor<4xf32>) {
    %s = scf.if %b -> (tensor<4xf32>) {
      %y = linalg.exp ins(%x : tensor<4xf32>) outs(%x : tensor<4xf32>) -> tensor<4xf32>
      scf.yield %y : tensor<4xf32>
    } else {
      scf.yield %x : tensor<4xf32>
    }
    scf.yield %s : tensor<4xf32>
  } else {
    scf.yield %x : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}

// -----

// negative_ nothing in an scf.forall's body moves (its shared_outs cannot
// cross a call), however deep.
// CHECK-LABEL: func.func @negative_forall
// CHECK-NOT: func.call
// CHECK-NOT: tdf_nest
func.func @negative_forall(%x: tensor<4xf32>, %a: i1, %b: i1, %n: index) -> tensor<4xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r = scf.forall (%i) in (4) shared_outs(%o = %x) -> (tensor<4xf32>) {
    %s = scf.if %a -> (f32) {
      %t = scf.if %b -> (f32) {
        %u = scf.for %j = %c0 to %n step %c1 iter_args(%acc = %i) -> (index) {
          scf.yield %j : index
        }
        %f = arith.index_cast %u : index to i32
        %g = arith.sitofp %f : i32 to f32
        scf.yield %g : f32
      } else {
        %z = arith.constant 0.0 : f32
        scf.yield %z : f32
      }
      scf.yield %t : f32
    } else {
      %z = arith.constant 1.0 : f32
      scf.yield %z : f32
    }
    %v = tensor.from_elements %s : tensor<1xf32>
    scf.forall.in_parallel {
      tensor.parallel_insert_slice %v into %o[%i] [1] [1] : tensor<1xf32> into tensor<4xf32>
    }
  }
  return %r : tensor<4xf32>
}

// -----

// negative_ nothing in a linalg body moves either (a call there would be a
// call per element), however deep.
// CHECK-LABEL: func.func @negative_linalg_body
// CHECK-NOT: func.call
// CHECK-NOT: tdf_nest
func.func @negative_linalg_body(%x: tensor<4xf32>, %a: i1, %b: i1, %c: i1) -> tensor<4xf32> {
  %e = tensor.empty() : tensor<4xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>],
                       iterator_types = ["parallel"]}
      ins(%x : tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %s = scf.if %a -> (f32) {
      %t = scf.if %b -> (f32) {
        %u = scf.if %c -> (f32) {
          %v = arith.addf %in, %in : f32
          scf.yield %v : f32
        } else {
          scf.yield %in : f32
        }
        scf.yield %u : f32
      } else {
        scf.yield %in : f32
      }
      scf.yield %t : f32
    } else {
      scf.yield %in : f32
    }
    linalg.yield %s : f32
  } -> tensor<4xf32>
  return %r : tensor<4xf32>
}
