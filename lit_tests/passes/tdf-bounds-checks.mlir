// RUN: tdf-opt %s --split-input-file --tdf-bounds-checks | FileCheck %s
// RUN: tdf-opt %s --tdf-bounds-checks --mlir-pass-statistics 2>&1 >/dev/null | FileCheck %s --check-prefix=STATS

// The KV step: the row offset is a function argument, so its check runs at
// function entry, before the update writes anything.
// CHECK-LABEL: func.func @row_offset_checked_at_entry
// CHECK-SAME: %[[POS:[^:]*]]: index)
// CHECK: %[[LAST:.*]] = arith.constant 7 : index
// CHECK: %[[FAIL:.*]] = arith.cmpi ugt, %[[POS]], %[[LAST]] : index
// CHECK: scf.if %[[FAIL]] {
// CHECK: func.call @tdf_rt_bounds_error(
// CHECK: }
// CHECK: tensor.insert_slice %{{.*}} into %{{.*}}[%[[POS]], 0] [1, 4] [1, 1]
// CHECK: func.func private @tdf_rt_bounds_error(i64, i64, i64, i64, i64)
func.func @row_offset_checked_at_entry(%cache: tensor<8x4xf32> {tdf.donate}, %row: tensor<1x4xf32>, %pos: index) -> tensor<8x4xf32> {
  %new = tensor.insert_slice %row into %cache[%pos, 0] [1, 4] [1, 1] : tensor<1x4xf32> into tensor<8x4xf32>
  return %new : tensor<8x4xf32>
}

// -----

// A computed index is checked right after the op that defines it, before
// an earlier write of the same block.
// CHECK-LABEL: func.func @check_hoisted_above_earlier_write
// CHECK: %[[NEXT:.*]] = arith.addi
// CHECK-NEXT: %[[LAST:.*]] = arith.constant 7 : index
// CHECK-NEXT: %[[FAIL:.*]] = arith.cmpi ugt, %[[NEXT]], %[[LAST]] : index
// CHECK: scf.if %[[FAIL]]
// CHECK: tensor.insert %{{.*}} into %{{.*}}[%{{.*}}]
// CHECK: tensor.insert %{{.*}} into %{{.*}}[%[[NEXT]]]
func.func @check_hoisted_above_earlier_write(%t: tensor<8xf32> {tdf.donate}, %i: index, %x: f32) -> tensor<8xf32> {
  %c1 = arith.constant 1 : index
  %next = arith.addi %i, %c1 : index
  %c0 = arith.constant 0 : index
  %a = tensor.insert %x into %t[%c0] : tensor<8xf32>
  %b = tensor.insert %x into %a[%next] : tensor<8xf32>
  return %b : tensor<8xf32>
}

// -----

// A check never leaves its region: the branch that is not taken checks nothing.
// CHECK-LABEL: func.func @check_stays_in_its_branch
// CHECK: scf.if %{{.*}} -> (tensor<1xf32>) {
// CHECK-NEXT: arith.constant 7 : index
// CHECK-NEXT: arith.cmpi ugt
// CHECK: func.call @tdf_rt_bounds_error(
// CHECK: tensor.extract
func.func @check_stays_in_its_branch(%t: tensor<8xf32>, %i: index, %use: i1) -> tensor<1xf32> {
  %r = scf.if %use -> tensor<1xf32> {
    %v = tensor.extract %t[%i] : tensor<8xf32>
    %e = tensor.from_elements %v : tensor<1xf32>
    scf.yield %e : tensor<1xf32>
  } else {
    %z = arith.constant dense<0.0> : tensor<1xf32>
    scf.yield %z : tensor<1xf32>
  }
  return %r : tensor<1xf32>
}

// -----

