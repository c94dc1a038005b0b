// The GPU path where in place is NOT allowed, and its errors.
// RUN: tdf-opt %s --split-input-file --tdf-lower-to-nvvm="inplace=false stop-at=gpu" --verify-diagnostics | FileCheck %s
// A bad chip/format/opt-level is an error (exit 1), never an abort in MLIR.
// RUN: not tdf-opt %s --split-input-file --tdf-lower-to-nvvm="chip=sm_91" 2>&1 | FileCheck %s --check-prefix=CHIP
// RUN: not tdf-opt %s --split-input-file --tdf-lower-to-nvvm="chip=compute_90" 2>&1 | FileCheck %s --check-prefix=CHIP2
// RUN: not tdf-opt %s --split-input-file --tdf-lower-to-nvvm="format=elf" 2>&1 | FileCheck %s --check-prefix=FORMAT
// RUN: not tdf-opt %s --split-input-file --tdf-lower-to-nvvm="opt-level=9" 2>&1 | FileCheck %s --check-prefix=OPT
// RUN: not tdf-opt %s --split-input-file --tdf-lower-to-nvvm="tile-sizes=64,32" 2>&1 | FileCheck %s --check-prefix=TILES

// CHIP: unsupported chip 'sm_91' for tdf-lower-to-nvvm (supported: sm_70,
// CHIP2: unsupported chip 'compute_90' for tdf-lower-to-nvvm
// FORMAT: unknown format 'elf' for tdf-lower-to-nvvm (expected one of: isa, bin, fatbin)
// OPT: opt-level 9 of tdf-lower-to-nvvm is not in [0, 3]
// TILES: tile-sizes '64,32' make 2048 threads per block (at most 1024)

// The same in-place kernel call on an argument that is NOT donated: the
// argument's device buffer is never written; the call works on a device copy.
func.func private @add_inplace(%acc: memref<64x128xf32>, %rhs: memref<64x128xf32>) attributes {tdf.elementwise} {
  linalg.add ins(%acc, %rhs : memref<64x128xf32>, memref<64x128xf32>) outs(%acc : memref<64x128xf32>)
  return
}
func.func @negative_not_donated(%x: tensor<64x128xf32>, %y: tensor<64x128xf32>) -> tensor<64x128xf32> {
  %0 = tdf.call_inplace @add_inplace(%x, %y) inplace [0] : (tensor<64x128xf32>, tensor<64x128xf32>) -> tensor<64x128xf32>
  return %0 : tensor<64x128xf32>
}

// CHECK-LABEL: func.func @negative_not_donated(
// CHECK-SAME: %[[X:[^:]*]]: memref<64x128xf32>, %[[Y:[^:]*]]: memref<64x128xf32>)
// CHECK: %[[DX:.*]], %{{.*}} = gpu.alloc async
// CHECK: gpu.memcpy async [%{{.*}}] %[[DX]], %[[X]] {{.*}}tdf.transfer = "h2d"
// CHECK: %[[DY:.*]], %{{.*}} = gpu.alloc async
// CHECK: %[[COPY:.*]], %{{.*}} = gpu.alloc async {{.*}} : memref<64x128xf32>
// CHECK: gpu.launch_func async {{.*}} @negative_not_donated_kernel::@negative_not_donated_kernel {{.*}} args(%[[DX]] : memref<64x128xf32>, %[[COPY]] : memref<64x128xf32>)
// CHECK: call @add_inplace(%[[COPY]], %[[DY]])
// CHECK-NOT: %[[X]], %[[DX]]
// CHECK: %[[HOST:.*]] = memref.alloc() : memref<64x128xf32>
// CHECK: gpu.memcpy async [%{{.*}}] %[[HOST]], %[[COPY]] {{.*}}tdf.transfer = "d2h"
// CHECK-NOT: gpu.memcpy
// CHECK: return %[[HOST]]

// -----

// A donated cache that is still read after the update: One-Shot copies it on
// the device (a copy kernel), the update goes into the copy.
func.func @negative_donated_but_live(%cache: tensor<4x16x64xf32> {tdf.donate}, %row: tensor<4x1x64xf32>, %pos: index) -> (tensor<4x16x64xf32>, tensor<4x16x64xf32>) {
  %updated = tensor.insert_slice %row into %cache[0, %pos, 0] [4, 1, 64] [1, 1, 1] : tensor<4x1x64xf32> into tensor<4x16x64xf32>
  return %updated, %cache : tensor<4x16x64xf32>, tensor<4x16x64xf32>
}

// CHECK-LABEL: func.func @negative_donated_but_live(
// CHECK: %[[DCACHE:.*]], %{{.*}} = gpu.alloc async {{.*}} : memref<4x16x64xf32>
// CHECK: %[[FRESH:.*]], %{{.*}} = gpu.alloc async {{.*}} : memref<4x16x64xf32>
// CHECK: gpu.launch_func async {{.*}} args({{.*}}%[[DCACHE]] : memref<4x16x64xf32>, %[[FRESH]] : memref<4x16x64xf32>)
// CHECK: memref.subview %[[FRESH]]

// -----

// Host code may not read device memory: a scalar read of an element of a
// computed tensor larger than tdf-gpu-host-scalars copies (256 bytes) stays
// on the host after mapping and is rejected. (A read of an argument reads
// the caller's buffer, and one of a small computed tensor a copy of it:
// tdf-lower-to-nvvm.mlir.)
func.func @negative_host_read(%x: tensor<128xf32>) -> f32 {
  %c0 = arith.constant 0 : index
  %e = tensor.empty() : tensor<128xf32>
  %y = linalg.exp ins(%x : tensor<128xf32>) outs(%e : tensor<128xf32>) -> tensor<128xf32>
  // expected-error@+1 {{memref.load accesses device memory on the host: not supported on the GPU path (compute it in a kernel)}}
  %v = tensor.extract %y[%c0] : tensor<128xf32>
  return %v : f32
}
