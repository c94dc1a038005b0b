// RUN: tdf-opt %s --split-input-file --one-shot-bufferize="%one_shot_options" --canonicalize | FileCheck %s

// Kernel calls with dynamic shapes: a fresh result of dynamic shape is
// allocated with the sizes of the shape operand (the first tensor operand of
// its rank), and a kernel parameter more dynamic than its operand gets the
// buffer through a memref.cast.

func.func private @scale(memref<?x?xf32>, f32, memref<?x?xf32>)

// CHECK-LABEL: func.func @dynamic_fresh_result(
// CHECK-SAME:    %[[X:.*]]: memref<?x?xf32>, %[[S:.*]]: f32)
// CHECK-DAG:     %[[C0:.*]] = arith.constant 0 : index
// CHECK-DAG:     %[[C1:.*]] = arith.constant 1 : index
// CHECK:         %[[D0:.*]] = memref.dim %[[X]], %[[C0]]
// CHECK:         %[[D1:.*]] = memref.dim %[[X]], %[[C1]]
// CHECK:         %[[OUT:.*]] = memref.alloc(%[[D0]], %[[D1]]) {{.*}}: memref<?x?xf32>
// CHECK:         call @scale(%[[X]], %[[S]], %[[OUT]])
// CHECK:         return %[[OUT]]
func.func @dynamic_fresh_result(%x: tensor<?x?xf32>, %s: f32) -> tensor<?x?xf32> {
  %y = tdf.call @scale(%x, %s) : (tensor<?x?xf32>, f32) -> tensor<?x?xf32>
  return %y : tensor<?x?xf32>
}

// -----

// Only the dynamic dimensions are read from the shape operand; a static
// result dimension stays static.
func.func private @rows(memref<?x8xf32>, memref<?x8xf32>)

// CHECK-LABEL: func.func @mixed_static_dynamic(
// CHECK-SAME:    %[[X:.*]]: memref<?x8xf32>)
// CHECK:         %[[D0:.*]] = memref.dim %[[X]], %{{.*}} : memref<?x8xf32>
// CHECK-NOT:     memref.dim
// CHECK:         %[[OUT:.*]] = memref.alloc(%[[D0]]) {{.*}}: memref<?x8xf32>
// CHECK:         call @rows(%[[X]], %[[OUT]])
func.func @mixed_static_dynamic(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %y = tdf.call @rows(%x) : (tensor<?x8xf32>) -> tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}

// -----

// A kernel generic in its sizes called on static tensors: the operand and
// the (static) fresh output are cast to the parameter types; the result keeps
// its static type.
func.func private @generic(memref<?xf32>, memref<?xf32>)

// CHECK-LABEL: func.func @generic_kernel_static_call(
// CHECK-SAME:    %[[X:.*]]: memref<4xf32>) -> memref<4xf32>
// CHECK-DAG:     %[[XC:.*]] = memref.cast %[[X]] : memref<4xf32> to memref<?xf32>
// CHECK-DAG:     %[[OUT:.*]] = memref.alloc() {{.*}}: memref<4xf32>
// CHECK-DAG:     %[[OC:.*]] = memref.cast %[[OUT]] : memref<4xf32> to memref<?xf32>
// CHECK:         call @generic(%[[XC]], %[[OC]])
// CHECK:         return %[[OUT]] : memref<4xf32>
func.func @generic_kernel_static_call(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = tdf.call @generic(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// In place through a generic kernel: the result is the operand's buffer with
// its static type (cast back from the parameter type).
func.func private @generic_inplace(memref<?xf32>)

// CHECK-LABEL: func.func @generic_kernel_inplace(
// CHECK-SAME:    %[[X:.*]]: memref<4xf32>) -> memref<4xf32>
// CHECK:         %[[XC:.*]] = memref.cast %[[X]] : memref<4xf32> to memref<?xf32>
// CHECK:         call @generic_inplace(%[[XC]])
// CHECK-NOT:     memref.alloc
// CHECK-NOT:     memref.copy
// CHECK:         return %[[X]] : memref<4xf32>
func.func @generic_kernel_inplace(%x: tensor<4xf32> {bufferization.writable = true}) -> tensor<4xf32> {
  %y = tdf.call_inplace @generic_inplace(%x) inplace [0] : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// A dynamic in-place operand: the result is the operand's buffer.
func.func private @dyn_inplace(memref<?xf32>, memref<?xf32>)

// CHECK-LABEL: func.func @dynamic_inplace(
// CHECK-SAME:    %[[X:.*]]: memref<?xf32>, %[[Y:.*]]: memref<?xf32>) -> memref<?xf32>
// CHECK-NOT:     memref.alloc
// CHECK:         call @dyn_inplace(%[[X]], %[[Y]])
// CHECK-NOT:     memref.copy
// CHECK:         return %[[X]]
func.func @dynamic_inplace(%x: tensor<?xf32> {bufferization.writable = true}, %y: tensor<?xf32>) -> tensor<?xf32> {
  %r = tdf.call_inplace @dyn_inplace(%x, %y) inplace [0] : (tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32>
  return %r : tensor<?xf32>
}
