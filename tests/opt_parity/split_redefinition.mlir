// Near-miss markers do not split: a symbol redefined across one is an error
// that --verify-diagnostics can expect; custom input and output markers.
// RUN: %opt %s --split-input-file --verify-diagnostics
// RUN: %opt %s --split-input-file
// RUN: %opt %s -split-input-file="// SPLIT"" HERE" -output-split-marker="// next chunk"

func.func @first() { return }

// -----

// expected-note @+1 {{see existing symbol definition here}}
func.func @dup() { return }
// ----

// expected-error @+1 {{redefinition of symbol named 'dup'}}
func.func @dup() { return }
// SPLIT HERE
func.func @last() { return }
// ----
