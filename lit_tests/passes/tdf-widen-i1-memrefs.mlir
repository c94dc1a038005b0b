// RUN: tdf-opt %s --tdf-widen-i1-memrefs | FileCheck %s

// A non-splat i1 global is widened with its initial value (0/1 bytes), so
// the widened memref.get_global still matches its global.
// CHECK-LABEL: memref.global "private" constant @mask : memref<3xi8> = dense<[1, 0, 1]>
// CHECK-LABEL: memref.global "private" constant @splat : memref<2x2xi8> = dense<1>
// CHECK-LABEL: memref.global "private" @uninit : memref<4xi8> = uninitialized
// CHECK-LABEL: memref.global "private" constant @bytes : memref<2xi8> = dense<[7, 0]>
memref.global "private" constant @mask : memref<3xi1> = dense<[true, false, true]>
memref.global "private" constant @splat : memref<2x2xi1> = dense<true>
memref.global "private" @uninit : memref<4xi1> = uninitialized
memref.global "private" constant @bytes : memref<2xi8> = dense<[7, 0]>

// CHECK-LABEL: func.func @load_mask
// CHECK:         %[[G:.*]] = memref.get_global @mask : memref<3xi8>
// CHECK:         %[[W:.*]] = memref.load %[[G]][%{{.*}}] : memref<3xi8>
// CHECK:         %[[B:.*]] = arith.trunci %[[W]] : i8 to i1
// CHECK:         return %[[B]] : i1
func.func @load_mask(%i: index) -> i1 {
  %g = memref.get_global @mask : memref<3xi1>
  %b = memref.load %g[%i] : memref<3xi1>
  return %b : i1
}
