// -run-reproducer runs the pipeline stored in the input's resources.
// RUN: %opt %s -run-reproducer
// RUN: %opt %s -run-reproducer -dump-pass-pipeline
// RUN: %opt %s

func.func @f(%a: i32) -> i32 {
  %0 = arith.addi %a, %a : i32
  %1 = arith.addi %a, %a : i32
  %2 = arith.muli %0, %1 : i32
  return %2 : i32
}

{-#
  external_resources: {
    mlir_reproducer: {
      pipeline: "builtin.module(func.func(cse,canonicalize))",
      disable_threading: true,
      verify_each: true
    }
  }
#-}
