// RUN: tdf-opt %s --tdf-insert-inplace=remarks --verify-diagnostics | FileCheck %s --check-prefix=OFF
// RUN: tdf-opt %s --tdf-insert-inplace="size-match remarks" | FileCheck %s --check-prefix=ON
// RUN: tdf-opt %s --pass-pipeline="builtin.module(tdf-insert-inplace{size-match}, tdf-donate, one-shot-bufferize{%one_shot_options}, canonicalize, cse, canonicalize)" | FileCheck %s --check-prefix=BUFON
// RUN: tdf-opt %s --pass-pipeline="builtin.module(tdf-insert-inplace, tdf-donate, one-shot-bufferize{%one_shot_options}, canonicalize, cse, canonicalize)" | FileCheck %s --check-prefix=BUFOFF

// size-match: a dead input whose type is not exactly the result's may hold
// it when an identity-map read forces the sizes to agree: a dynamic-shaped
// donated input of a static-shaped element-wise op is reused through a
// tensor.cast. Off by default (remark: fits).

// OFF-LABEL: func.func @dynamic_input(
// OFF: %[[E:.*]] = tensor.empty() : tensor<4x8xf32>
// OFF: linalg.generic {{.*}} outs(%[[E]] : tensor<4x8xf32>)
// ON-LABEL: func.func @dynamic_input(
// ON-SAME:  %[[X:[^:]+]]:
// ON-NOT: tensor.empty
// ON: %[[C:.*]] = tensor.cast %[[X]] : tensor<?x8xf32> to tensor<4x8xf32>
// ON: linalg.generic {{.*}} outs(%[[C]] : tensor<4x8xf32>)
// BUFON-LABEL: func.func @dynamic_input(
// BUFON-SAME:  %[[X:[^:]+]]:
// BUFON-NOT: memref.alloc
// BUFON-NOT: memref.copy
// BUFON: memref.cast %[[X]] : memref<?x8xf32> to memref<4x8xf32>
// BUFON-NOT: memref.alloc
// BUFON: return
// BUFOFF-LABEL: func.func @dynamic_input(
// BUFOFF: memref.alloc() {{.*}} : memref<4x8xf32>
func.func @dynamic_input(%x: tensor<?x8xf32> {tdf.donate}, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %e = tensor.empty() : tensor<4x8xf32>
  // expected-remark@+2 {{in-place rejected (fits): operand #0 (%arg0) has type tensor<?x8xf32>, the result needs tensor<4x8xf32>}}
  // expected-remark@+1 {{in-place rejected (fits): operand #1 (%arg1) is not read with the identity map (broadcast or permuted)}}
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%x, %b : tensor<?x8xf32>, tensor<8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %s = arith.addf %a, %c : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}

// The other rules still hold under size-match: a dynamic input read later is
// not reused, nor is a broadcast (lower-rank) input.
// OFF-LABEL: func.func @negative_dynamic_input_live(
// ON-LABEL: func.func @negative_dynamic_input_live(
// ON-NOT: tensor.cast
// ON: tensor.empty() : tensor<4x8xf32>
// ON-NOT: tensor.cast
// ON: return
func.func @negative_dynamic_input_live(%x: tensor<?x8xf32> {tdf.donate}, %b: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<?x8xf32>) {
  %e = tensor.empty() : tensor<4x8xf32>
  // expected-remark@+2 {{in-place rejected (fits): operand #0 (%arg0) has type tensor<?x8xf32>, the result needs tensor<4x8xf32>}}
  // expected-remark@+1 {{in-place rejected (fits): operand #1 (%arg1) is not read with the identity map (broadcast or permuted)}}
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%x, %b : tensor<?x8xf32>, tensor<8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %s = arith.addf %a, %c : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  return %r, %x : tensor<4x8xf32>, tensor<?x8xf32>
}
