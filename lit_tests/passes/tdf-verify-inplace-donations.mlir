// RUN: tdf-opt %s --tdf-verify-inplace="strict donations" --split-input-file --verify-diagnostics
// RUN: not tdf-opt %s --tdf-verify-inplace=donations --split-input-file 2>&1 | FileCheck %s --check-prefix=WARN
// RUN: tdf-opt %s --tdf-verify-inplace=strict --split-input-file | FileCheck %s --check-prefix=OFF

// tdf-verify-inplace{donations}: a donated argument must hold the result it
// is paired with (One-Shot Bufferize finds them equivalent); a miss names the
// argument, the result and why. Without `donations` nothing is checked (OFF).

// WARN: warning: donated argument #0 (%arg0) does not hold its paired result #0 (tensor<4xf32>): %arg0 is still used by %3 (linalg.mul) after %1 (linalg.add) (donation); the result is computed in a new buffer
// OFF-LABEL: func.func @negative_read_after(

// %x is read after the update that should go into it.
func.func @negative_read_after(%x: tensor<4xf32> {tdf.donate}) -> (tensor<4xf32>, tensor<4xf32>) {
  %e = tensor.empty() : tensor<4xf32>
  // expected-error@+1 {{donated argument #0 (%arg0) does not hold its paired result #0 (tensor<4xf32>): %arg0 is still used by %3 (linalg.mul) after %1 (linalg.add) (donation)}}
  %n = linalg.add ins(%x, %x : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %e2 = tensor.empty() : tensor<4xf32>
  %o = linalg.mul ins(%n, %x : tensor<4xf32>, tensor<4xf32>) outs(%e2 : tensor<4xf32>) -> tensor<4xf32>
  return %n, %o : tensor<4xf32>, tensor<4xf32>
}

// -----

// Held: the update is computed in %x.
func.func @held(%x: tensor<4xf32> {tdf.donate}) -> tensor<4xf32> {
  %n = linalg.add ins(%x, %x : tensor<4xf32>, tensor<4xf32>) outs(%x : tensor<4xf32>) -> tensor<4xf32>
  return %n : tensor<4xf32>
}

// -----

// The update of %x is on a copy: its old value is returned too.
func.func @negative_updated_on_a_copy(%x: tensor<4xf32> {tdf.donate}, %i: index, %v: f32) -> (tensor<4xf32>, tensor<4xf32>) {
  // expected-error@+1 {{donated argument #0 (%arg0) does not hold its paired result #0 (tensor<4xf32>): One-Shot Bufferize computes the update on a copy of the argument (its old value is still read after the update) (donation)}}
  %n = tensor.insert %v into %x[%i] : tensor<4xf32>
  return %n, %x : tensor<4xf32>, tensor<4xf32>
}

// -----

// In the buffer of another donated argument: a swap is no pairing.
func.func @negative_swapped(%a: tensor<4xf32> {tdf.donate}, %b: tensor<4xf32> {tdf.donate}) -> (tensor<4xf32>, tensor<4xf32>) {
  // expected-error@+2 {{donated argument #0 (%arg0) does not hold its paired result #0 (tensor<4xf32>): it is computed in the buffer of argument #1 (donation)}}
  // expected-error@+1 {{donated argument #1 (%arg1) does not hold its paired result #1 (tensor<4xf32>): it is computed in the buffer of argument #0 (donation)}}
  return %b, %a : tensor<4xf32>, tensor<4xf32>
}

// -----

// A malformed tdf.donation_pairs.
// expected-error@+1 {{'tdf.donation_pairs' pairs result #0 with argument #1, which is not donated}}
func.func @negative_bad_pairs(%a: tensor<4xf32> {tdf.donate}, %b: tensor<4xf32>) -> tensor<4xf32>
    attributes {tdf.donation_pairs = array<i64: 1>} {
  return %b : tensor<4xf32>
}

// -----

// expected-error@+1 {{'tdf.donation_pairs' has 2 entries for 1 result(s) (one per result: the donated argument paired with it, or -1)}}
func.func @negative_pairs_count(%a: tensor<4xf32> {tdf.donate}) -> tensor<4xf32>
    attributes {tdf.donation_pairs = array<i64: 0, -1>} {
  return %a : tensor<4xf32>
}

// -----

// A function tdf-outline-deep-nests made (tdf.outlined): its donated
// parameters let it update them in place, but carry no pairing contract, so
// a result computed elsewhere is no miss (the same body in @negative_read_after
// is one).
// OFF-LABEL: func.func private @outlined_no_contract(
func.func @caller(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %r:2 = func.call @outlined_no_contract(%x) : (tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  return %r#0, %r#1 : tensor<4xf32>, tensor<4xf32>
}
func.func private @outlined_no_contract(%x: tensor<4xf32> {tdf.donate}) -> (tensor<4xf32>, tensor<4xf32>)
    attributes {tdf.outlined} {
  %e = tensor.empty() : tensor<4xf32>
  %n = linalg.add ins(%x, %x : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %e2 = tensor.empty() : tensor<4xf32>
  %o = linalg.mul ins(%n, %x : tensor<4xf32>, tensor<4xf32>) outs(%e2 : tensor<4xf32>) -> tensor<4xf32>
  return %n, %o : tensor<4xf32>, tensor<4xf32>
}
