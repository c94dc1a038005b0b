// RUN: tdf-opt %s --tdf-insert-inplace=remarks --verify-diagnostics | FileCheck %s
// RUN: tdf-opt %s --tdf-insert-inplace --tdf-verify-inplace=strict | tdf-opt | FileCheck %s
// RUN: tdf-opt %s --pass-pipeline="builtin.module(tdf-insert-inplace, tdf-donate, one-shot-bufferize{%one_shot_options}, canonicalize, cse, canonicalize)" | FileCheck %s --check-prefix=BUF

// A freshly computed part inserted with tensor.insert_slice (through reshape
// views) is computed straight into extract_slice %dest[...] when %dest is
// owned, unaliased, dead after the insert and not read between the part's
// producer and the insert. Unit-dim reshapes vanish (rank-reduced slice);
// other reshapes are inverted on the slice.

func.func private @log(%x: memref<8xf32>, %out: memref<8xf32>) {
  linalg.log ins(%x : memref<8xf32>) outs(%out : memref<8xf32>)
  return
}
func.func private @exp_row(%x: memref<2x1x4xf32>, %out: memref<2x1x4xf32>) {
  linalg.exp ins(%x : memref<2x1x4xf32>) outs(%out : memref<2x1x4xf32>)
  return
}
func.func private @neg16(%x: memref<16xf32>, %out: memref<16xf32>) {
  linalg.negf ins(%x : memref<16xf32>) outs(%out : memref<16xf32>)
  return
}
func.func private @ext_log(memref<8xf32>, memref<8xf32>)

// CHECK-DAG: func.func private @log_strided(%{{.*}}: memref<8xf32>, %{{.*}}: memref<8xf32, strided<[1], offset: ?>>) attributes {tdf.strided_of = @log}
// CHECK-DAG: func.func private @exp_row_strided(%{{.*}}: memref<2x1x4xf32>, %{{.*}}: memref<2x1x4xf32, strided<[32, ?, 1], offset: ?>>) attributes {tdf.strided_of = @exp_row}
// CHECK-DAG: func.func private @neg16_strided(%{{.*}}: memref<16xf32>, %{{.*}}: memref<16xf32, strided<[1], offset: ?>>) attributes {tdf.strided_of = @neg16}
// CHECK-NOT: func.func private @ext_log_strided

// The benchmark's log_concat: rows of a tensor.empty, each computed by a
// kernel call (through expand_shape) or a linalg op.
// CHECK-LABEL: func.func @log_concat_rows(
// CHECK-SAME:  %[[Y0:[^:]+]]: {{[^%]*}}%[[Y1:[^:]+]]:
// CHECK: %[[E:.*]] = tensor.empty() : tensor<2x8xf32>
// CHECK: %[[S0:.*]] = tensor.extract_slice %[[E]][0, 0] [1, 8] [1, 1] : tensor<2x8xf32> to tensor<8xf32>
// CHECK: %[[Z0:.*]] = tdf.call_inplace @log_strided(%[[Y0]], %[[S0]]) inplace [1]
// CHECK: %[[C0:.*]] = tensor.insert_slice %[[Z0]] into %[[E]][0, 0] [1, 8] [1, 1] : tensor<8xf32> into tensor<2x8xf32>
// CHECK: %[[S1:.*]] = tensor.extract_slice %[[C0]][1, 0] [1, 8] [1, 1] : tensor<2x8xf32> to tensor<8xf32>
// CHECK: %[[Z1:.*]] = linalg.exp ins(%[[Y1]] : tensor<8xf32>) outs(%[[S1]] : tensor<8xf32>)
// CHECK: %[[C1:.*]] = tensor.insert_slice %[[Z1]] into %[[C0]][1, 0] [1, 8] [1, 1]
// CHECK-NOT: tensor.expand_shape
// CHECK: return %[[C1]]
// BUF-LABEL: func.func @log_concat_rows(
// BUF-SAME:  %[[Y0:[^:]+]]:
// BUF: %[[ALLOC:.*]] = memref.alloc() {{.*}} : memref<2x8xf32>
// BUF-NOT: memref.alloc
// BUF-NOT: memref.copy
// BUF: call @log_strided(%[[Y0]],
// BUF-NOT: memref.alloc
// BUF-NOT: memref.copy
// BUF: linalg.exp
// BUF-NOT: memref.alloc
// BUF-NOT: memref.copy
// BUF: return %[[ALLOC]]
func.func @log_concat_rows(%y0: tensor<8xf32>, %y1: tensor<8xf32>) -> tensor<2x8xf32> {
  %e = tensor.empty() : tensor<2x8xf32>
  %z0 = tdf.call @log(%y0) : (tensor<8xf32>) -> tensor<8xf32>
  %r0 = tensor.expand_shape %z0 [[0, 1]] output_shape [1, 8] : tensor<8xf32> into tensor<1x8xf32>
  %c0 = tensor.insert_slice %r0 into %e[0, 0] [1, 8] [1, 1] : tensor<1x8xf32> into tensor<2x8xf32>
  %e1 = tensor.empty() : tensor<8xf32>
  %z1 = linalg.exp ins(%y1 : tensor<8xf32>) outs(%e1 : tensor<8xf32>) -> tensor<8xf32>
  %r1 = tensor.expand_shape %z1 [[0, 1]] output_shape [1, 8] : tensor<8xf32> into tensor<1x8xf32>
  %c1 = tensor.insert_slice %r1 into %c0[1, 0] [1, 8] [1, 1] : tensor<1x8xf32> into tensor<2x8xf32>
  return %c1 : tensor<2x8xf32>
}

