// RUN: tdf-opt %s --tdf-insert-inplace | FileCheck %s
// RUN: tdf-opt %s --tdf-insert-inplace --tdf-verify-inplace=strict | FileCheck %s

// Donation pairing stores a rank-0 result into its donated argument right
// before the return (tensor.insert), and undoes that when One-Shot Bufferize
// does not then find the result equivalent to the argument: here the loop
// counter is carried through an scf.while. The undo gives the return its old
// operand back before erasing the insert it read (erasing first aborted the
// process: "operation destroyed but still has uses").
// CHECK-LABEL: func.func @negative_counter_in_while
// CHECK: %[[R:.*]]:2 = scf.while
// CHECK-NOT: tensor.insert
// CHECK: return %[[R]]#0, %[[R]]#1 : tensor<i32>, tensor<8xf32>
func.func @negative_counter_in_while(%n: tensor<i32> {tdf.donate}, %v: tensor<8xf32> {tdf.donate})
    -> (tensor<i32>, tensor<8xf32>) {
  %r:2 = scf.while (%a = %n, %b = %v) : (tensor<i32>, tensor<8xf32>) -> (tensor<i32>, tensor<8xf32>) {
    %one = arith.constant 1 : i32
    %x = tensor.extract %a[] : tensor<i32>
    %go = arith.cmpi slt, %x, %one : i32
    scf.condition(%go) %a, %b : tensor<i32>, tensor<8xf32>
  } do {
  ^bb0(%a: tensor<i32>, %b: tensor<8xf32>):
    %one = arith.constant 1 : i32
    %x = tensor.extract %a[] : tensor<i32>
    %y = arith.addi %x, %one : i32
    %t = tensor.from_elements %y : tensor<i32>
    %e = tensor.empty() : tensor<8xf32>
    %h = arith.constant 0.5 : f32
    %w = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>],
                         iterator_types = ["parallel"]}
        ins(%b : tensor<8xf32>) outs(%e : tensor<8xf32>) {
    ^bb0(%in: f32, %out: f32):
      %s = arith.addf %in, %h : f32
      linalg.yield %s : f32
    } -> tensor<8xf32>
    scf.yield %t, %w : tensor<i32>, tensor<8xf32>
  }
  return %r#0, %r#1 : tensor<i32>, tensor<8xf32>
}
