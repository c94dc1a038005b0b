// RUN: tdf-opt %s --tdf-scalarize-loop-carried --mlir-pass-statistics 2>%t.stats | FileCheck %s
// RUN: FileCheck %s --check-prefix=STATS < %t.stats

// STATS: 3 scalarized

// A fori_loop-style counter: the init's element is carried, the body's
// extract/from_elements pair is gone, the result is rebuilt after the loop.
// CHECK-LABEL: func.func @counter
// CHECK-SAME:    (%[[T:[^:]+]]: tensor<i32>, %[[N:[^:]+]]: index)
// CHECK:         %[[S0:.*]] = tensor.extract %[[T]][] : tensor<i32>
// CHECK:         %[[R:.*]] = scf.for %{{.*}} = %{{.*}} to %[[N]] step %{{.*}} iter_args(%[[V:.*]] = %[[S0]]) -> (i32) {
// CHECK-NOT:       tensor.
// CHECK:           %[[W:.*]] = arith.addi %[[V]], %{{.*}} : i32
// CHECK:           scf.yield %[[W]] : i32
// CHECK:         %[[OUT:.*]] = tensor.from_elements %[[R]] : tensor<i32>
// CHECK:         return %[[OUT]]
func.func @counter(%t0: tensor<i32>, %n: index) -> tensor<i32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %one = arith.constant 1 : i32
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%t = %t0) -> (tensor<i32>) {
    %v = tensor.extract %t[] : tensor<i32>
    %w = arith.addi %v, %one : i32
    %u = tensor.from_elements %w : tensor<i32>
    scf.yield %u : tensor<i32>
  }
  return %r : tensor<i32>
}

// A rank-0 carry used as a tensor inside (a linalg op reads it) is rebuilt
// there; a carry yielded unchanged passes its element; other carries stay.
// CHECK-LABEL: func.func @mixed
// CHECK:         scf.for {{.*}} iter_args(%[[S:[^ ]+]] = %{{[^,]+}}, %[[X:[^ ]+]] = %{{[^,]+}}, %[[K:[^ ]+]] = %{{[^)]+}}) -> (f32, tensor<4xf32>, f32)
// CHECK:           %[[ST:.*]] = tensor.from_elements %[[S]] : tensor<f32>
// CHECK:           linalg.generic {{.*}} ins(%[[X]], %[[ST]] :
// CHECK:           scf.yield %{{.*}}, %{{.*}}, %[[K]] : f32, tensor<4xf32>, f32
func.func @mixed(%s0: tensor<f32>, %x0: tensor<4xf32>, %k0: tensor<f32>, %n: index)
    -> (tensor<f32>, tensor<4xf32>, tensor<f32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r:3 = scf.for %i = %c0 to %n step %c1 iter_args(%s = %s0, %x = %x0, %k = %k0)
      -> (tensor<f32>, tensor<4xf32>, tensor<f32>) {
    %e = tensor.empty() : tensor<4xf32>
    %y = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> ()>, affine_map<(d0) -> (d0)>],
                         iterator_types = ["parallel"]}
        ins(%x, %s : tensor<4xf32>, tensor<f32>) outs(%e : tensor<4xf32>) {
    ^bb0(%a: f32, %b: f32, %o: f32):
      %m = arith.mulf %a, %b : f32
      linalg.yield %m : f32
    } -> tensor<4xf32>
    %v = tensor.extract %s[] : tensor<f32>
    %h = arith.mulf %v, %v : f32
    %hs = tensor.from_elements %h : tensor<f32>
    scf.yield %hs, %y, %k : tensor<f32>, tensor<4xf32>, tensor<f32>
  }
  return %r#0, %r#1, %r#2 : tensor<f32>, tensor<4xf32>, tensor<f32>
}
