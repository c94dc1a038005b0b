// RUN: tdf-opt %s --tdf-unown-opaque-results=phase=later --verify-diagnostics

// An unknown phase is an error on the module naming it.
// expected-error@+1 {{unknown phase 'later' (expected 'snapshot' or 'unown')}}
module {
  func.func private @opaque(memref<4xf32>) -> memref<4xf32>
}
