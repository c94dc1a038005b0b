//===- FusionPasses.cpp - elementwise fusion with a body-size bound -------===//
//
// `tdf-fuse-elementwise{max-body-ops=N}` (declared in dialect/TDFPasses.td):
// the pattern set of upstream `linalg-fuse-elementwise-ops` -- elementwise
// producer/consumer fusion, reshapes folded by expansion, the linalg and
// tensor canonicalizations, linalg constant folding, applied top-down --
// with one more condition on each fusion: the fused body must stay within
// `max-body-ops` operations. Every fusion clones both bodies into a new op,
// so fusing a chain of N element-wise ops into one loop costs O(N^2); with
// the bound a chain becomes loops of at most `max-body-ops` ops each. The
// upstream pass registers no control function, hence this pass.
//
// Before the pattern driver, the element-wise fusions run in rounds: each
// round fuses every eligible producer/consumer pair whose two ops were not
// made by a fusion of the same round, so the bodies of a chain double in
// size each round. Fusing one pair at a time, as the driver does, clones a
// growing body at every step: a chain of N ops fused into loops of B body
// ops cloned N * B / 2 body ops (a 2,000-op JAX program: 0.27 s at B = 128,
// linear in B); in rounds it clones N * log2(B). The driver then finds
// what the rounds left (pairs over the bound in one round that fit
// differently) and does the rest: reshapes, canonicalization, constants.
// First of all, element-wise ops over a concatenation run on each part
// (`distributeOverConcats`): the rounds then fuse each part's loop with the
// part's producer.
// A `linalg.contract` (what `tdf-specialize-contractions` makes of a BLAS
// contraction) takes part in no fusion and no reshape folding: folded, a
// reshape turns it back into a `linalg.generic` that the next fusion then
// grows (a scale or bias fused into its body), and it no longer reaches the
// BLAS (`tdf-contractions-to-blas`). The reshape stays a view.
//
// Every symbol used here is exported by libMLIRPythonCAPI.so.
//
//===----------------------------------------------------------------------===//

#include "Bridge.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tensor/Transforms/Transforms.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

using namespace mlir;

namespace tdfpy {
#define GEN_PASS_DECL_TDFFUSEELEMENTWISE
#define GEN_PASS_DEF_TDFFUSEELEMENTWISE
#include "TDFPasses.h.inc"
} // namespace tdfpy

