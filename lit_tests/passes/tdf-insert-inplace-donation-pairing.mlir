// RUN: tdf-opt %s --tdf-insert-inplace | FileCheck %s
// RUN: tdf-opt %s --tdf-insert-inplace --tdf-verify-inplace=strict | FileCheck %s
// RUN: tdf-opt %s --tdf-insert-inplace --tdf-bufferize | FileCheck %s --check-prefix=BUF

// Donation pairing (step 6 of tdf-insert-inplace): the result JAX pairs with
// a donated argument (per shape and dtype, the k-th result takes the k-th
// donated argument) is computed in that argument's buffer when its old
// contents are dead there. The invariant holds (second RUN line), and
// bufferized, the paired results are the arguments (tdf.returned_args).

#id = affine_map<(d0) -> (d0)>

func.func private @scale(%x: memref<8xf32>, %out: memref<8xf32>) {
  %c = arith.constant 3.0 : f32
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%x : memref<8xf32>) outs(%out : memref<8xf32>) {
  ^bb0(%a: f32, %b: f32):
    %m = arith.mulf %a, %c : f32
    linalg.yield %m : f32
  }
  return
}

func.func private @reverse(%x: memref<8xf32>, %out: memref<8xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0) -> (7 - d0)>, #id],
                  iterator_types = ["parallel"]}
      ins(%x : memref<8xf32>) outs(%out : memref<8xf32>) {
  ^bb0(%a: f32, %b: f32):
    linalg.yield %a : f32
  }
  return
}

func.func private @keep(memref<8xf32>) -> memref<8xf32>

// Adam's moments: step 4 gives the nu update the dead temporary %g (its
// first dead input); the pairing moves it into %nu.
// CHECK-LABEL: func.func @adam_moments(
// CHECK-SAME:  %{{[^:]+}}: {{[^%]*}}%[[MU:[^:]+]]: {{[^%]*}}%[[NU:[^:]+]]:
// CHECK: %[[G:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<8xf32>)
// CHECK: linalg.generic {{.*}} ins(%[[G]], %[[MU]] : {{.*}}) outs(%[[MU]] : tensor<8xf32>)
// CHECK: linalg.generic {{.*}} ins(%[[G]], %[[NU]] : {{.*}}) outs(%[[NU]] : tensor<8xf32>)
// BUF-LABEL: func.func @adam_moments(
// BUF-SAME:  tdf.returned_args = array<i64: 1, 2>
func.func @adam_moments(%x: tensor<8xf32>, %mu: tensor<8xf32> {tdf.donate},
                        %nu: tensor<8xf32> {tdf.donate}) -> (tensor<8xf32>, tensor<8xf32>) {
  %two = arith.constant 2.0 : f32
  %b1 = arith.constant 0.9 : f32
  %b2 = arith.constant 0.999 : f32
  %e0 = tensor.empty() : tensor<8xf32>
  %g = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%x : tensor<8xf32>) outs(%e0 : tensor<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.mulf %a, %two : f32
    linalg.yield %m : f32
  } -> tensor<8xf32>
  %e1 = tensor.empty() : tensor<8xf32>
  %m1 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
      ins(%g, %mu : tensor<8xf32>, tensor<8xf32>) outs(%e1 : tensor<8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.mulf %b, %b1 : f32
    %t = arith.addf %a, %s : f32
    linalg.yield %t : f32
  } -> tensor<8xf32>
  %e2 = tensor.empty() : tensor<8xf32>
  %n1 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
      ins(%g, %nu : tensor<8xf32>, tensor<8xf32>) outs(%e2 : tensor<8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %sq = arith.mulf %a, %a : f32
    %s = arith.mulf %b, %b2 : f32
    %t = arith.addf %sq, %s : f32
    linalg.yield %t : f32
  } -> tensor<8xf32>
  return %m1, %n1 : tensor<8xf32>, tensor<8xf32>
}

