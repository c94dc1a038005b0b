// Parsing without the verifier (and printing the invalid IR generically).
// RUN: %opt %s -mlir-very-unsafe-disable-verifier-on-parsing -mlir-print-op-generic -verify-each=false
// RUN: %opt %s -mlir-very-unsafe-disable-verifier-on-parsing -mlir-print-op-generic
// RUN: %opt %s -mlir-print-op-generic

func.func @bad(%x: i32) -> i64 {
  return %x : i32
}
