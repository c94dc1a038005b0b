// RUN: tdf-opt %s --tdf-rescale-subnormal-math --tdf-math-approximation="ops=log,exp,tanh" | FileCheck %s --check-prefix=APPROX
// RUN: tdf-opt %s --tdf-expand-math | FileCheck %s --check-prefix=EXPAND
// RUN: tdf-opt %s --tdf-convert-math-to-libm="ops=expm1,erf" | FileCheck %s --check-prefix=LIBM
// RUN: tdf-opt %s --tdf-lower-to-cpu | FileCheck %s --check-prefix=CPU
// RUN: tdf-opt %s --tdf-lower-to-cpu=approximate-math=false | FileCheck %s --check-prefix=NOAPPROX
// RUN: not tdf-opt %s --tdf-math-approximation="ops=sqrtt" 2>&1 | FileCheck %s --check-prefix=BADOP
// RUN: not tdf-opt %s --tdf-convert-math-to-libm="ops=rsqrt" 2>&1 | FileCheck %s --check-prefix=BADLIBM

// BADOP: error: unsupported math op 'sqrtt' (expected one of acos,asin,atan,atan2,cbrt,cos,erf,erfc,exp,expm1,log,log1p,log2,rsqrt,sin,tanh)
// BADLIBM: error: unsupported math op 'rsqrt'

// f32 log/exp/tanh become arith/math.fma polynomials (no call); the log and
// exp arguments are rescaled first for subnormal inputs/results. f64 and ops
// not listed are left alone.
// APPROX-LABEL: func.func @approximate
// APPROX:       arith.cmpf olt
// APPROX:       arith.select
// APPROX-NOT:   math.log %{{.*}} : f32
// APPROX-NOT:   math.exp %{{.*}} : vector<8xf32>
// APPROX-NOT:   math.tanh
// APPROX:       math.log %{{.*}} : f64
// APPROX:       math.erf
// APPROX:       return
func.func @approximate(%x: f32, %v: vector<8xf32>, %d: f64) -> (f32, vector<8xf32>, f32, f64, f32) {
  %0 = math.log %x : f32
  %1 = math.exp %v : vector<8xf32>
  %2 = math.tanh %x : f32
  %3 = math.log %d : f64
  %4 = math.erf %x : f32
  return %0, %1, %2, %3, %4 : f32, vector<8xf32>, f32, f64, f32
}

// isinf/isnormal have no upstream lowering: |x| compared with +inf and with
// the smallest normal (ordered: false for NaN).
// EXPAND-LABEL: func.func @predicates
// EXPAND-SAME:  (%[[X:.*]]: f32, %[[V:.*]]: vector<4xf64>)
// EXPAND:       %[[A:.*]] = math.absf %[[X]] : f32
// EXPAND:       %[[INF:.*]] = arith.constant 0x7F800000 : f32
// EXPAND:       %[[ISINF:.*]] = arith.cmpf oeq, %[[A]], %[[INF]] : f32
// EXPAND:       %[[AV:.*]] = math.absf %[[V]] : vector<4xf64>
// EXPAND:       %[[GE:.*]] = arith.cmpf oge, %[[AV]], %{{.*}} : vector<4xf64>
// EXPAND:       %[[LT:.*]] = arith.cmpf olt, %[[AV]], %{{.*}} : vector<4xf64>
// EXPAND:       %[[NORMAL:.*]] = arith.andi %[[GE]], %[[LT]] : vector<4xi1>
// EXPAND:       return %[[ISINF]], %[[NORMAL]]
func.func @predicates(%x: f32, %v: vector<4xf64>) -> (i1, vector<4xi1>) {
  %0 = math.isinf %x : f32
  %1 = math.isnormal %v : vector<4xf64>
  return %0, %1 : i1, vector<4xi1>
}

// Only the listed ops become libm calls; the others (here copysign, which
// upstream convert-math-to-libm fails on) are left for convert-math-to-llvm.
// LIBM-LABEL: func.func @libm
// LIBM:       call @expm1f
// LIBM:       call @erf(
// LIBM:       math.copysign
// LIBM:       math.rsqrt
func.func @libm(%x: f32, %d: f64) -> (f32, f64, f32, f32) {
  %0 = math.expm1 %x : f32
  %1 = math.erf %d : f64
  %2 = math.copysign %x, %x : f32
  %3 = math.rsqrt %x : f32
  return %0, %1, %2, %3 : f32, f64, f32, f32
}

// The whole CPU lowering: every op reaches LLVM; rsqrt is 1/sqrt (libm has
// no rsqrtf); approximated f32 ops call nothing, f64 ones still do.
// CPU-LABEL: llvm.func @approximate
// CPU-NOT:   llvm.intr.log({{.*}}) : (f32)
// CPU-NOT:   @tanhf
// CPU:       llvm.intr.log({{.*}}) : (f64)
// CPU:       llvm.return
// CPU-LABEL: llvm.func @libm
// CPU-NOT:   rsqrtf
// CPU-NOT:   llvm.call @expm1f
// CPU:       llvm.call @erf(
// CPU:       llvm.intr.copysign
// CPU:       llvm.intr.sqrt
// CPU:       llvm.fdiv
// NOAPPROX-LABEL: llvm.func @approximate
// NOAPPROX:  llvm.intr.log({{.*}}) : (f32)
// NOAPPROX:  llvm.intr.exp({{.*}}) : (vector<8xf32>)
// NOAPPROX:  llvm.intr.tanh
