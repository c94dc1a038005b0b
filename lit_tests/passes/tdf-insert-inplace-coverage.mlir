// RUN: tdf-opt %s --tdf-insert-inplace | FileCheck %s
// RUN: tdf-opt %s --tdf-insert-inplace --tdf-verify-inplace=strict --tdf-donate \
// RUN:   --one-shot-bufferize="%one_shot_options" --canonicalize --cse --canonicalize | FileCheck %s --check-prefix=BUF

// In-place coverage cases (JIT versions against numpy, in-place
// on and off: tests/test_inplace_coverage.py).
//
// 1. A write and a later read of provably disjoint static slices of one
//    tensor: the read of the old %A (rows 4..7) is rebased onto the updated
//    tensor (the same values: rows 0..3 are the only ones that change), so
//    %A has no read after the call and the call writes rows 0..3 in place.
// 2. A slice of a slice updated and written back at both levels: each
//    level's only other use overwrites the region holding the written one.

#id2 = affine_map<(d0, d1) -> (d0, d1)>
func.func private @inc(%a: memref<4x8xf32>, %out: memref<4x8xf32>) {
  %c = arith.constant 1.5 : f32
  linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%a : memref<4x8xf32>) outs(%out : memref<4x8xf32>) {
  ^bb0(%x: f32, %o: f32):
    %y = arith.addf %x, %c : f32
    linalg.yield %y : f32
  }
  return
}
func.func private @dbl(%a: memref<4x8xf32>, %out: memref<4x8xf32>) {
  linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%a : memref<4x8xf32>) outs(%out : memref<4x8xf32>) {
  ^bb0(%x: f32, %o: f32):
    %y = arith.addf %x, %x : f32
    linalg.yield %y : f32
  }
  return
}
func.func private @inc24(%a: memref<2x4xf32>, %out: memref<2x4xf32>) {
  %c = arith.constant 1.5 : f32
  linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%a : memref<2x4xf32>) outs(%out : memref<2x4xf32>) {
  ^bb0(%x: f32, %o: f32):
    %y = arith.addf %x, %c : f32
    linalg.yield %y : f32
  }
  return
}

// CHECK-LABEL: func.func @disjoint_read_after_write(
// CHECK: %[[ROWS:.*]] = tensor.extract_slice %[[A:.*]][0, 0] [4, 8] [1, 1]
// CHECK: %[[NEW:.*]] = tdf.call_inplace @inc_inplace_strided(%[[ROWS]]) inplace [0]
// CHECK: %[[C:.*]] = tensor.insert_slice %[[NEW]] into %[[A]][0, 0] [4, 8] [1, 1]
// CHECK: %[[OTHER:.*]] = tensor.extract_slice %[[C]][4, 0] [4, 8] [1, 1]
// CHECK: tdf.call @dbl(%[[OTHER]])
// BUF-LABEL: func.func @disjoint_read_after_write(
// BUF: call @inc_inplace_strided(
// BUF-NOT: memref.copy %arg0
// BUF: return
func.func @disjoint_read_after_write(%A: tensor<8x8xf32> {tdf.donate}) -> (tensor<8x8xf32>, tensor<4x8xf32>) {
  %w = tensor.extract_slice %A[0, 0] [4, 8] [1, 1] : tensor<8x8xf32> to tensor<4x8xf32>
  %z = tdf.call @inc(%w) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %r = tensor.extract_slice %A[4, 0] [4, 8] [1, 1] : tensor<8x8xf32> to tensor<4x8xf32>
  %s = tdf.call @dbl(%r) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %c = tensor.insert_slice %z into %A[0, 0] [4, 8] [1, 1] : tensor<4x8xf32> into tensor<8x8xf32>
  return %c, %s : tensor<8x8xf32>, tensor<4x8xf32>
}

// The read slice was taken before the write: a copy of it after the insert
// serves the later read (the old one, now unused, goes).
// CHECK-LABEL: func.func @disjoint_slice_taken_before(
// CHECK-NOT: tensor.extract_slice %{{.*}}[4, 0]
// CHECK: tdf.call_inplace @inc_inplace_strided(
// CHECK: %[[C:.*]] = tensor.insert_slice
// CHECK: %[[OTHER:.*]] = tensor.extract_slice %[[C]][4, 0] [4, 8] [1, 1]
// CHECK: tdf.call @dbl(%[[OTHER]])
func.func @disjoint_slice_taken_before(%A: tensor<8x8xf32> {tdf.donate}) -> (tensor<8x8xf32>, tensor<4x8xf32>) {
  %r = tensor.extract_slice %A[4, 0] [4, 8] [1, 1] : tensor<8x8xf32> to tensor<4x8xf32>
  %w = tensor.extract_slice %A[0, 0] [4, 8] [1, 1] : tensor<8x8xf32> to tensor<4x8xf32>
  %z = tdf.call @inc(%w) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %c = tensor.insert_slice %z into %A[0, 0] [4, 8] [1, 1] : tensor<4x8xf32> into tensor<8x8xf32>
  %s = tdf.call @dbl(%r) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %c, %s : tensor<8x8xf32>, tensor<4x8xf32>
}