// A dynamic dimension is read with tensor.dim; a dynamic size and stride
// use the general test (no overflow: the stride is bounded by a division).
// CHECK-LABEL: func.func @dynamic_dim_size_and_stride
// CHECK-SAME: (%[[T:[^:]*]]: tensor<?xf32>, %[[O:[^:]*]]: index, %[[S:[^:]*]]: index, %[[ST:[^:]*]]: index)
// CHECK: %[[DIM:.*]] = tensor.dim %[[T]], %{{.*}} : tensor<?xf32>
// CHECK: arith.cmpi ugt, %[[S]], %[[DIM]] : index
// CHECK: arith.divui
// CHECK: arith.cmpi ugt, %[[ST]], %{{.*}} : index
// CHECK: func.call @tdf_rt_bounds_error(
// CHECK: tensor.extract_slice %[[T]][%[[O]]] [%[[S]]] [%[[ST]]]
func.func @dynamic_dim_size_and_stride(%t: tensor<?xf32>, %o: index, %s: index, %st: index) -> tensor<?xf32> {
  %w = tensor.extract_slice %t[%o] [%s] [%st] : tensor<?xf32> to tensor<?xf32>
  return %w : tensor<?xf32>
}

// -----

// Loads and stores indexed by a loop's induction variable over the memref's
// own shape are proven in range: no check.
// CHECK-LABEL: func.func @negative_loop_over_the_shape
// CHECK-NOT: tdf_rt_bounds_error
// CHECK: return
func.func @negative_loop_over_the_shape(%a: memref<16xf32>, %out: memref<16xf32>) {
  %c0 = arith.constant 0 : index
  %c16 = arith.constant 16 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %c16 step %c1 {
    %x = memref.load %a[%i] : memref<16xf32>
    memref.store %x, %out[%i] : memref<16xf32>
  }
  return
}

// -----

// A loop that may run past the shape keeps the check, inside the loop.
// CHECK-LABEL: func.func @loop_past_the_shape
// CHECK: scf.for %[[I:.*]] =
// CHECK: arith.cmpi ugt, %[[I]]
// CHECK: func.call @tdf_rt_bounds_error(
// CHECK: memref.load %{{.*}}[%[[I]]]
func.func @loop_past_the_shape(%a: memref<16xf32>, %out: memref<1xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    %x = memref.load %a[%i] : memref<16xf32>
    memref.store %x, %out[%c0] : memref<1xf32>
  }
  return
}

// -----

// Static slices are the verifier's business: no check, no declaration.
// CHECK-LABEL: func.func @negative_static_slice
// CHECK-NOT: tdf_rt_bounds_error
func.func @negative_static_slice(%cache: tensor<8x4xf32>, %row: tensor<1x4xf32>) -> tensor<8x4xf32> {
  %new = tensor.insert_slice %row into %cache[7, 0] [1, 4] [1, 1] : tensor<1x4xf32> into tensor<8x4xf32>
  return %new : tensor<8x4xf32>
}

// -----

// A gather in a linalg body: the row id is data (checked inside the body),
// the column is linalg.index over a static domain (proven).
// CHECK-LABEL: func.func @gather_row_checked_column_proven
// CHECK: linalg.generic
// CHECK: ^bb0(%[[ID:.*]]: index, %{{.*}}: f32):
// CHECK: arith.cmpi ugt, %[[ID]]
// CHECK: func.call @tdf_rt_bounds_error(
// CHECK-NOT: func.call @tdf_rt_bounds_error(
// CHECK: tensor.extract
func.func @gather_row_checked_column_proven(%table: tensor<16x4xf32>, %ids: tensor<3xindex>) -> tensor<3x4xf32> {
  %e = tensor.empty() : tensor<3x4xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]} ins(%ids : tensor<3xindex>) outs(%e : tensor<3x4xf32>) {
  ^bb0(%id: index, %o: f32):
    %j = linalg.index 1 : index
    %v = tensor.extract %table[%id, %j] : tensor<16x4xf32>
    linalg.yield %v : f32
  } -> tensor<3x4xf32>
  return %r : tensor<3x4xf32>
}

// STATS: tdf-bounds-checks
// STATS-DAG: (S) 6 checks
// STATS-DAG: (S) 5 proven
