// IR printing prints the op the pass ran on, unless module scope.
// RUN: %opt %s -mlir-disable-threading -pass-pipeline="builtin.module(func.func(cse,canonicalize))" -mlir-print-ir-before=cse -mlir-print-ir-after=canonicalize
// RUN: %opt %s -mlir-disable-threading -pass-pipeline="builtin.module(func.func(cse,canonicalize))" -mlir-print-ir-before-all -mlir-print-ir-after-all
// RUN: %opt %s -mlir-disable-threading -pass-pipeline="builtin.module(func.func(cse,canonicalize))" -mlir-print-ir-after-all -mlir-print-ir-module-scope
// RUN: %opt %s -pass-pipeline="builtin.module(func.func(cse))" -mlir-print-ir-after-all -mlir-print-ir-module-scope
// RUN: %opt %s -mlir-disable-threading -pass-pipeline="builtin.module(func.func(cse,canonicalize),symbol-dce)" -mlir-print-ir-after-change
// RUN: %opt %s -mlir-disable-threading -pass-pipeline="builtin.module(func.func(cse),symbol-dce)" -mlir-print-ir-after-all -mlir-print-ir-tree-dir=%t
// RUN: %opt %s -pass-pipeline="builtin.module(func.func(cse,canonicalize{max-iterations=3}),symbol-dce)" -dump-pass-pipeline
// RUN: %opt %s -cse -canonicalize -dump-pass-pipeline -o %t
// RUN: %opt %s -mlir-disable-threading -pass-pipeline="builtin.module(func.func(cse))" -mlir-print-ir-after-all -mlir-print-op-generic -mlir-print-debuginfo

func.func @f(%a: i32) -> i32 {
  %0 = arith.addi %a, %a : i32
  %1 = arith.addi %a, %a : i32
  %2 = arith.muli %0, %1 : i32
  return %2 : i32
}
func.func private @unused() {
  return
}
func.func @g(%a: i32) -> i32 {
  %c0 = arith.constant 0 : i32
  %0 = arith.addi %a, %c0 : i32
  return %0 : i32
}
