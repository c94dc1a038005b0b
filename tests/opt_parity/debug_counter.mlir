// Several -mlir-debug-counter occurrences and comma-separated values.
// (Malformed values abort mlir-opt 22; see test_opt_parity.py.)
// RUN: %opt %s --mlir-disable-threading --mlir-debug-counter=pass-execution-skip=1,pass-execution-count=1 -cse -canonicalize --mlir-print-debug-counter
// RUN: %opt %s --mlir-disable-threading --mlir-debug-counter=pass-execution-skip=0 --mlir-debug-counter=pass-execution-count=0 -cse --mlir-print-debug-counter

func.func @g() {
  return
}