// A rank-0 counter computed as a scalar is stored back into its argument.
// CHECK-LABEL: func.func @rank0_counter(
// CHECK-SAME:  %[[C:[^:]+]]: tensor<i32>
// CHECK: %[[V:.*]] = arith.addi
// CHECK-NOT: tensor.from_elements
// CHECK: %[[N:.*]] = tensor.insert %[[V]] into %[[C]][] : tensor<i32>
// CHECK-NEXT: return %[[N]]
// BUF-LABEL: func.func @rank0_counter(
// BUF-SAME:  tdf.returned_args = array<i64: 0>
// BUF: memref.store
func.func @rank0_counter(%c: tensor<i32> {tdf.donate}) -> tensor<i32> {
  %one = arith.constant 1 : i32
  %v = tensor.extract %c[] : tensor<i32>
  %w = arith.addi %v, %one : i32
  %r = tensor.from_elements %w : tensor<i32>
  return %r : tensor<i32>
}

// A kernel's result written straight into the donated argument: the
// argument is the kernel's output parameter.
// CHECK-LABEL: func.func @call_result(
// CHECK-SAME:  %[[X:[^:]+]]: {{[^%]*}}%[[Y:[^:]+]]:
// CHECK: tdf.call_inplace @scale(%[[Y]], %[[X]]) inplace [1]
// BUF-LABEL: func.func @call_result(
// BUF-SAME:  tdf.returned_args = array<i64: 0>
// BUF-NOT: memref.alloc
// BUF: call @scale(%{{.*}}, %{{.*}})
func.func @call_result(%x: tensor<8xf32> {tdf.donate}, %y: tensor<8xf32>) -> tensor<8xf32> {
  %a = tdf.call @scale(%y) : (tensor<8xf32>) -> tensor<8xf32>
  return %a : tensor<8xf32>
}

// A reduction: its init (a fill of a tensor.empty) becomes the argument.
// CHECK-LABEL: func.func @reduction(
// CHECK-SAME:  %[[ACC:[^:]+]]: tensor<4xf32>
// CHECK: %[[F:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[ACC]] : tensor<4xf32>)
// CHECK: linalg.reduce ins(%{{.*}} : tensor<4x8xf32>) outs(%[[F]] : tensor<4xf32>)
func.func @reduction(%acc: tensor<4xf32> {tdf.donate}, %m: tensor<4x8xf32>) -> tensor<4xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %r = linalg.reduce ins(%m : tensor<4x8xf32>) outs(%f : tensor<4xf32>) dimensions = [1]
    (%in: f32, %init: f32) {
      %s = arith.addf %in, %init : f32
      linalg.yield %s : f32
    }
  return %r : tensor<4xf32>
}

// Parts inserted into a tensor.empty: the empty becomes the argument.
// CHECK-LABEL: func.func @assembled(
// CHECK-SAME:  %[[D:[^:]+]]: tensor<8xf32> {{[^%]*}}%[[P:[^:]+]]: {{[^%]*}}%[[Q:[^:]+]]:
// CHECK-NOT: tensor.empty
// CHECK: %[[C0:.*]] = tensor.insert_slice %[[P]] into %[[D]][0] [4] [1]
// CHECK: tensor.insert_slice %[[Q]] into %[[C0]][4] [4] [1]
func.func @assembled(%d: tensor<8xf32> {tdf.donate}, %p: tensor<4xf32>, %q: tensor<4xf32>) -> tensor<8xf32> {
  %e = tensor.empty() : tensor<8xf32>
  %c0 = tensor.insert_slice %p into %e[0] [4] [1] : tensor<4xf32> into tensor<8xf32>
  %c1 = tensor.insert_slice %q into %c0[4] [4] [1] : tensor<4xf32> into tensor<8xf32>
  return %c1 : tensor<8xf32>
}

// Both branches of an scf.if: in each, the op computing the yielded value
// takes the argument -- in the first, the last of the two readers of %x
// (not the dead temporary %a that step 4 gave it).
// CHECK-LABEL: func.func @branches(
// CHECK-SAME:  %[[X:[^:]+]]: tensor<8xf32>
// CHECK: scf.if
// CHECK: %[[A:.*]] = linalg.exp ins(%[[X]] : tensor<8xf32>)
// CHECK: linalg.add ins(%[[A]], %[[X]] : tensor<8xf32>, tensor<8xf32>) outs(%[[X]] : tensor<8xf32>)
// CHECK: } else {
// CHECK: linalg.mul ins(%[[X]], %{{.*}} : tensor<8xf32>, tensor<8xf32>) outs(%[[X]] : tensor<8xf32>)
// BUF-LABEL: func.func @branches(
// BUF-SAME:  tdf.returned_args = array<i64: 0>
func.func @branches(%x: tensor<8xf32> {tdf.donate}, %y: tensor<8xf32>, %p: i1) -> tensor<8xf32> {
  %r = scf.if %p -> tensor<8xf32> {
    %e = tensor.empty() : tensor<8xf32>
    %a = linalg.exp ins(%x : tensor<8xf32>) outs(%e : tensor<8xf32>) -> tensor<8xf32>
    %e2 = tensor.empty() : tensor<8xf32>
    %b = linalg.add ins(%a, %x : tensor<8xf32>, tensor<8xf32>) outs(%e2 : tensor<8xf32>) -> tensor<8xf32>
    scf.yield %b : tensor<8xf32>
  } else {
    %e3 = tensor.empty() : tensor<8xf32>
    %c = linalg.mul ins(%x, %y : tensor<8xf32>, tensor<8xf32>) outs(%e3 : tensor<8xf32>) -> tensor<8xf32>
    scf.yield %c : tensor<8xf32>
  }
  return %r : tensor<8xf32>
}

