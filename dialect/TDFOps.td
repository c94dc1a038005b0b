//===- TDFOps.td - tdf dialect operations -------------------*- tablegen -*-===//
//
// The operations of the tdf dialect: kernel calls (out of place, in place,
// opaque) and the aliasing escape hatch.
//
//===----------------------------------------------------------------------===//

#ifndef TDF_OPS_TD
#define TDF_OPS_TD

include "TDFDialect.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/OpBase.td"
include "mlir/IR/BuiltinAttributes.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

/// What a kernel call may pass: ranked tensors (memref parameters of the
/// kernel) and scalars (passed through unchanged, e.g. a row offset).
def TDF_CallArg : AnyTypeOf<[AnyRankedTensor, Index, AnySignlessInteger,
                             AnyFloat], "ranked tensor or scalar">;

def TDF_CallOp : TDF_Op<"call", [
    Pure, DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "call a destination-passing kernel; every result gets fresh storage";
  let description = [{
    Calls the kernel `callee` on tensors. The kernel is a `func.func` in
    destination-passing style on memrefs: its parameters are one per operand
    (a memref of the same shape and element type for a tensor operand, the
    same type for a scalar) followed by one output memref per result, and it
    returns nothing. The op is pure: every result is computed into fresh
    storage and no operand is written.

    Bufferizes to `func.call @callee(operand buffers..., fresh allocations...)`.

    Example:

    ```mlir
    func.func private @add(memref<4xf32>, memref<4xf32>, memref<4xf32>)

    %sum = tdf.call @add(%x, %y)
        : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    ```

    `tdf-insert-inplace` rewrites a `tdf.call` to `tdf.call_inplace` when an
    operand is dead, unaliased, owned and fits the result.

    Dynamic shapes: a kernel parameter dimension may be `?` where the operand
    (or result) dimension is static or `?` (a kernel generic in that size; the
    buffer is passed through a `memref.cast`); a static parameter dimension
    only accepts the same static size. A dynamic dimension `d` of a result
    with fresh storage takes its size from dimension `d` of the *shape
    operand*: the first ranked tensor operand of the result's rank (the
    usual case of an element-wise kernel, whose output has its first input's
    shape). The verifier rejects a fresh dynamic result with no tensor operand
    of its rank; a kernel whose output sizes are not those of an operand takes
    a static result type (or a `tensor.cast` after the call).
    ```mlir
    func.func private @scale(memref<?x?xf32>, f32, memref<?x?xf32>)
    // %y has the sizes of %x (dimension 0 and 1 of the shape operand %x).
    %y = tdf.call @scale(%x, %s) : (tensor<?x?xf32>, f32) -> tensor<?x?xf32>
    ```

    Like every tdf op it must be inside a function body. The kernel must not
    mark a parameter `tdf.donate` (it owns no buffer) and must not be
    recursive: a kernel that calls itself, directly or through other
    functions, or reaches any call cycle is rejected naming the cycle.
  }];
  let arguments = (ins FlatSymbolRefAttr:$callee,
                       Variadic<TDF_CallArg>:$operands);
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let assemblyFormat = [{
    $callee `(` $operands `)` attr-dict `:` functional-type($operands, results)
  }];
  let hasVerifier = 1;
}

def TDF_CallInplaceOp : TDF_Op<"call_inplace", [
    Pure, DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "call a kernel that computes results in the storage of operands";
  let description = [{
    Calls the kernel `callee`, computing result `i` in the storage of operand
    `inplace[i]`, or in fresh storage when `inplace[i]` is `-1` (the operand
    indices of TVM Relax's `call_tir_inplace`). The kernel's parameters are one
    per operand followed by one output memref per `-1` result; a result
    computed in place has no parameter of its own: the kernel writes it through
    the operand's parameter.

    The op keeps value semantics: the operands keep their old values. When
    One-Shot Bufferize finds an in-place operand still live after the call it
    copies the operand first and the kernel writes the copy;
    `tdf-verify-inplace{strict}` and `tdf.compile(strict=True)` turn such a
    copy into an error.

    Bufferizes to `func.call @callee(operand buffers..., fresh allocations...)`;
    result `i` is the buffer of operand `inplace[i]`.

    Example:

    ```mlir
    // %sum reuses the storage of %x; %carry gets fresh storage.
    %sum, %carry = tdf.call_inplace @add_carry(%x, %y) inplace [0, -1]
        : (tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xi1>)
    ```

    Dynamic shapes follow `tdf.call`: a `-1` result of dynamic shape takes
    its sizes from the first tensor operand of its rank; an in-place result
    has exactly its operand's type, so its sizes are the operand's.
    Verifier: one index per result, each in `[-1, #operands)`, no operand index
    twice, at least one index `>= 0`, and each in-place result has exactly its
    operand's type; inside a function body; the kernel neither marks a
    parameter `tdf.donate` nor reaches a recursive call (as `tdf.call`).
  }];
  let arguments = (ins FlatSymbolRefAttr:$callee,
                       Variadic<TDF_CallArg>:$operands,
                       DenseI64ArrayAttr:$inplace_indices);
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let assemblyFormat = [{
    $callee `(` $operands `)` `inplace` $inplace_indices attr-dict `:`
    functional-type($operands, results)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The operand whose storage result `resultIndex` reuses, or null for a
    /// result that gets fresh storage.
    ::mlir::OpOperand *getInplaceOperand(unsigned resultIndex);
    /// The result computed in the storage of operand `operandIndex`, or null.
    ::mlir::OpResult getInplaceResult(unsigned operandIndex);
  }];
}

def TDF_CallOpaqueOp : TDF_Op<"call_opaque", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "call a function with unknown effects and aliasing";
  let description = [{
    Calls `callee` (a `func.func` taking memrefs for tensor operands and
    returning memrefs for tensor results) with unknown side effects and
    unknown aliasing: a packed call into a runtime, a "black hole" for the
    analyses. Every tensor operand escapes (the callee may keep it and may
    write it), and every result may alias any value that ever escaped.
    Nothing that reached an opaque call is ever overwritten in place.

    Bufferizes to `func.call @callee(operand buffers...)`; the results are the
    memrefs the callee returns.

    Example:

    ```mlir
    func.func private @log_stats(memref<4xf32>) -> memref<4xf32>

    %stats = tdf.call_opaque @log_stats(%x) : (tensor<4xf32>) -> tensor<4xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$callee,
                       Variadic<TDF_CallArg>:$operands);
  let results = (outs Variadic<TDF_CallArg>:$results);
  let assemblyFormat = [{
    $callee `(` $operands `)` attr-dict `:` functional-type($operands, results)
  }];
  let hasVerifier = 1;
}

def TDF_AssumeUnaliasedOp : TDF_Op<"assume_unaliased", [
    Pure, AllTypesMatch<["source", "result"]>]> {
  let summary = "assert that a tensor shares no storage with another live value";
  let description = [{
    Returns its operand unchanged and tells the tdf alias analysis that the
    result shares storage with no other live value: the user's escape hatch
    for the "unaliased" safety rule, e.g. for the result of an opaque call
    that is known to be fresh. Asserting this for a value that does alias
    another live value makes in-place rewrites overwrite live data.

    Bufferizes to nothing: the result is the operand's buffer.

    Example:

    ```mlir
    %fresh = tdf.call_opaque @make_buffer() : () -> tensor<4xf32>
    %own = tdf.assume_unaliased %fresh : tensor<4xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$source);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$source attr-dict `:` type($result)";
  let hasVerifier = 1;
}

#endif // TDF_OPS_TD
