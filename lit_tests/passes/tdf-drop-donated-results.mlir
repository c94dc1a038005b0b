// RUN: tdf-opt %s --split-input-file --tdf-drop-donated-results | FileCheck %s
// RUN: tdf-opt %s --tdf-drop-donated-results --mlir-pass-statistics 2>&1 >/dev/null | FileCheck %s --check-prefix=STATS

// After bufferization, a public entry function's result that is one of its
// donated arguments is dropped: the caller keeps its own buffer, updated in
// place. tdf.returned_args records, per original result, the argument it was
// (or -1). tdf.donate is consumed (removed from every function).

// CHECK-LABEL: func.func @step
// CHECK-SAME:  (%[[CACHE:.*]]: memref<8x4xf32>, %[[ROW:.*]]: memref<1x4xf32>)
// CHECK-SAME:  attributes {tdf.returned_args = array<i64: 0>} {
// CHECK:       %[[SLOT:.*]] = memref.subview %[[CACHE]]
// CHECK-NEXT:  memref.copy %[[ROW]], %[[SLOT]]
// CHECK-NEXT:  return{{$}}
func.func @step(%cache: memref<8x4xf32> {tdf.donate}, %row: memref<1x4xf32>) -> memref<8x4xf32> {
  %c0 = arith.constant 0 : index
  %slot = memref.subview %cache[%c0, 0] [1, 4] [1, 1] : memref<8x4xf32> to memref<1x4xf32, strided<[4, 1], offset: ?>>
  memref.copy %row, %slot : memref<1x4xf32> to memref<1x4xf32, strided<[4, 1], offset: ?>>
  return %cache : memref<8x4xf32>
}

// -----

// Several results: donated ones are dropped, the others (a non-donated
// argument, a scalar) kept in order.
// CHECK-LABEL: func.func @mixed
// CHECK-SAME:  (%[[A:.*]]: memref<4xf32>, %[[B:.*]]: memref<4xf32>, %[[C:.*]]: memref<4xf32>)
// CHECK-SAME:  -> (memref<4xf32>, index)
// CHECK-SAME:  attributes {tdf.returned_args = array<i64: -1, 2, 0, -1>}
// CHECK:       %[[I:.*]] = arith.constant 0 : index
// CHECK-NEXT:  return %[[B]], %[[I]] : memref<4xf32>, index
func.func @mixed(%a: memref<4xf32> {tdf.donate}, %b: memref<4xf32>, %c: memref<4xf32> {tdf.donate})
    -> (memref<4xf32>, memref<4xf32>, memref<4xf32>, index) {
  %i = arith.constant 0 : index
  return %b, %c, %a, %i : memref<4xf32>, memref<4xf32>, memref<4xf32>, index
}

// -----

// A result that is the donated argument through casts back to its own type
// is dropped too.
// CHECK-LABEL: func.func @through_casts
// CHECK-SAME:  (%[[A:.*]]: memref<4xf32>)
// CHECK-SAME:  attributes {tdf.returned_args = array<i64: 0>}
// CHECK:       return{{$}}
func.func @through_casts(%a: memref<4xf32> {tdf.donate}) -> memref<4xf32> {
  %0 = memref.cast %a : memref<4xf32> to memref<?xf32>
  %1 = memref.cast %0 : memref<?xf32> to memref<4xf32>
  return %1 : memref<4xf32>
}

// -----

// Not dropped: a result of another type than the argument (the caller would
// not get the dynamic-size view back).
// CHECK-LABEL: func.func @negative_other_type
// CHECK-SAME:  (%[[A:.*]]: memref<4xf32>) -> memref<?xf32> {
// CHECK:       %[[CAST:.*]] = memref.cast %[[A]]
// CHECK-NEXT:  return %[[CAST]] : memref<?xf32>
// CHECK-NOT:   tdf.returned_args
func.func @negative_other_type(%a: memref<4xf32> {tdf.donate}) -> memref<?xf32> {
  %0 = memref.cast %a : memref<4xf32> to memref<?xf32>
  return %0 : memref<?xf32>
}

// -----

// Not dropped: a non-donated argument, a private function, a function that
// is called in the module (its callers use the result). tdf.donate is still
// removed everywhere.
// CHECK-LABEL: func.func @negative_not_donated
// CHECK-SAME:  (%[[A:.*]]: memref<4xf32>) -> memref<4xf32> {
// CHECK-NEXT:  return %[[A]] : memref<4xf32>
// CHECK-LABEL: func.func private @negative_private
// CHECK-SAME:  (%[[A:.*]]: memref<4xf32>) -> memref<4xf32> {
// CHECK-NEXT:  return %[[A]] : memref<4xf32>
// CHECK-LABEL: func.func @negative_called
// CHECK-SAME:  (%[[A:.*]]: memref<4xf32>) -> memref<4xf32> {
// CHECK-NEXT:  return %[[A]] : memref<4xf32>
// CHECK-LABEL: func.func @caller
// CHECK-SAME:  (%[[X:.*]]: memref<4xf32>) -> memref<4xf32>
// CHECK-NOT:   tdf.returned_args
// CHECK:       %[[R:.*]] = call @negative_called(%[[X]])
// CHECK-NEXT:  return %[[R]]
// CHECK-NOT:   tdf.donate
func.func @negative_not_donated(%a: memref<4xf32>) -> memref<4xf32> {
  return %a : memref<4xf32>
}
func.func private @negative_private(%a: memref<4xf32> {tdf.donate}) -> memref<4xf32> {
  return %a : memref<4xf32>
}
func.func @negative_called(%a: memref<4xf32> {tdf.donate}) -> memref<4xf32> {
  return %a : memref<4xf32>
}
func.func @caller(%x: memref<4xf32>) -> memref<4xf32> {
  %0 = call @negative_called(%x) : (memref<4xf32>) -> memref<4xf32>
  return %0 : memref<4xf32>
}

// -----

// Not dropped: several exits (unstructured control flow).
// CHECK-LABEL: func.func @negative_two_returns
// CHECK-SAME:  (%[[C:.*]]: i1, %[[A:.*]]: memref<4xf32>) -> memref<4xf32> {
// CHECK:       return %[[A]] : memref<4xf32>
// CHECK:       return %[[A]] : memref<4xf32>
// CHECK-NOT:   tdf.returned_args
func.func @negative_two_returns(%c: i1, %a: memref<4xf32> {tdf.donate}) -> memref<4xf32> {
  cf.cond_br %c, ^bb1, ^bb2
^bb1:
  return %a : memref<4xf32>
^bb2:
  return %a : memref<4xf32>
}

// The whole file as one module: @step drops 1, @mixed 2, @through_casts 1.
// STATS: (S) 4 dropped
