// RUN: tdf-opt %s --split-input-file --tdf-schedule-for-memory | FileCheck %s

// The update of %w (donated) is the last use of the gradient %g: it moves to
// just after the last other read of %w, before the second gradient %h is
// computed, so %g and %h are never live at once. Its tensor.empty moves along.
// CHECK-LABEL: func.func @update_after_its_gradient
// CHECK: %[[G:.*]] = linalg.matmul
// CHECK: %[[D:.*]] = linalg.matmul ins(%{{.*}}, %arg0
// CHECK: %[[E:.*]] = tensor.empty() : tensor<64x64xf32>
// CHECK: %[[W:.*]] = linalg.sub ins(%arg0, %[[G]] : {{.*}}) outs(%[[E]]
// CHECK: %[[H:.*]] = linalg.matmul
// CHECK: return %[[W]], %[[H]]
func.func @update_after_its_gradient(%w: tensor<64x64xf32> {tdf.donate}, %x: tensor<64x64xf32>,
                                     %init: tensor<64x64xf32>) -> (tensor<64x64xf32>, tensor<64x64xf32>) {
  %g = linalg.matmul ins(%x, %x : tensor<64x64xf32>, tensor<64x64xf32>) outs(%init : tensor<64x64xf32>) -> tensor<64x64xf32>
  %d = linalg.matmul ins(%x, %w : tensor<64x64xf32>, tensor<64x64xf32>) outs(%init : tensor<64x64xf32>) -> tensor<64x64xf32>
  %h = linalg.matmul ins(%d, %x : tensor<64x64xf32>, tensor<64x64xf32>) outs(%init : tensor<64x64xf32>) -> tensor<64x64xf32>
  %e = tensor.empty() : tensor<64x64xf32>
  %wn = linalg.sub ins(%w, %g : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  return %wn, %h : tensor<64x64xf32>, tensor<64x64xf32>
}

// -----

// negative_: the sub frees nothing (%g is read again by the add, %x is not
// donated), and the add is already right after the last other use of %g:
// nothing moves.
// CHECK-LABEL: func.func @negative_not_last_use
// CHECK: linalg.matmul
// CHECK: linalg.matmul
// CHECK: tensor.empty
// CHECK: linalg.sub
// CHECK: linalg.add
func.func @negative_not_last_use(%x: tensor<64x64xf32>, %init: tensor<64x64xf32>)
    -> (tensor<64x64xf32>, tensor<64x64xf32>) {
  %g = linalg.matmul ins(%x, %x : tensor<64x64xf32>, tensor<64x64xf32>) outs(%init : tensor<64x64xf32>) -> tensor<64x64xf32>
  %h = linalg.matmul ins(%x, %x : tensor<64x64xf32>, tensor<64x64xf32>) outs(%init : tensor<64x64xf32>) -> tensor<64x64xf32>
  %e = tensor.empty() : tensor<64x64xf32>
  %d = linalg.sub ins(%x, %g : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %s = linalg.add ins(%g, %h : tensor<64x64xf32>, tensor<64x64xf32>) outs(%init : tensor<64x64xf32>) -> tensor<64x64xf32>
  return %d, %s : tensor<64x64xf32>, tensor<64x64xf32>
}

// -----

// negative_: the op would free only a non-donated argument (it frees nothing):
// it stays where it is.
// CHECK-LABEL: func.func @negative_frees_nothing
// CHECK: linalg.matmul
// CHECK: linalg.matmul
// CHECK: tensor.empty
// CHECK: linalg.sub
func.func @negative_frees_nothing(%w: tensor<64x64xf32>, %x: tensor<64x64xf32>,
                                  %init: tensor<64x64xf32>) -> (tensor<64x64xf32>, tensor<64x64xf32>) {
  %g = linalg.matmul ins(%x, %x : tensor<64x64xf32>, tensor<64x64xf32>) outs(%init : tensor<64x64xf32>) -> tensor<64x64xf32>
  %h = linalg.matmul ins(%g, %x : tensor<64x64xf32>, tensor<64x64xf32>) outs(%init : tensor<64x64xf32>) -> tensor<64x64xf32>
  %e = tensor.empty() : tensor<64x64xf32>
  %wn = linalg.sub ins(%w, %x : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  return %wn, %h : tensor<64x64xf32>, tensor<64x64xf32>
}

// -----

// negative_: the sub frees %g, but the only op it would move above makes a
// small tensor: moving frees nothing sooner, so the written order stays.
// CHECK-LABEL: func.func @negative_nothing_large_in_between
// CHECK: linalg.matmul
// CHECK: linalg.reduce
// CHECK: tensor.empty
// CHECK: linalg.sub
func.func @negative_nothing_large_in_between(%w: tensor<64x64xf32> {tdf.donate}, %x: tensor<64x64xf32>,
    %init: tensor<64x64xf32>, %acc: tensor<64xf32>) -> (tensor<64x64xf32>, tensor<64xf32>) {
  %g = linalg.matmul ins(%x, %x : tensor<64x64xf32>, tensor<64x64xf32>) outs(%init : tensor<64x64xf32>) -> tensor<64x64xf32>
  %s = linalg.reduce ins(%x : tensor<64x64xf32>) outs(%acc : tensor<64xf32>) dimensions = [1]
    (%in: f32, %a: f32) {
      %r = arith.addf %in, %a : f32
      linalg.yield %r : f32
    }
  %e = tensor.empty() : tensor<64x64xf32>
  %wn = linalg.sub ins(%w, %g : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  return %wn, %s : tensor<64x64xf32>, tensor<64xf32>
}
