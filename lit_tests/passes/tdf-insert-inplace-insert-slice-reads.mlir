// RUN: tdf-opt %s --tdf-insert-inplace=remarks --verify-diagnostics | FileCheck %s
// RUN: tdf-opt %s --tdf-insert-inplace --tdf-verify-inplace=strict | FileCheck %s

// A part of tensor.insert_slice is never computed into its destination when
// its producer (or what it transitively reads after the destination is
// defined) reads storage that may overlap the destination: whatever the
// offsets (static, dynamic, chosen by scf.if), the write would overwrite what
// the producer still reads. Regressions: these became one loop reading
// A[0..4) while writing A[1..5).

func.func private @exp(%x: memref<4xf32>, %out: memref<4xf32>) {
  linalg.exp ins(%x : memref<4xf32>) outs(%out : memref<4xf32>)
  return
}

// CHECK-LABEL: func.func @negative_producer_reads_shifted_slice(
// CHECK: %[[R:.*]] = tensor.extract_slice %{{.*}}[0] [4] [1]
// CHECK: %[[Z:.*]] = tdf.call @exp(%[[R]])
// CHECK: tensor.insert_slice %[[Z]] into %{{.*}}[1] [4] [1]
func.func @negative_producer_reads_shifted_slice(%A: tensor<8xf32> {tdf.donate}) -> tensor<8xf32> {
  %r0 = tensor.extract_slice %A[0] [4] [1] : tensor<8xf32> to tensor<4xf32>
  // expected-remark@+1 {{in-place rejected (unaliased): operand #0 (%extracted_slice) may share storage with %arg0, which is still used by %inserted_slice (tensor.insert_slice)}}
  %z = tdf.call @exp(%r0) : (tensor<4xf32>) -> tensor<4xf32>
  // expected-remark@+1 {{in-place rejected (unaliased): part (%0) of tensor.insert_slice into %arg0: its producer reads %extracted_slice, which may overlap the slice it would be written into}}
  %c = tensor.insert_slice %z into %A[1] [4] [1] : tensor<4xf32> into tensor<8xf32>
  return %c : tensor<8xf32>
}

