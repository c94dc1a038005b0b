// RUN: tdf-opt %s --split-input-file --tdf-strided-copies-to-loops | FileCheck %s
// RUN: tdf-opt %s --tdf-strided-copies-to-loops --mlir-pass-statistics 2>&1 >/dev/null | FileCheck %s --check-prefix=STATS

// A memref.copy with an operand that is not an identity-layout memref would
// be lowered to the generic memrefCopy runtime call (element by element,
// through descriptors); it becomes linalg.copy (loops LLVM can vectorize).

// A row written into a cache: the destination is a strided view.
// CHECK-LABEL: func.func @row_into_cache
// CHECK-SAME:  (%[[ROW:.*]]: memref<1x4xf32>, %[[CACHE:.*]]: memref<8x4xf32>, %[[POS:.*]]: index)
// CHECK:       %[[SLOT:.*]] = memref.subview %[[CACHE]][%[[POS]], 0] [1, 4] [1, 1]
// CHECK-NOT:   memref.copy
// CHECK:       linalg.copy {{.*}}ins(%[[ROW]] : memref<1x4xf32>) outs(%[[SLOT]] : memref<1x4xf32, strided<[4, 1], offset: ?>>)
// CHECK-NEXT:  return
func.func @row_into_cache(%row: memref<1x4xf32>, %cache: memref<8x4xf32>, %pos: index) {
  %slot = memref.subview %cache[%pos, 0] [1, 4] [1, 1] : memref<8x4xf32> to memref<1x4xf32, strided<[4, 1], offset: ?>>
  memref.copy %row, %slot : memref<1x4xf32> to memref<1x4xf32, strided<[4, 1], offset: ?>>
  return
}

// -----

// A column read out of a matrix: the source is a strided view.
// CHECK-LABEL: func.func @column_out
// CHECK-SAME:  (%[[M:.*]]: memref<8x4xf32>, %[[OUT:.*]]: memref<8x1xf32>)
// CHECK:       %[[COL:.*]] = memref.subview %[[M]][0, 2] [8, 1] [1, 1]
// CHECK:       linalg.copy {{.*}}ins(%[[COL]] : memref<8x1xf32, strided<[4, 1], offset: 2>>) outs(%[[OUT]] : memref<8x1xf32>)
// CHECK-NOT:   memref.copy
func.func @column_out(%m: memref<8x4xf32>, %out: memref<8x1xf32>) {
  %col = memref.subview %m[0, 2] [8, 1] [1, 1] : memref<8x4xf32> to memref<8x1xf32, strided<[4, 1], offset: 2>>
  memref.copy %col, %out : memref<8x1xf32, strided<[4, 1], offset: 2>> to memref<8x1xf32>
  return
}

// -----

// Copies between identity-layout memrefs (static or dynamic sizes) stay
// memref.copy: they lower to one memcpy.
// CHECK-LABEL: func.func @negative_contiguous
// CHECK-SAME:  (%[[A:.*]]: memref<4xf32>, %[[B:.*]]: memref<4xf32>, %[[C:.*]]: memref<?x4xf32>, %[[D:.*]]: memref<?x4xf32>)
// CHECK-NEXT:  memref.copy %[[A]], %[[B]] : memref<4xf32> to memref<4xf32>
// CHECK-NEXT:  memref.copy %[[C]], %[[D]] : memref<?x4xf32> to memref<?x4xf32>
// CHECK-NOT:   linalg.copy
func.func @negative_contiguous(%a: memref<4xf32>, %b: memref<4xf32>, %c: memref<?x4xf32>, %d: memref<?x4xf32>) {
  memref.copy %a, %b : memref<4xf32> to memref<4xf32>
  memref.copy %c, %d : memref<?x4xf32> to memref<?x4xf32>
  return
}

// STATS: (S) 2 rewritten - memref.copy ops turned into linalg.copy
