// A failing pass: -mlir-print-ir-after-failure, crash reproducers, the
// diagnostic verbosity options.
// RUN: %opt %s -allow-unregistered-dialect -one-shot-bufferize -mlir-print-ir-after-failure
// RUN: %opt %s -allow-unregistered-dialect -one-shot-bufferize -mlir-print-op-on-diagnostic=false
// RUN: %opt %s -allow-unregistered-dialect -one-shot-bufferize -mlir-diagnostic-verbosity-level=errors
// RUN: %opt %s -allow-unregistered-dialect -one-shot-bufferize -mlir-disable-diagnostic-notes
// RUN: %opt %s -allow-unregistered-dialect -pass-pipeline="builtin.module(canonicalize,one-shot-bufferize)" -mlir-pass-pipeline-crash-reproducer=%t
// RUN: %opt %s -allow-unregistered-dialect -mlir-disable-threading -pass-pipeline="builtin.module(canonicalize,one-shot-bufferize)" -mlir-pass-pipeline-crash-reproducer=%t -mlir-pass-pipeline-local-reproducer
// RUN: %opt %s -allow-unregistered-dialect -pass-pipeline="builtin.module(canonicalize,one-shot-bufferize)" -mlir-pass-pipeline-crash-reproducer=%t -mlir-pass-pipeline-local-reproducer
// RUN: %opt %s -allow-unregistered-dialect -canonicalize -mlir-generate-reproducer=%t

func.func @f(%t: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "foo.op"(%t) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
