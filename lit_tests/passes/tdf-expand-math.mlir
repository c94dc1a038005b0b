// RUN: tdf-opt %s --split-input-file --tdf-expand-math --verify-diagnostics | FileCheck %s
// RUN: tdf-opt %s --split-input-file --tdf-expand-math --verify-diagnostics --mlir-pass-statistics 2>&1 >/dev/null | FileCheck %s --check-prefix=STATS

// math.isinf and math.isnormal have no upstream CPU lowering: |x| is compared
// with +inf and with the smallest normal of the element type (ordered
// comparisons: false for NaN), on scalars and vectors.

// CHECK-LABEL: func.func @predicates
// CHECK-SAME:  (%[[X:.*]]: f32, %[[V:.*]]: vector<4xf64>)
// CHECK:       %[[A:.*]] = math.absf %[[X]] : f32
// CHECK:       %[[INF:.*]] = arith.constant 0x7F800000 : f32
// CHECK:       %[[ISINF:.*]] = arith.cmpf oeq, %[[A]], %[[INF]] : f32
// CHECK:       %[[AV:.*]] = math.absf %[[V]] : vector<4xf64>
// CHECK:       %[[VINF:.*]] = arith.constant dense<0x7FF0000000000000> : vector<4xf64>
// CHECK:       %[[VMIN:.*]] = arith.constant dense<2.2250738585072014E-308> : vector<4xf64>
// CHECK:       %[[GE:.*]] = arith.cmpf oge, %[[AV]], %[[VMIN]] : vector<4xf64>
// CHECK:       %[[LT:.*]] = arith.cmpf olt, %[[AV]], %[[VINF]] : vector<4xf64>
// CHECK:       %[[NORMAL:.*]] = arith.andi %[[GE]], %[[LT]] : vector<4xi1>
// CHECK-NOT:   math.is
// CHECK:       return %[[ISINF]], %[[NORMAL]]
func.func @predicates(%x: f32, %v: vector<4xf64>) -> (i1, vector<4xi1>) {
  %0 = math.isinf %x : f32
  %1 = math.isnormal %v : vector<4xf64>
  return %0, %1 : i1, vector<4xi1>
}

// -----

// The bounds follow the element type: f16's smallest normal is 2^-14,
// bf16's is 2^-126.
// CHECK-LABEL: func.func @half_types
// CHECK-SAME:  (%[[H:.*]]: f16, %[[B:.*]]: bf16)
// CHECK:       %[[AH:.*]] = math.absf %[[H]] : f16
// CHECK:       %[[HINF:.*]] = arith.constant 0x7C00 : f16
// CHECK:       %[[HMIN:.*]] = arith.constant 6.103520e-05 : f16
// CHECK:       %[[HGE:.*]] = arith.cmpf oge, %[[AH]], %[[HMIN]] : f16
// CHECK:       %[[HLT:.*]] = arith.cmpf olt, %[[AH]], %[[HINF]] : f16
// CHECK:       %[[HN:.*]] = arith.andi %[[HGE]], %[[HLT]] : i1
// CHECK:       %[[AB:.*]] = math.absf %[[B]] : bf16
// CHECK:       %[[BINF:.*]] = arith.constant 0x7F80 : bf16
// CHECK:       %[[BI:.*]] = arith.cmpf oeq, %[[AB]], %[[BINF]] : bf16
// CHECK:       return %[[HN]], %[[BI]]
func.func @half_types(%h: f16, %b: bf16) -> (i1, i1) {
  %0 = math.isnormal %h : f16
  %1 = math.isinf %b : bf16
  return %0, %1 : i1, i1
}

// -----

// Other math ops, including the ones that look alike, are left alone.
// CHECK-LABEL: func.func @negative_other_math
// CHECK-SAME:  (%[[X:.*]]: f32)
// CHECK:       %[[N:.*]] = math.isnan %[[X]] : f32
// CHECK:       %[[F:.*]] = math.isfinite %[[X]] : f32
// CHECK:       %[[A:.*]] = math.absf %[[X]] : f32
// CHECK:       return %[[N]], %[[F]], %[[A]]
func.func @negative_other_math(%x: f32) -> (i1, i1, f32) {
  %0 = math.isnan %x : f32
  %1 = math.isfinite %x : f32
  %2 = math.absf %x : f32
  return %0, %1, %2 : i1, i1, f32
}

// -----

// An element type without a known smallest normal is an error naming the
// op and the type (the op is left as it is).
func.func @unsupported_type(%q: f128) -> i1 {
  // expected-error@+1 {{'math.isinf' on element type f128 is not supported}}
  %0 = math.isinf %q : f128
  return %0 : i1
}

// One statistic per split: two ops expanded in each of the first two, none
// in the negative case, none where the element type is refused.
// STATS:      (S) 2 expanded - math ops expanded
// STATS:      (S) 2 expanded - math ops expanded
// STATS:      (S) 0 expanded - math ops expanded
// STATS:      (S) 0 expanded - math ops expanded