// KV-cache decode: the new row of a donated cache computed by a kernel, no
// reshape, dynamic position.
// CHECK-LABEL: func.func @kv_row_by_kernel(
// CHECK-SAME:  %[[CACHE:[^:]+]]: {{[^%]*}}%[[X:[^:]+]]: {{[^%]*}}%[[POS:[^:]+]]:
// CHECK: %[[S:.*]] = tensor.extract_slice %[[CACHE]][0, %[[POS]], 0] [2, 1, 4] [1, 1, 1] : tensor<2x8x4xf32> to tensor<2x1x4xf32>
// CHECK: %[[Z:.*]] = tdf.call_inplace @exp_row_strided(%[[X]], %[[S]]) inplace [1]
// CHECK: %[[C:.*]] = tensor.insert_slice %[[Z]] into %[[CACHE]][0, %[[POS]], 0] [2, 1, 4] [1, 1, 1]
// CHECK: return %[[C]]
// BUF-LABEL: func.func @kv_row_by_kernel(
// BUF-SAME:  %[[CACHE:[^:]+]]: {{[^%]*}}%[[X:[^:]+]]: {{[^%]*}}%[[POS:[^:]+]]:
// BUF-NOT: memref.alloc
// BUF-NOT: memref.copy
// BUF: %[[V:.*]] = memref.subview %[[CACHE]][0, %[[POS]], 0] [2, 1, 4] [1, 1, 1]
// BUF: %[[CAST:.*]] = memref.cast %[[V]]
// BUF: call @exp_row_strided(%[[X]], %[[CAST]])
// BUF-NOT: memref.alloc
// BUF-NOT: memref.copy
// BUF: return %[[CACHE]]
func.func @kv_row_by_kernel(%cache: tensor<2x8x4xf32> {tdf.donate}, %x: tensor<2x1x4xf32>, %pos: index) -> tensor<2x8x4xf32> {
  %row = tdf.call @exp_row(%x) : (tensor<2x1x4xf32>) -> tensor<2x1x4xf32>
  %new = tensor.insert_slice %row into %cache[0, %pos, 0] [2, 1, 4] [1, 1, 1] : tensor<2x1x4xf32> into tensor<2x8x4xf32>
  return %new : tensor<2x8x4xf32>
}

