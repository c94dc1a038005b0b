// RUN: tdf-opt %s --split-input-file --tdf-unown-opaque-results | FileCheck %s
// RUN: tdf-opt %s --split-input-file --tdf-unown-opaque-results=phase=snapshot | FileCheck %s
// RUN: tdf-opt %s --split-input-file --tdf-unown-opaque-results=phase=unown | FileCheck %s --check-prefix=UNOWN

// An opaque call (a declaration returning memrefs, what tdf.call_opaque
// bufferizes to) may return a buffer the callee keeps or one that aliases an
// argument. phase=snapshot (the default, before deallocation) copies each
// such result into a fresh buffer right after the call and redirects its
// uses to the copy; phase=unown (after deallocation) makes every
// bufferization.dealloc condition of the opaque result itself false.

// CHECK-LABEL: func.func @snapshot
// CHECK-SAME:  (%[[A:.*]]: memref<4xf32>, %[[B:.*]]: memref<?x4xf32>)
// CHECK:       %[[C0:.*]] = arith.constant 0 : index
// CHECK:       %[[R:.*]] = call @opaque(%[[A]]) : (memref<4xf32>) -> memref<4xf32>
// CHECK-NEXT:  %[[OWN:.*]] = memref.alloc() : memref<4xf32>
// CHECK-NEXT:  memref.copy %[[R]], %[[OWN]] : memref<4xf32> to memref<4xf32>
// CHECK-NEXT:  %[[V:.*]] = memref.load %[[OWN]][%[[C0]]] : memref<4xf32>
// CHECK-NEXT:  %[[D:.*]]:2 = call @opaque_dyn(%[[B]])
// CHECK-NEXT:  %[[DIM0:.*]] = arith.constant 0 : index
// CHECK-NEXT:  %[[N:.*]] = memref.dim %[[D]]#0, %[[DIM0]] : memref<?x4xf32>
// CHECK-NEXT:  %[[OWND:.*]] = memref.alloc(%[[N]]) : memref<?x4xf32>
// CHECK-NEXT:  memref.copy %[[D]]#0, %[[OWND]] : memref<?x4xf32> to memref<?x4xf32>
// CHECK-NEXT:  %[[W:.*]] = memref.load %[[OWND]][%[[C0]], %[[D]]#1] : memref<?x4xf32>
// CHECK-NEXT:  return %[[V]], %[[W]]
// UNOWN-LABEL: func.func @snapshot
// UNOWN-NOT:   memref.copy
// UNOWN:       return
func.func private @opaque(memref<4xf32>) -> memref<4xf32>
func.func private @opaque_dyn(memref<?x4xf32>) -> (memref<?x4xf32>, index)
func.func @snapshot(%a: memref<4xf32>, %b: memref<?x4xf32>) -> (f32, f32) {
  %c0 = arith.constant 0 : index
  %r = call @opaque(%a) : (memref<4xf32>) -> memref<4xf32>
  %v = memref.load %r[%c0] : memref<4xf32>
  %d:2 = call @opaque_dyn(%b) : (memref<?x4xf32>) -> (memref<?x4xf32>, index)
  %w = memref.load %d#0[%c0, %d#1] : memref<?x4xf32>
  return %v, %w : f32, f32
}

// -----

// Not opaque: a callee with a body (deallocation sees through it), and a
// declaration that returns no memref.
// CHECK-LABEL: func.func @negative_not_opaque
// CHECK-SAME:  (%[[A:.*]]: memref<4xf32>)
// CHECK-NEXT:  %[[R:.*]] = call @identity(%[[A]]) : (memref<4xf32>) -> memref<4xf32>
// CHECK-NEXT:  %[[S:.*]] = call @scalar(%[[A]]) : (memref<4xf32>) -> f32
// CHECK-NEXT:  return %[[R]], %[[S]]
func.func private @identity(%a: memref<4xf32>) -> memref<4xf32> {
  return %a : memref<4xf32>
}
func.func private @scalar(memref<4xf32>) -> f32
func.func @negative_not_opaque(%a: memref<4xf32>) -> (memref<4xf32>, f32) {
  %r = call @identity(%a) : (memref<4xf32>) -> memref<4xf32>
  %s = call @scalar(%a) : (memref<4xf32>) -> f32
  return %r, %s : memref<4xf32>, f32
}

// -----

// phase=unown: the condition of the opaque result's base buffer becomes
// false; the other buffers of the same dealloc keep theirs.
// UNOWN-LABEL: func.func @unown
// UNOWN-SAME:  (%[[A:.*]]: memref<4xf32>, %[[C:.*]]: i1)
// UNOWN:       %[[R:.*]] = call @opaque(%[[A]])
// UNOWN:       %[[OWN:.*]] = memref.alloc() : memref<4xf32>
// UNOWN:       %[[RB:.*]], %{{.*}}, %{{.*}}, %{{.*}} = memref.extract_strided_metadata %[[R]]
// UNOWN:       %[[OB:.*]], %{{.*}}, %{{.*}}, %{{.*}} = memref.extract_strided_metadata %[[OWN]]
// UNOWN:       %[[FALSE:.*]] = arith.constant false
// UNOWN-NEXT:  bufferization.dealloc (%[[RB]], %[[OB]] : memref<f32>, memref<f32>) if (%[[FALSE]], %[[C]])
// CHECK-LABEL: func.func @unown
// CHECK:       bufferization.dealloc (%{{.*}}, %{{.*}} : memref<f32>, memref<f32>) if (%[[C:.*]], %[[C]])
func.func private @opaque(memref<4xf32>) -> memref<4xf32>
func.func @unown(%a: memref<4xf32>, %c: i1) {
  %r = call @opaque(%a) : (memref<4xf32>) -> memref<4xf32>
  %own = memref.alloc() : memref<4xf32>
  %rb, %ro, %rs, %rt = memref.extract_strided_metadata %r : memref<4xf32> -> memref<f32>, index, index, index
  %ob, %oo, %os, %ot = memref.extract_strided_metadata %own : memref<4xf32> -> memref<f32>, index, index, index
  bufferization.dealloc (%rb, %ob : memref<f32>, memref<f32>) if (%c, %c)
  return
}
