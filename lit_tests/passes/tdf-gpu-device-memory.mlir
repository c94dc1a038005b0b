// RUN: tdf-opt %s --split-input-file --tdf-gpu-device-memory --verify-diagnostics | FileCheck %s
// RUN: tdf-opt %s --split-input-file --tdf-gpu-device-memory --verify-diagnostics --mlir-pass-statistics 2>&1 >/dev/null | FileCheck %s --check-prefix=STATS

// Every buffer of a bufferized program goes to the device: memref.alloc
// becomes gpu.alloc, memref.dealloc gpu.dealloc and memref.copy a
// linalg.copy (a device kernel once mapped). A public function is an entry
// point called with host buffers: each memref argument gets a device buffer
// and an h2d gpu.memcpy; at the return, donated arguments are copied back
// (d2h) and returned as the caller's buffer, other results are copied into
// fresh host buffers; device buffers of the entry block are freed.

// CHECK-LABEL: func.func @step
// CHECK-SAME:  (%[[CACHE:.*]]: memref<4x16xf32>, %[[X:.*]]: memref<4x16xf32>)
// CHECK-SAME:  -> (memref<4x16xf32>, memref<4x16xf32>, memref<4x16xf32>)
// CHECK-NEXT:  %[[DCACHE:.*]] = gpu.alloc () : memref<4x16xf32>
// CHECK-NEXT:  gpu.memcpy %[[DCACHE]], %[[CACHE]] : memref<4x16xf32>, memref<4x16xf32> {tdf.transfer = "h2d"}
// CHECK-NEXT:  %[[DX:.*]] = gpu.alloc () : memref<4x16xf32>
// CHECK-NEXT:  gpu.memcpy %[[DX]], %[[X]] : memref<4x16xf32>, memref<4x16xf32> {tdf.transfer = "h2d"}
// CHECK-NEXT:  %[[T:.*]] = gpu.alloc () : memref<4x16xf32>
// CHECK-NEXT:  linalg.copy {{.*}}ins(%[[DX]] : memref<4x16xf32>) outs(%[[T]] : memref<4x16xf32>)
// CHECK-NEXT:  linalg.add ins(%[[T]], %[[DX]] : {{.*}}) outs(%[[DCACHE]] : memref<4x16xf32>)
// CHECK-NEXT:  %[[R:.*]] = gpu.alloc () : memref<4x16xf32>
// CHECK-NEXT:  linalg.add ins(%[[T]], %[[T]] : {{.*}}) outs(%[[R]] : memref<4x16xf32>)
// CHECK-NEXT:  gpu.memcpy %[[CACHE]], %[[DCACHE]] : memref<4x16xf32>, memref<4x16xf32> {tdf.transfer = "d2h"}
// CHECK-NEXT:  %[[HR:.*]] = memref.alloc() : memref<4x16xf32>
// CHECK-NEXT:  gpu.memcpy %[[HR]], %[[R]] : memref<4x16xf32>, memref<4x16xf32> {tdf.transfer = "d2h"}
// CHECK-NEXT:  %[[HX:.*]] = memref.alloc() : memref<4x16xf32>
// CHECK-NEXT:  gpu.memcpy %[[HX]], %[[DX]] : memref<4x16xf32>, memref<4x16xf32> {tdf.transfer = "d2h"}
// CHECK-DAG:   gpu.dealloc %[[T]] : memref<4x16xf32>
// CHECK-DAG:   gpu.dealloc %[[R]] : memref<4x16xf32>
// CHECK-DAG:   gpu.dealloc %[[DCACHE]] : memref<4x16xf32>
// CHECK-DAG:   gpu.dealloc %[[DX]] : memref<4x16xf32>
// CHECK:       return %[[CACHE]], %[[HR]], %[[HX]] : memref<4x16xf32>, memref<4x16xf32>, memref<4x16xf32>
// CHECK-NOT:   tdf.donate
func.func @step(%cache: memref<4x16xf32> {tdf.donate}, %x: memref<4x16xf32>)
    -> (memref<4x16xf32>, memref<4x16xf32>, memref<4x16xf32>) {
  %t = memref.alloc() : memref<4x16xf32>
  memref.copy %x, %t : memref<4x16xf32> to memref<4x16xf32>
  linalg.add ins(%t, %x : memref<4x16xf32>, memref<4x16xf32>) outs(%cache : memref<4x16xf32>)
  %r = memref.alloc() : memref<4x16xf32>
  linalg.add ins(%t, %t : memref<4x16xf32>, memref<4x16xf32>) outs(%r : memref<4x16xf32>)
  return %cache, %r, %x : memref<4x16xf32>, memref<4x16xf32>, memref<4x16xf32>
}

// -----

