// RUN: tdf-opt %s --tdf-insert-inplace | FileCheck %s
// RUN: tdf-opt %s --tdf-insert-inplace --tdf-verify-inplace=strict --tdf-donate \
// RUN:   --one-shot-bufferize="%one_shot_options" --canonicalize --cse | FileCheck %s --check-prefix=BUF

// The read-modify-write of a slice: %r = extract_slice %A[R], a call in place
// on %r, the result inserted back at R. The in-place variant takes the
// layout %r's subview has after bufferization (@k_inplace_strided,
// tdf.strided_of = @k_inplace), so One-Shot Bufferize passes the subview
// (a memref.cast at most) instead of copying the slice out and back: no
// allocation, no copy. The strides come from the slice's source buffer
// (identity for a function argument or an scf.for carried value that keeps
// it) times the slice's steps; unit dimensions get `?`.

#id = affine_map<(d0) -> (d0)>
#id2 = affine_map<(d0, d1) -> (d0, d1)>
func.func private @inc(%a: memref<8xf32>, %out: memref<8xf32>) {
  %c = arith.constant 1.5 : f32
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%a : memref<8xf32>) outs(%out : memref<8xf32>) {
  ^bb0(%x: f32, %o: f32):
    %y = arith.addf %x, %c : f32
    linalg.yield %y : f32
  }
  return
}
func.func private @add(%a: memref<8xf32>, %b: memref<8xf32>, %out: memref<8xf32>) {
  linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
      ins(%a, %b : memref<8xf32>, memref<8xf32>) outs(%out : memref<8xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %s = arith.addf %x, %y : f32
    linalg.yield %s : f32
  }
  return
}
func.func private @dbl24(%a: memref<2x4xf32>, %out: memref<2x4xf32>) {
  linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%a : memref<2x4xf32>) outs(%out : memref<2x4xf32>) {
  ^bb0(%x: f32, %o: f32):
    %y = arith.addf %x, %x : f32
    linalg.yield %y : f32
  }
  return
}
func.func private @scale(%a: memref<8xf32>, %out: memref<8xf32>)
    attributes {tdf.inplace_ok = [[0, 0]], tdf.inplace_variant = @scale_ip}
// CHECK: func.func private @inc_inplace_strided(%{{.*}}: memref<8xf32, strided<[1], offset: ?>>)
// CHECK-SAME: tdf.strided_of = @inc_inplace
// CHECK: func.func private @add_inplace_1_strided(%{{.*}}: memref<8xf32>, %{{.*}}: memref<8xf32, strided<[4], offset: ?>>)
// CHECK: func.func private @dbl24_strided(%{{.*}}: memref<2x4xf32>, %{{.*}}: memref<2x4xf32, strided<[8, 1], offset: ?>>)

