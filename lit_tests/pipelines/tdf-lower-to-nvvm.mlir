// The GPU path on the flagship programs: the GPU-dialect stage (in-place
// decisions survive: kernels write the argument's device buffer, no device
// copy) and the final NVVM/PTX stage for sm_90.
// RUN: tdf-opt %s --split-input-file --tdf-lower-to-nvvm="inplace=false stop-at=gpu" | FileCheck %s --check-prefix=GPU
// RUN: tdf-opt %s --split-input-file --tdf-lower-to-nvvm="inplace=false" | FileCheck %s --check-prefix=PTX
// RUN: tdf-opt %s --split-input-file --tdf-lower-to-nvvm="inplace=false chip=sm_80" | FileCheck %s --check-prefix=SM80
// Device buffers from MLIR's runtime (pool=false) or tdf's pool (the default).
// RUN: tdf-opt %s --split-input-file --tdf-lower-to-nvvm="inplace=false pool=false" | FileCheck %s --check-prefix=NOPOOL

// Element-wise chain in place: x (donated) += y, twice, in x's device buffer.
func.func private @add_inplace(%acc: memref<64x128xf32>, %rhs: memref<64x128xf32>) attributes {tdf.elementwise} {
  linalg.add ins(%acc, %rhs : memref<64x128xf32>, memref<64x128xf32>) outs(%acc : memref<64x128xf32>)
  return
}
func.func @chain_inplace(%x: tensor<64x128xf32> {tdf.donate}, %y: tensor<64x128xf32>) -> tensor<64x128xf32> {
  %0 = tdf.call_inplace @add_inplace(%x, %y) inplace [0] : (tensor<64x128xf32>, tensor<64x128xf32>) -> tensor<64x128xf32>
  %1 = tdf.call_inplace @add_inplace(%0, %y) inplace [0] : (tensor<64x128xf32>, tensor<64x128xf32>) -> tensor<64x128xf32>
  return %1 : tensor<64x128xf32>
}

// GPU-LABEL: func.func private @add_inplace
// GPU: gpu.launch_func async {{.*}} @add_inplace_kernel::@add_inplace_kernel blocks in (%{{.*}}, %{{.*}}, %{{.*}}) threads in (%[[C32:.*]], %[[C8:.*]], %{{.*}})
// GPU: gpu.module @add_inplace_kernel
// GPU: gpu.func @add_inplace_kernel(%[[ACC:.*]]: memref<64x128xf32>, %[[RHS:.*]]: memref<64x128xf32>) kernel
// Coalesced: threadIdx.x walks the contiguous (last) dimension.
// GPU: %[[TX:.*]] = gpu.thread_id x
// GPU: %[[COL:.*]] = arith.addi %[[TX]]
// GPU: memref.load %[[ACC]][%{{.*}}, %[[COL]]]
// GPU: memref.store %{{.*}}, %[[ACC]][%{{.*}}, %[[COL]]]
// GPU-LABEL: func.func @chain_inplace(
// GPU-SAME: %[[X:[^:]*]]: memref<64x128xf32>, %[[Y:[^:]*]]: memref<64x128xf32>) -> memref<64x128xf32>
// GPU: %[[DX:.*]], %{{.*}} = gpu.alloc async
// GPU: gpu.memcpy async [%{{.*}}] %[[DX]], %[[X]] {{.*}}tdf.transfer = "h2d"
// GPU: %[[DY:.*]], %{{.*}} = gpu.alloc async
// GPU: gpu.memcpy async [%{{.*}}] %[[DY]], %[[Y]] {{.*}}tdf.transfer = "h2d"
// GPU-NOT: gpu.memcpy
// GPU-NOT: gpu.alloc
// GPU: call @add_inplace(%[[DX]], %[[DY]])
// GPU-NOT: gpu.memcpy
// GPU-NOT: gpu.alloc
// GPU: call @add_inplace(%[[DX]], %[[DY]])
// GPU: gpu.memcpy async [%{{.*}}] %[[X]], %[[DX]] {{.*}}tdf.transfer = "d2h"
// GPU-NOT: gpu.memcpy
// GPU: gpu.dealloc async [%{{.*}}] %[[DX]] :
// GPU: gpu.dealloc async [%{{.*}}] %[[DY]] :
// GPU: return %[[X]] : memref<64x128xf32>

