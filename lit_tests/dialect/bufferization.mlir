// RUN: tdf-opt %s --split-input-file --one-shot-bufferize="%one_shot_options" --canonicalize | FileCheck %s
// RUN: tdf-opt %s --split-input-file --one-shot-bufferize="%one_shot_options test-analysis-only" | FileCheck %s --check-prefix=ANALYSIS

// Bufferization of each tdf op through its BufferizableOpInterface model.

func.func private @add(memref<4xf32>, memref<4xf32>, memref<4xf32>)

// A tdf.call allocates its result and passes it as the output parameter.
// CHECK-LABEL: func.func @call_allocates_result
// CHECK-SAME: (%[[X:.*]]: memref<4xf32>, %[[Y:.*]]: memref<4xf32>)
// CHECK: %[[OUT:.*]] = memref.alloc() {{.*}} : memref<4xf32>
// CHECK: call @add(%[[X]], %[[Y]], %[[OUT]])
// CHECK-NOT: memref.copy
// CHECK: return %[[OUT]]
func.func @call_allocates_result(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  %sum = tdf.call @add(%x, %y) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %sum : tensor<4xf32>
}

// -----

func.func private @add(memref<4xf32>, memref<4xf32>, memref<4xf32>)
func.func private @add_inplace(memref<4xf32>, memref<4xf32>)