// The same with a reshape: a flat row expanded into the cache's row shape.
// CHECK-LABEL: func.func @kv_row_by_kernel_reshaped(
// CHECK-SAME:  %[[CACHE:[^:]+]]: {{[^%]*}}%[[Y:[^:]+]]: {{[^%]*}}%[[POS:[^:]+]]:
// CHECK: %[[S:.*]] = tensor.extract_slice %[[CACHE]][%[[POS]], 0] [1, 8] [1, 1] : tensor<4x8xf32> to tensor<8xf32>
// CHECK: %[[Z:.*]] = tdf.call_inplace @log_strided(%[[Y]], %[[S]]) inplace [1]
// CHECK: tensor.insert_slice %[[Z]] into %[[CACHE]][%[[POS]], 0] [1, 8] [1, 1] : tensor<8xf32> into tensor<4x8xf32>
// BUF-LABEL: func.func @kv_row_by_kernel_reshaped(
// BUF-SAME:  %[[CACHE:[^:]+]]: {{[^%]*}}%[[Y:[^:]+]]:
// BUF-NOT: memref.alloc
// BUF-NOT: memref.copy
// BUF: call @log_strided(%[[Y]],
// BUF-NOT: memref.alloc
// BUF-NOT: memref.copy
// BUF: return %[[CACHE]]
func.func @kv_row_by_kernel_reshaped(%cache: tensor<4x8xf32> {tdf.donate}, %y: tensor<8xf32>, %pos: index) -> tensor<4x8xf32> {
  %z = tdf.call @log(%y) : (tensor<8xf32>) -> tensor<8xf32>
  %r = tensor.expand_shape %z [[0, 1]] output_shape [1, 8] : tensor<8xf32> into tensor<1x8xf32>
  %c = tensor.insert_slice %r into %cache[%pos, 0] [1, 8] [1, 1] : tensor<1x8xf32> into tensor<4x8xf32>
  return %c : tensor<4x8xf32>
}

// A reshape that is not only unit dimensions is inverted on the slice: two
// rows of the cache collapsed into the kernel's flat shape.
// CHECK-LABEL: func.func @rows_by_kernel_collapsed(
// CHECK-SAME:  %[[CACHE:[^:]+]]: {{[^%]*}}%[[Y:[^:]+]]: {{[^%]*}}%[[POS:[^:]+]]:
// CHECK: %[[S:.*]] = tensor.extract_slice %[[CACHE]][%[[POS]], 0] [2, 8] [1, 1] : tensor<4x8xf32> to tensor<2x8xf32>
// CHECK: %[[F:.*]] = tensor.collapse_shape %[[S]] {{\[\[}}0, 1]] : tensor<2x8xf32> into tensor<16xf32>
// CHECK: %[[Z:.*]] = tdf.call_inplace @neg16_strided(%[[Y]], %[[F]]) inplace [1]
// CHECK: %[[R:.*]] = tensor.expand_shape %[[Z]]
// CHECK: tensor.insert_slice %[[R]] into %[[CACHE]][%[[POS]], 0] [2, 8] [1, 1]
// BUF-LABEL: func.func @rows_by_kernel_collapsed(
// BUF-SAME:  %[[CACHE:[^:]+]]: {{[^%]*}}%[[Y:[^:]+]]:
// BUF-NOT: memref.alloc
// BUF-NOT: memref.copy
// BUF: call @neg16_strided(%[[Y]],
// BUF-NOT: memref.alloc
// BUF-NOT: memref.copy
// BUF: return %[[CACHE]]
func.func @rows_by_kernel_collapsed(%cache: tensor<4x8xf32> {tdf.donate}, %y: tensor<16xf32>, %pos: index) -> tensor<4x8xf32> {
  %z = tdf.call @neg16(%y) : (tensor<16xf32>) -> tensor<16xf32>
  %r = tensor.expand_shape %z [[0, 1]] output_shape [2, 8] : tensor<16xf32> into tensor<2x8xf32>
  %c = tensor.insert_slice %r into %cache[%pos, 0] [2, 8] [1, 1] : tensor<2x8xf32> into tensor<4x8xf32>
  return %c : tensor<4x8xf32>
}

