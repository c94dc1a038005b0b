// RUN: tdf-opt %s --tdf-insert-inplace=remarks --verify-diagnostics | FileCheck %s
// RUN: tdf-opt %s --tdf-insert-inplace --tdf-verify-inplace=strict | tdf-opt | FileCheck %s
// RUN: tdf-opt %s --pass-pipeline="builtin.module(tdf-insert-inplace, tdf-donate, one-shot-bufferize{%one_shot_options}, canonicalize, cse, canonicalize)" | FileCheck %s --check-prefix=BUF

// tensor.concat of parts computed by tdf.call: each part is computed by a
// strided-layout variant of its kernel straight into its slice of the final
// buffer (a log-concat update): one allocation, no copy.

func.func private @log(%x: memref<1x8xf32>, %out: memref<1x8xf32>) {
  linalg.log ins(%x : memref<1x8xf32>) outs(%out : memref<1x8xf32>)
  return
}
func.func private @ext_log(memref<1x8xf32>, memref<1x8xf32>)
// The output parameter goes through a subview: its type depends on the layout.
func.func private @viewed(%x: memref<1x8xf32>, %out: memref<1x8xf32>) {
  %v = memref.subview %out[0, 0] [1, 8] [1, 1] : memref<1x8xf32> to memref<8xf32>
  %w = memref.subview %x[0, 0] [1, 8] [1, 1] : memref<1x8xf32> to memref<8xf32>
  linalg.copy ins(%w : memref<8xf32>) outs(%v : memref<8xf32>)
  return
}

// One strided variant per kernel and layout, reused by every call.
// CHECK-DAG: func.func private @log_strided(%{{.*}}: memref<1x8xf32>, %{{.*}}: memref<1x8xf32, strided<[8, 1], offset: ?>>) attributes {tdf.strided_of = @log}
// CHECK-DAG: func.func private @log_strided_1(%{{.*}}: memref<1x8xf32>, %{{.*}}: memref<1x8xf32, strided<[16, 1], offset: ?>>) attributes {tdf.strided_of = @log}
// CHECK-NOT: func.func private @ext_log_strided
// CHECK-NOT: func.func private @viewed_strided

// CHECK-LABEL: func.func @log_concat_update(
// CHECK-SAME:  %[[Y0:[^:]+]]: {{[^%]*}}%[[Y1:[^:]+]]: {{[^%]*}}%[[Y2:[^:]+]]:
// CHECK: %[[D:.*]] = tensor.empty() : tensor<3x8xf32>
// CHECK: %[[S0:.*]] = tensor.extract_slice %[[D]][0, 0] [1, 8] [1, 1]
// CHECK: %[[Z0:.*]] = tdf.call_inplace @log_strided(%[[Y0]], %[[S0]]) inplace [1]
// CHECK: %[[D1:.*]] = tensor.insert_slice %[[Z0]] into %[[D]][0, 0] [1, 8] [1, 1]
// CHECK: %[[S1:.*]] = tensor.extract_slice %[[D1]][1, 0] [1, 8] [1, 1]
// CHECK: %[[Z1:.*]] = tdf.call_inplace @log_strided(%[[Y1]], %[[S1]]) inplace [1]
// CHECK: %[[D2:.*]] = tensor.insert_slice %[[Z1]] into %[[D1]][1, 0] [1, 8] [1, 1]
// CHECK: %[[S2:.*]] = tensor.extract_slice %[[D2]][2, 0] [1, 8] [1, 1]
// CHECK: %[[Z2:.*]] = tdf.call_inplace @log_strided(%[[Y2]], %[[S2]]) inplace [1]
// CHECK: %[[D3:.*]] = tensor.insert_slice %[[Z2]] into %[[D2]][2, 0] [1, 8] [1, 1]
// CHECK-NOT: tensor.concat
// CHECK-NOT: tdf.call @
// CHECK: return %[[D3]]
// BUF-LABEL: func.func @log_concat_update(
// BUF-SAME:  %[[Y0:[^:]+]]: {{[^%]*}}%[[Y1:[^:]+]]: {{[^%]*}}%[[Y2:[^:]+]]:
// BUF: %[[ALLOC:.*]] = memref.alloc() {{.*}} : memref<3x8xf32>
// BUF-NOT: memref.alloc
// BUF-NOT: memref.copy
// BUF: %[[V0:.*]] = memref.subview %[[ALLOC]][0, 0] [1, 8] [1, 1]
// BUF: %[[C0:.*]] = memref.cast %[[V0]] {{.*}} to memref<1x8xf32, strided<[8, 1], offset: ?>>
// BUF: call @log_strided(%[[Y0]], %[[C0]])
// BUF-NOT: memref.alloc
// BUF-NOT: memref.copy
// BUF: call @log_strided(%[[Y1]],
// BUF-NOT: memref.alloc
// BUF-NOT: memref.copy
// BUF: call @log_strided(%[[Y2]],
// BUF-NOT: memref.alloc
// BUF-NOT: memref.copy
// BUF: return %[[ALLOC]]
func.func @log_concat_update(%y0: tensor<1x8xf32>, %y1: tensor<1x8xf32>, %y2: tensor<1x8xf32>) -> tensor<3x8xf32> {
  %z0 = tdf.call @log(%y0) : (tensor<1x8xf32>) -> tensor<1x8xf32>
  %z1 = tdf.call @log(%y1) : (tensor<1x8xf32>) -> tensor<1x8xf32>
  %z2 = tdf.call @log(%y2) : (tensor<1x8xf32>) -> tensor<1x8xf32>
  %r = tensor.concat dim(0) %z0, %z1, %z2 : (tensor<1x8xf32>, tensor<1x8xf32>, tensor<1x8xf32>) -> tensor<3x8xf32>
  return %r : tensor<3x8xf32>
}