// Dynamic sizes: the device buffer of an argument takes the argument's
// sizes (memref.dim).
// CHECK-LABEL: func.func @dynamic
// CHECK-SAME:  (%[[A:.*]]: memref<?x4xf32>)
// CHECK-NEXT:  %[[C0:.*]] = arith.constant 0 : index
// CHECK-NEXT:  %[[N:.*]] = memref.dim %[[A]], %[[C0]] : memref<?x4xf32>
// CHECK-NEXT:  %[[DA:.*]] = gpu.alloc (%[[N]]) : memref<?x4xf32>
// CHECK-NEXT:  gpu.memcpy %[[DA]], %[[A]] : memref<?x4xf32>, memref<?x4xf32> {tdf.transfer = "h2d"}
// CHECK-NEXT:  linalg.add ins(%[[DA]], %[[DA]] : {{.*}}) outs(%[[DA]] : memref<?x4xf32>)
// CHECK-NEXT:  gpu.memcpy %[[A]], %[[DA]] : {{.*}} {tdf.transfer = "d2h"}
// CHECK-NEXT:  gpu.dealloc %[[DA]] : memref<?x4xf32>
// CHECK-NEXT:  return{{$}}
func.func @dynamic(%a: memref<?x4xf32> {tdf.donate}) {
  linalg.add ins(%a, %a : memref<?x4xf32>, memref<?x4xf32>) outs(%a : memref<?x4xf32>)
  return
}

// -----

// A private function is not an entry point: its buffers go to the device,
// its arguments (already device buffers) are used as they are.
// CHECK-LABEL: func.func private @helper
// CHECK-SAME:  (%[[A:.*]]: memref<?xf32>, %[[N:.*]]: index)
// CHECK-NEXT:  %[[T:.*]] = gpu.alloc (%[[N]]) : memref<?xf32>
// CHECK-NEXT:  linalg.copy {{.*}}ins(%[[A]] : memref<?xf32>) outs(%[[T]] : memref<?xf32>)
// CHECK-NEXT:  gpu.dealloc %[[T]] : memref<?xf32>
// CHECK-NEXT:  return{{$}}
// CHECK-NOT:   gpu.memcpy
func.func private @helper(%a: memref<?xf32>, %n: index) {
  %t = memref.alloc(%n) : memref<?xf32>
  memref.copy %a, %t : memref<?xf32> to memref<?xf32>
  memref.dealloc %t : memref<?xf32>
  return
}

// -----

// A buffer of an entry function that the body already frees is freed once
// (the bridge frees only the device buffers nothing else frees).
// CHECK-LABEL: func.func @frees_its_own
// CHECK-SAME:  (%[[A:.*]]: memref<8xf32>)
// CHECK:       %[[DA:.*]] = gpu.alloc () : memref<8xf32>
// CHECK:       %[[T:.*]] = gpu.alloc () : memref<8xf32>
// CHECK-NEXT:  linalg.copy {{.*}}ins(%[[DA]] : memref<8xf32>) outs(%[[T]] : memref<8xf32>)
// CHECK-NEXT:  gpu.dealloc %[[T]] : memref<8xf32>
// CHECK-NOT:   gpu.dealloc %[[T]]
// CHECK:       gpu.dealloc %[[DA]] : memref<8xf32>
// CHECK-NOT:   gpu.dealloc
// CHECK:       return{{$}}
func.func @frees_its_own(%a: memref<8xf32>) {
  %t = memref.alloc() : memref<8xf32>
  memref.copy %a, %t : memref<8xf32> to memref<8xf32>
  memref.dealloc %t : memref<8xf32>
  return
}

// -----

// Declarations and functions without memrefs are left alone.
// CHECK-LABEL: func.func private @negative_declaration(memref<4xf32>)
// CHECK-LABEL: func.func @negative_scalars
// CHECK-SAME:  (%[[X:.*]]: f32) -> f32 {
// CHECK-NEXT:  return %[[X]] : f32
func.func private @negative_declaration(memref<4xf32>)
func.func @negative_scalars(%x: f32) -> f32 {
  return %x : f32
}

// -----

// Only identity layouts can be placed on the device.
func.func private @strided_alloc() {
  // expected-error@+1 {{cannot place memref<4x4xf32, strided<[8, 1]>> on the device: only identity layouts are supported}}
  %t = memref.alloc() : memref<4x4xf32, strided<[8, 1]>>
  return
}

// -----

// expected-error@+1 {{argument #0 has type memref<4xf32, strided<[2]>>: the GPU path needs identity layouts}}
func.func @strided_argument(%a: memref<4xf32, strided<[2]>>) {
  return
}

// -----

// expected-error@+1 {{the GPU path needs a single-block entry function}}
func.func @blocks(%c: i1, %a: memref<4xf32>) {
  cf.cond_br %c, ^bb1, ^bb2
^bb1:
  return
^bb2:
  return
}

// Statistics of the first split (@step): two allocations and one copy
// moved to the device, one entry point with two transfers in and three out.
// STATS:      (S) 2 device-allocs
// STATS-NEXT: (S) 1 device-copies
// STATS-NEXT: (S) 1 entry-points
// STATS-NEXT: (S) 3 transfers-d2h
// STATS-NEXT: (S) 2 transfers-h2d