// The old %A read after the insert (One-Shot alone copies all of %A here).
// CHECK-LABEL: func.func @disjoint_old_value_after_insert(
// CHECK: tdf.call_inplace @inc_inplace_strided(
// CHECK: %[[C:.*]] = tensor.insert_slice
// CHECK: tensor.extract_slice %[[C]][4, 0] [4, 8] [1, 1]
// BUF-LABEL: func.func @disjoint_old_value_after_insert(
// BUF-NOT: memref.alloc() {{.*}} : memref<8x8xf32>
// BUF: return
func.func @disjoint_old_value_after_insert(%A: tensor<8x8xf32> {tdf.donate}) -> (tensor<8x8xf32>, tensor<4x8xf32>) {
  %w = tensor.extract_slice %A[0, 0] [4, 8] [1, 1] : tensor<8x8xf32> to tensor<4x8xf32>
  %z = tdf.call @inc(%w) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %c = tensor.insert_slice %z into %A[0, 0] [4, 8] [1, 1] : tensor<4x8xf32> into tensor<8x8xf32>
  %r = tensor.extract_slice %A[4, 0] [4, 8] [1, 1] : tensor<8x8xf32> to tensor<4x8xf32>
  %s = tdf.call @dbl(%r) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %c, %s : tensor<8x8xf32>, tensor<4x8xf32>
}

// Rows 2..5 overlap the rows 0..3 written: nothing is rebased, no call in place.
// CHECK-LABEL: func.func @negative_overlapping_read(
// CHECK-SAME:  %[[A:[^:]*]]: {{[^,)]*}}
// CHECK: tdf.call @inc(
// CHECK: tensor.extract_slice %[[A]][2, 0] [4, 8] [1, 1]
func.func @negative_overlapping_read(%A: tensor<8x8xf32> {tdf.donate}) -> (tensor<8x8xf32>, tensor<4x8xf32>) {
  %w = tensor.extract_slice %A[0, 0] [4, 8] [1, 1] : tensor<8x8xf32> to tensor<4x8xf32>
  %z = tdf.call @inc(%w) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %r = tensor.extract_slice %A[2, 0] [4, 8] [1, 1] : tensor<8x8xf32> to tensor<4x8xf32>
  %s = tdf.call @dbl(%r) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %c = tensor.insert_slice %z into %A[0, 0] [4, 8] [1, 1] : tensor<4x8xf32> into tensor<8x8xf32>
  return %c, %s : tensor<8x8xf32>, tensor<4x8xf32>
}

// A dynamic offset is not provably disjoint.
// CHECK-LABEL: func.func @negative_dynamic_read(
// CHECK-SAME:  %[[A:[^:]*]]: {{[^,)]*}}, %[[I:[^:]*]]: {{[^,)]*}}
// CHECK: tdf.call @inc(
// CHECK: tensor.extract_slice %[[A]][%[[I]], 0] [4, 8] [1, 1]
func.func @negative_dynamic_read(%A: tensor<8x8xf32> {tdf.donate}, %i: index) -> (tensor<8x8xf32>, tensor<4x8xf32>) {
  %w = tensor.extract_slice %A[0, 0] [4, 8] [1, 1] : tensor<8x8xf32> to tensor<4x8xf32>
  %z = tdf.call @inc(%w) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %r = tensor.extract_slice %A[%i, 0] [4, 8] [1, 1] : tensor<8x8xf32> to tensor<4x8xf32>
  %s = tdf.call @dbl(%r) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %c = tensor.insert_slice %z into %A[0, 0] [4, 8] [1, 1] : tensor<4x8xf32> into tensor<8x8xf32>
  return %c, %s : tensor<8x8xf32>, tensor<4x8xf32>
}

