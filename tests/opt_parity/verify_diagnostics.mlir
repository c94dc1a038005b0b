// --verify-diagnostics, its only-expected level, and split chunks.
// RUN: %opt %s --split-input-file --verify-diagnostics
// RUN: %opt %s --split-input-file --verify-diagnostics=all
// RUN: %opt %s --split-input-file --verify-diagnostics=only-expected
// RUN: %opt %s --split-input-file --verify-diagnostics=bogus
// RUN: %opt %s --split-input-file

// expected-error @below {{type of return operand 0 ('i32') doesn't match function result type ('i64')}}
func.func @bad(%x: i32) -> i64 {
  return %x : i32
}

// -----

func.func @matched(%x: i32) -> i64 {
  // expected-error @+1 {{type of return operand 0 ('i32') doesn't match function result type ('i64')}}
  return %x : i32
}

// -----

func.func @unexpected(%x: i32) -> i64 {
  return %x : i32
}

// -----

// expected-error @+1 {{this error is never emitted}}
func.func @fine() {
  return
}

// -----

// expected-warning @below {{near miss: not matched}}
func.func @near(%x: i32) -> i64 {
  return %x : i32
}
