// RUN: tdf-opt %s --split-input-file --tdf-bounds-checks | FileCheck %s

// Linalg ops over dynamic sizes: every operand dimension indexed by one loop
// dimension must have the loop's size. Each pair not provably equal gets a
// run-time check (site kind "shape": the runtime raises ValueError).

#id = affine_map<(d0) -> (d0)>

// CHECK:       tdf.runtime_sites = ["shape{{.*}}two_dynamic_inputs{{.*}}linalg.generic
// CHECK-LABEL: func.func @two_dynamic_inputs(
// CHECK-SAME:    %[[X:[^:]*]]: tensor<?xf32>, %[[Y:[^:]*]]: tensor<?xf32>
// CHECK:         %[[NX:.*]] = tensor.dim %[[X]], %{{.*}} : tensor<?xf32>
// CHECK:         %[[NY:.*]] = tensor.dim %[[Y]], %{{.*}} : tensor<?xf32>
// CHECK:         %[[BAD:.*]] = arith.cmpi ne, %[[NX]], %[[NY]] : index
// CHECK:         scf.if %[[BAD]] {
// CHECK:           func.call @tdf_rt_bounds_error(
// CHECK:         linalg.generic
func.func @two_dynamic_inputs(%x: tensor<?xf32>, %y: tensor<?xf32>) -> tensor<?xf32> {
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%y : tensor<?xf32>) outs(%x : tensor<?xf32>) {
  ^bb0(%a: f32, %b: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<?xf32>
  return %r : tensor<?xf32>
}

// -----

// A static operand dimension against a dynamic one is checked too.
// CHECK-LABEL: func.func @static_against_dynamic(
// CHECK:         %[[C4:.*]] = arith.constant 4 : index
// CHECK:         arith.cmpi ne, %{{.*}}, %[[C4]] : index
// CHECK:         linalg.add
func.func @static_against_dynamic(%x: tensor<4xf32>, %y: tensor<?xf32>) -> tensor<4xf32> {
  %c = tensor.cast %y : tensor<?xf32> to tensor<4xf32>
  %e = tensor.empty() : tensor<4xf32>
  %z = tensor.cast %e : tensor<4xf32> to tensor<?xf32>
  %r = linalg.add ins(%x, %y : tensor<4xf32>, tensor<?xf32>) outs(%z : tensor<?xf32>) -> tensor<?xf32>
  %s = tensor.cast %r : tensor<?xf32> to tensor<4xf32>
  return %s : tensor<4xf32>
}

// -----

// Provably equal sizes (the init is sized with tensor.dim of the input): no
// check.
// CHECK-LABEL: func.func @negative_provably_equal(
// CHECK-NOT:     scf.if
// CHECK-NOT:     tdf_rt_bounds_error
// CHECK:         linalg.generic
func.func @negative_provably_equal(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %x, %c0 : tensor<?x8xf32>
  %e = tensor.empty(%n) : tensor<?x8xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<?x8xf32>) outs(%e : tensor<?x8xf32>) {
  ^bb0(%a: f32, %b: f32):
    linalg.yield %a : f32
  } -> tensor<?x8xf32>
  return %r : tensor<?x8xf32>
}

// -----

// Kernel bodies on dynamic memrefs are checked (memref.dim); a broadcast
// (rank-0 / projected) operand only on the dimensions it is indexed by.
// CHECK-LABEL: func.func private @kernel(
// CHECK-SAME:  %[[ROW:[^:]+]]: {{[^%]*}}%[[M:[^:]+]]: {{[^%]*}}%[[OUT:[^:]+]]:
// CHECK:         %[[ONE:.*]] = arith.constant 1 : index
// CHECK:         %[[A:.*]] = memref.dim %[[M]], %[[ONE]] : memref<?x?xf32>
// CHECK:         %[[ZERO:.*]] = arith.constant 0 : index
// CHECK:         %[[B:.*]] = memref.dim %[[ROW]], %[[ZERO]] : memref<?xf32>
// CHECK:         arith.cmpi ne, %[[A]], %[[B]]
// CHECK:         scf.if
// CHECK:         %[[C:.*]] = memref.dim %[[OUT]], %{{.*}} : memref<?x?xf32>
// CHECK:         %[[D:.*]] = memref.dim %[[M]], %{{.*}} : memref<?x?xf32>
// CHECK:         arith.cmpi ne, %[[C]], %[[D]]
// CHECK:         scf.if
// CHECK:         %[[E:.*]] = memref.dim %[[OUT]], %{{.*}} : memref<?x?xf32>
// CHECK:         %[[F:.*]] = memref.dim %[[ROW]], %{{.*}} : memref<?xf32>
// CHECK:         arith.cmpi ne, %[[E]], %[[F]]
// CHECK:         scf.if
// CHECK-NOT:     scf.if
// CHECK:         linalg.generic
func.func private @kernel(%row: memref<?xf32>, %m: memref<?x?xf32>, %out: memref<?x?xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>,
                                   affine_map<(d0, d1) -> (d0, d1)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%row, %m : memref<?xf32>, memref<?x?xf32>) outs(%out : memref<?x?xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A cast from a dynamic to a static size asserts that size: checked before
// the cast (site kind "cast"); a dimension that stays dynamic is not.
// CHECK:       tdf.runtime_sites = ["cast{{.*}}dynamic_to_static_cast{{.*}}tensor.cast
// CHECK-LABEL: func.func @dynamic_to_static_cast(
// CHECK-SAME:    %[[Y:[^:]*]]: tensor<?x?xf32>
// CHECK:         %[[ZERO:.*]] = arith.constant 0 : index
// CHECK:         %[[N:.*]] = tensor.dim %[[Y]], %[[ZERO]] : tensor<?x?xf32>
// CHECK:         %[[C4:.*]] = arith.constant 4 : index
// CHECK:         %[[BAD:.*]] = arith.cmpi ne, %[[N]], %[[C4]] : index
// CHECK:         scf.if %[[BAD]] {
// CHECK:           func.call @tdf_rt_bounds_error(
// CHECK-NOT:     scf.if
// CHECK:         tensor.cast %[[Y]] : tensor<?x?xf32> to tensor<4x?xf32>
func.func @dynamic_to_static_cast(%y: tensor<?x?xf32>) -> tensor<4x?xf32> {
  %c = tensor.cast %y : tensor<?x?xf32> to tensor<4x?xf32>
  return %c : tensor<4x?xf32>
}

// -----

// CHECK-LABEL: func.func @negative_static_to_dynamic_cast(
// CHECK-NOT:     scf.if
func.func @negative_static_to_dynamic_cast(%y: tensor<4xf32>) -> tensor<?xf32> {
  %c = tensor.cast %y : tensor<4xf32> to tensor<?xf32>
  return %c : tensor<?xf32>
}
