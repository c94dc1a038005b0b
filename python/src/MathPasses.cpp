//===- MathPasses.cpp - tdf's C++ passes for the math dialect -------------===//
//
// Two passes that wrap upstream math patterns the Python bindings cannot
// reach (no registered upstream pass exposes them); their declarations,
// options and descriptions are in dialect/TDFPasses.td:
//
// - `tdf-math-approximation{ops=...}`: upstream
//   populateMathPolynomialApproximationPatterns restricted to the listed ops:
//   f32 math ops (scalars or vectors) become polynomials built from arith
//   ops, which LLVM vectorizes (a libm call in a loop it cannot).
// - `tdf-convert-math-to-libm{ops=...}`: upstream
//   populateMathToLibmConversionPatterns as a partial conversion in which only
//   the listed ops are illegal. Upstream convert-math-to-libm makes the whole
//   math dialect illegal (so an op libm has no function for fails the pass)
//   and maps math.rsqrt to `rsqrtf`, which libm does not define.
//
// PolynomialApproximation.cpp.o comes from the dev wheel's static
// libMLIRMathTransforms.a; every MLIR symbol it needs is exported by
// libMLIRPythonCAPI.so, so it adds no second copy of MLIR (see CMakeLists).
//
//===----------------------------------------------------------------------===//

#include "Bridge.h"

#include "mlir/Conversion/MathToLibm/MathToLibm.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Transforms/DialectConversion.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;

namespace tdfpy {
#define GEN_PASS_DECL
#define GEN_PASS_DEF_TDFMATHAPPROXIMATION
#define GEN_PASS_DEF_TDFCONVERTMATHTOLIBM
#define GEN_PASS_REGISTRATION
#include "TDFPasses.h.inc"
} // namespace tdfpy

namespace {

/// The op name without its `math.` prefix.
StringRef mnemonic(StringRef name) {
  name.consume_front("math.");
  return name;
}

/// Fills `set` from a list option; false (with a diagnostic on `op`) when an
/// entry is not an op of the math dialect.
bool collectOps(Operation *op, ArrayRef<std::string> ops, StringRef allowed,
                llvm::StringSet<> &set) {
  llvm::StringSet<> known;
  SmallVector<StringRef> names;
  allowed.split(names, ',');
  for (StringRef name : names)
    known.insert(name);
  for (const std::string &entry : ops) {
    StringRef name = mnemonic(StringRef(entry).trim());
    if (!known.contains(name)) {
      op->emitError() << "unsupported math op '" << entry
                      << "' (expected one of " << allowed << ")";
      return false;
    }
    set.insert(name);
  }
  return true;
}

constexpr const char *kApproximable =
    "acos,asin,atan,atan2,cbrt,cos,erf,erfc,exp,expm1,log,log1p,log2,"
    "rsqrt,sin,tanh";

constexpr const char *kLibm =
    "acos,acosh,asin,asinh,atan,atan2,atanh,cbrt,ceil,cos,cosh,erf,erfc,exp,"
    "exp2,expm1,floor,fma,log,log10,log1p,log2,powf,round,roundeven,sin,sinh,"
    "tan,tanh,trunc";

struct MathApproximationPass
    : public tdfpy::impl::TDFMathApproximationBase<MathApproximationPass> {
  using Base::Base;

  void runOnOperation() override {
    llvm::StringSet<> selected;
    if (!collectOps(getOperation(), ops, kApproximable, selected))
      return signalPassFailure();
    RewritePatternSet patterns(&getContext());
    populateMathPolynomialApproximationPatterns(patterns, [&](StringRef name) {
      return selected.contains(mnemonic(name));
    });
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};

struct ConvertMathToLibmPass
    : public tdfpy::impl::TDFConvertMathToLibmBase<ConvertMathToLibmPass> {
  using Base::Base;

  void runOnOperation() override {
    llvm::StringSet<> selected;
    if (!collectOps(getOperation(), ops, kLibm, selected))
      return signalPassFailure();
    RewritePatternSet patterns(&getContext());
    populateMathToLibmConversionPatterns(patterns);
    ConversionTarget target(getContext());
    target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });
    target.addDynamicallyLegalDialect<math::MathDialect>([&](Operation *op) {
      return !selected.contains(mnemonic(op->getName().getStringRef()));
    });
    if (failed(applyPartialConversion(getOperation(), target,
                                      std::move(patterns))))
      return signalPassFailure();
  }
};

} // namespace

void tdfpy::registerMathPasses() {
  static bool done = [] {
    registerTDFPasses();
    return true;
  }();
  (void)done;
}