// A non-donated destination: One-Shot copies the whole destination before
// the insert, so the part must not be written into it.
// CHECK-LABEL: func.func @negative_dest_not_donated(
// CHECK-SAME:  %{{[^:]+}}: {{[^%]*}}%[[Y:[^:]+]]:
// CHECK: %[[Z:.*]] = tdf.call @log(%[[Y]])
// CHECK-NOT: tensor.extract_slice
// BUF-LABEL: func.func @negative_dest_not_donated(
// BUF-SAME:  %[[CACHE:[^:]+]]:
// BUF: memref.copy %[[CACHE]]
func.func @negative_dest_not_donated(%cache: tensor<4x8xf32>, %y: tensor<8xf32>, %pos: index) -> tensor<4x8xf32> {
  // expected-remark@+1 {{in-place rejected (owned): operand #0 (%arg1) is a function argument that is not donated}}
  %z = tdf.call @log(%y) : (tensor<8xf32>) -> tensor<8xf32>
  %r = tensor.expand_shape %z [[0, 1]] output_shape [1, 8] : tensor<8xf32> into tensor<1x8xf32>
  // expected-remark@+1 {{in-place rejected (owned): part (%0) of tensor.insert_slice into %arg0: the destination is a function argument that is not donated (One-Shot copies it before the insert)}}
  %c = tensor.insert_slice %r into %cache[%pos, 0] [1, 8] [1, 1] : tensor<1x8xf32> into tensor<4x8xf32>
  return %c : tensor<4x8xf32>
}

// The destination is read again after the insert.
// CHECK-LABEL: func.func @negative_dest_read_after_insert(
// CHECK-SAME:  %{{[^:]+}}: {{[^%]*}}%[[Y:[^:]+]]:
// CHECK: tdf.call @log(%[[Y]])
// CHECK-NOT: tensor.extract_slice
func.func @negative_dest_read_after_insert(%cache: tensor<4x8xf32> {tdf.donate}, %y: tensor<8xf32>, %pos: index) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  // expected-remark@+1 {{in-place rejected (owned): operand #0 (%arg1) is a function argument that is not donated}}
  %z = tdf.call @log(%y) : (tensor<8xf32>) -> tensor<8xf32>
  %r = tensor.expand_shape %z [[0, 1]] output_shape [1, 8] : tensor<8xf32> into tensor<1x8xf32>
  // expected-remark@+1 {{in-place rejected (dead): part (%0) of tensor.insert_slice into %arg0: the destination is still used by func.return (a function result) (after the insert)}}
  %c = tensor.insert_slice %r into %cache[%pos, 0] [1, 8] [1, 1] : tensor<1x8xf32> into tensor<4x8xf32>
  return %c, %cache : tensor<4x8xf32>, tensor<4x8xf32>
}

// The destination's row is read between the producer and the insert.
// CHECK-LABEL: func.func @negative_dest_read_between(
// CHECK-SAME:  %[[CACHE:[^:]+]]: {{[^%]*}}%[[Y:[^:]+]]: {{[^%]*}}%[[POS:[^:]+]]:
// CHECK: tdf.call @log(%[[Y]])
// CHECK: tensor.extract_slice %[[CACHE]][%[[POS]], 0] [1, 8] [1, 1] : tensor<4x8xf32> to tensor<1x8xf32>
// CHECK-NOT: tensor.extract_slice
func.func @negative_dest_read_between(%cache: tensor<4x8xf32> {tdf.donate}, %y: tensor<8xf32>, %pos: index) -> (tensor<4x8xf32>, tensor<1x8xf32>) {
  // expected-remark@+1 {{in-place rejected (owned): operand #0 (%arg1) is a function argument that is not donated}}
  %z = tdf.call @log(%y) : (tensor<8xf32>) -> tensor<8xf32>
  %old = tensor.extract_slice %cache[%pos, 0] [1, 8] [1, 1] : tensor<4x8xf32> to tensor<1x8xf32>
  %r = tensor.expand_shape %z [[0, 1]] output_shape [1, 8] : tensor<8xf32> into tensor<1x8xf32>
  // expected-remark@+1 {{in-place rejected (dead): part (%0) of tensor.insert_slice into %arg0: the destination is still used by %extracted_slice (tensor.extract_slice) (between the part's producer and the insert)}}
  %c = tensor.insert_slice %r into %cache[%pos, 0] [1, 8] [1, 1] : tensor<1x8xf32> into tensor<4x8xf32>
  return %c, %old : tensor<4x8xf32>, tensor<1x8xf32>
}

