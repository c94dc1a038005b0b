// RUN: tdf-opt %s --tdf-convert-math-to-libm="ops=expm1,rsqrt" --verify-diagnostics

// An op libm has no function for (rsqrt) is an error on the module, naming
// it and the ops that can be listed.
// expected-error@+1 {{unsupported math op 'rsqrt' (expected one of acos,acosh,asin,asinh,atan,atan2,atanh,cbrt,ceil,cos,cosh,erf,erfc,exp,exp2,expm1,floor,fma,log,log10,log1p,log2,powf,round,roundeven,sin,sinh,tan,tanh,trunc)}}
module {
  func.func @f(%x: f32) -> f32 {
    %0 = math.rsqrt %x : f32
    return %0 : f32
  }
}
