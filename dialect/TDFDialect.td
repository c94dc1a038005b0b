//===- TDFDialect.td - tdf dialect definition ---------------*- tablegen -*-===//
//
// The `tdf` dialect: in-place tensor dataflow.
//
//===----------------------------------------------------------------------===//

#ifndef TDF_DIALECT_TD
#define TDF_DIALECT_TD

include "mlir/IR/OpBase.td"

def TDF_Dialect : Dialect {
  let name = "tdf";
  let cppNamespace = "::mlir::tdf";
  let summary = "In-place tensor dataflow: kernel calls with explicit in-place contracts";
  let description = [{
    The `tdf` dialect keeps a tensor program functional (every op produces a new
    SSA value) while making it explicit where a kernel may compute a result in
    the storage of one of its operands.

    Kernels are ordinary `func.func`s in destination-passing style on memrefs:
    parameters are `(inputs..., outputs...)` and there are no results. The ops
    of this dialect call them on tensors:

    * `tdf.call` gives every result fresh storage;
    * `tdf.call_inplace` computes result `i` in the storage of operand
      `inplace[i]` (or fresh storage for `-1`), keeping value semantics: when
      One-Shot Bufferize finds that operand still live it inserts a copy;
    * `tdf.call_opaque` calls a function with unknown effects and aliasing;
    * `tdf.assume_unaliased` asserts that a value shares no storage with any
      other live value.

    The function-argument attribute `tdf.donate` (a unit attribute) marks an
    argument whose storage the caller gives away, as JAX's `donate_argnums`.
    It is valid on ranked tensor arguments of functions with a body (and on
    their memref form during bufferization); it is rejected on results, on
    arguments of declarations and on kernel parameters.

    The kernel attribute `tdf.elementwise` (a unit attribute on a kernel
    `func.func`) promises that the kernel behaves as *one* parallel loop
    whose iteration *i* reads only index *i* of each input and then writes
    only index *i* of each output, so an output may share the storage of an
    input of the same type. "Each output element depends only on same-index
    inputs" is not enough: a kernel computing `out = a + b` and then
    `out = out * a` reads `a` after `out` overwrote it when both share one
    buffer. A kernel with a body is judged by its body (`tdf-insert-inplace`
    warns, naming the offending op, when the body contradicts the attribute,
    and leaves the call alone); the attribute is trusted for declarations.

    ```mlir
    func.func private @axpy(memref<8xf32>, memref<8xf32>, memref<8xf32>)
        attributes {tdf.elementwise}
    ```
  }];
  let extraClassDeclaration = [{
    /// Name of the unit argument attribute that marks a donated argument.
    static constexpr ::llvm::StringLiteral getDonateAttrName() {
      return ::llvm::StringLiteral("tdf.donate");
    }
  }];
  let hasOperationAttrVerify = 0;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
}

class TDF_Op<string mnemonic, list<Trait> traits = []>
    : Op<TDF_Dialect, mnemonic, traits>;

#endif // TDF_DIALECT_TD