// The part (through its view) is used twice.
// CHECK-LABEL: func.func @negative_part_used_twice(
// CHECK-SAME:  %{{[^:]+}}: {{[^%]*}}%[[Y:[^:]+]]:
// CHECK: tdf.call @log(%[[Y]])
// CHECK-NOT: tensor.extract_slice
func.func @negative_part_used_twice(%cache: tensor<4x8xf32> {tdf.donate}, %y: tensor<8xf32>, %pos: index) -> (tensor<4x8xf32>, tensor<1x8xf32>) {
  // expected-remark@+1 {{in-place rejected (owned): operand #0 (%arg1) is a function argument that is not donated}}
  %z = tdf.call @log(%y) : (tensor<8xf32>) -> tensor<8xf32>
  %r = tensor.expand_shape %z [[0, 1]] output_shape [1, 8] : tensor<8xf32> into tensor<1x8xf32>
  // expected-remark@+1 {{in-place rejected (dead): part (%0) of tensor.insert_slice into %arg0: it is also used by func.return (a function result); it is computed in its own buffer and copied}}
  %c = tensor.insert_slice %r into %cache[%pos, 0] [1, 8] [1, 1] : tensor<1x8xf32> into tensor<4x8xf32>
  return %c, %r : tensor<4x8xf32>, tensor<1x8xf32>
}

// A declaration-only kernel has no strided variant: the part is copied.
// CHECK-LABEL: func.func @negative_declaration_kernel(
// CHECK-SAME:  %{{[^:]+}}: {{[^%]*}}%[[Y:[^:]+]]:
// CHECK: tdf.call @ext_log(%[[Y]])
// CHECK-NOT: tensor.extract_slice
// BUF-LABEL: func.func @negative_declaration_kernel(
// BUF: memref.alloc
// BUF: memref.copy
func.func @negative_declaration_kernel(%cache: tensor<4x8xf32> {tdf.donate}, %y: tensor<8xf32>, %pos: index) -> tensor<4x8xf32> {
  // expected-remark@+1 {{in-place rejected (kernel): @ext_log is not known to be element-wise on operand #0 and result #0}}
  %z = tdf.call @ext_log(%y) : (tensor<8xf32>) -> tensor<8xf32>
  %r = tensor.expand_shape %z [[0, 1]] output_shape [1, 8] : tensor<8xf32> into tensor<1x8xf32>
  // expected-remark@+1 {{in-place rejected (kernel): part (%0) of tensor.insert_slice into %arg0: @ext_log is a declaration: its output parameter only takes an identity layout, so the part is computed in a fresh buffer and copied into its slice}}
  %c = tensor.insert_slice %r into %cache[%pos, 0] [1, 8] [1, 1] : tensor<1x8xf32> into tensor<4x8xf32>
  return %c : tensor<4x8xf32>
}

// The destination is defined after the part's producer.
// CHECK-LABEL: func.func @negative_dest_defined_after_producer(
// CHECK-SAME:  %[[Y:[^:]+]]:
// CHECK: tdf.call @log(%[[Y]])
// CHECK-NOT: tensor.extract_slice
func.func @negative_dest_defined_after_producer(%y: tensor<8xf32>) -> tensor<2x8xf32> {
  // expected-remark@+1 {{in-place rejected (owned): operand #0 (%arg0) is a function argument that is not donated}}
  %z = tdf.call @log(%y) : (tensor<8xf32>) -> tensor<8xf32>
  %e = tensor.empty() : tensor<2x8xf32>
  %r = tensor.expand_shape %z [[0, 1]] output_shape [1, 8] : tensor<8xf32> into tensor<1x8xf32>
  // expected-remark@+1 {{in-place rejected (dead): part (%0) of tensor.insert_slice into %1: %1 is defined after the part's producer %0 (tdf.call); the part is computed in its own buffer and copied}}
  %c = tensor.insert_slice %r into %e[1, 0] [1, 8] [1, 1] : tensor<1x8xf32> into tensor<2x8xf32>
  return %c : tensor<2x8xf32>
}