// The old %a is read after %a * 2 is computed, but nothing needs %a * 2 in
// between: the update moves after that read (as XLA schedules it).
// CHECK-LABEL: func.func @scheduled_after_the_read(
// CHECK-SAME:  %[[A:[^:]+]]: {{[^%]*}}%[[B:[^:]+]]:
// CHECK: %[[S:.*]] = linalg.add ins(%[[A]], %[[B]] : {{.*}}) outs(%[[B]] : tensor<8xf32>)
// CHECK: %[[D:.*]] = linalg.add ins(%[[A]], %[[A]] : {{.*}}) outs(%[[A]] : tensor<8xf32>)
// CHECK: return %[[D]], %[[S]]
// BUF-LABEL: func.func @scheduled_after_the_read(
// BUF-SAME:  tdf.returned_args = array<i64: 0, 1>
func.func @scheduled_after_the_read(%a: tensor<8xf32> {tdf.donate}, %b: tensor<8xf32> {tdf.donate})
    -> (tensor<8xf32>, tensor<8xf32>) {
  %e = tensor.empty() : tensor<8xf32>
  %d = linalg.add ins(%a, %a : tensor<8xf32>, tensor<8xf32>) outs(%e : tensor<8xf32>) -> tensor<8xf32>
  %e2 = tensor.empty() : tensor<8xf32>
  %s = linalg.add ins(%a, %b : tensor<8xf32>, tensor<8xf32>) outs(%e2 : tensor<8xf32>) -> tensor<8xf32>
  return %d, %s : tensor<8xf32>, tensor<8xf32>
}

// Two donated arguments of one type and one result: JAX pairs the first.
// CHECK-LABEL: func.func @first_of_two_donated(
// CHECK-SAME:  %[[A:[^:]+]]: {{[^%]*}}%[[B:[^:]+]]:
// CHECK: linalg.mul ins(%[[B]], %[[A]] : {{.*}}) outs(%[[A]] : tensor<8xf32>)
func.func @first_of_two_donated(%a: tensor<8xf32> {tdf.donate}, %b: tensor<8xf32> {tdf.donate}) -> tensor<8xf32> {
  %e = tensor.empty() : tensor<8xf32>
  %r = linalg.mul ins(%b, %a : tensor<8xf32>, tensor<8xf32>) outs(%e : tensor<8xf32>) -> tensor<8xf32>
  return %r : tensor<8xf32>
}

// The explicit pairs (tdf.jax.jit sets them): %b is paired, not %a.
// CHECK-LABEL: func.func @explicit_pairs(
// CHECK-SAME:  %[[A:[^:]+]]: {{[^%]*}}%[[B:[^:]+]]:
// CHECK: linalg.mul ins(%[[A]], %[[B]] : {{.*}}) outs(%[[B]] : tensor<8xf32>)
func.func @explicit_pairs(%a: tensor<8xf32> {tdf.donate}, %b: tensor<8xf32> {tdf.donate}) -> tensor<8xf32>
    attributes {tdf.donation_pairs = array<i64: 1>} {
  %e = tensor.empty() : tensor<8xf32>
  %r = linalg.mul ins(%a, %b : tensor<8xf32>, tensor<8xf32>) outs(%e : tensor<8xf32>) -> tensor<8xf32>
  return %r : tensor<8xf32>
}

// ------------------------------------------------------------- negatives

