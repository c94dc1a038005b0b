// RUN: tdf-opt %s --tdf-math-approximation="ops=log,sqrtt" --verify-diagnostics

// An op without an upstream polynomial (or a misspelled one) in `ops` is
// an error on the module, naming it and the supported ops.
// expected-error@+1 {{unsupported math op 'sqrtt' (expected one of acos,asin,atan,atan2,cbrt,cos,erf,erfc,exp,expm1,log,log1p,log2,rsqrt,sin,tanh)}}
module {
  func.func @f(%x: f32) -> f32 {
    %0 = math.log %x : f32
    return %0 : f32
  }
}
