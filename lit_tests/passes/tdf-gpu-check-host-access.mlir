// RUN: tdf-opt %s --split-input-file --tdf-gpu-check-host-access --verify-diagnostics | FileCheck %s

// After GPU mapping every buffer is a device buffer (a gpu.alloc, a view of
// one, a private function's parameter: host code calls those with device
// buffers), except an entry point's host arguments and host allocations:
// host code may pass device buffers around, take views, copy with
// gpu.memcpy and launch kernels. A load, store, copy or linalg op left on
// the host would dereference a device pointer there: an error naming the
// op. Code inside gpu.module is device code and is not checked.

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

func.func private @host_load(%d: memref<16xf32>, %i: index) -> f32 {
  // expected-error@+1 {{memref.load accesses device memory on the host: not supported on the GPU path (compute it in a kernel)}}
  %v = memref.load %d[%i] : memref<16xf32>
  return %v : f32
}

// -----

func.func private @host_store(%d: memref<16xf32>, %i: index, %v: f32) {
  // expected-error@+1 {{memref.store accesses device memory on the host}}
  memref.store %v, %d[%i] : memref<16xf32>
  return
}

// -----

func.func private @host_copy(%a: memref<16xf32>, %b: memref<16xf32>) {
  // expected-error@+1 {{memref.copy accesses device memory on the host}}
  memref.copy %a, %b : memref<16xf32> to memref<16xf32>
  return
}

// -----

func.func private @host_vector_read(%d: memref<16xf32>, %i: index) -> vector<4xf32> {
  %pad = arith.constant 0.0 : f32
  // expected-error@+1 {{vector.transfer_read accesses device memory on the host}}
  %v = vector.transfer_read %d[%i], %pad : memref<16xf32>, vector<4xf32>
  return %v : vector<4xf32>
}

// -----

// A linalg op left on the host (not mapped to a kernel) is reported once,
// not its body's linalg.yield.
func.func private @host_linalg(%a: memref<16xf32>, %b: memref<16xf32>) {
  // expected-error@+1 {{linalg.add accesses device memory on the host}}
  linalg.add ins(%a, %a : memref<16xf32>, memref<16xf32>) outs(%b : memref<16xf32>)
  return
}

// -----

// negative_: host memory may be read and written on the host: an entry
// point's argument (the caller's buffer) and a host allocation (the copy
// tdf-gpu-host-scalars makes of a small device buffer).
// CHECK-LABEL: func.func @negative_host_buffers
// CHECK:         memref.load %{{.*}}[] : memref<i32>
// CHECK:         memref.store
// CHECK:         memref.load
func.func @negative_host_buffers(%pos: memref<i32>, %d: memref<f32>) -> (i32, f32) {
  %v = memref.load %pos[] : memref<i32>
  %h = memref.alloca() : memref<f32>
  gpu.memcpy %h, %d : memref<f32>, memref<f32>
  %c = arith.constant 1.0 : f32
  memref.store %c, %h[] : memref<f32>
  %w = memref.load %h[] : memref<f32>
  return %v, %w : i32, f32
}

// -----

// A view of a device buffer is device memory, whatever view op made it.
func.func @view_of_device(%i: index) -> f32 {
  %c0 = arith.constant 0 : index
  %d = gpu.alloc () : memref<64xi8>
  %v = memref.view %d[%c0][] : memref<64xi8> to memref<16xf32>
  // expected-error@+1 {{memref.load accesses device memory on the host}}
  %x = memref.load %v[%i] : memref<16xf32>
  return %x : f32
}

// -----

// A buffer a call returns may be device memory (host code hands device
// buffers around): reading it on the host is an error.
func.func private @make() -> memref<4xf32>
func.func @call_result(%i: index) -> f32 {
  %m = call @make() : () -> memref<4xf32>
  // expected-error@+1 {{memref.load accesses device memory on the host}}
  %v = memref.load %m[%i] : memref<4xf32>
  return %v : f32
}