// Along dim 1 the rows of the result are 16 wide; a linalg part and a call
// part mix.
// CHECK-LABEL: func.func @concat_dim1_mixed(
// CHECK-SAME:  %{{[^:]+}}: {{[^%]*}}%[[Y1:[^:]+]]:
// CHECK: %[[D:.*]] = tensor.empty() : tensor<1x16xf32>
// CHECK: linalg.exp
// CHECK: tdf.call_inplace @log_strided_1(%[[Y1]], %{{.*}}) inplace [1]
// CHECK-NOT: tensor.concat
// BUF-LABEL: func.func @concat_dim1_mixed(
// BUF: %[[ALLOC:.*]] = memref.alloc() {{.*}} : memref<1x16xf32>
// BUF-NOT: memref.alloc
// BUF-NOT: memref.copy
// BUF: memref.cast %{{.*}} : memref<1x8xf32, strided<[16, 1], offset: 8>> to memref<1x8xf32, strided<[16, 1], offset: ?>>
// BUF-NOT: memref.alloc
// BUF-NOT: memref.copy
// BUF: return %[[ALLOC]]
func.func @concat_dim1_mixed(%y0: tensor<1x8xf32>, %y1: tensor<1x8xf32>) -> tensor<1x16xf32> {
  %e = tensor.empty() : tensor<1x8xf32>
  %z0 = linalg.exp ins(%y0 : tensor<1x8xf32>) outs(%e : tensor<1x8xf32>) -> tensor<1x8xf32>
  %z1 = tdf.call @log(%y1) : (tensor<1x8xf32>) -> tensor<1x8xf32>
  %r = tensor.concat dim(1) %z0, %z1 : (tensor<1x8xf32>, tensor<1x8xf32>) -> tensor<1x16xf32>
  return %r : tensor<1x16xf32>
}

// A call part that is also returned keeps its own buffer (it is copied into
// the concat); the other part is still computed in place.
// CHECK-LABEL: func.func @negative_concat_call_part_used_twice(
// CHECK-SAME:  %[[Y0:[^:]+]]: {{[^%]*}}%[[Y1:[^:]+]]:
// CHECK: %[[Z0:.*]] = tdf.call @log(%[[Y0]])
// CHECK: tensor.insert_slice %[[Z0]]
// CHECK: tdf.call_inplace @log_strided(%[[Y1]], %{{.*}}) inplace [1]
// CHECK: return %{{.*}}, %[[Z0]]
// BUF-LABEL: func.func @negative_concat_call_part_used_twice(
// BUF-COUNT-2: memref.alloc()
// BUF-NOT: memref.alloc
// BUF: memref.copy
// BUF-NOT: memref.copy
// BUF: return
func.func @negative_concat_call_part_used_twice(%y0: tensor<1x8xf32>, %y1: tensor<1x8xf32>) -> (tensor<2x8xf32>, tensor<1x8xf32>) {
  // expected-remark@+2 {{in-place rejected (dead): part #0 (%0) of tensor.concat: it is also used by func.return (a function result); it is computed in its own buffer and copied}}
  // expected-remark@+1 {{in-place rejected (owned): operand #0 (%arg0) is a function argument that is not donated}}
  %z0 = tdf.call @log(%y0) : (tensor<1x8xf32>) -> tensor<1x8xf32>
  %z1 = tdf.call @log(%y1) : (tensor<1x8xf32>) -> tensor<1x8xf32>
  // The insert_slice the concat leaves for %z0 is no candidate either.
  // expected-remark@+1 {{in-place rejected (dead): part (%0) of tensor.insert_slice into %1: it is also used by func.return (a function result); it is computed in its own buffer and copied}}
  %r = tensor.concat dim(0) %z0, %z1 : (tensor<1x8xf32>, tensor<1x8xf32>) -> tensor<2x8xf32>
  return %r, %z0 : tensor<2x8xf32>, tensor<1x8xf32>
}

