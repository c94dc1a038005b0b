// RUN: tdf-opt %s --tdf-insert-inplace | FileCheck %s
// RUN: tdf-opt %s --tdf-insert-inplace | tdf-opt | FileCheck %s
// RUN: tdf-opt %s --pass-pipeline="builtin.module(tdf-insert-inplace, tdf-donate, one-shot-bufferize{%one_shot_options}, canonicalize, cse, canonicalize)" | FileCheck %s --check-prefix=BUF

// Kernels with element-wise bodies: the pass proves them element-wise and
// generates the in-place variants.
func.func private @addone(%x: memref<4xf32>, %out: memref<4xf32>) {
  linalg.add ins(%x, %x : memref<4xf32>, memref<4xf32>) outs(%out : memref<4xf32>)
  return
}
func.func private @add(%x: memref<4xf32>, %y: memref<4xf32>, %out: memref<4xf32>) {
  linalg.add ins(%x, %y : memref<4xf32>, memref<4xf32>) outs(%out : memref<4xf32>)
  return
}
func.func private @exp(%x: memref<4xf32>, %out: memref<4xf32>) {
  linalg.exp ins(%x : memref<4xf32>) outs(%out : memref<4xf32>)
  return
}
// Not element-wise: out[i] = x[3 - i] (reversal) -- never in place.
func.func private @reverse(%x: memref<4xf32>, %out: memref<4xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0) -> (3 - d0)>, affine_map<(d0) -> (d0)>],
                  iterator_types = ["parallel"]}
      ins(%x : memref<4xf32>) outs(%out : memref<4xf32>) {
  ^bb0(%a: f32, %b: f32):
    linalg.yield %a : f32
  }
  return
}
// Two results: a sum (element-wise on x) and a flag of another type.
func.func private @add_flag(%x: memref<4xf32>, %y: memref<4xf32>, %sum: memref<4xf32>, %flag: memref<4xi1>) {
  linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>,
                                   affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>],
                  iterator_types = ["parallel"]}
      ins(%x, %y : memref<4xf32>, memref<4xf32>) outs(%sum, %flag : memref<4xf32>, memref<4xi1>) {
  ^bb0(%a: f32, %b: f32, %s: f32, %f: i1):
    %r = arith.addf %a, %b : f32
    %c = arith.cmpf ogt, %r, %a : f32
    linalg.yield %r, %c : f32, i1
  }
  return
}
// A declaration resolved at JIT time: the author promises the pair and names
// the in-place symbol.
func.func private @scale(memref<4xf32>, memref<4xf32>)
    attributes {tdf.inplace_ok = [[0, 0]], tdf.inplace_variant = @scale_ip, tdf.elementwise}
// A declaration without the opt-in: never in place.
func.func private @mystery(memref<4xf32>, memref<4xf32>)
func.func private @keep(memref<4xf32>) -> memref<4xf32>
func.func private @make() -> memref<4xf32>

// CHECK-DAG: func.func private @addone_inplace(%{{.*}}: memref<4xf32>) attributes {tdf.elementwise, tdf.inplace_indices = array<i64: 0>, tdf.inplace_of = @addone}
// CHECK-DAG: linalg.add ins(%[[A:.*]], %[[A]] : memref<4xf32>, memref<4xf32>) outs(%[[A]] : memref<4xf32>)
// CHECK-DAG: func.func private @add_inplace(%{{.*}}: memref<4xf32>, %{{.*}}: memref<4xf32>) attributes {tdf.elementwise, tdf.inplace_indices = array<i64: 0>, tdf.inplace_of = @add}
// CHECK-DAG: func.func private @add_flag_inplace_0_n(%{{.*}}: memref<4xf32>, %{{.*}}: memref<4xf32>, %{{.*}}: memref<4xi1>) attributes {tdf.elementwise, tdf.inplace_indices = array<i64: 0, -1>, tdf.inplace_of = @add_flag}
// CHECK-DAG: func.func private @scale_ip(memref<4xf32>) attributes {tdf.elementwise}
// CHECK-NOT: @reverse_inplace
// CHECK-NOT: @mystery_inplace

