// RUN: tdf-opt %s --split-input-file --tdf-rescale-subnormal-math | FileCheck %s
// RUN: tdf-opt %s --split-input-file --tdf-rescale-subnormal-math --tdf-rescale-subnormal-math | FileCheck %s
// RUN: tdf-opt %s --split-input-file --tdf-rescale-subnormal-math --tdf-rescale-subnormal-math --mlir-pass-statistics 2>&1 >/dev/null | FileCheck %s --check-prefix=STATS
// RUN: tdf-opt %s --split-input-file --tdf-rescale-subnormal-math --tdf-math-approximation="ops=log,exp,tanh" | FileCheck %s --check-prefix=APPROX

// f32 log/log2 of a subnormal input are computed on x * 2^24 and corrected
// (- 24 ln 2, - 24); f32 exp of an input whose result is subnormal is
// computed as exp(x / 2)^2. Other inputs take the unchanged path (selects on
// the same condition). The rescaled op is tagged tdf.rescaled, so a second
// run changes nothing.

// CHECK-LABEL: func.func @log_f32
// CHECK-SAME:  (%[[X:.*]]: f32)
// CHECK:       %[[ABS:.*]] = math.absf %[[X]] : f32
// CHECK:       %[[MIN:.*]] = arith.constant 1.17549435E-38 : f32
// CHECK:       %[[SMALL:.*]] = arith.cmpf olt, %[[ABS]], %[[MIN]] : f32
// CHECK:       %[[TWO24:.*]] = arith.constant 0x4B800000 : f32
// CHECK:       %[[SCALED:.*]] = arith.mulf %[[X]], %[[TWO24]] : f32
// CHECK:       %[[IN:.*]] = arith.select %[[SMALL]], %[[SCALED]], %[[X]] : f32
// CHECK:       %[[L:.*]] = math.log %[[IN]] {tdf.rescaled} : f32
// CHECK:       %[[SHIFT:.*]] = arith.constant -16.6355324 : f32
// CHECK:       %[[FIXED:.*]] = arith.addf %[[L]], %[[SHIFT]] : f32
// CHECK:       %[[R:.*]] = arith.select %[[SMALL]], %[[FIXED]], %[[L]] : f32
// CHECK-NOT:   math.log
// CHECK:       return %[[R]]
// Under tdf-math-approximation the rescaled op is approximated too, inside
// the same selects.
// APPROX-LABEL: func.func @log_f32
// APPROX-SAME:  (%[[X:.*]]: f32)
// APPROX:       %[[ABS:.*]] = math.absf %[[X]] : f32
// APPROX:       %[[SMALL:.*]] = arith.cmpf olt, %[[ABS]], %{{.*}} : f32
// APPROX:       arith.select %[[SMALL]], %{{.*}}, %[[X]] : f32
// APPROX-NOT:   math.log
// APPROX:       %[[R:.*]] = arith.select %[[SMALL]], %{{.*}}, %{{.*}} : f32
// APPROX-NEXT:  return %[[R]]
func.func @log_f32(%x: f32) -> f32 {
  %0 = math.log %x : f32
  return %0 : f32
}

// -----

// CHECK-LABEL: func.func @log2_f32
// CHECK-SAME:  (%[[X:.*]]: f32)
// CHECK:       %[[SMALL:.*]] = arith.cmpf olt, %{{.*}}, %{{.*}} : f32
// CHECK:       %[[IN:.*]] = arith.select %[[SMALL]], %{{.*}}, %[[X]] : f32
// CHECK:       %[[L:.*]] = math.log2 %[[IN]] {tdf.rescaled} : f32
// CHECK:       %[[SHIFT:.*]] = arith.constant -2.400000e+01 : f32
// CHECK:       %[[FIXED:.*]] = arith.addf %[[L]], %[[SHIFT]] : f32
// CHECK:       %[[R:.*]] = arith.select %[[SMALL]], %[[FIXED]], %[[L]] : f32
// CHECK:       return %[[R]]
func.func @log2_f32(%x: f32) -> f32 {
  %0 = math.log2 %x : f32
  return %0 : f32
}

// -----

// CHECK-LABEL: func.func @exp_vector
// CHECK-SAME:  (%[[V:.*]]: vector<4xf32>)
// CHECK:       %[[LOW:.*]] = arith.constant dense<-87.3365478> : vector<4xf32>
// CHECK:       %[[SMALL:.*]] = arith.cmpf olt, %[[V]], %[[LOW]] : vector<4xf32>
// CHECK:       %[[HALF:.*]] = arith.constant dense<5.000000e-01> : vector<4xf32>
// CHECK:       %[[H:.*]] = arith.mulf %[[V]], %[[HALF]] : vector<4xf32>
// CHECK:       %[[IN:.*]] = arith.select %[[SMALL]], %[[H]], %[[V]] : vector<4xi1>, vector<4xf32>
// CHECK:       %[[E:.*]] = math.exp %[[IN]] {tdf.rescaled} : vector<4xf32>
// CHECK:       %[[SQ:.*]] = arith.mulf %[[E]], %[[E]] : vector<4xf32>
// CHECK:       %[[R:.*]] = arith.select %[[SMALL]], %[[SQ]], %[[E]] : vector<4xi1>, vector<4xf32>
// CHECK:       return %[[R]]
// APPROX-LABEL: func.func @exp_vector
// APPROX-SAME:  (%[[V:.*]]: vector<4xf32>)
// APPROX:       %[[SMALL:.*]] = arith.cmpf olt, %[[V]], %{{.*}} : vector<4xf32>
// APPROX:       arith.select %[[SMALL]], %{{.*}}, %[[V]] : vector<4xi1>, vector<4xf32>
// APPROX-NOT:   math.exp
// APPROX:       %[[R:.*]] = arith.select %[[SMALL]], %{{.*}}, %{{.*}} : vector<4xi1>, vector<4xf32>
// APPROX-NEXT:  return %[[R]]
func.func @exp_vector(%v: vector<4xf32>) -> vector<4xf32> {
  %0 = math.exp %v : vector<4xf32>
  return %0 : vector<4xf32>
}

// -----

// f64 (no approximation to protect) and other ops are left alone.
// CHECK-LABEL: func.func @negative_f64_and_other_ops
// CHECK-SAME:  (%[[X:.*]]: f32, %[[D:.*]]: f64)
// CHECK-NEXT:  %[[L:.*]] = math.log %[[D]] : f64
// CHECK-NEXT:  %[[T:.*]] = math.tanh %[[X]] : f32
// CHECK-NEXT:  %[[P:.*]] = math.log1p %[[X]] : f32
// CHECK-NEXT:  return %[[L]], %[[T]], %[[P]]
// APPROX-LABEL: func.func @negative_f64_and_other_ops
// APPROX:       math.log %{{.*}} : f64
// APPROX-NOT:   math.tanh
// APPROX:       math.log1p %{{.*}} : f32
func.func @negative_f64_and_other_ops(%x: f32, %d: f64) -> (f64, f32, f32) {
  %0 = math.log %d : f64
  %1 = math.tanh %x : f32
  %2 = math.log1p %x : f32
  return %0, %1, %2 : f64, f32, f32
}

// Per split, first run then second run: each op rescaled once.
// STATS: (S) 1 rescaled
// STATS: (S) 0 rescaled
// STATS: (S) 1 rescaled
// STATS: (S) 0 rescaled
// STATS: (S) 1 rescaled
// STATS: (S) 0 rescaled
// STATS: (S) 0 rescaled
// STATS: (S) 0 rescaled