// %A itself is still read (returned) after the write: nothing is rebased.
// CHECK-LABEL: func.func @negative_whole_read_after(
// CHECK-SAME:  %[[A:[^:]*]]: {{[^,)]*}}
// CHECK: tdf.call @inc(
// CHECK: tensor.extract_slice %[[A]][4, 0] [4, 8] [1, 1]
func.func @negative_whole_read_after(%A: tensor<8x8xf32> {tdf.donate}) -> (tensor<8x8xf32>, tensor<4x8xf32>, tensor<8x8xf32>) {
  %w = tensor.extract_slice %A[0, 0] [4, 8] [1, 1] : tensor<8x8xf32> to tensor<4x8xf32>
  %z = tdf.call @inc(%w) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %r = tensor.extract_slice %A[4, 0] [4, 8] [1, 1] : tensor<8x8xf32> to tensor<4x8xf32>
  %s = tdf.call @dbl(%r) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %c = tensor.insert_slice %z into %A[0, 0] [4, 8] [1, 1] : tensor<4x8xf32> into tensor<8x8xf32>
  return %c, %s, %A : tensor<8x8xf32>, tensor<4x8xf32>, tensor<8x8xf32>
}

// CHECK-LABEL: func.func @slice_of_slice(
// CHECK-SAME:  %[[A:[^:]*]]: {{[^,)]*}}
// CHECK: %[[BLOCK:.*]] = tensor.extract_slice %[[A]][0, 0] [8, 4] [1, 1]
// CHECK: %[[PART:.*]] = tensor.extract_slice %[[BLOCK]][2, 0] [2, 4] [1, 1]
// CHECK: tdf.call_inplace @inc24_inplace_strided(%[[PART]]) inplace [0]
// BUF-LABEL: func.func @slice_of_slice(
// BUF-NOT: memref.alloc
// BUF: call @inc24_inplace_strided(
// BUF-NOT: memref.alloc
// BUF: return
func.func @slice_of_slice(%A: tensor<8x8xf32> {tdf.donate}) -> tensor<8x8xf32> {
  %o = tensor.extract_slice %A[0, 0] [8, 4] [1, 1] : tensor<8x8xf32> to tensor<8x4xf32>
  %r = tensor.extract_slice %o[2, 0] [2, 4] [1, 1] : tensor<8x4xf32> to tensor<2x4xf32>
  %z = tdf.call @inc24(%r) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %o2 = tensor.insert_slice %z into %o[2, 0] [2, 4] [1, 1] : tensor<2x4xf32> into tensor<8x4xf32>
  %c = tensor.insert_slice %o2 into %A[0, 0] [8, 4] [1, 1] : tensor<8x4xf32> into tensor<8x8xf32>
  return %c : tensor<8x8xf32>
}

// The block goes back elsewhere: the old columns 0..3 stay in %c.
// CHECK-LABEL: func.func @negative_slice_of_slice_moved(
// CHECK: tdf.call @inc24(
func.func @negative_slice_of_slice_moved(%A: tensor<8x8xf32> {tdf.donate}) -> tensor<8x8xf32> {
  %o = tensor.extract_slice %A[0, 0] [8, 4] [1, 1] : tensor<8x8xf32> to tensor<8x4xf32>
  %r = tensor.extract_slice %o[2, 0] [2, 4] [1, 1] : tensor<8x4xf32> to tensor<2x4xf32>
  %z = tdf.call @inc24(%r) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %o2 = tensor.insert_slice %z into %o[2, 0] [2, 4] [1, 1] : tensor<2x4xf32> into tensor<8x4xf32>
  %c = tensor.insert_slice %o2 into %A[0, 4] [8, 4] [1, 1] : tensor<8x4xf32> into tensor<8x8xf32>
  return %c : tensor<8x8xf32>
}

// The outer block is read again (returned): its old rows 2..3 are needed.
// CHECK-LABEL: func.func @negative_slice_of_slice_block_read(
// CHECK: tdf.call @inc24(
func.func @negative_slice_of_slice_block_read(%A: tensor<8x8xf32> {tdf.donate}) -> (tensor<8x8xf32>, tensor<8x4xf32>) {
  %o = tensor.extract_slice %A[0, 0] [8, 4] [1, 1] : tensor<8x8xf32> to tensor<8x4xf32>
  %r = tensor.extract_slice %o[2, 0] [2, 4] [1, 1] : tensor<8x4xf32> to tensor<2x4xf32>
  %z = tdf.call @inc24(%r) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %o2 = tensor.insert_slice %z into %o[2, 0] [2, 4] [1, 1] : tensor<2x4xf32> into tensor<8x4xf32>
  %c = tensor.insert_slice %o2 into %A[0, 0] [8, 4] [1, 1] : tensor<8x4xf32> into tensor<8x8xf32>
  return %c, %o : tensor<8x8xf32>, tensor<8x4xf32>
}

