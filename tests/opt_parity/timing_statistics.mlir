// --mlir-timing (with Parser and Output rows) and pass statistics. (The
// statistics merged across threads are racy in mlir-opt 22 too (either
// display): single-threaded here. The timing list is sorted by time: compared
// sorted.)
// RUN: %opt %s -cse -canonicalize -mlir-timing -o %t
// RUN: %opt %s -pass-pipeline="builtin.module(func.func(cse,canonicalize))" -mlir-timing -mlir-timing-display=list -mlir-disable-threading -o %t
// RUN: %opt %s -pass-pipeline="builtin.module(func.func(cse,canonicalize))" -mlir-timing -mlir-timing-display=tree -o %t
// RUN: %opt %s --split-input-file -cse -mlir-timing -o %t
// RUN: %opt %s -pass-pipeline="builtin.module(func.func(cse,canonicalize))" -mlir-pass-statistics -mlir-disable-threading -o %t
// RUN: %opt %s -pass-pipeline="builtin.module(func.func(cse,canonicalize))" -mlir-pass-statistics -mlir-pass-statistics-display=list -mlir-disable-threading -o %t
// RUN: %opt %s -pass-pipeline="builtin.module(func.func(cse,canonicalize))" -mlir-pass-statistics -mlir-pass-statistics-display=pipeline -mlir-disable-threading -o %t
// RUN: %opt %s -pass-pipeline="builtin.module(func.func(cse,canonicalize))" -mlir-debug-counter=pass-execution-skip=1 -mlir-print-debug-counter -mlir-disable-threading
// RUN: %opt %s -pass-pipeline="builtin.module(func.func(cse,canonicalize))" -mlir-debug-counter=pass-execution-count=2 -mlir-print-debug-counter -mlir-disable-threading

func.func @f(%a: i32) -> i32 {
  %0 = arith.addi %a, %a : i32
  %1 = arith.addi %a, %a : i32
  %2 = arith.muli %0, %1 : i32
  return %2 : i32
}
// -----
func.func @g(%a: i32) -> i32 {
  %c0 = arith.constant 0 : i32
  %0 = arith.addi %a, %c0 : i32
  return %0 : i32
}
