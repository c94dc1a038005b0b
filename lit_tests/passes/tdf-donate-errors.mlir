// RUN: tdf-opt %s --split-input-file --tdf-donate --verify-diagnostics
// RUN: not tdf-opt %s --split-input-file --tdf-donate="strict=true" 2>&1 | FileCheck %s --check-prefix=STRICT
// RUN: not tdf-opt %s --tdf-donate="strictly" 2>&1 | FileCheck %s --check-prefix=BADOPT

// STRICT: tdf-donate-errors.mlir:[[# @LINE + 3]]:1: error: donated argument #0 of @unusable_donation (type tensor<4xf32>) cannot be used: no result has its type and nothing updates it
// BADOPT: no such option strictly
// expected-warning@+1 {{donated argument #0 of @unusable_donation (type tensor<4xf32>) cannot be used: no result has its type and nothing updates it; its buffer will not be reused}}
func.func @unusable_donation(%x: tensor<4xf32> {tdf.donate}) -> tensor<8xf32> {
  %e = tensor.empty() : tensor<8xf32>
  return %e : tensor<8xf32>
}

// -----

// A donated argument returned unchanged is usable (its type is a result's).
func.func @donation_returned(%x: tensor<4xf32> {tdf.donate}) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// -----

// A donated argument updated through a view is usable.
func.func @donation_updated_through_view(%x: tensor<4x8xf32> {tdf.donate}, %v: tensor<8xf32>) -> tensor<8xf32> {
  %row = tensor.extract_slice %x[0, 0] [1, 8] [1, 1] : tensor<4x8xf32> to tensor<1x8xf32>
  %flat = tensor.collapse_shape %row [[0, 1]] : tensor<1x8xf32> into tensor<8xf32>
  %e = tensor.empty() : tensor<8xf32>
  %sum = linalg.add ins(%flat, %v : tensor<8xf32>, tensor<8xf32>) outs(%flat : tensor<8xf32>) -> tensor<8xf32>
  return %sum : tensor<8xf32>
}

// -----

// tdf.donation_pairs must pair results with donated arguments of their type.
// expected-error@+2 {{'tdf.donation_pairs' pairs result #0 (tensor<4xf32>) with donated argument #0 of another or a dynamic type (tensor<8xf32>)}}
// expected-warning@+1 {{donated argument #0 of @negative_pairs_of_another_type (type tensor<8xf32>) cannot be used}}
func.func @negative_pairs_of_another_type(%x: tensor<8xf32> {tdf.donate}, %y: tensor<4xf32>) -> tensor<4xf32>
    attributes {tdf.donation_pairs = array<i64: 0>} {
  return %y : tensor<4xf32>
}
