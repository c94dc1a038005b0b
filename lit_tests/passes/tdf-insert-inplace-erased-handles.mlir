// RUN: tdf-opt %s --tdf-insert-inplace --tdf-verify-inplace=strict | FileCheck %s
// RUN: tdf-opt %s --tdf-insert-inplace=remarks | FileCheck %s

// Rewriting one insert_slice erases ops (the part's tensor.empty init, the
// unit-dimension views); the analysis the later candidates use must never
// reach the Python handles of those erased ops (this input aborted the
// process: "expected the owner of the value in Python to match that in the
// IR").

#id = affine_map<(d0) -> (d0)>

// CHECK-LABEL: func.func @two_parts_through_views
// CHECK-SAME: (%[[Y0:.*]]: tensor<8xf32>, %[[Y1:.*]]: tensor<8xf32>)
// CHECK: %[[D:.*]] = tensor.empty() : tensor<2x8xf32>
// CHECK: %[[S0:.*]] = tensor.extract_slice %[[D]][0, 0] [1, 8] [1, 1] : tensor<2x8xf32> to tensor<8xf32>
// CHECK: %[[L0:.*]] = linalg.generic {{.*}} ins(%[[Y0]] : tensor<8xf32>) outs(%[[S0]] : tensor<8xf32>)
// CHECK: %[[C0:.*]] = tensor.insert_slice %[[L0]] into %[[D]][0, 0] [1, 8] [1, 1]
// CHECK: %[[S1:.*]] = tensor.extract_slice %[[C0]][1, 0] [1, 8] [1, 1] : tensor<2x8xf32> to tensor<8xf32>
// CHECK: %[[L1:.*]] = linalg.generic {{.*}} ins(%[[Y1]] : tensor<8xf32>) outs(%[[S1]] : tensor<8xf32>)
// CHECK: %[[C1:.*]] = tensor.insert_slice %[[L1]] into %[[C0]][1, 0] [1, 8] [1, 1]
// CHECK-NOT: tensor.expand_shape
// CHECK: return %[[C1]]
func.func @two_parts_through_views(%y0: tensor<8xf32>, %y1: tensor<8xf32>) -> tensor<2x8xf32> {
  %dest = tensor.empty() : tensor<2x8xf32>
  %e0 = tensor.empty() : tensor<8xf32>
  %l0 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]} ins(%y0 : tensor<8xf32>) outs(%e0 : tensor<8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = math.log %in : f32
    linalg.yield %r : f32
  } -> tensor<8xf32>
  %row0 = tensor.expand_shape %l0 [[0, 1]] output_shape [1, 8] : tensor<8xf32> into tensor<1x8xf32>
  %c0 = tensor.insert_slice %row0 into %dest[0, 0] [1, 8] [1, 1] : tensor<1x8xf32> into tensor<2x8xf32>
  %e1 = tensor.empty() : tensor<8xf32>
  %l1 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]} ins(%y1 : tensor<8xf32>) outs(%e1 : tensor<8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = math.log %in : f32
    linalg.yield %r : f32
  } -> tensor<8xf32>
  %row1 = tensor.expand_shape %l1 [[0, 1]] output_shape [1, 8] : tensor<8xf32> into tensor<1x8xf32>
  %c1 = tensor.insert_slice %row1 into %c0[1, 0] [1, 8] [1, 1] : tensor<1x8xf32> into tensor<2x8xf32>
  return %c1 : tensor<2x8xf32>
}

// Three parts through a collapse_shape of a 2-D part (views kept), the
// destination itself a donated argument.
// CHECK-LABEL: func.func @three_parts_donated
// CHECK-NOT: tensor.empty
// CHECK-COUNT-3: tensor.expand_shape %extracted_slice
// CHECK-NOT: tensor.empty
// CHECK: return
func.func @three_parts_donated(%y: tensor<2x4xf32>, %d: tensor<3x8xf32> {tdf.donate}) -> tensor<3x8xf32> {
  %e0 = tensor.empty() : tensor<2x4xf32>
  %l0 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%y : tensor<2x4xf32>) outs(%e0 : tensor<2x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = math.exp %in : f32
    linalg.yield %r : f32
  } -> tensor<2x4xf32>
  %v0 = tensor.collapse_shape %l0 [[0, 1]] : tensor<2x4xf32> into tensor<8xf32>
  %c0 = tensor.insert_slice %v0 into %d[0, 0] [1, 8] [1, 1] : tensor<8xf32> into tensor<3x8xf32>
  %e1 = tensor.empty() : tensor<2x4xf32>
  %l1 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%y : tensor<2x4xf32>) outs(%e1 : tensor<2x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = math.log %in : f32
    linalg.yield %r : f32
  } -> tensor<2x4xf32>
  %v1 = tensor.collapse_shape %l1 [[0, 1]] : tensor<2x4xf32> into tensor<8xf32>
  %c1 = tensor.insert_slice %v1 into %c0[1, 0] [1, 8] [1, 1] : tensor<8xf32> into tensor<3x8xf32>
  %e2 = tensor.empty() : tensor<2x4xf32>
  %l2 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%y : tensor<2x4xf32>) outs(%e2 : tensor<2x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = math.sqrt %in : f32
    linalg.yield %r : f32
  } -> tensor<2x4xf32>
  %v2 = tensor.collapse_shape %l2 [[0, 1]] : tensor<2x4xf32> into tensor<8xf32>
  %c2 = tensor.insert_slice %v2 into %c1[2, 0] [1, 8] [1, 1] : tensor<8xf32> into tensor<3x8xf32>
  return %c2 : tensor<3x8xf32>
}
