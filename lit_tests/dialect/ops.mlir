// RUN: tdf-opt %s | tdf-opt | FileCheck %s
// RUN: tdf-opt %s --mlir-print-op-generic | tdf-opt | FileCheck %s
// RUN: tdf-opt %s --mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC

// Round trip of every tdf op in pretty and generic form.

func.func private @add(memref<4xf32>, memref<4xf32>, memref<4xf32>)
func.func private @add_inplace(memref<4xf32>, memref<4xf32>) attributes {tdf.elementwise}
func.func private @add_carry(memref<4xf32>, memref<4xf32>, memref<4xi1>)
func.func private @row_update(memref<8x4xf32>, memref<1x4xf32>, index)
func.func private @opaque_stats(memref<4xf32>) -> memref<4xf32>
func.func private @opaque_sink(memref<4xf32>)

// CHECK-LABEL: func.func @call_fresh
// CHECK-SAME: %[[X:.*]]: tensor<4xf32>, %[[Y:.*]]: tensor<4xf32>
// CHECK: %[[S:.*]] = tdf.call @add(%[[X]], %[[Y]]) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// CHECK: return %[[S]]
// GENERIC-LABEL: sym_name = "call_fresh"
// GENERIC: "tdf.call"(%{{.*}}, %{{.*}}) <{callee = @add}>
func.func @call_fresh(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  %sum = tdf.call @add(%x, %y) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %sum : tensor<4xf32>
}

// CHECK-LABEL: func.func @call_inplace_single
// CHECK-SAME: %[[X:.*]]: tensor<4xf32> {tdf.donate}
// CHECK: tdf.call_inplace @add_inplace(%[[X]], %{{.*}}) inplace [0] : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// GENERIC: "tdf.call_inplace"(%{{.*}}, %{{.*}}) <{callee = @add_inplace, inplace_indices = array<i64: 0>}>
func.func @call_inplace_single(%x: tensor<4xf32> {tdf.donate}, %y: tensor<4xf32>) -> tensor<4xf32> {
  %sum = tdf.call_inplace @add_inplace(%x, %y) inplace [0] : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %sum : tensor<4xf32>
}

// CHECK-LABEL: func.func @call_inplace_mixed
// CHECK: %{{.*}}:2 = tdf.call_inplace @add_carry(%{{.*}}, %{{.*}}) inplace [0, -1] : (tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xi1>)
// GENERIC: inplace_indices = array<i64: 0, -1>
func.func @call_inplace_mixed(%x: tensor<4xf32> {tdf.donate}, %y: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xi1>) {
  %sum, %carry = tdf.call_inplace @add_carry(%x, %y) inplace [0, -1] : (tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xi1>)
  return %sum, %carry : tensor<4xf32>, tensor<4xi1>
}

// CHECK-LABEL: func.func @call_inplace_scalar_operand
// CHECK: tdf.call_inplace @row_update(%{{.*}}, %{{.*}}, %{{.*}}) inplace [0] : (tensor<8x4xf32>, tensor<1x4xf32>, index) -> tensor<8x4xf32>
func.func @call_inplace_scalar_operand(%cache: tensor<8x4xf32> {tdf.donate}, %row: tensor<1x4xf32>, %pos: index) -> tensor<8x4xf32> {
  %updated = tdf.call_inplace @row_update(%cache, %row, %pos) inplace [0] : (tensor<8x4xf32>, tensor<1x4xf32>, index) -> tensor<8x4xf32>
  return %updated : tensor<8x4xf32>
}

// CHECK-LABEL: func.func @call_opaque_results
// CHECK: %[[R:.*]] = tdf.call_opaque @opaque_stats(%{{.*}}) : (tensor<4xf32>) -> tensor<4xf32>
// CHECK: tdf.call_opaque @opaque_sink(%[[R]]) : (tensor<4xf32>) -> ()
// GENERIC: "tdf.call_opaque"(%{{.*}}) <{callee = @opaque_stats}>
func.func @call_opaque_results(%x: tensor<4xf32>) -> tensor<4xf32> {
  %stats = tdf.call_opaque @opaque_stats(%x) : (tensor<4xf32>) -> tensor<4xf32>
  tdf.call_opaque @opaque_sink(%stats) : (tensor<4xf32>) -> ()
  return %stats : tensor<4xf32>
}

// CHECK-LABEL: func.func @assume_unaliased
// CHECK: %[[U:.*]] = tdf.assume_unaliased %{{.*}} : tensor<4xf32>
// CHECK: return %[[U]]
// GENERIC: "tdf.assume_unaliased"(%{{.*}}) : (tensor<4xf32>) -> tensor<4xf32>
func.func @assume_unaliased(%x: tensor<4xf32>) -> tensor<4xf32> {
  %fresh = tdf.call_opaque @opaque_stats(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %own = tdf.assume_unaliased %fresh : tensor<4xf32>
  return %own : tensor<4xf32>
}