namespace {

/// Operations in the body of a linalg op (the terminator included).
size_t bodySize(Operation *op) {
  auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
  if (!linalgOp || linalgOp->getNumRegions() != 1 ||
      linalgOp->getRegion(0).empty())
    return 0;
  return linalgOp->getRegion(0).front().getOperations().size();
}

/// Whether `op` is kept out of fusion and reshape folding.
bool keptWhole(Operation *op) { return op && isa<linalg::ContractOp>(op); }

/// Whether the fusion or folding across `fused` involves a kept op.
bool touchesKept(OpOperand *fused) {
  return keptWhole(fused->getOwner()) ||
         keptWhole(fused->get().getDefiningOp());
}

/// The parts of at most this many are distributed (each part clones the
/// consumer's body).
constexpr size_t kMaxConcatParts = 64;

/// The concatenation an element-wise `op` may be distributed over (see
/// `distributeOverConcats`), or null: `op` is a `linalg.generic` with one
/// init whose block argument its body never reads, no `linalg.index` in its
/// body (a part's loop counts from 0), every loop parallel,
/// every operand a statically shaped tensor indexed by the identity map,
/// and one of its inputs the only use of a `tensor.concat` of at most
/// `kMaxConcatParts` parts.
tensor::ConcatOp concatToDistribute(linalg::GenericOp op) {
  if (op.getNumDpsInits() != 1 || op.getNumResults() != 1 ||
      op.getNumLoops() == 0 || op.hasIndexSemantics() ||
      op.getNumParallelLoops() != op.getNumLoops() ||
      !op.hasPureTensorSemantics())
    return nullptr;
  if (!op.getMatchingBlockArgument(op.getDpsInitOperand(0)).use_empty())
    return nullptr;
  for (OpOperand &operand : op->getOpOperands()) {
    auto type = dyn_cast<RankedTensorType>(operand.get().getType());
    if (!type || !type.hasStaticShape() ||
        !op.getMatchingIndexingMap(&operand).isIdentity())
      return nullptr;
  }
  for (OpOperand *input : op.getDpsInputOperands()) {
    auto concat = input->get().getDefiningOp<tensor::ConcatOp>();
    if (concat && concat->hasOneUse() &&
        concat.getInputs().size() <= kMaxConcatParts &&
        concat.getResultType().hasStaticShape())
      return concat;
  }
  return nullptr;
}

/// `f(concat(a, b, ...))` becomes `concat(f(a), f(b), ...)` for every
/// element-wise `f` that `concatToDistribute` accepts, the other inputs of
/// `f` sliced to each part: a concatenation followed by an element-wise
/// op (`jnp.log(jnp.concatenate(...))`) is then one loop per part, each
/// writing its slice of the result (and fused with the part's producer),
/// instead of the parts copied into the result and the whole result read
/// and written again. The result is the same element for element. Returns
/// how many ops were distributed.
unsigned distributeOverConcats(Operation *root) {
  SmallVector<linalg::GenericOp> candidates;
  root->walk([&](linalg::GenericOp op) { candidates.push_back(op); });
  IRRewriter rewriter(root->getContext());
  unsigned distributed = 0;
  for (linalg::GenericOp op : candidates) {
    tensor::ConcatOp concat = concatToDistribute(op);
    if (!concat)
      continue;
    int64_t dim = static_cast<int64_t>(concat.getDim());
    Location loc = op.getLoc();
    auto resultType = cast<RankedTensorType>(op->getResult(0).getType());
    rewriter.setInsertionPoint(op);
    SmallVector<Value> parts;
    int64_t offset = 0;
    for (Value part : concat.getInputs()) {
      auto partType = cast<RankedTensorType>(part.getType());
      ArrayRef<int64_t> shape = partType.getShape();
      SmallVector<Value> inputs;
      for (OpOperand *input : op.getDpsInputOperands()) {
        if (input->get() == concat.getResult()) {
          inputs.push_back(part);
          continue;
        }
        auto type = cast<RankedTensorType>(input->get().getType());
        SmallVector<OpFoldResult> offsets(type.getRank(),
                                          rewriter.getIndexAttr(0));
        offsets[dim] = rewriter.getIndexAttr(offset);
        SmallVector<OpFoldResult> sizes, strides;
        for (int64_t size : shape) {
          sizes.push_back(rewriter.getIndexAttr(size));
          strides.push_back(rewriter.getIndexAttr(1));
        }
        inputs.push_back(tensor::ExtractSliceOp::create(
            rewriter, loc, input->get(), offsets, sizes, strides));
      }
      Value init = tensor::EmptyOp::create(rewriter, loc, shape,
                                           resultType.getElementType());
      auto clone = linalg::GenericOp::create(
          rewriter, loc, TypeRange{init.getType()}, inputs, ValueRange{init},
          op.getIndexingMapsArray(), op.getIteratorTypesArray());
      rewriter.cloneRegionBefore(op.getRegion(), clone.getRegion(),
                                 clone.getRegion().begin());
      clone->setDiscardableAttrs(op->getDiscardableAttrDictionary());
      parts.push_back(clone->getResult(0));
      offset += shape[dim];
    }
    Value joined = tensor::ConcatOp::create(rewriter, loc, dim, parts);
    rewriter.replaceOp(op, joined);
    rewriter.eraseOp(concat);
    ++distributed;
  }
  return distributed;
}

/// Element-wise producer/consumer fusion in rounds (see the file comment):
/// in each round a `linalg.generic` consumer fuses with one producer that
/// `control` accepts, neither made by a fusion of this round.
void fuseInRounds(Operation *root, const linalg::ControlFusionFn &control) {
  IRRewriter rewriter(root->getContext());
  for (bool changed = true; changed;) {
    changed = false;
    SmallVector<linalg::GenericOp> consumers;
    root->walk([&](linalg::GenericOp op) { consumers.push_back(op); });
    // Ops made by this round's fusions (and the consumers erased by them,
    // which come before the ops still to visit and are never visited).
    DenseSet<Operation *> fresh;
    for (linalg::GenericOp consumer : consumers) {
      if (fresh.contains(consumer))
        continue;
      for (OpOperand &operand : consumer->getOpOperands()) {
        Operation *producer = operand.get().getDefiningOp();
        if (!producer || fresh.contains(producer) ||
            !linalg::areElementwiseOpsFusable(&operand) || !control(&operand))
          continue;
        rewriter.setInsertionPoint(consumer);
        FailureOr<linalg::ElementwiseOpFusionResult> fused =
            linalg::fuseElementwiseOps(rewriter, &operand);
        if (failed(fused))
          continue;
        for (auto [original, replacement] : fused->replacements)
          rewriter.replaceUsesWithIf(
              original, replacement,
              [&](OpOperand &use) { return use.getOwner() != producer; });
        fresh.insert(fused->fusedOp);
        fresh.insert(consumer);
        rewriter.eraseOp(consumer);
        if (producer->use_empty()) {
          fresh.insert(producer);
          rewriter.eraseOp(producer);
        }
        changed = true;
        break;
      }
    }
  }
}

struct FuseElementwisePass
    : public tdfpy::impl::TDFFuseElementwiseBase<FuseElementwisePass> {
  using Base::Base;

  void runOnOperation() override {
    MLIRContext *context = &getContext();
    const size_t limit = maxBodyOps;
    // Upstream's condition (the producer has one use) plus the bound.
    linalg::ControlFusionFn fuse = [limit](OpOperand *fused) {
      Operation *producer = fused->get().getDefiningOp();
      if (!producer || !producer->hasOneUse() || touchesKept(fused))
        return false;
      return bodySize(producer) + bodySize(fused->getOwner()) <= limit + 1;
    };
    // Reshape folding and constant folding keep upstream's condition, and
    // leave contractions alone.
    linalg::ControlFusionFn oneUse = [](OpOperand *fused) {
      Operation *producer = fused->get().getDefiningOp();
      return producer && producer->hasOneUse() && !touchesKept(fused);
    };
    distributeOverConcats(getOperation());
    fuseInRounds(getOperation(), fuse);
    RewritePatternSet patterns(context);
    linalg::populateElementwiseOpsFusionPatterns(patterns, fuse);
    linalg::populateFoldReshapeOpsByExpansionPatterns(patterns, oneUse);
    tensor::populateBubbleUpExpandShapePatterns(patterns);
    affine::AffineApplyOp::getCanonicalizationPatterns(patterns, context);
    linalg::GenericOp::getCanonicalizationPatterns(patterns, context);
    tensor::ExpandShapeOp::getCanonicalizationPatterns(patterns, context);
    tensor::CollapseShapeOp::getCanonicalizationPatterns(patterns, context);
    context->getLoadedDialect<linalg::LinalgDialect>()
        ->getCanonicalizationPatterns(patterns);
    linalg::populateConstantFoldLinalgOperations(patterns, oneUse);
    (void)applyPatternsGreedily(getOperation(), std::move(patterns),
                                GreedyRewriteConfig().setUseTopDownTraversal());
  }
};

} // namespace
