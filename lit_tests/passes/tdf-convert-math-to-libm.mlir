// RUN: tdf-opt %s --split-input-file --tdf-convert-math-to-libm="ops=expm1,erf" | FileCheck %s

// Only the listed ops become libm calls (f32: the `f` function, f64: the
// plain one, vectors one call per element); every other math op is left for
// convert-math-to-llvm, including copysign (upstream convert-math-to-libm
// fails on it) and rsqrt (upstream calls `rsqrtf`, which libm lacks).

// CHECK-DAG:   func.func private @expm1f(f32) -> f32
// CHECK-DAG:   func.func private @erf(f64) -> f64
// CHECK-DAG:   func.func private @erff(f32) -> f32
// CHECK-LABEL: func.func @scalars
// CHECK-SAME:  (%[[X:.*]]: f32, %[[D:.*]]: f64)
// CHECK:       %[[E:.*]] = call @expm1f(%[[X]]) : (f32) -> f32
// CHECK:       %[[ERF:.*]] = call @erf(%[[D]]) : (f64) -> f64
// CHECK:       %[[ERFF:.*]] = call @erff(%[[X]]) : (f32) -> f32
// CHECK:       return %[[E]], %[[ERF]], %[[ERFF]]
func.func @scalars(%x: f32, %d: f64) -> (f32, f64, f32) {
  %0 = math.expm1 %x : f32
  %1 = math.erf %d : f64
  %2 = math.erf %x : f32
  return %0, %1, %2 : f32, f64, f32
}

// -----

// CHECK-LABEL: func.func @vector
// CHECK-SAME:  (%[[V:.*]]: vector<2xf32>)
// CHECK:       %[[V0:.*]] = vector.extract %[[V]][0] : f32 from vector<2xf32>
// CHECK:       %[[R0:.*]] = call @expm1f(%[[V0]]) : (f32) -> f32
// CHECK:       %[[P:.*]] = vector.insert %[[R0]], %{{.*}} [0] : f32 into vector<2xf32>
// CHECK:       %[[V1:.*]] = vector.extract %[[V]][1] : f32 from vector<2xf32>
// CHECK:       %[[R1:.*]] = call @expm1f(%[[V1]]) : (f32) -> f32
// CHECK:       %[[R:.*]] = vector.insert %[[R1]], %[[P]] [1] : f32 into vector<2xf32>
// CHECK:       return %[[R]]
func.func @vector(%v: vector<2xf32>) -> vector<2xf32> {
  %0 = math.expm1 %v : vector<2xf32>
  return %0 : vector<2xf32>
}

// -----

// CHECK-NOT:   func.func private
// CHECK-LABEL: func.func @negative_not_listed
// CHECK-SAME:  (%[[X:.*]]: f32)
// CHECK:       %[[C:.*]] = math.copysign %[[X]], %[[X]] : f32
// CHECK:       %[[S:.*]] = math.rsqrt %[[X]] : f32
// CHECK:       %[[L:.*]] = math.log1p %[[X]] : f32
// CHECK-NOT:   call
// CHECK:       return %[[C]], %[[S]], %[[L]]
func.func @negative_not_listed(%x: f32) -> (f32, f32, f32) {
  %0 = math.copysign %x, %x : f32
  %1 = math.rsqrt %x : f32
  %2 = math.log1p %x : f32
  return %0, %1, %2 : f32, f32, f32
}
