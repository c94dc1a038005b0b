// RUN: tdf-opt %s --split-input-file --verify-diagnostics

// Every verifier and symbol error of the tdf dialect, with its exact message.

func.func @undefined_callee(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{'tdf.call' op references an undefined function @missing}}
  %r = tdf.call @missing(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

memref.global "private" @not_a_function : memref<4xf32>
func.func @callee_not_func(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{'tdf.call' op callee @not_a_function must be a func.func, but it is a 'memref.global'}}
  %r = tdf.call @not_a_function(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

func.func private @returns_value(memref<4xf32>, memref<4xf32>) -> i32
func.func @kernel_returns(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{'tdf.call' op kernel @returns_value must return nothing (kernels write their outputs through memref parameters), but it returns 1 value(s)}}
  %r = tdf.call @returns_value(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

func.func private @unary(memref<4xf32>, memref<4xf32>)
func.func @param_count(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{'tdf.call' op kernel @unary takes 2 parameter(s), but the call passes 2 operand(s) and 1 fresh output(s)}}
  %r = tdf.call @unary(%x, %y) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

func.func private @unary(memref<8xf32>, memref<4xf32>)
func.func @operand_shape(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{'tdf.call' op operand #0 of type 'tensor<4xf32>' does not match parameter #0 of kernel @unary: expected memref<4xf32>, got 'memref<8xf32>'}}
  %r = tdf.call @unary(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

func.func private @unary(memref<4xf32>, memref<4xi32>)
func.func @result_element_type(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{'tdf.call' op result #0 of type 'tensor<4xf32>' does not match output parameter #1 of kernel @unary: expected memref<4xf32>, got 'memref<4xi32>'}}
  %r = tdf.call @unary(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

func.func private @scaled(memref<4xf32>, i32, memref<4xf32>)
func.func @scalar_type(%x: tensor<4xf32>, %s: index) -> tensor<4xf32> {
  // expected-error@+1 {{'tdf.call' op operand #1 of type 'index' does not match parameter #1 of kernel @scaled: expected index, got 'i32'}}
  %r = tdf.call @scaled(%x, %s) : (tensor<4xf32>, index) -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

// A fresh result of dynamic shape needs a tensor operand of its rank to take
// its sizes from.
func.func private @dyn(memref<?xf32>, memref<?x?xf32>)
func.func @dynamic_fresh_result_no_shape_operand(%x: tensor<?xf32>) -> tensor<?x?xf32> {
  // expected-error@+1 {{'tdf.call' op result #0 gets fresh storage of dynamic shape 'tensor<?x?xf32>', but no tensor operand has rank 2 (a dynamic dimension of a fresh result takes the size of the same dimension of the first tensor operand of the same rank)}}
  %r = tdf.call @dyn(%x) : (tensor<?xf32>) -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}

// -----

func.func private @dyn2(index, index, memref<4xf32>, memref<?xf32>)
func.func @dynamic_fresh_result_scalar_only(%n: index) -> tensor<?xf32> {
  // expected-error@+1 {{'tdf.call_inplace' op result #1 gets fresh storage of dynamic shape 'tensor<?xf32>', but no tensor operand has rank 1}}
  %r:2 = tdf.call_inplace @dyn2(%n, %n) inplace [-1, -1] : (index, index) -> (tensor<4xf32>, tensor<?xf32>)
  return %r#1 : tensor<?xf32>
}

// -----

// A static kernel parameter does not accept a dynamic operand (nothing would
// check the size).
func.func private @static4(memref<4xf32>, memref<4xf32>)
func.func @dynamic_operand_static_param(%x: tensor<?xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{'tdf.call' op operand #0 of type 'tensor<?xf32>' does not match parameter #0 of kernel @static4: expected memref<?xf32>, got 'memref<4xf32>'}}
  %r = tdf.call @static4(%x) : (tensor<?xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

func.func private @dyn_out(memref<?xf32>, memref<4xf32>)
func.func @dynamic_result_static_param(%x: tensor<?xf32>) -> tensor<?xf32> {
  // expected-error@+1 {{'tdf.call' op result #0 of type 'tensor<?xf32>' does not match output parameter #1 of kernel @dyn_out: expected memref<?xf32>, got 'memref<4xf32>'}}
  %r = tdf.call @dyn_out(%x) : (tensor<?xf32>) -> tensor<?xf32>
  return %r : tensor<?xf32>
}

// -----

// A dynamic parameter still needs the operand's rank and element type.
func.func private @dyn_rank(memref<?x?xf32>, memref<?x?xf32>)
func.func @dynamic_param_rank_mismatch(%x: tensor<4xf32>) -> tensor<4x4xf32> {
  // expected-error@+1 {{'tdf.call' op operand #0 of type 'tensor<4xf32>' does not match parameter #0 of kernel @dyn_rank: expected memref<4xf32>, got 'memref<?x?xf32>'}}
  %r = tdf.call @dyn_rank(%x) : (tensor<4xf32>) -> tensor<4x4xf32>
  return %r : tensor<4x4xf32>
}

// -----

func.func private @k(memref<4xf32>, memref<4xf32>)
func.func @unranked_operand(%x: tensor<*xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{'tdf.call' op operand #0 must be variadic of ranked tensor or scalar, but got 'tensor<*xf32>'}}
  %r = tdf.call @k(%x) : (tensor<*xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

func.func private @add_inplace(memref<4xf32>, memref<4xf32>)
func.func @index_count(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{'tdf.call_inplace' op expects one in-place index per result, but got 2 index(es) for 1 result(s)}}
  %r = tdf.call_inplace @add_inplace(%x, %y) inplace [0, 1] : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

func.func private @add_inplace(memref<4xf32>, memref<4xf32>)
func.func @index_out_of_range(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{'tdf.call_inplace' op in-place index 2 of result #0 is out of range [-1, 2)}}
  %r = tdf.call_inplace @add_inplace(%x, %y) inplace [2] : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

func.func private @add_inplace(memref<4xf32>, memref<4xf32>)
func.func @index_below_minus_one(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{'tdf.call_inplace' op in-place index -2 of result #0 is out of range [-1, 2)}}
  %r = tdf.call_inplace @add_inplace(%x, %y) inplace [-2] : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

func.func private @split(memref<4xf32>, memref<4xf32>)
func.func @operand_twice(%x: tensor<4xf32>, %y: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  // expected-error@+1 {{'tdf.call_inplace' op operand #0 is used in place by both result #0 and result #1}}
  %a, %b = tdf.call_inplace @split(%x, %y) inplace [0, 0] : (tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  return %a, %b : tensor<4xf32>, tensor<4xf32>
}

// -----

func.func private @add(memref<4xf32>, memref<4xf32>, memref<4xf32>)
func.func @no_inplace_index(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{'tdf.call_inplace' op needs at least one in-place index >= 0 (every result gets fresh storage: use tdf.call)}}
  %r = tdf.call_inplace @add(%x, %y) inplace [-1] : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

func.func private @grow(memref<4xf32>, memref<4xf32>)
func.func @result_type_mismatch(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<8xf32> {
  // expected-error@+1 {{'tdf.call_inplace' op result #0 has type 'tensor<8xf32>', but its in-place operand #0 has type 'tensor<4xf32>'}}
  %r = tdf.call_inplace @grow(%x, %y) inplace [0] : (tensor<4xf32>, tensor<4xf32>) -> tensor<8xf32>
  return %r : tensor<8xf32>
}

// -----

func.func private @scalar_inplace(memref<4xf32>, index)
func.func @inplace_on_scalar(%x: tensor<4xf32>, %i: index) -> tensor<4xf32> {
  // expected-error@+1 {{'tdf.call_inplace' op in-place operand #1 of result #0 must be a ranked tensor, got 'index'}}
  %r = tdf.call_inplace @scalar_inplace(%x, %i) inplace [1] : (tensor<4xf32>, index) -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

func.func private @add_carry(memref<4xf32>, memref<4xf32>, memref<4xf32>)
func.func @inplace_fresh_output_type(%x: tensor<4xf32>, %y: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xi1>) {
  // expected-error@+1 {{'tdf.call_inplace' op result #1 of type 'tensor<4xi1>' does not match output parameter #2 of kernel @add_carry: expected memref<4xi1>, got 'memref<4xf32>'}}
  %a, %c = tdf.call_inplace @add_carry(%x, %y) inplace [0, -1] : (tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xi1>)
  return %a, %c : tensor<4xf32>, tensor<4xi1>
}

// -----

func.func private @add_inplace(memref<4xf32>, memref<4xf32>)
func.func @inplace_undefined(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{'tdf.call_inplace' op references an undefined function @add_in_place}}
  %r = tdf.call_inplace @add_in_place(%x, %y) inplace [0] : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

func.func private @stats(memref<4xf32>) -> memref<4xf32>
func.func @opaque_undefined(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{'tdf.call_opaque' op references an undefined function @statz}}
  %r = tdf.call_opaque @statz(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

func.func private @stats(memref<4xf32>, memref<4xf32>) -> memref<4xf32>
func.func @opaque_param_count(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{'tdf.call_opaque' op callee @stats takes 2 parameter(s), but the call passes 1 operand(s)}}
  %r = tdf.call_opaque @stats(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

func.func private @stats(memref<4xf32>)
func.func @opaque_result_count(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{'tdf.call_opaque' op callee @stats returns 0 value(s), but the call has 1 result(s)}}
  %r = tdf.call_opaque @stats(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

func.func private @stats(memref<4xf16>) -> memref<4xf32>
func.func @opaque_operand_type(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{'tdf.call_opaque' op operand #0 of type 'tensor<4xf32>' does not match parameter #0 of callee @stats: expected memref<4xf32>, got 'memref<4xf16>'}}
  %r = tdf.call_opaque @stats(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

func.func private @stats(memref<4xf32>) -> memref<2xf32>
func.func @opaque_result_type(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{'tdf.call_opaque' op result #0 of type 'tensor<4xf32>' does not match result #0 of callee @stats: expected memref<4xf32>, got 'memref<2xf32>'}}
  %r = tdf.call_opaque @stats(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

// expected-note@+1 {{prior use here}}
func.func @assume_type_mismatch(%x: tensor<4xf32>) -> tensor<8xf32> {
  // expected-error@+1 {{use of value '%x' expects different type than prior uses: 'tensor<8xf32>' vs 'tensor<4xf32>'}}
  %r = tdf.assume_unaliased %x : tensor<8xf32>
  return %r : tensor<8xf32>
}

// -----

// expected-error@+1 {{'tdf.donate' is only valid on ranked tensor arguments, but argument #0 has type 'i32'}}
func.func @donate_scalar(%n: i32 {tdf.donate}) {
  return
}

// -----

// expected-error@+1 {{'tdf.donate' must be a unit attribute, got 1 : i64}}
func.func @donate_not_unit(%x: tensor<4xf32> {tdf.donate = 1}) {
  return
}

// -----

// expected-error@+1 {{unknown tdf argument attribute 'tdf.donated'}}
func.func @donate_misspelled(%x: tensor<4xf32> {tdf.donated}) {
  return
}

// -----

// expected-error@+1 {{'tdf.donate' is only valid on function arguments, not on result #0 (donation gives an argument's buffer away; results are the ones that reuse it)}}
func.func @donate_result(%x: tensor<4xf32>) -> (tensor<4xf32> {tdf.donate}) {
  return %x : tensor<4xf32>
}

// -----

// expected-error@+1 {{unknown tdf result attribute 'tdf.donated'}}
func.func @result_attr_misspelled(%x: tensor<4xf32>) -> (tensor<4xf32> {tdf.donated}) {
  return %x : tensor<4xf32>
}

// -----

// expected-error@+1 {{'tdf.donate' on argument #0 of a function declaration: only a function with a body can reuse a donated buffer}}
func.func private @donate_on_declaration(tensor<4xf32> {tdf.donate}) -> tensor<4xf32>

// -----

// expected-note@+1 {{kernel @scale_donated is defined here}}
func.func @scale_donated(%in: memref<4xf32> {tdf.donate}, %out: memref<4xf32>) {
  return
}
func.func @donate_on_kernel_param(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{'tdf.call' op kernel @scale_donated marks parameter #0 'tdf.donate', but a kernel owns no buffer to donate (donate the caller's tensor argument instead)}}
  %r = tdf.call @scale_donated(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

func.func private @add(memref<4xf32>, memref<4xf32>, memref<4xf32>)
%x = arith.constant dense<1.0> : tensor<4xf32>
// expected-error@+1 {{'tdf.call' op must be inside a function body, but its parent is 'builtin.module'}}
%r = tdf.call @add(%x, %x) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>

// -----

func.func private @add_into(memref<4xf32>, memref<4xf32>)
%x = arith.constant dense<1.0> : tensor<4xf32>
// expected-error@+1 {{'tdf.call_inplace' op must be inside a function body, but its parent is 'builtin.module'}}
%r = tdf.call_inplace @add_into(%x, %x) inplace [0] : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>

// -----

func.func private @stats(memref<4xf32>) -> memref<4xf32>
%x = arith.constant dense<1.0> : tensor<4xf32>
// expected-error@+1 {{'tdf.call_opaque' op must be inside a function body, but its parent is 'builtin.module'}}
%r = tdf.call_opaque @stats(%x) : (tensor<4xf32>) -> tensor<4xf32>

// -----

%x = arith.constant dense<1.0> : tensor<4xf32>
// expected-error@+1 {{'tdf.assume_unaliased' op must be inside a function body, but its parent is 'builtin.module'}}
%r = tdf.assume_unaliased %x : tensor<4xf32>

// -----

// expected-note@+1 {{@self_recursive is defined here}}
func.func @self_recursive(%in: memref<4xf32>, %out: memref<4xf32>) {
  call @self_recursive(%in, %out) : (memref<4xf32>, memref<4xf32>) -> ()
  return
}
func.func @calls_self_recursive_kernel(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{'tdf.call' op kernel @self_recursive is recursive (call cycle @self_recursive -> @self_recursive): kernels must not call themselves}}
  %r = tdf.call @self_recursive(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

// expected-note@+1 {{@ping is defined here}}
func.func @ping(%in: memref<4xf32>, %out: memref<4xf32>) {
  call @pong(%in, %out) : (memref<4xf32>, memref<4xf32>) -> ()
  return
}
func.func @pong(%in: memref<4xf32>, %out: memref<4xf32>) {
  call @ping(%in, %out) : (memref<4xf32>, memref<4xf32>) -> ()
  return
}
func.func @calls_mutually_recursive_kernel(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{'tdf.call_inplace' op kernel @ping is recursive (call cycle @ping -> @pong -> @ping): kernels must not call themselves}}
  %r = tdf.call_inplace @ping(%x) inplace [0] : (tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

func.func @leaf(%in: memref<4xf32>, %out: memref<4xf32>) {
  call @loop_a(%in) : (memref<4xf32>) -> ()
  return
}
// expected-note@+1 {{@loop_a is defined here}}
func.func @loop_a(%m: memref<4xf32>) {
  call @loop_b(%m) : (memref<4xf32>) -> ()
  return
}
func.func @loop_b(%m: memref<4xf32>) {
  call @loop_a(%m) : (memref<4xf32>) -> ()
  return
}
func.func @kernel_reaching_a_cycle(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{'tdf.call' op kernel @leaf reaches recursive calls (call cycle @loop_a -> @loop_b -> @loop_a): kernels must not call themselves}}
  %r = tdf.call @leaf(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

// An opaque callee's result must match the call's result exactly: nothing
// checks the sizes it returns against a static result type.
func.func private @opaque_dyn(memref<?xf32>) -> memref<?xf32>
func.func @opaque_dynamic_result_static_type(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error@+1 {{'tdf.call_opaque' op result #0 of type 'tensor<4xf32>' does not match result #0 of callee @opaque_dyn: expected memref<4xf32>, got 'memref<?xf32>'}}
  %r = tdf.call_opaque @opaque_dyn(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}