// The in-place operand is dead after the call: it is written in place.
// CHECK-LABEL: func.func @inplace_dead_operand
// CHECK: %[[T:.*]] = memref.alloc() {{.*}} : memref<4xf32>
// CHECK: call @add(%{{.*}}, %{{.*}}, %[[T]])
// CHECK-NEXT: call @add_inplace(%[[T]], %{{.*}})
// CHECK-NOT: memref.copy
// CHECK: return %[[T]]
// ANALYSIS-LABEL: func.func @inplace_dead_operand
// ANALYSIS: tdf.call_inplace {{.*}} {__inplace_operands_attr__ = ["true", "true"]}
func.func @inplace_dead_operand(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  %t = tdf.call @add(%x, %y) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %r = tdf.call_inplace @add_inplace(%t, %y) inplace [0] : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

func.func private @add(memref<4xf32>, memref<4xf32>, memref<4xf32>)
func.func private @add_inplace(memref<4xf32>, memref<4xf32>)

// The in-place operand is still read after the call: One-Shot Bufferize
// copies it and the kernel writes the copy (a copy, never a wrong result).
// CHECK-LABEL: func.func @negative_inplace_live_operand
// CHECK: %[[T:.*]] = memref.alloc() {{.*}} : memref<4xf32>
// CHECK: call @add(%{{.*}}, %{{.*}}, %[[T]])
// CHECK: %[[COPY:.*]] = memref.alloc() {{.*}} : memref<4xf32>
// CHECK: memref.copy %[[T]], %[[COPY]]
// CHECK: call @add_inplace(%[[COPY]], %{{.*}})
// CHECK: call @add(%[[COPY]], %[[T]], %{{.*}})
// ANALYSIS-LABEL: func.func @negative_inplace_live_operand
// ANALYSIS: tdf.call_inplace {{.*}} {__inplace_operands_attr__ = ["false", "true"]}
func.func @negative_inplace_live_operand(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  %t = tdf.call @add(%x, %y) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %r = tdf.call_inplace @add_inplace(%t, %y) inplace [0] : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %s = tdf.call @add(%r, %t) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %s : tensor<4xf32>
}

// -----

func.func private @add_carry(memref<4xf32>, memref<4xf32>, memref<4xi1>)

// Mixed indices: result #0 reuses operand #0, result #1 (-1) is allocated and
// appended as the output parameter.
// CHECK-LABEL: func.func @mixed_fresh_result
// CHECK-SAME: (%[[X:.*]]: memref<4xf32>, %[[Y:.*]]: memref<4xf32>)
// CHECK: %[[CARRY:.*]] = memref.alloc() {{.*}} : memref<4xi1>
// CHECK: call @add_carry(%[[X]], %[[Y]], %[[CARRY]])
// CHECK-NOT: memref.copy
// CHECK: return %[[X]], %[[CARRY]]
func.func @mixed_fresh_result(%x: tensor<4xf32> {bufferization.writable = true}, %y: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xi1>) {
  %sum, %carry = tdf.call_inplace @add_carry(%x, %y) inplace [0, -1] : (tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xi1>)
  return %sum, %carry : tensor<4xf32>, tensor<4xi1>
}

// -----

func.func private @row_update(memref<8x4xf32>, memref<1x4xf32>, index)

// A read-only argument is never written: the whole tensor is copied first.
// CHECK-LABEL: func.func @negative_readonly_argument_copied
// CHECK-SAME: (%[[CACHE:.*]]: memref<8x4xf32>, %[[ROW:.*]]: memref<1x4xf32>, %[[POS:.*]]: index)
// CHECK: %[[COPY:.*]] = memref.alloc() {{.*}} : memref<8x4xf32>
// CHECK: memref.copy %[[CACHE]], %[[COPY]]
// CHECK: call @row_update(%[[COPY]], %[[ROW]], %[[POS]])
// CHECK: return %[[COPY]]
func.func @negative_readonly_argument_copied(%cache: tensor<8x4xf32> {bufferization.writable = false}, %row: tensor<1x4xf32>, %pos: index) -> tensor<8x4xf32> {
  %updated = tdf.call_inplace @row_update(%cache, %row, %pos) inplace [0] : (tensor<8x4xf32>, tensor<1x4xf32>, index) -> tensor<8x4xf32>
  return %updated : tensor<8x4xf32>
}

// -----

func.func private @add_inplace(memref<4xf32>, memref<4xf32>) attributes {tdf.elementwise}

// add(z, z) in place: an element-wise kernel reads and writes the same
// buffer at the same index, which is not a conflict.
// CHECK-LABEL: func.func @inplace_repeated_operand_elementwise
// CHECK-SAME: (%[[Z:.*]]: memref<4xf32>)
// CHECK: call @add_inplace(%[[Z]], %[[Z]])
// CHECK-NOT: memref.copy
// CHECK: return %[[Z]]
func.func @inplace_repeated_operand_elementwise(%z: tensor<4xf32> {bufferization.writable = true}) -> tensor<4xf32> {
  %r = tdf.call_inplace @add_inplace(%z, %z) inplace [0] : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

func.func private @stats(memref<4xf32>) -> memref<4xf32>

// tdf.call_opaque calls the callee on buffers and returns its memrefs.
// CHECK-LABEL: func.func @opaque_call
// CHECK-SAME: (%[[X:.*]]: memref<4xf32>)
// CHECK: %[[R:.*]] = call @stats(%[[X]]) : (memref<4xf32>) -> memref<4xf32>
// CHECK: return %[[R]]
func.func @opaque_call(%x: tensor<4xf32> {bufferization.writable = true}) -> tensor<4xf32> {
  %r = tdf.call_opaque @stats(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

func.func private @stats(memref<4xf32>) -> memref<4xf32>

// An opaque callee may write its operand: a read-only argument is copied.
// CHECK-LABEL: func.func @negative_opaque_readonly_operand
// CHECK-SAME: (%[[X:.*]]: memref<4xf32>)
// CHECK: %[[COPY:.*]] = memref.alloc() {{.*}} : memref<4xf32>
// CHECK: memref.copy %[[X]], %[[COPY]]
// CHECK: call @stats(%[[COPY]])
func.func @negative_opaque_readonly_operand(%x: tensor<4xf32> {bufferization.writable = false}) -> tensor<4xf32> {
  %r = tdf.call_opaque @stats(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

func.func private @add_inplace(memref<4xf32>, memref<4xf32>)

// tdf.assume_unaliased bufferizes to nothing.
// CHECK-LABEL: func.func @assume_unaliased_is_noop
// CHECK-SAME: (%[[X:.*]]: memref<4xf32>, %[[Y:.*]]: memref<4xf32>)
// CHECK-NOT: tdf.assume_unaliased
// CHECK: call @add_inplace(%[[X]], %[[Y]])
// CHECK-NOT: memref.copy
// CHECK: return %[[X]]
func.func @assume_unaliased_is_noop(%x: tensor<4xf32> {bufferization.writable = true}, %y: tensor<4xf32>) -> tensor<4xf32> {
  %u = tdf.assume_unaliased %x : tensor<4xf32>
  %r = tdf.call_inplace @add_inplace(%u, %y) inplace [0] : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

// tdf.elementwise on a kernel with a body is trusted only when the body is
// visibly one element-wise loop over the parameters. Here the second op reads
// %b after the first wrote %a: with %a and %b sharing storage the result
// differs, so the operand passed twice must be copied.
func.func private @elementwise_attr_contradicted(%a: memref<8xf32>, %b: memref<8xf32>) attributes {tdf.elementwise} {
  linalg.add ins(%a, %b : memref<8xf32>, memref<8xf32>) outs(%a : memref<8xf32>)
  linalg.mul ins(%a, %b : memref<8xf32>, memref<8xf32>) outs(%a : memref<8xf32>)
  return
}

// ANALYSIS-LABEL: func.func @negative_elementwise_attr_contradicted_by_body
// ANALYSIS: tdf.call_inplace {{.*}} {__inplace_operands_attr__ = ["false", "true"]}
func.func @negative_elementwise_attr_contradicted_by_body(%x: tensor<8xf32> {bufferization.writable = true}) -> tensor<8xf32> {
  %r = tdf.call_inplace @elementwise_attr_contradicted(%x, %x) inplace [0] : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %r : tensor<8xf32>
}

// -----

func.func private @elementwise_attr_shown(%a: memref<8xf32>, %b: memref<8xf32>) attributes {tdf.elementwise} {
  linalg.add ins(%a, %b : memref<8xf32>, memref<8xf32>) outs(%a : memref<8xf32>)
  return
}

// ANALYSIS-LABEL: func.func @elementwise_attr_shown_by_body
// ANALYSIS: tdf.call_inplace {{.*}} {__inplace_operands_attr__ = ["true", "true"]}
func.func @elementwise_attr_shown_by_body(%x: tensor<8xf32> {bufferization.writable = true}) -> tensor<8xf32> {
  %r = tdf.call_inplace @elementwise_attr_shown(%x, %x) inplace [0] : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %r : tensor<8xf32>
}