// The paired result is read together with the old value afterwards: the
// update cannot move after that read. It keeps a fresh buffer (and the later
// op, the last reader, takes %x instead).
// CHECK-LABEL: func.func @negative_read_after_by_a_dependent(
// CHECK-SAME:  %[[X:[^:]+]]: tensor<8xf32>
// CHECK: %[[E:.*]] = tensor.empty
// CHECK: %[[N:.*]] = linalg.add ins(%[[X]], %[[X]] : {{.*}}) outs(%[[E]] : tensor<8xf32>)
// CHECK: linalg.mul ins(%[[N]], %[[X]] : {{.*}}) outs(%[[X]] : tensor<8xf32>)
func.func @negative_read_after_by_a_dependent(%x: tensor<8xf32> {tdf.donate}) -> (tensor<8xf32>, tensor<8xf32>) {
  %e = tensor.empty() : tensor<8xf32>
  %n = linalg.add ins(%x, %x : tensor<8xf32>, tensor<8xf32>) outs(%e : tensor<8xf32>) -> tensor<8xf32>
  %e2 = tensor.empty() : tensor<8xf32>
  %o = linalg.mul ins(%n, %x : tensor<8xf32>, tensor<8xf32>) outs(%e2 : tensor<8xf32>) -> tensor<8xf32>
  return %n, %o : tensor<8xf32>, tensor<8xf32>
}

// Same shape, other element type: not paired.
// CHECK-LABEL: func.func @negative_other_dtype(
// CHECK: %[[E:.*]] = tensor.empty() : tensor<8xf32>
// CHECK: linalg.generic {{.*}} outs(%[[E]] : tensor<8xf32>)
func.func @negative_other_dtype(%c: tensor<8xi32> {tdf.donate}) -> tensor<8xf32> {
  %e = tensor.empty() : tensor<8xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%c : tensor<8xi32>) outs(%e : tensor<8xf32>) {
  ^bb0(%a: i32, %o: f32):
    %f = arith.sitofp %a : i32 to f32
    linalg.yield %f : f32
  } -> tensor<8xf32>
  return %r : tensor<8xf32>
}

// The argument reached an opaque call (it may be kept): never written.
// CHECK-LABEL: func.func @negative_escaped(
// CHECK: tdf.call @scale(
// CHECK-NOT: tdf.call_inplace
func.func @negative_escaped(%x: tensor<8xf32> {tdf.donate}, %y: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %k = tdf.call_opaque @keep(%x) : (tensor<8xf32>) -> tensor<8xf32>
  %a = tdf.call @scale(%y) : (tensor<8xf32>) -> tensor<8xf32>
  return %a, %k : tensor<8xf32>, tensor<8xf32>
}

// The cut would read the argument other than element by element (a
// permutation): computing in its buffer would overwrite what it still reads.
// CHECK-LABEL: func.func @negative_permuted_read(
// CHECK: %[[E:.*]] = tensor.empty
// CHECK: linalg.transpose ins(%{{.*}} : tensor<4x4xf32>) outs(%[[E]] : tensor<4x4xf32>)
func.func @negative_permuted_read(%x: tensor<4x4xf32> {tdf.donate}) -> tensor<4x4xf32> {
  %e = tensor.empty() : tensor<4x4xf32>
  %t = linalg.transpose ins(%x : tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) permutation = [1, 0]
  return %t : tensor<4x4xf32>
}

// A kernel that reads the argument (not element-wise): left alone.
// CHECK-LABEL: func.func @negative_call_reads_the_argument(
// CHECK: tdf.call @reverse(
// CHECK-NOT: tdf.call_inplace
func.func @negative_call_reads_the_argument(%x: tensor<8xf32> {tdf.donate}) -> tensor<8xf32> {
  %r = tdf.call @reverse(%x) : (tensor<8xf32>) -> tensor<8xf32>
  return %r : tensor<8xf32>
}

// The update is computed in a loop: each iteration reads the last one's.
// CHECK-LABEL: func.func @negative_loop(
// CHECK: %[[E:.*]] = tensor.empty
// CHECK: scf.for {{.*}} iter_args(%{{.*}} = %[[E]])
func.func @negative_loop(%x: tensor<8xf32> {tdf.donate}, %y: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %c1 = arith.constant 1 : index
  %e = tensor.empty() : tensor<8xf32>
  %r = scf.for %i = %c0 to %c2 step %c1 iter_args(%acc = %e) -> tensor<8xf32> {
    %n = linalg.add ins(%y, %x : tensor<8xf32>, tensor<8xf32>) outs(%acc : tensor<8xf32>) -> tensor<8xf32>
    scf.yield %n : tensor<8xf32>
  }
  return %r, %x : tensor<8xf32>, tensor<8xf32>
}