// 3. A part read again after it is inserted: computed in the destination's
//    row all the same when its other readers are linalg ops after the insert
//    (they read the row, a strided view costs them nothing) and the updated
//    tensor is not used before the last of them (nothing can overwrite the
//    row while the part is still read).
#id = affine_map<(d0) -> (d0)>
// CHECK-LABEL: func.func @part_read_again(
// CHECK-SAME:  %[[A:[^:]*]]: {{[^,)]*}}
// CHECK: %[[ROW:.*]] = tensor.extract_slice %[[A]][1, 0] [1, 8] [1, 1]
// CHECK: %[[PART:.*]] = linalg.generic {{.*}} outs(%[[ROW]] : tensor<8xf32>)
// CHECK: tensor.insert_slice %[[PART]] into %[[A]][1, 0] [1, 8] [1, 1]
// CHECK: linalg.generic {{.*}} ins(%[[PART]] : tensor<8xf32>)
// BUF-LABEL: func.func @part_read_again(
// BUF-NOT: memref.copy
// BUF: return
func.func @part_read_again(%d: tensor<4x8xf32> {tdf.donate}, %y: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>) {
  %e = tensor.empty() : tensor<8xf32>
  %z = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%y : tensor<8xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%x: f32, %o: f32):
    %v = math.exp %x : f32
    linalg.yield %v : f32
  } -> tensor<8xf32>
  %c = tensor.insert_slice %z into %d[1, 0] [1, 8] [1, 1] : tensor<8xf32> into tensor<4x8xf32>
  %e2 = tensor.empty() : tensor<8xf32>
  %w = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%z : tensor<8xf32>) outs(%e2 : tensor<8xf32>) {
  ^bb0(%x: f32, %o: f32):
    %v = arith.addf %x, %x : f32
    linalg.yield %v : f32
  } -> tensor<8xf32>
  return %c, %w : tensor<4x8xf32>, tensor<8xf32>
}

// The updated tensor is written again (another insert into the same row)
// before the part is read: the part keeps its own buffer.
// CHECK-LABEL: func.func @negative_part_read_after_overwrite(
// CHECK-NOT: tensor.extract_slice
// CHECK: return
func.func @negative_part_read_after_overwrite(%d: tensor<4x8xf32> {tdf.donate}, %y: tensor<8xf32>, %q: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>) {
  %e = tensor.empty() : tensor<8xf32>
  %z = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%y : tensor<8xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%x: f32, %o: f32):
    %v = math.exp %x : f32
    linalg.yield %v : f32
  } -> tensor<8xf32>
  %c = tensor.insert_slice %z into %d[1, 0] [1, 8] [1, 1] : tensor<8xf32> into tensor<4x8xf32>
  %c2 = tensor.insert_slice %q into %c[1, 0] [1, 8] [1, 1] : tensor<8xf32> into tensor<4x8xf32>
  %e2 = tensor.empty() : tensor<8xf32>
  %w = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%z : tensor<8xf32>) outs(%e2 : tensor<8xf32>) {
  ^bb0(%x: f32, %o: f32):
    %v = arith.addf %x, %x : f32
    linalg.yield %v : f32
  } -> tensor<8xf32>
  return %c2, %w : tensor<4x8xf32>, tensor<8xf32>
}

// Read again by a kernel call (which takes identity layouts: the strided row
// would be copied for it) or read before the insert: no change.
// CHECK-LABEL: func.func @negative_part_read_by_call(
// CHECK: %[[PART:.*]] = tdf.call @inc8(
// CHECK: tensor.insert_slice %[[PART]]
func.func private @inc8(%a: memref<8xf32>, %out: memref<8xf32>) {
  %c = arith.constant 1.5 : f32
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%a : memref<8xf32>) outs(%out : memref<8xf32>) {
  ^bb0(%x: f32, %o: f32):
    %y = arith.addf %x, %c : f32
    linalg.yield %y : f32
  }
  return
}
func.func @negative_part_read_by_call(%d: tensor<4x8xf32> {tdf.donate}, %y: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>) {
  %z = tdf.call @inc8(%y) : (tensor<8xf32>) -> tensor<8xf32>
  %c = tensor.insert_slice %z into %d[1, 0] [1, 8] [1, 1] : tensor<8xf32> into tensor<4x8xf32>
  %w = tdf.call @inc8(%z) : (tensor<8xf32>) -> tensor<8xf32>
  return %c, %w : tensor<4x8xf32>, tensor<8xf32>
}