// PTX-LABEL: llvm.func @add_inplace(
// PTX: gpu.launch_func <%{{.*}} : !llvm.ptr> @add_inplace_kernel::@add_inplace_kernel
// PTX: gpu.binary @add_inplace_kernel [#gpu.object<#nvvm.target<O = 3, chip = "sm_90", features = "+ptx80">
// PTX-SAME: .version 8.0\0A.target sm_90
// PTX-SAME: .entry add_inplace_kernel
// PTX-LABEL: llvm.func @chain_inplace(
// PTX: llvm.call @tdf_gpu_mem_alloc
// PTX: llvm.call @mgpuMemcpy
// PTX: llvm.call @add_inplace(
// PTX: llvm.call @add_inplace(
// PTX: llvm.call @mgpuMemcpy
// PTX: llvm.call @tdf_gpu_mem_free
// PTX-NOT: @mgpuMemAlloc
// NOPOOL-LABEL: llvm.func @chain_inplace(
// NOPOOL: llvm.call @mgpuMemAlloc
// NOPOOL: llvm.call @mgpuMemFree
// NOPOOL-NOT: @tdf_gpu_mem_alloc

// SM80: #nvvm.target<O = 3, chip = "sm_80", features = "+ptx70">
// SM80-SAME: .target sm_80

// -----

// KV-cache row update on a donated cache: only the row is written, into the
// cache's own device buffer; the cache is never copied on the device.
func.func @kv_cache_update(%cache: tensor<4x16x64xf32> {tdf.donate}, %row: tensor<4x1x64xf32>, %pos: index) -> tensor<4x16x64xf32> {
  %updated = tensor.insert_slice %row into %cache[0, %pos, 0] [4, 1, 64] [1, 1, 1] : tensor<4x1x64xf32> into tensor<4x16x64xf32>
  return %updated : tensor<4x16x64xf32>
}

// GPU-LABEL: func.func @kv_cache_update(
// GPU-SAME: %[[CACHE:[^:]*]]: memref<4x16x64xf32>, %[[ROW:[^:]*]]: memref<4x1x64xf32>, %[[POS:[^:]*]]: index)
// GPU: %[[DCACHE:.*]], %{{.*}} = gpu.alloc async {{.*}} : memref<4x16x64xf32>
// GPU: gpu.memcpy async [%{{.*}}] %[[DCACHE]], %[[CACHE]] {{.*}}tdf.transfer = "h2d"
// GPU: %[[DROW:.*]], %{{.*}} = gpu.alloc async {{.*}} : memref<4x1x64xf32>
// GPU: gpu.memcpy async [%{{.*}}] %[[DROW]], %[[ROW]] {{.*}}tdf.transfer = "h2d"
// GPU-NOT: gpu.alloc
// GPU: %[[SLOT:.*]] = memref.subview %[[DCACHE]][0, %[[POS]], 0] [4, 1, 64] [1, 1, 1]
// GPU-NOT: gpu.alloc
// GPU-NOT: gpu.memcpy
// GPU: gpu.launch_func async {{.*}} @kv_cache_update_kernel::@kv_cache_update_kernel {{.*}} args({{.*}}%[[DROW]] : memref<4x1x64xf32>, {{.*}}%[[SLOT]] : memref<4x1x64xf32, strided<[1024, 64, 1], offset: ?>>)
// GPU: gpu.memcpy async [%{{.*}}] %[[CACHE]], %[[DCACHE]] {{.*}}tdf.transfer = "d2h"
// GPU-NOT: gpu.memcpy
// GPU: return %[[CACHE]]

// PTX-LABEL: llvm.func @kv_cache_update(
// PTX: llvm.call @mgpuMemcpy
// PTX: gpu.launch_func <%{{.*}} : !llvm.ptr> @kv_cache_update_kernel::@kv_cache_update_kernel
// PTX: llvm.call @mgpuMemcpy
// PTX: gpu.binary @kv_cache_update_kernel
// PTX-SAME: .target sm_90
// PTX-SAME: .entry kv_cache_update_kernel

