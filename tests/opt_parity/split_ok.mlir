// Every chunk valid: an indented marker, a marker after code and a marker
// followed by text all split (exit 0), near misses only warn.
// RUN: %opt %s --split-input-file
// RUN: %opt %s --split-input-file --mlir-print-debuginfo -mlir-print-local-scope
// RUN: %opt %s --split-input-file -output-split-marker="// =====" -cse
// RUN: %opt %s --split-input-file --verify-diagnostics
// RUN: %opt %s

func.func @a() {
  return
}
    // -----
func.func @a() {
  return
}
func.func @b() { return } // -----
func.func @a() { return }
// ----- // the rest of a marker line is the next chunk's
func.func @a() { return }
// ----
func.func @c() { return }
// ---
func.func @d() { return }
