// RUN: tdf-opt %s --split-input-file --tdf-math-approximation="ops=log,exp,tanh" | FileCheck %s
// RUN: tdf-opt %s --split-input-file --tdf-math-approximation | FileCheck %s --check-prefix=NONE

// Only the listed f32 ops (scalars and vectors) become upstream's
// polynomials: arith ops and math.fma, no math op left for a libm call.
// Without `ops` nothing is approximated.

// log: the exponent field is read through a bitcast and the mantissa goes
// through the polynomial.
// CHECK-LABEL: func.func @log_f32
// CHECK-SAME:  (%[[X:.*]]: f32)
// CHECK-NOT:   math.log
// CHECK:       %[[GT:.*]] = arith.cmpf ugt, %[[X]], %{{.*}} : f32
// CHECK:       %[[CLAMPED:.*]] = arith.select %[[GT]], %[[X]], %{{.*}} : f32
// CHECK:       arith.bitcast %[[CLAMPED]] : f32 to i32
// CHECK:       math.fma
// CHECK-NOT:   math.log
// CHECK:       return
// NONE-LABEL:  func.func @log_f32
// NONE:        math.log %{{.*}} : f32
func.func @log_f32(%x: f32) -> f32 {
  %0 = math.log %x : f32
  return %0 : f32
}

// -----

// exp on a vector: clamp, range reduction with floor, polynomial, and the
// power of two built in the exponent field.
// CHECK-LABEL: func.func @exp_vector
// CHECK-SAME:  (%[[V:.*]]: vector<8xf32>)
// CHECK-NOT:   math.exp
// CHECK:       %[[GE:.*]] = arith.cmpf uge, %[[V]], %{{.*}} : vector<8xf32>
// CHECK:       arith.select %[[GE]], %[[V]], %{{.*}} : vector<8xi1>, vector<8xf32>
// CHECK:       math.floor
// CHECK:       %[[POLY:.*]] = arith.addf %{{.*}}, %{{.*}} : vector<8xf32>
// CHECK:       %[[POW2:.*]] = arith.bitcast %{{.*}} : vector<8xi32> to vector<8xf32>
// CHECK:       %[[R:.*]] = arith.mulf %[[POLY]], %[[POW2]] : vector<8xf32>
// CHECK:       return %[[R]]
// NONE-LABEL:  func.func @exp_vector
// NONE:        math.exp %{{.*}} : vector<8xf32>
func.func @exp_vector(%v: vector<8xf32>) -> vector<8xf32> {
  %0 = math.exp %v : vector<8xf32>
  return %0 : vector<8xf32>
}

// -----

// tanh: a rational function of the clamped input; inputs below 4e-4 in
// magnitude are returned as they are (select on |x|).
// CHECK-LABEL: func.func @tanh_f32
// CHECK-SAME:  (%[[X:.*]]: f32)
// CHECK-NOT:   math.tanh
// CHECK:       %[[ABS:.*]] = math.absf %[[X]] : f32
// CHECK:       %[[TINY:.*]] = arith.cmpf olt, %[[ABS]], %{{.*}} : f32
// CHECK:       %[[Q:.*]] = arith.divf %{{.*}}, %{{.*}} : f32
// CHECK:       %[[R:.*]] = arith.select %[[TINY]], %{{.*}}, %[[Q]] : f32
// CHECK:       return %[[R]]
func.func @tanh_f32(%x: f32) -> f32 {
  %0 = math.tanh %x : f32
  return %0 : f32
}

// -----

// f64 is left alone (upstream's polynomials are f32 only).
// CHECK-LABEL: func.func @negative_f64
// CHECK-SAME:  (%[[D:.*]]: f64)
// CHECK:       %[[R:.*]] = math.log %[[D]] : f64
// CHECK:       return %[[R]]
func.func @negative_f64(%d: f64) -> f64 {
  %0 = math.log %d : f64
  return %0 : f64
}

// -----

// An op that has a polynomial but is not listed stays a math op.
// CHECK-LABEL: func.func @negative_not_listed
// CHECK-SAME:  (%[[X:.*]]: f32)
// CHECK:       %[[R:.*]] = math.erf %[[X]] : f32
// CHECK:       return %[[R]]
func.func @negative_not_listed(%x: f32) -> f32 {
  %0 = math.erf %x : f32
  return %0 : f32
}