// CHECK-LABEL: func.func @negative_linalg_part_reads_shifted_slice(
// CHECK: %[[E:.*]] = tensor.empty
// CHECK: linalg.exp ins(%{{.*}} : tensor<4xf32>) outs(%[[E]] : tensor<4xf32>)
func.func @negative_linalg_part_reads_shifted_slice(%A: tensor<8xf32> {tdf.donate}) -> tensor<8xf32> {
  %r0 = tensor.extract_slice %A[0] [4] [1] : tensor<8xf32> to tensor<4xf32>
  %e = tensor.empty() : tensor<4xf32>
  // expected-remark@+1 {{in-place rejected (unaliased): operand #0 (%extracted_slice) may share storage with %arg0, which is still used by %inserted_slice (tensor.insert_slice)}}
  %z = linalg.exp ins(%r0 : tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  // expected-remark@+1 {{in-place rejected (unaliased): part (%1) of tensor.insert_slice into %arg0: its producer reads %extracted_slice, which may overlap the slice it would be written into}}
  %c = tensor.insert_slice %z into %A[1] [4] [1] : tensor<4xf32> into tensor<8xf32>
  return %c : tensor<8xf32>
}

// CHECK-LABEL: func.func @negative_dynamic_offsets(
// CHECK: tdf.call @exp
// CHECK-NOT: tdf.call_inplace
func.func @negative_dynamic_offsets(%A: tensor<8xf32> {tdf.donate}, %i: index, %j: index) -> tensor<8xf32> {
  %r0 = tensor.extract_slice %A[%i] [4] [1] : tensor<8xf32> to tensor<4xf32>
  // expected-remark@+1 {{in-place rejected (unaliased): operand #0 (%extracted_slice) may share storage with %arg0, which is still used by %inserted_slice (tensor.insert_slice)}}
  %z = tdf.call @exp(%r0) : (tensor<4xf32>) -> tensor<4xf32>
  // expected-remark@+1 {{in-place rejected (unaliased): part (%0) of tensor.insert_slice into %arg0: its producer reads %extracted_slice, which may overlap the slice it would be written into}}
  %c = tensor.insert_slice %z into %A[%j] [4] [1] : tensor<4xf32> into tensor<8xf32>
  return %c : tensor<8xf32>
}

// CHECK-LABEL: func.func @negative_slice_chosen_by_if(
// CHECK: scf.if
// CHECK: tdf.call @exp
// CHECK-NOT: tdf.call_inplace
func.func @negative_slice_chosen_by_if(%A: tensor<8xf32> {tdf.donate}, %B: tensor<8xf32> {tdf.donate}, %p: i1) -> tensor<8xf32> {
  %s = scf.if %p -> tensor<4xf32> {
    %r0 = tensor.extract_slice %A[0] [4] [1] : tensor<8xf32> to tensor<4xf32>
    scf.yield %r0 : tensor<4xf32>
  } else {
    %r1 = tensor.extract_slice %B[0] [4] [1] : tensor<8xf32> to tensor<4xf32>
    scf.yield %r1 : tensor<4xf32>
  }
  // expected-remark@+1 {{in-place rejected (unaliased): operand #0 (%0) may share storage with %arg0, which is still used by %inserted_slice (tensor.insert_slice)}}
  %z = tdf.call @exp(%s) : (tensor<4xf32>) -> tensor<4xf32>
  // expected-remark@+1 {{in-place rejected (unaliased): part (%1) of tensor.insert_slice into %arg0: its producer reads %0, which may overlap the slice it would be written into}}
  %c = tensor.insert_slice %z into %A[2] [4] [1] : tensor<4xf32> into tensor<8xf32>
  return %c : tensor<8xf32>
}

// What the producer reads transitively counts too (conservative: a fresh
// intermediate computed from the destination is rejected as well).
// CHECK-LABEL: func.func @negative_transitive_read(
// CHECK-NOT: tdf.call_inplace @exp_strided
func.func @negative_transitive_read(%A: tensor<8xf32> {tdf.donate}) -> tensor<8xf32> {
  %r0 = tensor.extract_slice %A[0] [4] [1] : tensor<8xf32> to tensor<4xf32>
  %e = tensor.empty() : tensor<4xf32>
  // expected-remark@+1 {{in-place rejected (unaliased): operand #0 (%extracted_slice) may share storage with %arg0, which is still used by %inserted_slice (tensor.insert_slice)}}
  %t = linalg.negf ins(%r0 : tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %z = tdf.call @exp(%t) : (tensor<4xf32>) -> tensor<4xf32>
  // expected-remark@+1 {{in-place rejected (unaliased): part (%2) of tensor.insert_slice into %arg0: its producer reads %extracted_slice (through linalg.negf), which may overlap the slice it would be written into}}
  %c = tensor.insert_slice %z into %A[4] [4] [1] : tensor<4xf32> into tensor<8xf32>
  return %c : tensor<8xf32>
}

// A part computed from another tensor is still computed in place.
// CHECK-LABEL: func.func @part_from_other_tensor(
// CHECK: %[[S:.*]] = tensor.extract_slice %{{.*}}[1] [4] [1]
// CHECK: tdf.call_inplace @exp_strided(%{{.*}}, %[[S]]) inplace [1]
func.func @part_from_other_tensor(%A: tensor<8xf32> {tdf.donate}, %x: tensor<4xf32>) -> tensor<8xf32> {
  %z = tdf.call @exp(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %c = tensor.insert_slice %z into %A[1] [4] [1] : tensor<4xf32> into tensor<8xf32>
  return %c : tensor<8xf32>
}

// A read-modify-write of the very region the part is inserted into
// (d[R] = d[R] + b, a scatter-add's row update): each element is read before
// the same iteration point writes it, so the part is computed in the slice,
// reading and writing one slice value (One-Shot Bufferize then writes it in
// place, with no copy of the row).
// CHECK-LABEL: func.func @read_modify_write_same_region(
// CHECK: %[[Z:.*]] = linalg.add ins(%[[S:[a-z_0-9]+]], %arg1 : tensor<4xf32>, tensor<4xf32>) outs(%[[S]] : tensor<4xf32>)
// CHECK-NEXT: tensor.insert_slice %[[Z]] into %arg0[2] [4] [1]
func.func @read_modify_write_same_region(%A: tensor<8xf32> {tdf.donate}, %B: tensor<4xf32>) -> tensor<8xf32> {
  %r0 = tensor.extract_slice %A[2] [4] [1] : tensor<8xf32> to tensor<4xf32>
  %e = tensor.empty() : tensor<4xf32>
  %z = linalg.add ins(%r0, %B : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %c = tensor.insert_slice %z into %A[2] [4] [1] : tensor<4xf32> into tensor<8xf32>
  return %c : tensor<8xf32>
}

// The same inside a loop whose carried tensor starts from a non-donated
// argument: One-Shot copies that argument once before the loop (the body
// writes the iter_arg), so the iter_arg's storage is the loop's own.
// CHECK-LABEL: func.func @scatter_rows_in_loop(
// CHECK: scf.for
// CHECK: %[[Z:.*]] = linalg.add ins(%[[S:[a-z_0-9]+]], %{{.*}} : tensor<4xf32>, tensor<4xf32>) outs(%[[S]] : tensor<4xf32>)
// CHECK-NEXT: tensor.insert_slice %[[Z]] into %arg4
func.func @scatter_rows_in_loop(%T: tensor<8x4xf32>, %rows: tensor<3x4xf32>, %ids: tensor<3xindex>) -> tensor<8x4xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %r = scf.for %i = %c0 to %c3 step %c1 iter_args(%acc = %T) -> (tensor<8x4xf32>) {
    %id = tensor.extract %ids[%i] : tensor<3xindex>
    %row = tensor.extract_slice %rows[%i, 0] [1, 4] [1, 1] : tensor<3x4xf32> to tensor<4xf32>
    %old = tensor.extract_slice %acc[%id, 0] [1, 4] [1, 1] : tensor<8x4xf32> to tensor<4xf32>
    %e = tensor.empty() : tensor<4xf32>
    %sum = linalg.add ins(%old, %row : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
    %new = tensor.insert_slice %sum into %acc[%id, 0] [1, 4] [1, 1] : tensor<4xf32> into tensor<8x4xf32>
    scf.yield %new : tensor<8x4xf32>
  }
  return %r : tensor<8x4xf32>
}

// negative_: the old row is read again after the insert: the part keeps its
// own buffer.
// CHECK-LABEL: func.func @negative_row_read_again(
// CHECK: %[[E:.*]] = tensor.empty() : tensor<4xf32>
// CHECK: linalg.add ins(%{{.*}}, %arg1 : tensor<4xf32>, tensor<4xf32>) outs(%[[E]] : tensor<4xf32>)
func.func @negative_row_read_again(%A: tensor<8xf32> {tdf.donate}, %B: tensor<4xf32>) -> (tensor<8xf32>, tensor<4xf32>) {
  %r0 = tensor.extract_slice %A[2] [4] [1] : tensor<8xf32> to tensor<4xf32>
  %e = tensor.empty() : tensor<4xf32>
  // expected-remark@+2 {{in-place rejected (dead): operand #0 (%extracted_slice) is still used by %3 (linalg.exp)}}
  // expected-remark@+1 {{in-place rejected (owned): operand #1 (%arg1) is a function argument that is not donated}}
  %z = linalg.add ins(%r0, %B : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  // expected-remark@+1 {{in-place rejected (unaliased): part (%1) of tensor.insert_slice into %arg0: the destination may share storage with %extracted_slice, which is still used by %3 (linalg.exp) (after the insert)}}
  %c = tensor.insert_slice %z into %A[2] [4] [1] : tensor<4xf32> into tensor<8xf32>
  %e2 = tensor.empty() : tensor<4xf32>
  // expected-remark@+1 {{in-place rejected (unaliased): operand #0 (%extracted_slice) may share storage with %inserted_slice, which is still used by func.return (a function result)}}
  %w = linalg.exp ins(%r0 : tensor<4xf32>) outs(%e2 : tensor<4xf32>) -> tensor<4xf32>
  return %c, %w : tensor<8xf32>, tensor<4xf32>
}
