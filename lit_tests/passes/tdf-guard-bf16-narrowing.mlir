// RUN: tdf-opt %s --tdf-guard-bf16-narrowing | FileCheck %s

// 1 - x (x from bf16), rounded to bf16: LLVM would narrow it into bf16
// arithmetic on a constant splat; the rounding becomes integer ops
// (round to nearest even, NaN quieted).
// CHECK-LABEL: func.func @constant_minus_bf16
// CHECK:         %[[S:.+]] = arith.subf
// CHECK:         %[[U:.+]] = arith.bitcast %[[S]] : f32 to i32
// CHECK:         arith.cmpi ugt
// CHECK:         arith.select
// CHECK:         arith.trunci {{.*}} : i32 to i16
// CHECK:         %[[R:.+]] = arith.bitcast {{.*}} : i16 to bf16
// CHECK-NOT:     arith.truncf
// CHECK:         return %[[R]]
func.func @constant_minus_bf16(%x: bf16) -> bf16 {
  %one = arith.constant 1.0 : f32
  %e = arith.extf %x : bf16 to f32
  %s = arith.subf %one, %e : f32
  %r = arith.truncf %s : f32 to bf16
  return %r : bf16
}

// Vectors too (a splat constant).
// CHECK-LABEL: func.func @vector_plus_constant
// CHECK:         arith.bitcast {{.*}} : vector<8xf32> to vector<8xi32>
// CHECK:         arith.bitcast {{.*}} : vector<8xi16> to vector<8xbf16>
// CHECK-NOT:     arith.truncf
func.func @vector_plus_constant(%x: vector<8xbf16>) -> vector<8xbf16> {
  %c = arith.constant dense<2.0> : vector<8xf32>
  %e = arith.extf %x : vector<8xbf16> to vector<8xf32>
  %s = arith.addf %e, %c : vector<8xf32>
  %r = arith.truncf %s : vector<8xf32> to vector<8xbf16>
  return %r : vector<8xbf16>
}

// negative_not_representable: a constant bf16 cannot hold (a float32
// reciprocal) keeps LLVM from narrowing: left alone.
// CHECK-LABEL: func.func @negative_not_representable
// CHECK:         arith.truncf
func.func @negative_not_representable(%x: bf16) -> bf16 {
  %r3 = arith.constant 0.333333343 : f32
  %e = arith.extf %x : bf16 to f32
  %m = arith.mulf %e, %r3 : f32
  %r = arith.truncf %m : f32 to bf16
  return %r : bf16
}

// negative_no_constant: two bf16 values (LLVM's narrowing of these
// legalizes): left alone.
// CHECK-LABEL: func.func @negative_no_constant
// CHECK:         arith.truncf
func.func @negative_no_constant(%x: bf16, %y: bf16) -> bf16 {
  %a = arith.extf %x : bf16 to f32
  %b = arith.extf %y : bf16 to f32
  %s = arith.addf %a, %b : f32
  %r = arith.truncf %s : f32 to bf16
  return %r : bf16
}

// negative_float16: float16 narrowing legalizes: left alone.
// CHECK-LABEL: func.func @negative_float16
// CHECK:         arith.truncf
func.func @negative_float16(%x: f16) -> f16 {
  %one = arith.constant 1.0 : f32
  %e = arith.extf %x : f16 to f32
  %s = arith.subf %one, %e : f32
  %r = arith.truncf %s : f32 to f16
  return %r : f16
}
