// --irdl-file loads a dialect defined in IRDL before the input is parsed.
// RUN: %opt %s --irdl-file=%S/Inputs/cmath.irdl.mlir
// RUN: %opt %s --irdl-file=%S/Inputs/cmath.irdl.mlir -verify-roundtrip
// RUN: %opt %s

func.func @norm(%c: !cmath.complex<f32>) -> !cmath.complex<f32> {
  %0 = "cmath.norm"(%c) : (!cmath.complex<f32>) -> f32
  return %c : !cmath.complex<f32>
}