// The same part twice in one concat: not rewritten.
// CHECK-LABEL: func.func @negative_concat_same_part_twice(
// CHECK-SAME:  %[[Y0:[^:]+]]:
// CHECK: tdf.call @log(%[[Y0]])
// CHECK: tensor.concat
func.func @negative_concat_same_part_twice(%y0: tensor<1x8xf32>) -> tensor<2x8xf32> {
  // expected-remark@+2 {{in-place rejected (dead): part #0 (%0) of tensor.concat: it is also used by %concat (tensor.concat); it is computed in its own buffer and copied}}
  // expected-remark@+1 {{in-place rejected (owned): operand #0 (%arg0) is a function argument that is not donated}}
  %z0 = tdf.call @log(%y0) : (tensor<1x8xf32>) -> tensor<1x8xf32>
  %r = tensor.concat dim(0) %z0, %z0 : (tensor<1x8xf32>, tensor<1x8xf32>) -> tensor<2x8xf32>
  return %r : tensor<2x8xf32>
}

// A declaration-only kernel takes an identity-layout output only: copy + remark.
// CHECK-LABEL: func.func @negative_concat_declaration(
// CHECK-SAME:  %[[Y0:[^:]+]]: {{[^%]*}}%[[Y1:[^:]+]]:
// CHECK: tdf.call @ext_log(%[[Y0]])
// CHECK: tdf.call @ext_log(%[[Y1]])
// CHECK: tensor.concat
// BUF-LABEL: func.func @negative_concat_declaration(
// BUF-COUNT-2: memref.copy
func.func @negative_concat_declaration(%y0: tensor<1x8xf32>, %y1: tensor<1x8xf32>) -> tensor<2x8xf32> {
  // expected-remark@+2 {{in-place rejected (kernel): part #0 (%0) of tensor.concat: @ext_log is a declaration: its output parameter only takes an identity layout, so the part is computed in a fresh buffer and copied into its slice}}
  // expected-remark@+1 {{in-place rejected (kernel): @ext_log is not known to be element-wise on operand #0 and result #0}}
  %z0 = tdf.call @ext_log(%y0) : (tensor<1x8xf32>) -> tensor<1x8xf32>
  // expected-remark@+2 {{in-place rejected (kernel): part #1 (%1) of tensor.concat: @ext_log is a declaration}}
  // expected-remark@+1 {{in-place rejected (kernel): @ext_log is not known to be element-wise}}
  %z1 = tdf.call @ext_log(%y1) : (tensor<1x8xf32>) -> tensor<1x8xf32>
  %r = tensor.concat dim(0) %z0, %z1 : (tensor<1x8xf32>, tensor<1x8xf32>) -> tensor<2x8xf32>
  return %r : tensor<2x8xf32>
}

// A kernel whose output parameter is used by a layout-dependent op (a
// subview) gets no strided variant.
// CHECK-LABEL: func.func @negative_concat_layout_dependent(
// CHECK-SAME:  %[[Y0:[^:]+]]:
// CHECK: tdf.call @viewed(%[[Y0]])
// CHECK: tensor.concat
func.func @negative_concat_layout_dependent(%y0: tensor<1x8xf32>, %y1: tensor<1x8xf32>) -> tensor<2x8xf32> {
  // expected-remark@+2 {{in-place rejected (kernel): part #0 (%0) of tensor.concat: @viewed uses its output parameter in memref.subview, whose types depend on the layout}}
  // expected-remark@+1 {{in-place rejected (kernel): @viewed is not known to be element-wise}}
  %z0 = tdf.call @viewed(%y0) : (tensor<1x8xf32>) -> tensor<1x8xf32>
  %r = tensor.concat dim(0) %z0, %y1 : (tensor<1x8xf32>, tensor<1x8xf32>) -> tensor<2x8xf32>
  return %r : tensor<2x8xf32>
}