// -----

// Concat in place: each part is computed straight into its slice of the
// result (the form tdf-insert-inplace gives a tensor.concat of computed parts).
func.func @concat_inplace(%a: tensor<4x64xf32>, %b: tensor<4x64xf32>) -> tensor<8x64xf32> {
  %empty = tensor.empty() : tensor<8x64xf32>
  %top = tensor.extract_slice %empty[0, 0] [4, 64] [1, 1] : tensor<8x64xf32> to tensor<4x64xf32>
  %exp_a = linalg.exp ins(%a : tensor<4x64xf32>) outs(%top : tensor<4x64xf32>) -> tensor<4x64xf32>
  %half = tensor.insert_slice %exp_a into %empty[0, 0] [4, 64] [1, 1] : tensor<4x64xf32> into tensor<8x64xf32>
  %bottom = tensor.extract_slice %half[4, 0] [4, 64] [1, 1] : tensor<8x64xf32> to tensor<4x64xf32>
  %exp_b = linalg.exp ins(%b : tensor<4x64xf32>) outs(%bottom : tensor<4x64xf32>) -> tensor<4x64xf32>
  %full = tensor.insert_slice %exp_b into %half[4, 0] [4, 64] [1, 1] : tensor<4x64xf32> into tensor<8x64xf32>
  return %full : tensor<8x64xf32>
}

// GPU-LABEL: func.func @concat_inplace(
// GPU-SAME: %[[A:[^:]*]]: memref<4x64xf32>, %[[B:[^:]*]]: memref<4x64xf32>) -> memref<8x64xf32>
// GPU: %[[DA:.*]], %{{.*}} = gpu.alloc async
// GPU: %[[DB:.*]], %{{.*}} = gpu.alloc async
// GPU: %[[OUT:.*]], %{{.*}} = gpu.alloc async {{.*}} : memref<8x64xf32>
// GPU-NOT: gpu.alloc
// GPU-NOT: gpu.memcpy
// GPU: %[[TOP:.*]] = memref.subview %[[OUT]][0, 0] [4, 64] [1, 1]
// GPU: gpu.launch_func async {{.*}} args({{.*}}%[[DA]] : memref<4x64xf32>, %[[TOP]] :
// GPU: %[[BOT:.*]] = memref.subview %[[OUT]][4, 0] [4, 64] [1, 1]
// GPU: gpu.launch_func async {{.*}} args({{.*}}%[[DB]] : memref<4x64xf32>, %[[BOT]] :
// GPU-NOT: gpu.launch_func
// GPU: %[[HOST:.*]] = memref.alloc() : memref<8x64xf32>
// GPU: gpu.memcpy async [%{{.*}}] %[[HOST]], %[[OUT]] {{.*}}tdf.transfer = "d2h"
// GPU-DAG: gpu.dealloc async [%{{.*}}] %[[DA]] :
// GPU-DAG: gpu.dealloc async [%{{.*}}] %[[DB]] :
// GPU-DAG: gpu.dealloc async [%{{.*}}] %[[OUT]] :
// GPU: return %[[HOST]]

// PTX-LABEL: llvm.func @concat_inplace(
// PTX: gpu.binary @concat_inplace_kernel
// PTX-SAME: .target sm_90
// PTX: gpu.binary @concat_inplace_kernel_0
// PTX-SAME: .target sm_90

// -----

// Decode loop over a donated cache: the whole loop updates the cache's one
// device buffer (no device copy of the cache, no allocation in the loop).
func.func @decode_loop(%cache: tensor<4x16x64xf32> {tdf.donate}, %rows: tensor<4x16x64xf32>, %steps: index) -> tensor<4x16x64xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %final = scf.for %t = %c0 to %steps step %c1 iter_args(%acc = %cache) -> tensor<4x16x64xf32> {
    %row = tensor.extract_slice %rows[0, %t, 0] [4, 1, 64] [1, 1, 1] : tensor<4x16x64xf32> to tensor<4x1x64xf32>
    %next = tensor.insert_slice %row into %acc[0, %t, 0] [4, 1, 64] [1, 1, 1] : tensor<4x1x64xf32> into tensor<4x16x64xf32>
    scf.yield %next : tensor<4x16x64xf32>
  }
  return %final : tensor<4x16x64xf32>
}

