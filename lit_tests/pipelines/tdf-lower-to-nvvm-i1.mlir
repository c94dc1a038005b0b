// i1 tensors on the GPU path: buffers of i1 are stored as bytes (i8), like the
// CPU pipeline (finalize-memref-to-llvm asserts on i1 loads and stores).
// Regression: these inputs aborted the process inside tdf-lower-to-nvvm.
// RUN: tdf-opt %s --split-input-file --tdf-lower-to-nvvm="stop-at=gpu" | FileCheck %s --check-prefix=GPU
// RUN: tdf-opt %s --split-input-file --tdf-lower-to-nvvm | FileCheck %s --check-prefix=PTX

// The @add_carry kernel of lit_tests/dialect/bufferization.mlir: an in-place
// sum and a fresh i1 carry.
func.func private @add_carry(memref<4xf32>, memref<4xf32>, memref<4xi1>)

// GPU-LABEL: func.func private @add_carry
// GPU-SAME: memref<4xi8>
// GPU-LABEL: func.func @mixed_fresh_result
// GPU-SAME: -> (memref<4xf32>, memref<4xi8>)
// GPU: %[[CARRY:.*]], %{{.*}} = gpu.alloc async {{.*}} : memref<4xi8>
// GPU: call @add_carry(%{{.*}}, %{{.*}}, %[[CARRY]])
// GPU-NOT: xi1>
// PTX-LABEL: llvm.func @mixed_fresh_result
func.func @mixed_fresh_result(%x: tensor<4xf32> {tdf.donate}, %y: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xi1>) {
  %sum, %carry = tdf.call_inplace @add_carry(%x, %y) inplace [0, -1] : (tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xi1>)
  return %sum, %carry : tensor<4xf32>, tensor<4xi1>
}

// -----

// An element-wise i1 kernel: loads truncate i8 -> i1, stores extend i1 -> i8
// inside the device kernel; the PTX moves bytes.
// GPU-LABEL: func.func @mask_and
// GPU-SAME: (%{{.*}}: memref<64xi8>, %{{.*}}: memref<64xi8>) -> memref<64xi8>
// GPU: gpu.func @mask_and_kernel(%[[A:.*]]: memref<64xi8>, %[[B:.*]]: memref<64xi8>, %[[OUT:.*]]: memref<64xi8>)
// GPU: %[[WA:.*]] = memref.load %[[A]][%{{.*}}] : memref<64xi8>
// GPU: %[[VA:.*]] = arith.trunci %[[WA]] : i8 to i1
// GPU: %[[WB:.*]] = memref.load %[[B]][%{{.*}}] : memref<64xi8>
// GPU: %[[VB:.*]] = arith.trunci %[[WB]] : i8 to i1
// GPU: %[[AND:.*]] = arith.andi %[[VA]], %[[VB]] : i1
// GPU: %[[WIDE:.*]] = arith.extui %[[AND]] : i1 to i8
// GPU: memref.store %[[WIDE]], %[[OUT]][%{{.*}}] : memref<64xi8>
// PTX-LABEL: llvm.func @mask_and
// PTX: gpu.binary @mask_and_kernel
// PTX-SAME: ld.global.b8
// PTX-SAME: st.global.b8
func.func @mask_and(%a: tensor<64xi1>, %b: tensor<64xi1>) -> tensor<64xi1> {
  %e = tensor.empty() : tensor<64xi1>
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%a, %b : tensor<64xi1>, tensor<64xi1>) outs(%e : tensor<64xi1>) {
  ^bb0(%p: i1, %q: i1, %o: i1):
    %v = arith.andi %p, %q : i1
    linalg.yield %v : i1
  } -> tensor<64xi1>
  return %r : tensor<64xi1>
}
