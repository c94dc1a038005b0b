// Driver options: module handling, unregistered ops, bad flags, IRDL.
// RUN: %opt %s -allow-unregistered-dialect
// RUN: %opt %s
// RUN: %opt %s -allow-unregistered-dialect -no-implicit-module
// RUN: %opt %s -allow-unregistered-dialect -verify-each=false -canonicalize
// RUN: %opt %s -allow-unregistered-dialect -mlir-print-value-users -mlir-print-unique-ssa-ids
// RUN: %opt %s -allow-unregistered-dialect --no-such-flag
// RUN: %opt %s -allow-unregistered-dialect -mlir-timing-display=bogus
// RUN: %opt %s -allow-unregistered-dialect --pass-pipeline="builtin.module(no-such-pass)"
// RUN: %opt %s -allow-unregistered-dialect --pass-pipeline="builtin.module(cse" -mlir-disable-threading
// RUN: %opt %s -allow-unregistered-dialect -o %t/missing/dir/out.mlir
// RUN: %opt %t/no/such/input.mlir
// RUN: %opt %s -allow-unregistered-dialect -remarks-filter=".*" -canonicalize
// RUN: %opt %s -allow-unregistered-dialect -log-actions-to=- -mlir-disable-threading -cse
// RUN: %opt %s -allow-unregistered-dialect -log-actions-to=- -log-mlir-actions-filter=%s:19 -mlir-disable-threading -cse
// RUN: %opt %s -allow-unregistered-dialect --mlir-enable-debugger-hook -mlir-disable-threading -cse

func.func @f(%a: i32) -> i32 {
  %0 = "foo.op"(%a) : (i32) -> i32
  return %0 : i32
}
