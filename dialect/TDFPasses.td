//===- TDFPasses.td - tdf's C++ passes ---------------------*- tablegen -*-===//
//
// The passes written in C++ (python/src/MathPasses.cpp,
// python/src/FusionPasses.cpp): declarations,
// options and descriptions. mlir-tblgen generates their base classes
// (TDFPasses.h.inc, -gen-pass-decls) and their entries in the pass reference
// (docs/PassReference.md, `make docs`). The Python passes are declared by
// their `@register_pass` decorators (passes/).
//
//===----------------------------------------------------------------------===//

#ifndef TDF_PASSES
#define TDF_PASSES

include "mlir/Pass/PassBase.td"

def TDFMathApproximation : Pass<"tdf-math-approximation"> {
  let summary = "Replace the listed f32 math ops by upstream's polynomial "
                "approximations (vectorizable, no libm call)";
  let description = [{
    Runs upstream `populateMathPolynomialApproximationPatterns` restricted to
    the ops named in `ops` (mnemonics, with or without the `math.` prefix):
    f32 math ops, scalars or vectors, become polynomials built from arith ops
    and `math.fma`, which LLVM vectorizes (a libm call in a loop it cannot).
    Without `ops` nothing is approximated; an op outside the supported list is
    an error (`unsupported math op 'x' (expected one of ...)`).

    Before (`--tdf-math-approximation="ops=log"`):

    ```mlir
    %0 = math.log %x : f32
    ```

    After:

    ```mlir
    %gt = arith.cmpf ugt, %x, %min : f32
    %clamped = arith.select %gt, %x, %min : f32
    %bits = arith.bitcast %clamped : f32 to i32
    ...
    %p = math.fma %a, %b, %c : f32
    ...
    ```
  }];
  let dependentDialects = [
    "arith::ArithDialect", "math::MathDialect", "vector::VectorDialect"
  ];
  let options = [
    ListOption<"ops", "ops", "std::string",
               "Math ops (mnemonics) to approximate; default none">
  ];
}

def TDFConvertMathToLibm : Pass<"tdf-convert-math-to-libm", "ModuleOp"> {
  let summary = "Lower only the listed math ops to libm calls (upstream "
                "patterns); other math ops are left alone";
  let description = [{
    Upstream `populateMathToLibmConversionPatterns` as a partial conversion
    in which only the ops named in `ops` are illegal: f32 ops call the `f`
    function, f64 ops the plain one, vectors one call per element. Every
    other math op is left for `convert-math-to-llvm`. Upstream
    `convert-math-to-libm` makes the whole math dialect illegal (an op libm
    has no function for, such as `math.copysign`, fails the pass) and maps
    `math.rsqrt` to `rsqrtf`, which libm does not define. An op outside the
    supported list is an error.

    Before (`--tdf-convert-math-to-libm="ops=expm1"`):

    ```mlir
    %0 = math.expm1 %x : f32
    ```

    After:

    ```mlir
    func.func private @expm1f(f32) -> f32
    ...
    %0 = call @expm1f(%x) : (f32) -> f32
    ```
  }];
  let dependentDialects = [
    "arith::ArithDialect", "func::FuncDialect", "vector::VectorDialect"
  ];
  let options = [
    ListOption<"ops", "ops", "std::string",
               "Math ops (mnemonics) to lower to libm">
  ];
}

def TDFFuseElementwise : Pass<"tdf-fuse-elementwise"> {
  let summary = "Upstream elementwise fusion of linalg ops, with fused loop "
                "bodies kept under a size bound (linear in the chain length)";
  let description = [{
    What upstream `linalg-fuse-elementwise-ops` does (elementwise producer /
    consumer fusion of `linalg.generic` ops whose producer has one use,
    reshapes folded by expansion, the linalg and tensor canonicalizations,
    constant folding; top-down), except that a producer is fused into its
    consumer only while the fused body stays within `max-body-ops`
    operations. Each fusion copies both bodies into a new op, so fusing a
    chain of N element-wise ops into one loop costs O(N^2) (a 2,000-op JAX
    program spent 5.7 s in upstream's pass); with the bound the chain
    becomes loops of at most `max-body-ops` ops each, built in O(N) time,
    and a loop reads and writes its operands once per `max-body-ops` ops.
    The element-wise fusions run in rounds first: each round fuses every
    eligible pair whose two ops no fusion of that round made, so a chain's
    bodies double each round and a chain of N ops costs N * log2(bound)
    copied body ops instead of N * bound / 2 (a 2,000-op JAX program:
    0.27 -> 0.05 s at the default bound); the pattern driver then does what
    the rounds left.
    A `linalg.contract` (a BLAS contraction, `tdf-specialize-contractions`)
    takes part in no fusion and no reshape folding: a folded reshape would
    turn it back into a `linalg.generic` that fusion then grows, and it
    would no longer reach the BLAS; the reshape stays a view.

    First of all, an element-wise `linalg.generic` over a `tensor.concat`
    (the concatenation's only use; one init its body never reads; every
    loop parallel; every operand a statically shaped tensor indexed by the
    identity map) runs on each part: `f(concat(a, b))` becomes
    `concat(f(a), f(b))`, the op's other inputs sliced to each part. Each
    part's loop then fuses with the part's producer and writes its slice of
    the result, instead of the parts being copied into the result and the
    whole result read and written again (`jnp.log(jnp.concatenate(...))` of
    4 x 1M floats: 6.6 -> 3.6 ms on one thread). At most 64 parts.

    Before (`--tdf-fuse-elementwise="max-body-ops=2"`, two chained
    `linalg.generic` ops of two body ops each):

    ```mlir
    %t = linalg.generic ... ins(%x) outs(%e) { math.exp; linalg.yield }
    %r = linalg.generic ... ins(%t) outs(%e) { math.log; linalg.yield }
    ```

    After: left as they are (fused, the body would have 3 ops: `math.exp`,
    `math.log` and the yield, over the bound); with the default bound they
    become one `linalg.generic` computing `log(exp(x))`.
  }];
  let dependentDialects = [
    "affine::AffineDialect", "linalg::LinalgDialect", "tensor::TensorDialect"
  ];
  let options = [
    Option<"maxBodyOps", "max-body-ops", "unsigned", /*default=*/"128",
           "Fuse only while the fused body has at most this many ops">
  ];
}

#endif // TDF_PASSES