// GPU-LABEL: func.func @decode_loop(
// GPU-SAME: %[[CACHE:[^:]*]]: memref<4x16x64xf32>, %[[ROWS:[^:]*]]: memref<4x16x64xf32>, %[[STEPS:[^:]*]]: index)
// GPU: %[[DCACHE:.*]], %{{.*}} = gpu.alloc async {{.*}} : memref<4x16x64xf32>
// GPU: gpu.memcpy async [%{{.*}}] %[[DCACHE]], %[[CACHE]] {{.*}}tdf.transfer = "h2d"
// GPU: %[[DROWS:.*]], %{{.*}} = gpu.alloc async {{.*}} : memref<4x16x64xf32>
// GPU: scf.for %[[T:.*]] = %{{.*}} to %[[STEPS]]
// GPU-NOT: gpu.alloc
// GPU-NOT: gpu.memcpy
// GPU-DAG: %[[SRC:.*]] = memref.subview %[[DROWS]][0, %[[T]], 0] [4, 1, 64] [1, 1, 1]
// GPU-DAG: %[[SLOT:.*]] = memref.subview %[[DCACHE]][0, %[[T]], 0] [4, 1, 64] [1, 1, 1]
// GPU: gpu.launch_func async {{.*}} @decode_loop_kernel::@decode_loop_kernel {{.*}} args({{.*}}%[[SRC]] : {{.*}}, %[[SLOT]] :
// GPU-NOT: gpu.alloc
// GPU-NOT: gpu.memcpy
// GPU: }
// GPU: gpu.memcpy async [%{{.*}}] %[[CACHE]], %[[DCACHE]] {{.*}}tdf.transfer = "d2h"
// GPU-NOT: gpu.memcpy
// GPU: return %[[CACHE]]

// PTX-LABEL: llvm.func @decode_loop(
// PTX: gpu.binary @decode_loop_kernel
// PTX-SAME: .target sm_90

// -----

// Scalars read on the host (a decode position, a reduction's result): the
// argument's read is served by the caller's host buffer, the reduction runs
// as a one-thread kernel and its 4 bytes are copied back before the read.
// GPU-LABEL: func.func @host_scalars(
// GPU-SAME:    %[[X:[^:]+]]: memref<8xf32>, %[[POS:[^:]+]]: memref<i32>
// GPU:         %[[H:.*]] = memref.alloca() : memref<f32>
// GPU:         memref.load %[[POS]][] : memref<i32>
// GPU:         gpu.launch_func {{.*}} blocks in (%{{.*}}, %{{.*}}, %{{.*}}) threads in (%[[ONE:.*]], %[[ONE]], %[[ONE]])
// GPU:         gpu.memcpy {{.*}}%[[H]], %{{.*}} : memref<f32>, memref<f32> {tdf.transfer = "d2h"}
// GPU:         memref.load %[[H]][] : memref<f32>
// PTX-LABEL: llvm.func @host_scalars(
func.func @host_scalars(%x: tensor<8xf32>, %pos: tensor<i32>) -> f32 {
  %zero = arith.constant 0.0 : f32
  %p = tensor.extract %pos[] : tensor<i32>
  %e = tensor.empty() : tensor<f32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<f32>) -> tensor<f32>
  %sum = linalg.reduce ins(%x : tensor<8xf32>) outs(%init : tensor<f32>) dimensions = [0]
    (%in: f32, %acc: f32) {
      %s = arith.addf %in, %acc : f32
      linalg.yield %s : f32
    }
  %s = tensor.extract %sum[] : tensor<f32>
  %pf = arith.sitofp %p : i32 to f32
  %r = arith.addf %s, %pf : f32
  return %r : f32
}
