// RUN: tdf-opt %s --tdf-verify-inplace --verify-diagnostics | FileCheck %s
// RUN: tdf-opt %s --pass-pipeline="builtin.module(tdf-donate, one-shot-bufferize{%one_shot_options})" | FileCheck %s --check-prefix=BUF

// Warnings where One-Shot Bufferize will copy the in-place operand; the
// IR is unchanged. The BUF lines show the copies the warnings announce.

func.func private @addone(memref<4xf32>) attributes {tdf.elementwise}
func.func private @add(memref<4xf32>, memref<4xf32>) attributes {tdf.elementwise}
func.func private @keep(memref<4xf32>) -> memref<4xf32>

// CHECK-LABEL: func.func @inplace_ok(
// CHECK: tdf.call_inplace @addone(%{{.*}}) inplace [0]
// BUF-LABEL: func.func @inplace_ok(
// BUF-NOT: memref.copy
// BUF: return
func.func @inplace_ok(%x: tensor<4xf32> {tdf.donate}) -> tensor<4xf32> {
  %a = tdf.call_inplace @addone(%x) inplace [0] : (tensor<4xf32>) -> tensor<4xf32>
  %b = tdf.call_inplace @add(%a, %a) inplace [0] : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %b : tensor<4xf32>
}

// BUF-LABEL: func.func @negative_still_used(
// BUF: memref.copy
func.func @negative_still_used(%x: tensor<4xf32> {tdf.donate}) -> (tensor<4xf32>, tensor<4xf32>) {
  // expected-warning@+1 {{in-place operand #0 (%arg0) is still used by func.return (a function result) (dead); a copy will be made}}
  %a = tdf.call_inplace @addone(%x) inplace [0] : (tensor<4xf32>) -> tensor<4xf32>
  return %a, %x : tensor<4xf32>, tensor<4xf32>
}

// BUF-LABEL: func.func @negative_not_donated(
// BUF: memref.copy
func.func @negative_not_donated(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-warning@+1 {{in-place operand #0 (%arg0) is a function argument that is not donated (owned); a copy will be made}}
  %a = tdf.call_inplace @addone(%x) inplace [0] : (tensor<4xf32>) -> tensor<4xf32>
  return %a : tensor<4xf32>
}

func.func @negative_alias_live(%x: tensor<4xf32> {tdf.donate}) -> (tensor<4xf32>, tensor<?xf32>) {
  %v = tensor.cast %x : tensor<4xf32> to tensor<?xf32>
  // expected-warning@+1 {{in-place operand #0 (%arg0) may share storage with %cast, which is still used by func.return (a function result) (unaliased); a copy will be made}}
  %a = tdf.call_inplace @addone(%x) inplace [0] : (tensor<4xf32>) -> tensor<4xf32>
  return %a, %v : tensor<4xf32>, tensor<?xf32>
}

func.func @negative_escaped(%x: tensor<4xf32> {tdf.donate}) -> (tensor<4xf32>, tensor<4xf32>) {
  %k = tdf.call_opaque @keep(%x) : (tensor<4xf32>) -> tensor<4xf32>
  // expected-warning@+1 {{in-place operand #0 (%arg0) may alias a value passed to an opaque call (unaliased); a copy will be made}}
  %a = tdf.call_inplace @addone(%x) inplace [0] : (tensor<4xf32>) -> tensor<4xf32>
  return %k, %a : tensor<4xf32>, tensor<4xf32>
}