// CHECK-LABEL: func.func @row(
// CHECK: %[[ROW:.*]] = tensor.extract_slice %{{.*}}[1, 0] [1, 8] [1, 1]
// CHECK: %[[NEW:.*]] = tdf.call_inplace @inc_inplace_strided(%[[ROW]]) inplace [0]
// CHECK: tensor.insert_slice %[[NEW]] into %{{.*}}[1, 0] [1, 8] [1, 1]
// BUF-LABEL: func.func @row(
// BUF-NOT: memref.alloc
// BUF: call @inc_inplace_strided(
// BUF-NOT: memref.alloc
// BUF: return
func.func @row(%A: tensor<4x8xf32> {tdf.donate}) -> tensor<4x8xf32> {
  %r = tensor.extract_slice %A[1, 0] [1, 8] [1, 1] : tensor<4x8xf32> to tensor<8xf32>
  %z = tdf.call @inc(%r) : (tensor<8xf32>) -> tensor<8xf32>
  %c = tensor.insert_slice %z into %A[1, 0] [1, 8] [1, 1] : tensor<8xf32> into tensor<4x8xf32>
  return %c : tensor<4x8xf32>
}
// A column (stride 4), dynamic offset, the slice is the second operand.
// CHECK-LABEL: func.func @column_two_inputs(
// CHECK: %[[COL:.*]] = tensor.extract_slice
// CHECK: tdf.call_inplace @add_inplace_1_strided(%{{.*}}, %[[COL]]) inplace [1]
// BUF-LABEL: func.func @column_two_inputs(
// BUF-NOT: memref.alloc
// BUF: call @add_inplace_1_strided(
// BUF-NOT: memref.alloc
// BUF: return
func.func @column_two_inputs(%A: tensor<8x4xf32> {tdf.donate}, %b: tensor<8xf32>, %j: index) -> tensor<8x4xf32> {
  %r = tensor.extract_slice %A[0, %j] [8, 1] [1, 1] : tensor<8x4xf32> to tensor<8xf32>
  %z = tdf.call @add(%b, %r) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %c = tensor.insert_slice %z into %A[0, %j] [8, 1] [1, 1] : tensor<8xf32> into tensor<8x4xf32>
  return %c : tensor<8x4xf32>
}
// The carried cache keeps the identity layout (init and yield have it).
// CHECK-LABEL: func.func @loop_rows(
// CHECK: scf.for
// CHECK: tdf.call_inplace @inc_inplace_strided(
// BUF-LABEL: func.func @loop_rows(
// BUF-NOT: memref.alloc
// BUF: call @inc_inplace_strided(
// BUF-NOT: memref.alloc
// BUF: return
func.func @loop_rows(%A: tensor<4x8xf32> {tdf.donate}) -> tensor<4x8xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %res = scf.for %i = %c0 to %c4 step %c1 iter_args(%acc = %A) -> (tensor<4x8xf32>) {
    %r = tensor.extract_slice %acc[%i, 0] [1, 8] [1, 1] : tensor<4x8xf32> to tensor<8xf32>
    %z = tdf.call @inc(%r) : (tensor<8xf32>) -> tensor<8xf32>
    %c = tensor.insert_slice %z into %acc[%i, 0] [1, 8] [1, 1] : tensor<8xf32> into tensor<4x8xf32>
    scf.yield %c : tensor<4x8xf32>
  }
  return %res : tensor<4x8xf32>
}
// CHECK-LABEL: func.func @negative_not_donated(
// CHECK: tdf.call @inc(
func.func @negative_not_donated(%A: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %r = tensor.extract_slice %A[1, 0] [1, 8] [1, 1] : tensor<4x8xf32> to tensor<8xf32>
  %z = tdf.call @inc(%r) : (tensor<8xf32>) -> tensor<8xf32>
  %c = tensor.insert_slice %z into %A[1, 0] [1, 8] [1, 1] : tensor<8xf32> into tensor<4x8xf32>
  return %c : tensor<4x8xf32>
}
// The result is used by more than the insert back: it would carry the
// strided layout to its other users; no call in place either (%A is read later).
// CHECK-LABEL: func.func @negative_result_used_again(
// CHECK-NOT: _strided
// CHECK: return
func.func @negative_result_used_again(%A: tensor<4x8xf32> {tdf.donate}) -> (tensor<4x8xf32>, tensor<8xf32>) {
  %r = tensor.extract_slice %A[1, 0] [1, 8] [1, 1] : tensor<4x8xf32> to tensor<8xf32>
  %z = tdf.call @inc(%r) : (tensor<8xf32>) -> tensor<8xf32>
  %c = tensor.insert_slice %z into %A[2, 0] [1, 8] [1, 1] : tensor<8xf32> into tensor<4x8xf32>
  return %c, %z : tensor<4x8xf32>, tensor<8xf32>
}
// The slice passed twice: in place, identity variant (no strided clone).
// CHECK-LABEL: func.func @negative_operand_twice(
// CHECK: tdf.call_inplace @add_inplace(
func.func @negative_operand_twice(%A: tensor<4x8xf32> {tdf.donate}) -> tensor<4x8xf32> {
  %r = tensor.extract_slice %A[1, 0] [1, 8] [1, 1] : tensor<4x8xf32> to tensor<8xf32>
  %z = tdf.call @add(%r, %r) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %c = tensor.insert_slice %z into %A[1, 0] [1, 8] [1, 1] : tensor<8xf32> into tensor<4x8xf32>
  return %c : tensor<4x8xf32>
}
// A dynamic step: the stride is unknown statically; identity variant.
// CHECK-LABEL: func.func @negative_dynamic_step(
// CHECK: tdf.call_inplace @inc_inplace(
func.func @negative_dynamic_step(%A: tensor<4x16xf32> {tdf.donate}, %s: index) -> tensor<4x16xf32> {
  %r = tensor.extract_slice %A[1, 0] [1, 8] [1, %s] : tensor<4x16xf32> to tensor<8xf32>
  %z = tdf.call @inc(%r) : (tensor<8xf32>) -> tensor<8xf32>
  %c = tensor.insert_slice %z into %A[1, 0] [1, 8] [1, %s] : tensor<8xf32> into tensor<4x16xf32>
  return %c : tensor<4x16xf32>
}
// A declaration only takes identity layouts: its named variant.
// CHECK-LABEL: func.func @negative_declaration(
// CHECK: tdf.call_inplace @scale_ip(
// BUF-LABEL: func.func @negative_declaration(
// BUF: memref.alloc
// BUF: call @scale_ip(
func.func @negative_declaration(%A: tensor<4x8xf32> {tdf.donate}) -> tensor<4x8xf32> {
  %r = tensor.extract_slice %A[1, 0] [1, 8] [1, 1] : tensor<4x8xf32> to tensor<8xf32>
  %z = tdf.call @scale(%r) : (tensor<8xf32>) -> tensor<8xf32>
  %c = tensor.insert_slice %z into %A[1, 0] [1, 8] [1, 1] : tensor<8xf32> into tensor<4x8xf32>
  return %c : tensor<4x8xf32>
}

// Step 2 (a part computed into its insert_slice destination) with a
// destination that is itself a block of %A: the part's kernel takes the
// block's strides [8, 1] (not the row-major [4, 1] of tensor<4x4xf32>,
// which bufferization could not cast to: a strided allocation failed).
// CHECK-LABEL: func.func @insert_into_block(
// CHECK: tdf.call_inplace @dbl24_strided(
// BUF-LABEL: func.func @insert_into_block(
// BUF: call @dbl24_strided(
func.func @insert_into_block(%A: tensor<4x8xf32> {tdf.donate}, %B: tensor<2x4xf32>) -> tensor<4x4xf32> {
  %r = tensor.extract_slice %A[0, 0] [4, 4] [1, 1] : tensor<4x8xf32> to tensor<4x4xf32>
  %y = tdf.call @dbl24(%B) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %o = tensor.insert_slice %y into %r[1, 0] [2, 4] [1, 1] : tensor<2x4xf32> into tensor<4x4xf32>
  return %o : tensor<4x4xf32>
}
