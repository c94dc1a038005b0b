// RUN: tdf-opt %s --tdf-lower-to-cpu | FileCheck %s --check-prefix=CPU
// RUN: tdf-opt %s --tdf-lower-to-cpu=approximate-math=false | FileCheck %s --check-prefix=NOAPPROX

// The math part of the CPU lowering, end to end: every math op reaches LLVM.
// f32 log/exp/tanh are approximated by polynomials (no call, no intrinsic);
// f64 ones still use the LLVM intrinsics or libm (erf); isinf/isnormal are
// expanded; rsqrt is 1/sqrt (libm has no rsqrtf).
// With approximate-math=false every op keeps its intrinsic or libm call.

// CPU-LABEL:      llvm.func @approximate
// CPU-NOT:        llvm.intr.log({{.*}}) : (f32)
// CPU-NOT:        llvm.intr.exp
// CPU-NOT:        @tanhf
// CPU-NOT:        @erff
// CPU:            llvm.intr.log({{.*}}) : (f64)
// CPU-NOT:        @erff
// CPU:            llvm.return
// NOAPPROX-LABEL: llvm.func @approximate
// NOAPPROX:       llvm.intr.log({{.*}}) : (f32)
// NOAPPROX:       llvm.intr.exp({{.*}}) : (vector<8xf32>)
// NOAPPROX:       llvm.intr.tanh
// NOAPPROX:       llvm.call @erff(
func.func @approximate(%x: f32, %v: vector<8xf32>, %d: f64) -> (f32, vector<8xf32>, f32, f64, f32) {
  %0 = math.log %x : f32
  %1 = math.exp %v : vector<8xf32>
  %2 = math.tanh %x : f32
  %3 = math.log %d : f64
  %4 = math.erf %x : f32
  return %0, %1, %2, %3, %4 : f32, vector<8xf32>, f32, f64, f32
}

// CPU-LABEL:      llvm.func @libm
// CPU-NOT:        rsqrtf
// CPU-NOT:        llvm.call @expm1f
// CPU:            llvm.call @erf(
// CPU:            llvm.intr.copysign
// CPU:            llvm.intr.sqrt
// CPU:            llvm.fdiv
// NOAPPROX-LABEL: llvm.func @libm
// NOAPPROX:       llvm.call @expm1f(
// NOAPPROX:       llvm.call @erf(
func.func @libm(%x: f32, %d: f64) -> (f32, f64, f32, f32) {
  %0 = math.expm1 %x : f32
  %1 = math.erf %d : f64
  %2 = math.copysign %x, %x : f32
  %3 = math.rsqrt %x : f32
  return %0, %1, %2, %3 : f32, f64, f32, f32
}

// CPU-LABEL:      llvm.func @predicates
// CPU-NOT:        math.
// CPU-SAME:       (%[[X:.*]]: f32)
// CPU:            %[[INF:.*]] = llvm.mlir.constant(0x7F800000 : f32) : f32
// CPU:            %[[A:.*]] = llvm.intr.fabs(%[[X]]) : (f32) -> f32
// CPU:            %[[R:.*]] = llvm.fcmp "oeq" %[[A]], %[[INF]] : f32
// CPU:            llvm.return %[[R]]
func.func @predicates(%x: f32) -> i1 {
  %0 = math.isinf %x : f32
  return %0 : i1
}