// The old counter is also returned: not stored into.
// CHECK-LABEL: func.func @negative_rank0_returned_twice(
// CHECK-NOT: tensor.insert
// CHECK: return
func.func @negative_rank0_returned_twice(%c: tensor<i32> {tdf.donate}) -> (tensor<i32>, tensor<i32>) {
  %one = arith.constant 1 : i32
  %v = tensor.extract %c[] : tensor<i32>
  %w = arith.addi %v, %one : i32
  %r = tensor.from_elements %w : tensor<i32>
  return %r, %c : tensor<i32>, tensor<i32>
}

// A bias's momentum (optax trace) after reshape propagation: the update
// runs on 1x8 views and its result is collapsed back. The cut takes the
// operand that is %t reshaped to the init's type, so the collapsed result
// is %t's buffer.
// CHECK-LABEL: func.func @reshaped_momentum(
// CHECK-SAME:  %[[T:[^:]+]]: tensor<8xf32> {tdf.donate}
// CHECK: %[[V:.*]] = tensor.expand_shape %[[T]]
// CHECK: %[[N:.*]] = linalg.generic {{.*}} ins(%{{.*}}, %[[V]] : {{.*}}) outs(%[[V]] : tensor<1x8xf32>)
// CHECK: %[[C:.*]] = tensor.collapse_shape %[[N]]
// CHECK: return %[[C]]
// BUF-LABEL: func.func @reshaped_momentum(
// BUF-SAME:  tdf.returned_args = array<i64: 0>
func.func @reshaped_momentum(%t: tensor<8xf32> {tdf.donate}, %x: tensor<4x8xf32>) -> tensor<8xf32> {
  %tv = tensor.expand_shape %t [[0, 1]] output_shape [1, 8] : tensor<8xf32> into tensor<1x8xf32>
  %zero = arith.constant 0.0 : f32
  %decay = arith.constant 0.9 : f32
  %e0 = tensor.empty() : tensor<1x8xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e0 : tensor<1x8xf32>) -> tensor<1x8xf32>
  %g = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d2, d1)>,
                                        affine_map<(d0, d1, d2) -> (d0, d1)>],
                       iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x : tensor<4x8xf32>) outs(%z : tensor<1x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %o, %a : f32
    linalg.yield %s : f32
  } -> tensor<1x8xf32>
  %e1 = tensor.empty() : tensor<1x8xf32>
  %n = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>,
                                        affine_map<(d0, d1) -> (d0, d1)>,
                                        affine_map<(d0, d1) -> (d0, d1)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%g, %tv : tensor<1x8xf32>, tensor<1x8xf32>) outs(%e1 : tensor<1x8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %b, %decay : f32
    %s = arith.addf %a, %m : f32
    linalg.yield %s : f32
  } -> tensor<1x8xf32>
  %c = tensor.collapse_shape %n [[0, 1]] : tensor<1x8xf32> into tensor<8xf32>
  return %c : tensor<8xf32>
}

// The same update reading %t broadcast along a new dimension (2x8): no
// operand is %t in the init's shape, so the result is not cut into it.
// CHECK-LABEL: func.func @negative_reshaped_other_shape(
// CHECK: %[[E:.*]] = tensor.empty() : tensor<2x8xf32>
// CHECK: linalg.generic {{.*}} outs(%[[E]] : tensor<2x8xf32>)
func.func @negative_reshaped_other_shape(%t: tensor<16xf32> {tdf.donate}, %u: tensor<8xf32>) -> tensor<16xf32> {
  %decay = arith.constant 0.9 : f32
  %e = tensor.empty() : tensor<2x8xf32>
  %n = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d1)>,
                                        affine_map<(d0, d1) -> (d0, d1)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%u : tensor<8xf32>) outs(%e : tensor<2x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.mulf %a, %decay : f32
    linalg.yield %m : f32
  } -> tensor<2x8xf32>
  %c = tensor.collapse_shape %n [[0, 1]] : tensor<2x8xf32> into tensor<16xf32>
  return %c : tensor<16xf32>
}
