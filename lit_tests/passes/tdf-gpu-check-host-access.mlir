// RUN: tdf-opt %s --split-input-file --tdf-gpu-check-host-access --verify-diagnostics | FileCheck %s

// After GPU mapping every buffer is a device buffer: host code may pass
// them around, take views, copy with gpu.memcpy and launch kernels. A load,
// store, copy or linalg op left on the host would dereference a device
// pointer there: an error naming the op. Code inside gpu.module is device
// code and is not checked.

// CHECK-LABEL: func.func @negative_host_launches
// CHECK-SAME:  (%[[H:.*]]: memref<16xf32>)
// CHECK:       %[[D:.*]] = gpu.alloc () : memref<16xf32>
// CHECK:       gpu.memcpy %[[D]], %[[H]]
// CHECK:       %[[VIEW:.*]] = memref.subview %[[D]][0] [8] [1]
// CHECK:       gpu.launch_func @kernels::@scale blocks in (%{{.*}}, %{{.*}}, %{{.*}}) threads in (%{{.*}}, %{{.*}}, %{{.*}}) args(%[[D]] : memref<16xf32>)
// CHECK:       gpu.memcpy %[[H]], %[[D]]
// CHECK:       gpu.dealloc %[[D]]
// CHECK-LABEL: gpu.module @kernels
// CHECK:       gpu.func @scale(%[[A:.*]]: memref<16xf32>) kernel
// CHECK:       %[[V:.*]] = memref.load %[[A]]
// CHECK:       memref.store %{{.*}}, %[[A]]
module attributes {gpu.container_module} {
  func.func @negative_host_launches(%h: memref<16xf32>) {
    %c1 = arith.constant 1 : index
    %c16 = arith.constant 16 : index
    %d = gpu.alloc () : memref<16xf32>
    gpu.memcpy %d, %h : memref<16xf32>, memref<16xf32>
    %view = memref.subview %d[0] [8] [1] : memref<16xf32> to memref<8xf32, strided<[1]>>
    gpu.launch_func @kernels::@scale blocks in (%c1, %c1, %c1) threads in (%c16, %c1, %c1) args(%d : memref<16xf32>)
    gpu.memcpy %h, %d : memref<16xf32>, memref<16xf32>
    gpu.dealloc %d : memref<16xf32>
    return
  }
  gpu.module @kernels {
    gpu.func @scale(%a: memref<16xf32>) kernel {
      %i = gpu.thread_id x
      %v = memref.load %a[%i] : memref<16xf32>
      %w = arith.addf %v, %v : f32
      memref.store %w, %a[%i] : memref<16xf32>
      gpu.return
    }
  }
}

// -----

func.func @host_load(%d: memref<16xf32>, %i: index) -> f32 {
  // expected-error@+1 {{memref.load accesses device memory on the host: not supported on the GPU path (compute it in a kernel)}}
  %v = memref.load %d[%i] : memref<16xf32>
  return %v : f32
}

// -----

func.func @host_store(%d: memref<16xf32>, %i: index, %v: f32) {
  // expected-error@+1 {{memref.store accesses device memory on the host}}
  memref.store %v, %d[%i] : memref<16xf32>
  return
}

// -----

func.func @host_copy(%a: memref<16xf32>, %b: memref<16xf32>) {
  // expected-error@+1 {{memref.copy accesses device memory on the host}}
  memref.copy %a, %b : memref<16xf32> to memref<16xf32>
  return
}

// -----

func.func @host_vector_read(%d: memref<16xf32>, %i: index) -> vector<4xf32> {
  %pad = arith.constant 0.0 : f32
  // expected-error@+1 {{vector.transfer_read accesses device memory on the host}}
  %v = vector.transfer_read %d[%i], %pad : memref<16xf32>, vector<4xf32>
  return %v : vector<4xf32>
}

// -----

// A linalg op left on the host (not mapped to a kernel) is reported once,
// not its body's linalg.yield.
func.func @host_linalg(%a: memref<16xf32>, %b: memref<16xf32>) {
  // expected-error@+1 {{linalg.add accesses device memory on the host}}
  linalg.add ins(%a, %a : memref<16xf32>, memref<16xf32>) outs(%b : memref<16xf32>)
  return
}
