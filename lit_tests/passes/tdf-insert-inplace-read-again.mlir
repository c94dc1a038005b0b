// RUN: tdf-opt %s --tdf-insert-inplace | FileCheck %s
// RUN: tdf-opt %s --tdf-insert-inplace --tdf-verify-inplace=strict | FileCheck %s
// RUN: tdf-opt %s --tdf-insert-inplace --tdf-bufferize | FileCheck %s --check-prefix=BUF

// In-place coverage after upstream One-Shot Bufferize's own tests
// (read_of_matching_insert_slice_source and the scf.if cases):
// (1) a part inserted into a donated destination and read again after the
//     insert by element reads (tensor.extract) is computed in the row, and a
//     linalg.fill part too;
// (2) in a branch, the last of several readers of a dead value takes its
//     storage, even when the other branch already computes in it (the
//     classes of the two yields merge; the tensor.empty init the rewrite
//     replaces holds nothing to conflict with).

// CHECK-LABEL: func.func @fill_part_read_again(
// CHECK-SAME:  %[[A:[^:]+]]: tensor<4x8xf32> {{[^%]*}}%[[I:[^:]+]]: index
// CHECK: %[[S:.*]] = tensor.extract_slice %[[A]][%[[I]], 0] [1, 8] [1, 1]
// CHECK: %[[P:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[S]] : tensor<8xf32>)
// CHECK: tensor.insert_slice %[[P]] into %[[A]]
// CHECK: tensor.extract %[[P]]
// BUF-LABEL: func.func @fill_part_read_again(
// BUF-NOT: memref.alloc
// BUF-NOT: memref.copy
// BUF: return
func.func @fill_part_read_again(%A: tensor<4x8xf32> {tdf.donate}, %i: index, %j: index) -> (tensor<4x8xf32>, f32) {
  %cst = arith.constant 1.0 : f32
  %e = tensor.empty() : tensor<8xf32>
  %p = linalg.fill ins(%cst : f32) outs(%e : tensor<8xf32>) -> tensor<8xf32>
  %c = tensor.insert_slice %p into %A[%i, 0] [1, 8] [1, 1] : tensor<8xf32> into tensor<4x8xf32>
  %v = tensor.extract %p[%j] : tensor<8xf32>
  return %c, %v : tensor<4x8xf32>, f32
}

// CHECK-LABEL: func.func @computed_part_read_again(
// CHECK-SAME:  %[[A:[^:]+]]: tensor<4x8xf32>
// CHECK: %[[S:.*]] = tensor.extract_slice %[[A]]
// CHECK: %[[P:.*]] = linalg.exp ins(%{{.*}} : tensor<8xf32>) outs(%[[S]] : tensor<8xf32>)
// CHECK: tensor.extract %[[P]]
// BUF-LABEL: func.func @computed_part_read_again(
// BUF-NOT: memref.alloc
// BUF-NOT: memref.copy
// BUF: return
func.func @computed_part_read_again(%A: tensor<4x8xf32> {tdf.donate}, %y: tensor<8xf32>, %i: index, %j: index) -> (tensor<4x8xf32>, f32) {
  %e = tensor.empty() : tensor<8xf32>
  %p = linalg.exp ins(%y : tensor<8xf32>) outs(%e : tensor<8xf32>) -> tensor<8xf32>
  %c = tensor.insert_slice %p into %A[%i, 0] [1, 8] [1, 1] : tensor<8xf32> into tensor<4x8xf32>
  %v = tensor.extract %p[%j] : tensor<8xf32>
  return %c, %v : tensor<4x8xf32>, f32
}

// The updated tensor is written again (half the row) before the part is
// read: in the row, the read would see the new values. Left as a copy.
// CHECK-LABEL: func.func @negative_row_overwritten_before_the_read(
// CHECK: %[[E:.*]] = tensor.empty() : tensor<8xf32>
// CHECK: linalg.fill ins(%{{.*}} : f32) outs(%[[E]] : tensor<8xf32>)
func.func @negative_row_overwritten_before_the_read(%A: tensor<4x8xf32> {tdf.donate}, %i: index, %j: index) -> (tensor<4x8xf32>, f32) {
  %cst = arith.constant 1.0 : f32
  %cst2 = arith.constant 2.0 : f32
  %e = tensor.empty() : tensor<8xf32>
  %p = linalg.fill ins(%cst : f32) outs(%e : tensor<8xf32>) -> tensor<8xf32>
  %c = tensor.insert_slice %p into %A[%i, 0] [1, 8] [1, 1] : tensor<8xf32> into tensor<4x8xf32>
  %s = tensor.extract_slice %c[%i, 0] [1, 4] [1, 1] : tensor<4x8xf32> to tensor<4xf32>
  %f = linalg.fill ins(%cst2 : f32) outs(%s : tensor<4xf32>) -> tensor<4xf32>
  %v = tensor.extract %p[%j] : tensor<8xf32>
  %c2 = tensor.insert_slice %f into %c[%i, 0] [1, 4] [1, 1] : tensor<4xf32> into tensor<4x8xf32>
  return %c2, %v : tensor<4x8xf32>, f32
}

