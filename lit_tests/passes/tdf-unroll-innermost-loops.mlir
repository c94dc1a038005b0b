// RUN: tdf-opt %s --split-input-file --tdf-unroll-innermost-loops | FileCheck %s
// RUN: tdf-opt %s --split-input-file --tdf-unroll-innermost-loops --convert-scf-to-cf --finalize-memref-to-llvm --convert-arith-to-llvm --convert-func-to-llvm --convert-cf-to-llvm --reconcile-unrealized-casts | FileCheck %s --check-prefix=LLVM

// A loop holding a loop may not be unrolled by LLVM; the innermost loop keeps
// LLVM's decisions. The annotation reaches the outer loop's back edge as the
// llvm.br's own loop_annotation.
// CHECK: #[[$U:.*]] = #llvm.loop_unroll<disable = true>
// CHECK: #[[$NO:.*]] = #llvm.loop_annotation<unroll = #[[$U]]>
// CHECK-LABEL: func.func @nest
// CHECK: scf.for
// CHECK: scf.for
// CHECK: memref.store
// CHECK-NEXT: }
// CHECK-NOT: loop_annotation
// CHECK-NEXT: } {loop_annotation = #[[$NO]]}
// CHECK-NEXT: return
// LLVM: #[[$U:.*]] = #llvm.loop_unroll<disable = true>
// LLVM: #[[$A:.*]] = #llvm.loop_annotation<unroll = #[[$U]]>
// LLVM-LABEL: llvm.func @nest
// LLVM-COUNT-1: {loop_annotation = #[[$A]]}
// LLVM-NOT: loop_annotation
// LLVM: llvm.return
func.func @nest(%m: memref<8x512xf32>, %o: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c512 = arith.constant 512 : index
  scf.for %i = %c0 to %c8 step %c1 {
    scf.for %j = %c0 to %c512 step %c1 {
      %v = memref.load %m[%i, %j] : memref<8x512xf32>
      %a = memref.load %o[%i] : memref<8xf32>
      %s = arith.maximumf %a, %v : f32
      memref.store %s, %o[%i] : memref<8xf32>
    }
  }
  return
}

// -----

// negative_innermost: a loop with no loop inside is left alone.
// CHECK-LABEL: func.func @negative_innermost
// CHECK-NOT: loop_annotation
// CHECK: return
func.func @negative_innermost(%m: memref<64xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %f = arith.constant 2.0 : f32
  scf.for %i = %c0 to %c64 step %c1 {
    memref.store %f, %m[%i] : memref<64xf32>
  }
  return
}

// -----

// Three deep, and a loop inside an scf.if inside a loop: every loop holding
// a loop (through other ops) is annotated, the innermost ones are not.
// CHECK-LABEL: func.func @deep
// CHECK-COUNT-3: } {loop_annotation = {{.*}}}
// CHECK-NOT: loop_annotation
// CHECK: return
func.func @deep(%m: memref<4x4x4xf32>, %c: i1) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %f = arith.constant 1.0 : f32
  scf.for %i = %c0 to %c4 step %c1 {
    scf.for %j = %c0 to %c4 step %c1 {
      scf.for %k = %c0 to %c4 step %c1 {
        memref.store %f, %m[%i, %j, %k] : memref<4x4x4xf32>
      }
    }
  }
  scf.for %i = %c0 to %c4 step %c1 {
    scf.if %c {
      scf.for %k = %c0 to %c4 step %c1 {
        memref.store %f, %m[%i, %i, %k] : memref<4x4x4xf32>
      }
    }
  }
  return
}