// A donated argument updated in place.
// CHECK-LABEL: func.func @func(
// CHECK-SAME: %[[X:.*]]: tensor<4xf32> {tdf.donate}
// CHECK: %[[X1:.*]] = tdf.call_inplace @addone_inplace(%[[X]]) inplace [0]
// CHECK: return %[[X1]]
// BUF-LABEL: func.func @func(
// BUF-SAME:  %[[X:[^:]+]]:
// BUF-NOT: memref.alloc
// BUF-NOT: memref.copy
// BUF: call @addone_inplace(%[[X]])
// BUF-NOT: memref.copy
// BUF: return %[[X]]
func.func @func(%x: tensor<4xf32> {tdf.donate}) -> tensor<4xf32> {
  %x1 = tdf.call @addone(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %x1 : tensor<4xf32>
}

// %x is read again by add(%x, %x), so addone may
// not overwrite it; add(%x, %x) is its last use and runs in place.
// CHECK-LABEL: func.func @func_invalid(
// CHECK-SAME: %[[X:.*]]: tensor<4xf32> {tdf.donate}
// CHECK: tdf.call @addone(%[[X]])
// CHECK: %[[GV:.*]] = tdf.call_inplace @add_inplace(%[[X]], %[[X]]) inplace [0]
// CHECK: return %{{.*}}, %[[GV]]
// BUF-LABEL: func.func @func_invalid(
// BUF-SAME:  %[[X:[^:]+]]:
// BUF-NOT: memref.copy
// BUF: call @add_inplace(%[[X]], %[[X]])
// BUF-NOT: memref.copy
// BUF: return %{{.*}}, %[[X]]
func.func @func_invalid(%x: tensor<4xf32> {tdf.donate}) -> (tensor<4xf32>, tensor<4xf32>) {
  %x1 = tdf.call @addone(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %gv = tdf.call @add(%x, %x) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %x1, %gv : tensor<4xf32>, tensor<4xf32>
}

// exp(%x) reads %x before addone may overwrite it.
// CHECK-LABEL: func.func @func0(
// CHECK: %[[Y:.*]] = tdf.call @exp(%[[X:[^)]*]])
// CHECK: %[[X1:.*]] = tdf.call_inplace @addone_inplace(%[[X]]) inplace [0]
// BUF-LABEL: func.func @func0(
// BUF-SAME:  %[[X:[^:]+]]:
// BUF: %[[ALLOC:.*]] = memref.alloc
// BUF: call @exp(%[[X]], %[[ALLOC]])
// BUF-NOT: memref.copy
// BUF: call @addone_inplace(%[[X]])
// BUF-NOT: memref.copy
// BUF: return
func.func @func0(%x: tensor<4xf32> {tdf.donate}) -> (tensor<4xf32>, tensor<4xf32>) {
  %y = tdf.call @exp(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %x1 = tdf.call @addone(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %y, %x1 : tensor<4xf32>, tensor<4xf32>
}

// A chain of calls runs in one buffer; the second input of add is a
// non-donated argument and stays read-only.
// CHECK-LABEL: func.func @chain_of_calls(
// CHECK-SAME: %[[X:[^:]*]]: tensor<4xf32> {tdf.donate}, %[[W:[^:]*]]: tensor<4xf32>
// CHECK: %[[A:.*]] = tdf.call_inplace @addone_inplace(%[[X]]) inplace [0]
// CHECK: %[[B:.*]] = tdf.call_inplace @exp_inplace(%[[A]]) inplace [0]
// CHECK: %[[C:.*]] = tdf.call_inplace @add_inplace(%[[B]], %[[W]]) inplace [0]
// CHECK: %[[D:.*]] = tdf.call_inplace @add_inplace(%[[C]], %[[C]]) inplace [0]
// CHECK: return %[[D]]
// BUF-LABEL: func.func @chain_of_calls(
// BUF-SAME:  %[[X:[^:]+]]:
// BUF-NOT: memref.alloc
// BUF-NOT: memref.copy
// BUF: return %[[X]]
func.func @chain_of_calls(%x: tensor<4xf32> {tdf.donate}, %w: tensor<4xf32>) -> tensor<4xf32> {
  %a = tdf.call @addone(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %b = tdf.call @exp(%a) : (tensor<4xf32>) -> tensor<4xf32>
  %c = tdf.call @add(%b, %w) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %d = tdf.call @add(%c, %c) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %d : tensor<4xf32>
}

// A fresh intermediate (not an argument) is owned: in place without donation.
// CHECK-LABEL: func.func @inplace_fresh_intermediate(
// CHECK: %[[A:.*]] = tdf.call @exp(
// CHECK: tdf.call_inplace @addone_inplace(%[[A]]) inplace [0]
func.func @inplace_fresh_intermediate(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = tdf.call @exp(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %b = tdf.call @addone(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %b : tensor<4xf32>
}

// Parameters are never overwritten unless donated.
// CHECK-LABEL: func.func @negative_param_not_donated(
// CHECK-NOT: tdf.call_inplace
// CHECK: tdf.call @addone(
// BUF-LABEL: func.func @negative_param_not_donated(
// BUF-SAME:  %[[X:[^:]+]]:
// BUF: memref.alloc
// BUF: call @addone(%[[X]],
func.func @negative_param_not_donated(%x: tensor<4xf32>) -> tensor<4xf32> {
  %x1 = tdf.call @addone(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %x1 : tensor<4xf32>
}

// Constants are never overwritten.
// CHECK-LABEL: func.func @negative_constant(
// CHECK-NOT: tdf.call_inplace
// CHECK: tdf.call @addone(
func.func @negative_constant() -> tensor<4xf32> {
  %c = arith.constant dense<1.0> : tensor<4xf32>
  %x1 = tdf.call @addone(%c) : (tensor<4xf32>) -> tensor<4xf32>
  return %x1 : tensor<4xf32>
}

// The operand is returned as well: still live.
// CHECK-LABEL: func.func @negative_operand_returned(
// CHECK-NOT: tdf.call_inplace
func.func @negative_operand_returned(%x: tensor<4xf32> {tdf.donate}) -> (tensor<4xf32>, tensor<4xf32>) {
  %x1 = tdf.call @addone(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %x, %x1 : tensor<4xf32>, tensor<4xf32>
}

// A view of the operand is read later: the storage is still live.
// CHECK-LABEL: func.func @negative_alias_through_view(
// CHECK-NOT: tdf.call_inplace
func.func @negative_alias_through_view(%x: tensor<4xf32> {tdf.donate}) -> (tensor<4xf32>, tensor<2x2xf32>) {
  %v = tensor.expand_shape %x [[0, 1]] output_shape [2, 2] : tensor<4xf32> into tensor<2x2xf32>
  %x1 = tdf.call @addone(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %x1, %v : tensor<4xf32>, tensor<2x2xf32>
}

// Through a view whose source is dead: in place.
// CHECK-LABEL: func.func @inplace_through_view(
// CHECK: %[[V:.*]] = tensor.collapse_shape
// CHECK: tdf.call_inplace @addone_inplace(%[[V]]) inplace [0]
// BUF-LABEL: func.func @inplace_through_view(
// BUF-NOT: memref.copy
// BUF: return
func.func @inplace_through_view(%x: tensor<2x2xf32> {tdf.donate}) -> tensor<4xf32> {
  %v = tensor.collapse_shape %x [[0, 1]] : tensor<2x2xf32> into tensor<4xf32>
  %x1 = tdf.call @addone(%v) : (tensor<4xf32>) -> tensor<4xf32>
  return %x1 : tensor<4xf32>
}

// An operand that reached an opaque call escaped for good.
// CHECK-LABEL: func.func @negative_opaque_escape(
// CHECK-NOT: tdf.call_inplace
func.func @negative_opaque_escape(%x: tensor<4xf32> {tdf.donate}) -> (tensor<4xf32>, tensor<4xf32>) {
  %k = tdf.call_opaque @keep(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %x1 = tdf.call @addone(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %k, %x1 : tensor<4xf32>, tensor<4xf32>
}

// An opaque call's result may alias anything that escaped.
// CHECK-LABEL: func.func @negative_opaque_result(
// CHECK-NOT: tdf.call_inplace
func.func @negative_opaque_result() -> tensor<4xf32> {
  %o = tdf.call_opaque @make() : () -> tensor<4xf32>
  %x1 = tdf.call @addone(%o) : (tensor<4xf32>) -> tensor<4xf32>
  return %x1 : tensor<4xf32>
}

// tdf.assume_unaliased is the escape hatch.
// CHECK-LABEL: func.func @inplace_assume_unaliased(
// CHECK: %[[U:.*]] = tdf.assume_unaliased
// CHECK: tdf.call_inplace @addone_inplace(%[[U]]) inplace [0]
func.func @inplace_assume_unaliased() -> tensor<4xf32> {
  %o = tdf.call_opaque @make() : () -> tensor<4xf32>
  %u = tdf.assume_unaliased %o : tensor<4xf32>
  %x1 = tdf.call @addone(%u) : (tensor<4xf32>) -> tensor<4xf32>
  return %x1 : tensor<4xf32>
}

// Not element-wise (nor marked): never in place of its input. (Donation
// pairing still computes the result, @mystery's output parameter, in %x,
// which nothing reads after @reverse.)
// CHECK-LABEL: func.func @negative_kernel_not_elementwise(
// CHECK-SAME:  %[[X:[^:]+]]:
// CHECK-NOT: tdf.call_inplace
// CHECK: %[[A:.*]] = tdf.call @reverse(%[[X]])
// CHECK-NEXT: tdf.call_inplace @mystery(%[[A]], %[[X]]) inplace [1]
func.func @negative_kernel_not_elementwise(%x: tensor<4xf32> {tdf.donate}) -> tensor<4xf32> {
  %a = tdf.call @reverse(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %b = tdf.call @mystery(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %b : tensor<4xf32>
}

// A declaration with tdf.inplace_ok + tdf.inplace_variant.
// CHECK-LABEL: func.func @inplace_declared_kernel(
// CHECK: tdf.call_inplace @scale_ip(%{{.*}}) inplace [0]
// BUF-LABEL: func.func @inplace_declared_kernel(
// BUF-SAME:  %[[X:[^:]+]]:
// BUF-NOT: memref.copy
// BUF: call @scale_ip(%[[X]])
func.func @inplace_declared_kernel(%x: tensor<4xf32> {tdf.donate}) -> tensor<4xf32> {
  %a = tdf.call @scale(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %a : tensor<4xf32>
}

// Mixed results: the sum reuses %x, the i1 flag gets fresh storage.
// CHECK-LABEL: func.func @mixed_results(
// CHECK: %{{.*}}:2 = tdf.call_inplace @add_flag_inplace_0_n(%{{.*}}, %{{.*}}) inplace [0, -1]
// BUF-LABEL: func.func @mixed_results(
// BUF-SAME:  %[[X:[^:]+]]: {{[^%]*}}%[[Y:[^:]+]]:
// BUF: %[[F:.*]] = memref.alloc() {{.*}} : memref<4xi1>
// BUF-NOT: memref.copy
// BUF: call @add_flag_inplace_0_n(%[[X]], %[[Y]], %[[F]])
func.func @mixed_results(%x: tensor<4xf32> {tdf.donate}, %y: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xi1>) {
  %s, %f = tdf.call @add_flag(%x, %y) : (tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xi1>)
  return %s, %f : tensor<4xf32>, tensor<4xi1>
}

// Element-wise linalg ops on tensors: the dead input becomes the init.
// CHECK-LABEL: func.func @linalg_elementwise_chain(
// CHECK-SAME: %[[X:[^:]*]]: tensor<4xf32> {tdf.donate}, %[[Y:[^:]*]]: tensor<4xf32>
// CHECK-NOT: tensor.empty
// CHECK: %[[A:.*]] = linalg.exp ins(%[[X]] : tensor<4xf32>) outs(%[[X]] : tensor<4xf32>)
// CHECK: %[[B:.*]] = linalg.add ins(%[[A]], %[[Y]] : tensor<4xf32>, tensor<4xf32>) outs(%[[A]] : tensor<4xf32>)
// CHECK: linalg.map { math.sqrt } ins(%[[B]] : tensor<4xf32>) outs(%[[B]] : tensor<4xf32>)
// BUF-LABEL: func.func @linalg_elementwise_chain(
// BUF-SAME:  %[[X:[^:]+]]:
// BUF-NOT: memref.alloc
// BUF-NOT: memref.copy
// BUF: return %[[X]]
func.func @linalg_elementwise_chain(%x: tensor<4xf32> {tdf.donate}, %y: tensor<4xf32>) -> tensor<4xf32> {
  %e = tensor.empty() : tensor<4xf32>
  %a = linalg.exp ins(%x : tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %e2 = tensor.empty() : tensor<4xf32>
  %b = linalg.add ins(%a, %y : tensor<4xf32>, tensor<4xf32>) outs(%e2 : tensor<4xf32>) -> tensor<4xf32>
  %e3 = tensor.empty() : tensor<4xf32>
  %c = linalg.map { math.sqrt } ins(%b : tensor<4xf32>) outs(%e3 : tensor<4xf32>)
  return %c : tensor<4xf32>
}

// add(z, z) on linalg: both reads are element-wise.
// CHECK-LABEL: func.func @linalg_repeated_operand(
// CHECK: %[[Z:.*]] = linalg.exp
// CHECK: linalg.add ins(%[[Z]], %[[Z]] : tensor<4xf32>, tensor<4xf32>) outs(%[[Z]] : tensor<4xf32>)
// BUF-LABEL: func.func @linalg_repeated_operand(
// BUF-NOT: memref.copy
// BUF: return
func.func @linalg_repeated_operand(%x: tensor<4xf32>) -> tensor<4xf32> {
  %e = tensor.empty() : tensor<4xf32>
  %z = linalg.exp ins(%x : tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %e2 = tensor.empty() : tensor<4xf32>
  %r = linalg.add ins(%z, %z : tensor<4xf32>, tensor<4xf32>) outs(%e2 : tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// A broadcast (or permuted) input is never reused, even when dead.
// CHECK-LABEL: func.func @negative_linalg_broadcast(
// CHECK: %[[E:.*]] = tensor.empty() : tensor<4x4xf32>
// CHECK: linalg.generic {{.*}} outs(%[[E]] : tensor<4x4xf32>)
func.func @negative_linalg_broadcast(%x: tensor<4x4xf32> {tdf.donate}) -> tensor<4x4xf32> {
  %e = tensor.empty() : tensor<4x4xf32>
  %t = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d1, d0)>, affine_map<(d0, d1) -> (d0, d1)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%a: f32, %b: f32):
    linalg.yield %a : f32
  } -> tensor<4x4xf32>
  return %t : tensor<4x4xf32>
}

// A concat of computed parts (log of each part): each part is
// computed straight into its slice of the final buffer.
// CHECK-LABEL: func.func @concat_update(
// CHECK: %[[D:.*]] = tensor.empty() : tensor<3x8xf32>
// CHECK: %[[S0:.*]] = tensor.extract_slice %[[D]][0, 0] [1, 8] [1, 1]
// CHECK: %[[Z0:.*]] = linalg.log ins(%{{.*}} : tensor<1x8xf32>) outs(%[[S0]] : tensor<1x8xf32>)
// CHECK: %[[D1:.*]] = tensor.insert_slice %[[Z0]] into %[[D]][0, 0] [1, 8] [1, 1]
// CHECK: %[[S1:.*]] = tensor.extract_slice %[[D1]][1, 0] [1, 8] [1, 1]
// CHECK: %[[Z1:.*]] = linalg.log ins(%{{.*}} : tensor<1x8xf32>) outs(%[[S1]] : tensor<1x8xf32>)
// CHECK: %[[D2:.*]] = tensor.insert_slice %[[Z1]] into %[[D1]][1, 0] [1, 8] [1, 1]
// CHECK: %[[S2:.*]] = tensor.extract_slice %[[D2]][2, 0] [1, 8] [1, 1]
// CHECK: %[[Z2:.*]] = linalg.log ins(%{{.*}} : tensor<1x8xf32>) outs(%[[S2]] : tensor<1x8xf32>)
// CHECK: %[[D3:.*]] = tensor.insert_slice %[[Z2]] into %[[D2]][2, 0] [1, 8] [1, 1]
// CHECK-NOT: tensor.concat
// CHECK: return %[[D3]]
// BUF-LABEL: func.func @concat_update(
// BUF: %[[ALLOC:.*]] = memref.alloc() {{.*}} : memref<3x8xf32>
// BUF-NOT: memref.alloc
// BUF-NOT: memref.copy
// BUF: return %[[ALLOC]]
func.func @concat_update(%y0: tensor<1x8xf32>, %y1: tensor<1x8xf32>, %y2: tensor<1x8xf32>) -> tensor<3x8xf32> {
  %e0 = tensor.empty() : tensor<1x8xf32>
  %z0 = linalg.log ins(%y0 : tensor<1x8xf32>) outs(%e0 : tensor<1x8xf32>) -> tensor<1x8xf32>
  %e1 = tensor.empty() : tensor<1x8xf32>
  %z1 = linalg.log ins(%y1 : tensor<1x8xf32>) outs(%e1 : tensor<1x8xf32>) -> tensor<1x8xf32>
  %e2 = tensor.empty() : tensor<1x8xf32>
  %z2 = linalg.log ins(%y2 : tensor<1x8xf32>) outs(%e2 : tensor<1x8xf32>) -> tensor<1x8xf32>
  %r = tensor.concat dim(0) %z0, %z1, %z2 : (tensor<1x8xf32>, tensor<1x8xf32>, tensor<1x8xf32>) -> tensor<3x8xf32>
  return %r : tensor<3x8xf32>
}

// A part that is also used elsewhere is not computed into the concat.
// CHECK-LABEL: func.func @negative_concat_part_used_twice(
// CHECK: tensor.concat
func.func @negative_concat_part_used_twice(%y0: tensor<1x8xf32>, %y1: tensor<1x8xf32>) -> (tensor<2x8xf32>, tensor<1x8xf32>) {
  %e0 = tensor.empty() : tensor<1x8xf32>
  %z0 = linalg.log ins(%y0 : tensor<1x8xf32>) outs(%e0 : tensor<1x8xf32>) -> tensor<1x8xf32>
  %r = tensor.concat dim(0) %z0, %y1 : (tensor<1x8xf32>, tensor<1x8xf32>) -> tensor<2x8xf32>
  return %r, %z0 : tensor<2x8xf32>, tensor<1x8xf32>
}

// Decode loop over a donated KV cache: one buffer for the whole loop, the
// only copy is the row written each step; a call inside the loop on the
// loop-carried value runs in place too.
// CHECK-LABEL: func.func @decode_loop(
// CHECK: scf.for
// CHECK: tensor.insert_slice
// BUF-LABEL: func.func @decode_loop(
// BUF-SAME:  %[[CACHE:[^:]+]]:
// BUF-NOT: memref.alloc
// BUF: scf.for
// BUF-NOT: memref.alloc
// BUF: memref.copy %{{.*}}, %{{.*}} : memref<4x1x8xf32, {{.*}}> to memref<4x1x8xf32, {{.*}}>
// BUF-NOT: memref.copy
// BUF-NOT: memref.alloc
// BUF: return %[[CACHE]]
func.func @decode_loop(%cache: tensor<4x16x8xf32> {tdf.donate}, %rows: tensor<16x4x1x8xf32>) -> tensor<4x16x8xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %r = scf.for %i = %c0 to %c16 step %c1 iter_args(%kv = %cache) -> tensor<4x16x8xf32> {
    %row = tensor.extract_slice %rows[%i, 0, 0, 0] [1, 4, 1, 8] [1, 1, 1, 1] : tensor<16x4x1x8xf32> to tensor<4x1x8xf32>
    %next = tensor.insert_slice %row into %kv[0, %i, 0] [4, 1, 8] [1, 1, 1] : tensor<4x1x8xf32> into tensor<4x16x8xf32>
    scf.yield %next : tensor<4x16x8xf32>
  }
  return %r : tensor<4x16x8xf32>
}

// The loop-carried value itself updated by a call each iteration.
// CHECK-LABEL: func.func @loop_carried_call(
// CHECK: scf.for {{.*}} iter_args(%[[ACC:.*]] = %{{.*}})
// CHECK: tdf.call_inplace @addone_inplace(%[[ACC]]) inplace [0]
// BUF-LABEL: func.func @loop_carried_call(
// BUF-SAME:  %[[ACC0:[^:]+]]:
// BUF-NOT: memref.alloc
// BUF-NOT: memref.copy
// BUF: return %[[ACC0]]
func.func @loop_carried_call(%acc0: tensor<4xf32> {tdf.donate}) -> tensor<4xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %r = scf.for %i = %c0 to %c8 step %c1 iter_args(%acc = %acc0) -> tensor<4xf32> {
    %n = tdf.call @addone(%acc) : (tensor<4xf32>) -> tensor<4xf32>
    scf.yield %n : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}

// A value defined outside a loop and used inside it is live for the whole
// loop: %x is never overwritten, the loop-carried %acc is.
// CHECK-LABEL: func.func @negative_loop_invariant(
// CHECK-SAME: %[[X:[^:]*]]: tensor<4xf32> {tdf.donate}
// CHECK: scf.for {{.*}} iter_args(%[[ACC:.*]] = %{{.*}})
// CHECK: tdf.call_inplace @add_inplace_1(%[[X]], %[[ACC]]) inplace [1]
// BUF-LABEL: func.func @negative_loop_invariant(
// BUF-SAME:  %[[X:[^:]+]]: {{[^%]*}}%[[ACC0:[^:]+]]:
// BUF-NOT: memref.copy
// BUF: call @add_inplace_1(%[[X]], %[[ACC0]])
// BUF-NOT: memref.copy
// BUF: return %[[ACC0]]
func.func @negative_loop_invariant(%x: tensor<4xf32> {tdf.donate}, %acc0: tensor<4xf32> {tdf.donate}) -> tensor<4xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %r = scf.for %i = %c0 to %c8 step %c1 iter_args(%acc = %acc0) -> tensor<4xf32> {
    %n = tdf.call @add(%x, %acc) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    scf.yield %n : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}