// The part is also a result: a strided row cannot be returned as is.
// CHECK-LABEL: func.func @negative_part_returned(
// CHECK: %[[E:.*]] = tensor.empty() : tensor<8xf32>
// CHECK: linalg.fill ins(%{{.*}} : f32) outs(%[[E]] : tensor<8xf32>)
func.func @negative_part_returned(%A: tensor<4x8xf32> {tdf.donate}, %i: index) -> (tensor<4x8xf32>, tensor<8xf32>) {
  %cst = arith.constant 1.0 : f32
  %e = tensor.empty() : tensor<8xf32>
  %p = linalg.fill ins(%cst : f32) outs(%e : tensor<8xf32>) -> tensor<8xf32>
  %c = tensor.insert_slice %p into %A[%i, 0] [1, 8] [1, 1] : tensor<8xf32> into tensor<4x8xf32>
  return %c, %p : tensor<4x8xf32>, tensor<8xf32>
}

// (2) %v dies in the scf.if. The first branch computes its result in %v;
// in the second, %v has two readers and the last, linalg.sub, takes it.
// CHECK-LABEL: func.func @last_reader_in_a_branch(
// CHECK: %[[V:.*]] = linalg.exp
// CHECK: scf.if
// CHECK: linalg.mul ins(%[[V]], %{{.*}} : {{.*}}) outs(%[[V]] : tensor<8xf32>)
// CHECK: } else {
// CHECK: linalg.reduce ins(%[[V]] : tensor<8xf32>)
// CHECK: linalg.sub ins(%{{.*}}, %[[V]] : {{.*}}) outs(%[[V]] : tensor<8xf32>)
// BUF-LABEL: func.func @last_reader_in_a_branch(
// BUF-NOT: memref.copy
// BUF: return
func.func @last_reader_in_a_branch(%x: tensor<8xf32>, %y: tensor<8xf32>, %p: i1) -> tensor<8xf32> {
  %e0 = tensor.empty() : tensor<8xf32>
  %v = linalg.exp ins(%x : tensor<8xf32>) outs(%e0 : tensor<8xf32>) -> tensor<8xf32>
  %r = scf.if %p -> tensor<8xf32> {
    %e1 = tensor.empty() : tensor<8xf32>
    %a = linalg.mul ins(%v, %y : tensor<8xf32>, tensor<8xf32>) outs(%e1 : tensor<8xf32>) -> tensor<8xf32>
    scf.yield %a : tensor<8xf32>
  } else {
    %e2 = tensor.empty() : tensor<8xf32>
    %s = linalg.reduce ins(%v : tensor<8xf32>) outs(%e2 : tensor<8xf32>) dimensions = []
      (%in: f32, %init: f32) {
        linalg.yield %in : f32
      }
    %e3 = tensor.empty() : tensor<8xf32>
    %c = linalg.sub ins(%y, %v : tensor<8xf32>, tensor<8xf32>) outs(%e3 : tensor<8xf32>) -> tensor<8xf32>
    %e4 = tensor.empty() : tensor<8xf32>
    %d = linalg.add ins(%c, %s : tensor<8xf32>, tensor<8xf32>) outs(%e4 : tensor<8xf32>) -> tensor<8xf32>
    scf.yield %d : tensor<8xf32>
  }
  return %r : tensor<8xf32>
}

// %v is read after the scf.if: no reader in it may take its storage.
// CHECK-LABEL: func.func @negative_read_after_the_branch(
// CHECK: %[[V:.*]] = linalg.exp
// CHECK-NOT: outs(%[[V]]
// CHECK: return
func.func @negative_read_after_the_branch(%x: tensor<8xf32>, %y: tensor<8xf32>, %p: i1) -> (tensor<8xf32>, tensor<8xf32>) {
  %e0 = tensor.empty() : tensor<8xf32>
  %v = linalg.exp ins(%x : tensor<8xf32>) outs(%e0 : tensor<8xf32>) -> tensor<8xf32>
  %r = scf.if %p -> tensor<8xf32> {
    %e1 = tensor.empty() : tensor<8xf32>
    %a = linalg.mul ins(%v, %y : tensor<8xf32>, tensor<8xf32>) outs(%e1 : tensor<8xf32>) -> tensor<8xf32>
    scf.yield %a : tensor<8xf32>
  } else {
    %e3 = tensor.empty() : tensor<8xf32>
    %c = linalg.sub ins(%y, %v : tensor<8xf32>, tensor<8xf32>) outs(%e3 : tensor<8xf32>) -> tensor<8xf32>
    scf.yield %c : tensor<8xf32>
  }
  return %r, %v : tensor<8xf32>, tensor<8xf32>
}

// A real alias of %v read by the same op (a view, not a tensor.empty) still
// blocks: writing %v would overwrite what the view reads.
// CHECK-LABEL: func.func @negative_view_read_by_the_same_op(
// CHECK: %[[V:.*]] = linalg.exp
// CHECK: %[[E:.*]] = tensor.empty() : tensor<4xf32>
// CHECK: linalg.add ins(%{{.*}}, %{{.*}} : {{.*}}) outs(%[[E]] : tensor<4xf32>)
func.func @negative_view_read_by_the_same_op(%x: tensor<8xf32>) -> tensor<4xf32> {
  %e0 = tensor.empty() : tensor<8xf32>
  %v = linalg.exp ins(%x : tensor<8xf32>) outs(%e0 : tensor<8xf32>) -> tensor<8xf32>
  %lo = tensor.extract_slice %v[0] [4] [1] : tensor<8xf32> to tensor<4xf32>
  %hi = tensor.extract_slice %v[4] [4] [1] : tensor<8xf32> to tensor<4xf32>
  %e = tensor.empty() : tensor<4xf32>
  %s = linalg.add ins(%lo, %hi : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  return %s : tensor<4xf32>
}
