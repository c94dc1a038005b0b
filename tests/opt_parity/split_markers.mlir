// mlir-opt's --split-input-file: a marker anywhere on a line splits (indented,
// after code, followed by text), near misses warn, chunk locations point into
// the whole file.
// RUN: %opt %s --split-input-file
// RUN: %opt %s --split-input-file --mlir-print-debuginfo
// RUN: %opt %s --split-input-file -output-split-marker="// =====" -allow-unregistered-dialect
// RUN: %opt %s --split-input-file="// ----- followed" -allow-unregistered-dialect
// RUN: %opt %s -allow-unregistered-dialect

func.func @a() {
  return
}
  // -----
func.func @a() {
  return
}
func.func @b() { return } // -----
func.func @a() {
  return
}
// ----- followed by text
"test.op"() : () -> ()
// ----
func.func @c() { return }
//-----
func.func @d() { return }
// -----
func.func @bad(%x: i32) -> i64 {
  return %x : i32
}
