// RUN: tdf-opt %s --split-input-file --one-shot-bufferize="%one_shot_options" --canonicalize | FileCheck %s
// RUN: tdf-opt %s --split-input-file --one-shot-bufferize="%one_shot_options test-analysis-only dump-alias-sets" | FileCheck %s --check-prefix=ANALYSIS

// Alias cuts of the tdf.call_inplace model (dialect/TDFBufferization.cpp):
// on long in-place chains One-Shot's alias sets are split where the part
// before the call is dead, so that the analysis stays linear in the chain
// length; the in-place decisions are the same as without cuts.
func.func private @k(memref<4xf32>, memref<4xf32>)
func.func private @k_ip(memref<4xf32>) attributes {tdf.elementwise}
func.func private @add(memref<4xf32>, memref<4xf32>, memref<4xf32>)

// A chain of 10 in-place calls from a fresh buffer: One-Shot's alias set is
// cut after 8 values (the part before the cut is dead after %8's call), so
// no set grows with the chain. Every operand stays in place; bufferized: one
// allocation, no copy.
// CHECK-LABEL: func.func @long_chain_is_cut
// CHECK: %[[B:.*]] = memref.alloc()
// CHECK-NOT: memref.alloc
// CHECK-NOT: memref.copy
// CHECK-COUNT-10: call @k_ip(%[[B]])
// CHECK: return %[[B]]
// ANALYSIS-LABEL: func.func @long_chain_is_cut
// ANALYSIS: %[[C0:.*]] = tdf.call @k({{.*}}__opresult_alias_set_attr__ = {{\[\[}}"%7", "%6", "%5", "%4", "%3", "%2", "%1", "%0"]]
// ANALYSIS-COUNT-7: tdf.call_inplace @k_ip({{.*}}__inplace_operands_attr__ = ["true"], __opresult_alias_set_attr__ = {{\[\[}}"%7", "%6", "%5", "%4", "%3", "%2", "%1", "%0"]]
// ANALYSIS-COUNT-3: tdf.call_inplace @k_ip({{.*}}__inplace_operands_attr__ = ["true"], __opresult_alias_set_attr__ = {{\[\[}}"%10", "%9", "%8"]]
func.func @long_chain_is_cut(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = tdf.call @k(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = tdf.call_inplace @k_ip(%0) inplace [0] : (tensor<4xf32>) -> tensor<4xf32>
  %2 = tdf.call_inplace @k_ip(%1) inplace [0] : (tensor<4xf32>) -> tensor<4xf32>
  %3 = tdf.call_inplace @k_ip(%2) inplace [0] : (tensor<4xf32>) -> tensor<4xf32>
  %4 = tdf.call_inplace @k_ip(%3) inplace [0] : (tensor<4xf32>) -> tensor<4xf32>
  %5 = tdf.call_inplace @k_ip(%4) inplace [0] : (tensor<4xf32>) -> tensor<4xf32>
  %6 = tdf.call_inplace @k_ip(%5) inplace [0] : (tensor<4xf32>) -> tensor<4xf32>
  %7 = tdf.call_inplace @k_ip(%6) inplace [0] : (tensor<4xf32>) -> tensor<4xf32>
  %8 = tdf.call_inplace @k_ip(%7) inplace [0] : (tensor<4xf32>) -> tensor<4xf32>
  %9 = tdf.call_inplace @k_ip(%8) inplace [0] : (tensor<4xf32>) -> tensor<4xf32>
  %10 = tdf.call_inplace @k_ip(%9) inplace [0] : (tensor<4xf32>) -> tensor<4xf32>
  return %10 : tensor<4xf32>
}

// -----
func.func private @k(memref<4xf32>, memref<4xf32>)
func.func private @k_ip(memref<4xf32>) attributes {tdf.elementwise}
func.func private @add(memref<4xf32>, memref<4xf32>, memref<4xf32>)

// Below 8 values nothing is cut: the alias set is One-Shot's own.
// ANALYSIS-LABEL: func.func @negative_short_chain
// ANALYSIS-COUNT-6: tdf.call_inplace @k_ip({{.*}}__opresult_alias_set_attr__ = {{\[\[}}"%6", "%5", "%4", "%3", "%2", "%1", "%0"]]
func.func @negative_short_chain(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = tdf.call @k(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = tdf.call_inplace @k_ip(%0) inplace [0] : (tensor<4xf32>) -> tensor<4xf32>
  %2 = tdf.call_inplace @k_ip(%1) inplace [0] : (tensor<4xf32>) -> tensor<4xf32>
  %3 = tdf.call_inplace @k_ip(%2) inplace [0] : (tensor<4xf32>) -> tensor<4xf32>
  %4 = tdf.call_inplace @k_ip(%3) inplace [0] : (tensor<4xf32>) -> tensor<4xf32>
  %5 = tdf.call_inplace @k_ip(%4) inplace [0] : (tensor<4xf32>) -> tensor<4xf32>
  %6 = tdf.call_inplace @k_ip(%5) inplace [0] : (tensor<4xf32>) -> tensor<4xf32>
  return %6 : tensor<4xf32>
}

// -----
func.func private @k(memref<4xf32>, memref<4xf32>)
func.func private @k_ip(memref<4xf32>) attributes {tdf.elementwise}
func.func private @add(memref<4xf32>, memref<4xf32>, memref<4xf32>)

// A chain on a (writable) argument of a function that is called is never
// cut: the argument's equivalence with the result is what the callers use.
// One alias set holds the argument and every value; the result is the
// argument.
// ANALYSIS-LABEL: func.func @negative_chain_on_argument
// ANALYSIS-SAME:  (%[[X:[^:]+]]:
// ANALYSIS-COUNT-10: tdf.call_inplace @k_ip({{.*}}__inplace_operands_attr__ = ["true"], __opresult_alias_set_attr__ = {{\[\[}}"%9", "%8", "%7", "%6", "%5", "%4", "%3", "%2", "%1", "%0", "%[[X]]"]]
// ANALYSIS: return
// ANALYSIS-SAME: __equivalent_func_args__ = [0]
func.func @negative_chain_on_argument(%x: tensor<4xf32>) -> tensor<4xf32> {
  %1 = tdf.call_inplace @k_ip(%x) inplace [0] : (tensor<4xf32>) -> tensor<4xf32>
  %2 = tdf.call_inplace @k_ip(%1) inplace [0] : (tensor<4xf32>) -> tensor<4xf32>
  %3 = tdf.call_inplace @k_ip(%2) inplace [0] : (tensor<4xf32>) -> tensor<4xf32>
  %4 = tdf.call_inplace @k_ip(%3) inplace [0] : (tensor<4xf32>) -> tensor<4xf32>
  %5 = tdf.call_inplace @k_ip(%4) inplace [0] : (tensor<4xf32>) -> tensor<4xf32>
  %6 = tdf.call_inplace @k_ip(%5) inplace [0] : (tensor<4xf32>) -> tensor<4xf32>
  %7 = tdf.call_inplace @k_ip(%6) inplace [0] : (tensor<4xf32>) -> tensor<4xf32>
  %8 = tdf.call_inplace @k_ip(%7) inplace [0] : (tensor<4xf32>) -> tensor<4xf32>
  %9 = tdf.call_inplace @k_ip(%8) inplace [0] : (tensor<4xf32>) -> tensor<4xf32>
  %10 = tdf.call_inplace @k_ip(%9) inplace [0] : (tensor<4xf32>) -> tensor<4xf32>
  return %10 : tensor<4xf32>
}

func.func @calls_the_chain(%y: tensor<4xf32>) -> tensor<4xf32> {
  %r = func.call @negative_chain_on_argument(%y) : (tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----
func.func private @k_ip(memref<4xf32>) attributes {tdf.elementwise}

// The same chain on a (writable) argument of an entry point (nothing calls
// it) is cut like a chain from a fresh buffer: the analysis no longer
// reports the result equivalent to the argument, but every operand stays in
// place and the bufferized function still computes in the argument's buffer
// and returns it (what tdf-drop-donated-results reads).
// CHECK-LABEL: func.func @chain_on_entry_argument_is_cut
// CHECK-SAME:  (%[[A:[^:]+]]:
// CHECK-NOT: memref.alloc
// CHECK-NOT: memref.copy
// CHECK-COUNT-10: call @k_ip(%[[A]])
// CHECK: return %[[A]]
// ANALYSIS-LABEL: func.func @chain_on_entry_argument_is_cut
// ANALYSIS-COUNT-7: tdf.call_inplace @k_ip({{.*}}__inplace_operands_attr__ = ["true"], __opresult_alias_set_attr__ = {{\[\[}}"%6", "%5", "%4", "%3", "%2", "%1", "%0", "%{{.*}}"]]
// ANALYSIS-COUNT-3: tdf.call_inplace @k_ip({{.*}}__inplace_operands_attr__ = ["true"], __opresult_alias_set_attr__ = {{\[\[}}"%9", "%8", "%7"]]
func.func @chain_on_entry_argument_is_cut(%x: tensor<4xf32>) -> tensor<4xf32> {
  %1 = tdf.call_inplace @k_ip(%x) inplace [0] : (tensor<4xf32>) -> tensor<4xf32>
  %2 = tdf.call_inplace @k_ip(%1) inplace [0] : (tensor<4xf32>) -> tensor<4xf32>
  %3 = tdf.call_inplace @k_ip(%2) inplace [0] : (tensor<4xf32>) -> tensor<4xf32>
  %4 = tdf.call_inplace @k_ip(%3) inplace [0] : (tensor<4xf32>) -> tensor<4xf32>
  %5 = tdf.call_inplace @k_ip(%4) inplace [0] : (tensor<4xf32>) -> tensor<4xf32>
  %6 = tdf.call_inplace @k_ip(%5) inplace [0] : (tensor<4xf32>) -> tensor<4xf32>
  %7 = tdf.call_inplace @k_ip(%6) inplace [0] : (tensor<4xf32>) -> tensor<4xf32>
  %8 = tdf.call_inplace @k_ip(%7) inplace [0] : (tensor<4xf32>) -> tensor<4xf32>
  %9 = tdf.call_inplace @k_ip(%8) inplace [0] : (tensor<4xf32>) -> tensor<4xf32>
  %10 = tdf.call_inplace @k_ip(%9) inplace [0] : (tensor<4xf32>) -> tensor<4xf32>
  return %10 : tensor<4xf32>
}

// -----
func.func private @k(memref<4xf32>, memref<4xf32>)
func.func private @k_ip(memref<4xf32>) attributes {tdf.elementwise}
func.func private @add(memref<4xf32>, memref<4xf32>, memref<4xf32>)

// %3 is still read at the end: the component of %3 is not dead after the
// calls that follow, so none of them is cut, and One-Shot copies before the
// write to %3 as without cuts.
// CHECK-LABEL: func.func @negative_value_read_later
// CHECK: memref.copy
// ANALYSIS-LABEL: func.func @negative_value_read_later
// ANALYSIS: tdf.call @k(
// ANALYSIS-COUNT-2: tdf.call_inplace @k_ip(
// ANALYSIS: %[[V3:.*]] = tdf.call_inplace @k_ip(
// ANALYSIS-NEXT: tdf.call_inplace @k_ip(%[[V3]]) {{.*}}__inplace_operands_attr__ = ["false"]
// ANALYSIS: %[[SUM:.*]] = tdf.call @add({{.*}}__opresult_alias_set_attr__ = {{\[\[}}"%[[SUM]]"]]
func.func @negative_value_read_later(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = tdf.call @k(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = tdf.call_inplace @k_ip(%0) inplace [0] : (tensor<4xf32>) -> tensor<4xf32>
  %2 = tdf.call_inplace @k_ip(%1) inplace [0] : (tensor<4xf32>) -> tensor<4xf32>
  %3 = tdf.call_inplace @k_ip(%2) inplace [0] : (tensor<4xf32>) -> tensor<4xf32>
  %4 = tdf.call_inplace @k_ip(%3) inplace [0] : (tensor<4xf32>) -> tensor<4xf32>
  %5 = tdf.call_inplace @k_ip(%4) inplace [0] : (tensor<4xf32>) -> tensor<4xf32>
  %6 = tdf.call_inplace @k_ip(%5) inplace [0] : (tensor<4xf32>) -> tensor<4xf32>
  %7 = tdf.call_inplace @k_ip(%6) inplace [0] : (tensor<4xf32>) -> tensor<4xf32>
  %8 = tdf.call_inplace @k_ip(%7) inplace [0] : (tensor<4xf32>) -> tensor<4xf32>
  %9 = tdf.call_inplace @k_ip(%8) inplace [0] : (tensor<4xf32>) -> tensor<4xf32>
  %10 = tdf.call_inplace @k_ip(%9) inplace [0] : (tensor<4xf32>) -> tensor<4xf32>
  %11 = tdf.call @add(%10, %3) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %11 : tensor<4xf32>
}

// -----
func.func private @k(memref<4xf32>, memref<4xf32>)
func.func private @k_ip(memref<4xf32>) attributes {tdf.elementwise}
func.func private @add(memref<4xf32>, memref<4xf32>, memref<4xf32>)

// The chain's end may alias a non-writable argument (arith.select): a cut
// would hide that argument from the writability check of the writes before
// it, so the candidate cut after %7 is undone and the decisions are
// One-Shot's own: %0..%9 share one set; the last call of the chain copies.
// ANALYSIS-LABEL: func.func @negative_select_with_argument
// ANALYSIS-COUNT-8: tdf.call_inplace @k_ip({{.*}}__inplace_operands_attr__ = ["true"], __opresult_alias_set_attr__ = {{\[\[}}"%9", "%8", "%7", "%6", "%5", "%4", "%3", "%2", "%1", "%0"]]
// ANALYSIS: %[[V9:.*]] = tdf.call_inplace @k_ip({{.*}}__inplace_operands_attr__ = ["true"], __opresult_alias_set_attr__ = {{\[\[}}"%9", "%8", "%7", "%6", "%5", "%4", "%3", "%2", "%1", "%0"]]
// ANALYSIS-NEXT: tdf.call_inplace @k_ip(%[[V9]]) {{.*}}__inplace_operands_attr__ = ["false"]
func.func @negative_select_with_argument(%x: tensor<4xf32> {bufferization.writable = false}, %c: i1) -> tensor<4xf32> {
  %0 = tdf.call @k(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = tdf.call_inplace @k_ip(%0) inplace [0] : (tensor<4xf32>) -> tensor<4xf32>
  %2 = tdf.call_inplace @k_ip(%1) inplace [0] : (tensor<4xf32>) -> tensor<4xf32>
  %3 = tdf.call_inplace @k_ip(%2) inplace [0] : (tensor<4xf32>) -> tensor<4xf32>
  %4 = tdf.call_inplace @k_ip(%3) inplace [0] : (tensor<4xf32>) -> tensor<4xf32>
  %5 = tdf.call_inplace @k_ip(%4) inplace [0] : (tensor<4xf32>) -> tensor<4xf32>
  %6 = tdf.call_inplace @k_ip(%5) inplace [0] : (tensor<4xf32>) -> tensor<4xf32>
  %7 = tdf.call_inplace @k_ip(%6) inplace [0] : (tensor<4xf32>) -> tensor<4xf32>
  %8 = tdf.call_inplace @k_ip(%7) inplace [0] : (tensor<4xf32>) -> tensor<4xf32>
  %9 = tdf.call_inplace @k_ip(%8) inplace [0] : (tensor<4xf32>) -> tensor<4xf32>
  %10 = tdf.call_inplace @k_ip(%9) inplace [0] : (tensor<4xf32>) -> tensor<4xf32>
  %11 = arith.select %c, %10, %x : tensor<4xf32>
  %12 = tdf.call_inplace @k_ip(%11) inplace [0] : (tensor<4xf32>) -> tensor<4xf32>
  return %12 : tensor<4xf32>
}
