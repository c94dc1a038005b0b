//===- TDFBufferization.cpp - BufferizableOpInterface models --------------===//
//
// External BufferizableOpInterface models of the tdf ops, so that upstream
// One-Shot Bufferize decides for tdf.call_inplace whether an operand can be
// written in place or must be copied first.
//
//===----------------------------------------------------------------------===//

#include "TDFBufferization.h"
#include "TDFOps.h"

#include "mlir/Dialect/Bufferization/IR/BufferizableOpInterface.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Bufferization/Transforms/OneShotAnalysis.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseSet.h"

#include <limits>
#include <optional>

using namespace mlir;
using namespace mlir::bufferization;
using namespace mlir::tdf;

namespace {

/// Unit attribute on a kernel promising that it behaves as one parallel loop
/// whose iteration i reads only index i of each input and then writes only
/// index i of each output.
constexpr llvm::StringLiteral kElementwiseAttr = "tdf.elementwise";

func::FuncOp lookupKernel(Operation *op) {
  auto callee = op->getAttrOfType<FlatSymbolRefAttr>("callee");
  return SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(op, callee);
}

/// Whether the body of `kernel` is visibly one element-wise loop over its
/// parameters: a single block whose only op with memory effects (besides the
/// return) is one linalg op with parallel iterators and identity indexing
/// maps on every shaped operand, each operand a parameter of the kernel.
/// A body kernel's `tdf.elementwise` attribute is only trusted when this
/// holds: an attribute the body contradicts must not let One-Shot Bufferize
/// skip a copy.
bool bodyIsOneElementwiseLoop(func::FuncOp kernel) {
  if (!kernel.getBody().hasOneBlock())
    return false;
  Block &entry = kernel.getBody().front();
  linalg::LinalgOp loop;
  for (Operation &nested : entry) {
    if (isa<func::ReturnOp>(nested))
      continue;
    if (auto linalgOp = dyn_cast<linalg::LinalgOp>(nested)) {
      if (loop)
        return false;
      loop = linalgOp;
      continue;
    }
    if (!isMemoryEffectFree(&nested) || nested.getNumRegions() != 0)
      return false;
  }
  if (!loop || !loop.hasPureBufferSemantics() ||
      loop.getNumLoops() != loop.getNumParallelLoops())
    return false;
  for (OpOperand &operand : loop->getOpOperands()) {
    if (!isa<ShapedType>(operand.get().getType()))
      continue;
    auto param = dyn_cast<BlockArgument>(operand.get());
    if (!param || param.getOwner() != &entry ||
        !loop.getMatchingIndexingMap(&operand).isIdentity())
      return false;
  }
  return true;
}

/// Whether One-Shot Bufferize may treat a call of `kernel` as element-wise
/// access: the attribute is trusted on a declaration (nothing else can be
/// known) and on a body kernel only when the body shows it.
bool isElementwiseKernel(func::FuncOp kernel) {
  if (!kernel || !kernel->hasAttr(kElementwiseAttr))
    return false;
  return kernel.isDeclaration() || bodyIsOneElementwiseLoop(kernel);
}

/// The memref type of kernel parameter or result `type` with an identity
/// layout, used to allocate fresh outputs.
MemRefType identityType(Type type) {
  auto memref = cast<MemRefType>(type);
  return MemRefType::get(memref.getShape(), memref.getElementType(),
                         MemRefLayoutAttrInterface(), memref.getMemorySpace());
}

/// The buffer type of a kernel call result of type `tensor` computed in a
/// parameter of type `param`: the parameter's layout and memory space with
/// the result's shape (a parameter dimension may be `?` where the result's is
/// static).
MemRefType resultBufferType(Type param, RankedTensorType tensor) {
  auto memref = cast<MemRefType>(param);
  if (memref.getShape() == tensor.getShape())
    return memref;
  return MemRefType::get(tensor.getShape(), memref.getElementType(),
                         memref.getLayout(), memref.getMemorySpace());
}

/// Returns `buffer` as a value of `type`: a cast when the layouts are
/// compatible, a copy otherwise.
FailureOr<Value> adaptBuffer(RewriterBase &rewriter, Value buffer, Type type,
                             const BufferizationOptions &options) {
  if (buffer.getType() == type)
    return buffer;
  return castOrReallocMemRefValue(rewriter, buffer, cast<MemRefType>(type),
                                  options);
}

/// Appends to `args` the values a call passes for the operands of `op`: the
/// buffer of each tensor operand, adapted to the callee's parameter type, and
/// each scalar operand unchanged.
LogicalResult getCallArguments(Operation *op, FunctionType fnType,
                               RewriterBase &rewriter,
                               const BufferizationOptions &options,
                               BufferizationState &state,
                               SmallVectorImpl<Value> &args) {
  for (OpOperand &operand : op->getOpOperands()) {
    Value value = operand.get();
    if (!isa<TensorType>(value.getType())) {
      args.push_back(value);
      continue;
    }
    FailureOr<Value> buffer = getBuffer(rewriter, value, options, state);
    if (failed(buffer))
      return failure();
    FailureOr<Value> adapted =
        adaptBuffer(rewriter, *buffer,
                    fnType.getInput(operand.getOperandNumber()), options);
    if (failed(adapted))
      return failure();
    args.push_back(*adapted);
  }
  return success();
}

/// Bufferizes a destination-passing kernel call: operands are passed as
/// buffers, in-place results reuse the buffer of their operand, the others
/// get fresh allocations appended as output parameters.
/// `inplaceIndices[i]` is the operand whose storage result `i` reuses, or -1.
LogicalResult bufferizeKernelCall(Operation *op,
                                  ArrayRef<int64_t> inplaceIndices,
                                  RewriterBase &rewriter,
                                  const BufferizationOptions &options,
                                  BufferizationState &state) {
  func::FuncOp kernel = lookupKernel(op);
  if (!kernel)
    return op->emitOpError("kernel not found during bufferization");
  FunctionType fnType = kernel.getFunctionType();
  rewriter.setInsertionPoint(op);
  SmallVector<Value> args;
  if (failed(getCallArguments(op, fnType, rewriter, options, state, args)))
    return failure();
  SmallVector<Value> results, freshOutputs;
  unsigned nextOutput = op->getNumOperands();
  for (auto [resultIndex, operandIndex] : llvm::enumerate(inplaceIndices)) {
    auto tensorType =
        cast<RankedTensorType>(op->getResult(resultIndex).getType());
    if (operandIndex >= 0) {
      // Cast back after the call (below) when the kernel's parameter is more
      // dynamic than the operand.
      results.push_back(args[operandIndex]);
      continue;
    }
    Type paramType = fnType.getInput(nextOutput++);
    MemRefType bufferType = resultBufferType(paramType, tensorType);
    // Dynamic sizes: those of the shape operand (see TDFOps.td).
    SmallVector<Value> dynamicSizes;
    if (!tensorType.hasStaticShape()) {
      OpOperand *source = getFreshResultShapeOperand(op, resultIndex);
      if (!source)
        return op->emitOpError("no operand gives the sizes of result #")
               << resultIndex;
      Value sourceBuffer = args[source->getOperandNumber()];
      for (auto [dim, size] : llvm::enumerate(tensorType.getShape()))
        if (ShapedType::isDynamic(size))
          dynamicSizes.push_back(
              memref::DimOp::create(rewriter, op->getLoc(), sourceBuffer, dim));
    }
    FailureOr<Value> alloc = options.createAlloc(
        rewriter, op->getLoc(), identityType(bufferType), dynamicSizes);
    if (failed(alloc))
      return failure();
    FailureOr<Value> result =
        adaptBuffer(rewriter, *alloc, bufferType, options);
    if (failed(result))
      return failure();
    FailureOr<Value> adapted =
        adaptBuffer(rewriter, *result, paramType, options);
    if (failed(adapted))
      return failure();
    results.push_back(*result);
    freshOutputs.push_back(*adapted);
  }
  // Output parameters follow the operands, in result order.
  args.append(freshOutputs);
  func::CallOp::create(rewriter, op->getLoc(), kernel.getSymName(), TypeRange(),
                       args);
  // An in-place result whose kernel parameter is more dynamic than the
  // result (a generic kernel) is the operand's buffer cast back to the
  // result's sizes, after the call: whatever later copies the result (e.g.
  // a returned non-owned buffer) copies the written values.
  for (auto [resultIndex, operandIndex] : llvm::enumerate(inplaceIndices)) {
    if (operandIndex < 0)
      continue;
    MemRefType bufferType = resultBufferType(
        fnType.getInput(operandIndex),
        cast<RankedTensorType>(op->getResult(resultIndex).getType()));
    Value buffer = results[resultIndex];
    // The operand's own buffer when only the call needed the cast.
    if (auto cast = buffer.getDefiningOp<memref::CastOp>())
      if (cast.getSource().getType() == bufferType)
        buffer = cast.getSource();
    FailureOr<Value> adapted =
        adaptBuffer(rewriter, buffer, bufferType, options);
    if (failed(adapted))
      return failure();
    results[resultIndex] = *adapted;
  }
  replaceOpWithBufferizedValues(rewriter, op, results);
  return success();
}

/// The buffer type of result `value` of a kernel call: the type of the kernel
/// parameter it is computed in.
FailureOr<BufferLikeType> kernelResultBufferType(Operation *op, Value value,
                                                 ArrayRef<int64_t> indices) {
  func::FuncOp kernel = lookupKernel(op);
  if (!kernel)
    return op->emitOpError("kernel not found during bufferization");
  FunctionType fnType = kernel.getFunctionType();
  unsigned resultIndex = cast<OpResult>(value).getResultNumber();
  auto tensorType = cast<RankedTensorType>(value.getType());
  if (indices[resultIndex] >= 0)
    return cast<BufferLikeType>(
        resultBufferType(fnType.getInput(indices[resultIndex]), tensorType));
  unsigned paramIndex = op->getNumOperands();
  for (unsigned i = 0; i < resultIndex; ++i)
    if (indices[i] < 0)
      ++paramIndex;
  return cast<BufferLikeType>(
      resultBufferType(fnType.getInput(paramIndex), tensorType));
}

//===----------------------------------------------------------------------===//
// Alias cuts: keeping One-Shot's alias sets short on long in-place chains
//===----------------------------------------------------------------------===//
//
// One-Shot Analysis decides each tensor operand by collecting every read and
// every in-place write of the operand's alias set and the result's, and then
// checking every (read, write) pair. On a chain
//
//   %1 = tdf.call_inplace @k(%0) inplace [0]
//   %2 = tdf.call_inplace @k(%1) inplace [0]
//   ...
//
// every value ends up in one alias set, so the k-th decision costs O(k^2)
// and the whole analysis O(N^3) (N = 1000: ~80 s). The cure is to tell One-Shot
// that result %k does *not* alias operand %k-1 (so its alias sets stay short)
// wherever that cannot change what the program computes: the "cut".
//
// A cut at in-place pair (operand %v -> result %r) of a tdf.call_inplace is
// sound when nothing that may share %v's buffer is used after the call: then
// the only later accesses of that memory go through %r, and One-Shot's own
// check of the write to %v (still reported as a write) decides in place vs.
// copy as before (a read of an alias of %v after the call is still a
// conflict). Bufferization is unchanged: %r gets %v's buffer (or its copy).
// It does not change any decision either: a (read, write) pair with one side
// before the cut and the other after it is never a conflict when the part
// before is dead after the call (every read there happens before every write
// after; every write there happens before the definitions read after), and
// the one other way the two parts interact -- a non-writable value in one
// part making One-Shot copy before a write in the other -- is excluded by
// cutting only between parts that hold no non-writable value and no block
// argument.
//
// The may-alias components are computed with a union-find over every
// aliasing pair that any op's BufferizableOpInterface reports (a superset of
// One-Shot's alias sets, which only merge pairs decided in place), in program
// order, with earlier cuts removed. The pair is cut only when
//  * the call is in the single block of its function's body (no loop, no
//    branch: op order is execution order),
//  * %v's component has no value that One-Shot deems non-writable and no
//    block argument other than a writable (donated) argument of a function
//    that nothing in the module calls (a called function's argument
//    equivalence to a result is what its callers rely on; loop and branch
//    arguments are pinned),
//  * no member of %v's component is used after the call (uses in nested
//    regions count at their ancestor in the block), and no other in-place
//    operand of the call is in the component,
//  * %v's component has at least kMinCutComponent values: short chains (every
//    program of the test corpus) are analysed exactly as without cuts,
//  * and, checked once every cut is known, %r's final component has no block
//    argument and no non-writable value either (else the cut is undone; done
//    from the last cut to the first, since undoing one can only spoil an
//    earlier one).
// Chains therefore split into segments of about kMinCutComponent values and
// the analysis becomes linear in the chain length.

/// Components smaller than this are never cut.
constexpr unsigned kMinCutComponent = 8;

/// Union-find over tensor values with, per component, its size, whether it
/// holds a block argument or a non-writable value ("pinned"), and the
/// position of its last use in the block.
class AliasComponents {
public:
  AliasComponents(Block &block, const OneShotAnalysisState &state,
                  bool argumentsMayCut)
      : block(block), state(state), argumentsMayCut(argumentsMayCut) {
    unsigned index = 0;
    for (Operation &op : block)
      position[&op] = index++;
  }

  /// The component of `value` (created on first sight).
  unsigned find(Value value) {
    auto [it, inserted] = ids.try_emplace(value, parent.size());
    if (inserted) {
      parent.push_back(it->second);
      size.push_back(1);
      pinned.push_back(pinsComponent(value));
      lastUse.push_back(lastUseOf(value));
    }
    unsigned id = it->second;
    while (parent[id] != id) {
      parent[id] = parent[parent[id]];
      id = parent[id];
    }
    return id;
  }

  void merge(Value a, Value b) {
    unsigned x = find(a), y = find(b);
    if (x == y)
      return;
    if (size[x] < size[y])
      std::swap(x, y);
    parent[y] = x;
    size[x] += size[y];
    pinned[x] = pinned[x] || pinned[y];
    lastUse[x] = std::max(lastUse[x], lastUse[y]);
  }

  bool isPinned(Value value) { return pinned[find(value)]; }

  /// Whether the component `id` is dead after `op` (an op of the block),
  /// not pinned and at least `minSize` values large.
  bool canCutAfter(unsigned id, Operation *op, unsigned minSize) const {
    return !pinned[id] && size[id] >= minSize &&
           lastUse[id] <= position.lookup(op);
  }

private:
  /// The position of the last op of the block that uses `value` (directly or
  /// in a nested region); the maximum value when a use lies outside.
  unsigned lastUseOf(Value value) const {
    unsigned last = 0;
    for (OpOperand &use : value.getUses()) {
      Operation *ancestor = block.findAncestorOpInBlock(*use.getOwner());
      if (!ancestor)
        return std::numeric_limits<unsigned>::max();
      last = std::max(last, position.lookup(ancestor));
    }
    return last;
  }

  /// A non-writable value, or a block argument other than a writable
  /// argument of a function nothing calls (a donated argument of an entry
  /// point): cutting between such an argument and later parts changes no
  /// decision (the argument is defined before every op, and the part holding
  /// it is dead after the cut), and bufferization still gives every in-place
  /// result the argument's buffer (tdf-drop-donated-results reads the
  /// bufferized IR). Only the analysis' argument-result equivalence is lost,
  /// which callers would use: arguments of called functions stay pinned.
  bool pinsComponent(Value value) const {
    if (!state.isWritable(value))
      return true;
    auto arg = dyn_cast<BlockArgument>(value);
    return arg && (!argumentsMayCut || arg.getOwner() != &block);
  }

  Block &block;
  const OneShotAnalysisState &state;
  bool argumentsMayCut;
  DenseMap<Operation *, unsigned> position;
  DenseMap<Value, unsigned> ids;
  SmallVector<unsigned> parent, size, lastUse;
  SmallVector<bool> pinned;
};

/// Merges the aliasing pairs of `op`, except the in-place pairs of a
/// tdf.call_inplace (the caller decides those).
void mergeAliasingPairs(Operation *op, const AnalysisState &state,
                        AliasComponents &components) {
  if (isa<CallInplaceOp>(op))
    return;
  for (OpOperand &operand : op->getOpOperands()) {
    if (!isa<TensorLikeType>(operand.get().getType()))
      continue;
    for (const AliasingValue &alias : state.getAliasingValues(operand))
      components.merge(operand.get(), alias.value);
  }
}

/// The cut in-place operands of the tdf.call_inplace ops of each analysed
/// function, cached on the One-Shot analysis state for the duration of one
/// analysis (the IR does not change between the first query and the end of
/// the analysis).
class AliasCutState final : public OneShotAnalysisState::Extension {
public:
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(AliasCutState)

  explicit AliasCutState(OneShotAnalysisState &state) : Extension(state) {}

  /// Returns whether `operand` (an in-place operand of a tdf.call_inplace) is
  /// cut from its result, computing the cuts of its function on first use.
  bool isCut(OpOperand &operand) {
    auto func = operand.getOwner()->getParentOfType<func::FuncOp>();
    if (!func)
      return false;
    if (analyzed.insert(func).second)
      computeCuts(func);
    return cuts.contains(&operand);
  }

private:
  void computeCuts(func::FuncOp func);
  bool knownUncalled(func::FuncOp func);

  DenseSet<Operation *> analyzed;
  DenseSet<OpOperand *> cuts;
  /// Per symbol table: the root names of every symbol reference nested in it
  /// (one walk each, not one per function: a module of N functions took
  /// O(N^2)), or nullopt when its uses cannot be known.
  DenseMap<Operation *, std::optional<DenseSet<StringAttr>>> referenced;
};

bool AliasCutState::knownUncalled(func::FuncOp func) {
  Operation *symbolTable = SymbolTable::getNearestSymbolTable(func);
  if (!symbolTable)
    return false;
  auto [it, inserted] = referenced.try_emplace(symbolTable);
  if (inserted) {
    if (std::optional<SymbolTable::UseRange> uses =
            SymbolTable::getSymbolUses(&symbolTable->getRegion(0))) {
      DenseSet<StringAttr> names;
      for (const SymbolTable::SymbolUse &use : *uses)
        names.insert(use.getSymbolRef().getRootReference());
      it->second = std::move(names);
    }
  }
  // As SymbolTable::symbolKnownUseEmpty(func, symbolTable): a reference whose
  // root is the function's name uses it.
  return it->second && !it->second->contains(func.getSymNameAttr());
}

void AliasCutState::computeCuts(func::FuncOp func) {
  const OneShotAnalysisState &state = getAnalysisState();
  Region &body = func.getBody();
  if (!body.hasOneBlock())
    return;
  Block &block = body.front();

  // Candidates, in program order. Pre-order: every op before a call of the
  // block (nested ops included) is visited before the call.
  SmallVector<std::pair<OpOperand *, OpResult>> candidates;
  // An entry point's writable arguments may be cut from (see pinsComponent).
  bool uncalled = knownUncalled(func);
  AliasComponents components(block, state, uncalled);
  func.walk<WalkOrder::PreOrder>([&](Operation *op) {
    auto call = dyn_cast<CallInplaceOp>(op);
    if (!call) {
      mergeAliasingPairs(op, state, components);
      return;
    }
    ArrayRef<int64_t> indices = call.getInplaceIndices();
    SmallVector<unsigned> inplaceComponents;
    for (int64_t index : indices)
      if (index >= 0)
        inplaceComponents.push_back(components.find(op->getOperand(index)));
    for (auto [resultIndex, index] : llvm::enumerate(indices)) {
      if (index < 0)
        continue;
      OpOperand &operand = op->getOpOperand(index);
      OpResult result = op->getResult(resultIndex);
      unsigned id = components.find(operand.get());
      if (op->getBlock() == &block && llvm::count(inplaceComponents, id) == 1 &&
          components.canCutAfter(id, op, kMinCutComponent))
        candidates.push_back({&operand, result});
      else
        components.merge(operand.get(), result);
    }
  });
  if (candidates.empty())
    return;

  // Final components with every candidate cut; undo the cuts whose result
  // side is pinned, last first.
  AliasComponents final(block, state, uncalled);
  DenseSet<OpOperand *> candidateSet;
  for (auto &candidate : candidates)
    candidateSet.insert(candidate.first);
  func.walk([&](Operation *op) {
    mergeAliasingPairs(op, state, final);
    if (auto call = dyn_cast<CallInplaceOp>(op))
      for (auto [resultIndex, index] :
           llvm::enumerate(call.getInplaceIndices()))
        if (index >= 0 && !candidateSet.contains(&op->getOpOperand(index)))
          final.merge(op->getOperand(index), op->getResult(resultIndex));
  });
  for (auto &[operand, result] : llvm::reverse(candidates)) {
    if (final.isPinned(result))
      final.merge(operand->get(), result);
    else
      cuts.insert(operand);
  }
}

/// Whether One-Shot Analysis should see in-place `operand` of a
/// tdf.call_inplace as cut from its result (see above). Only a One-Shot
/// analysis state has cuts; other states (copy-before-write) see every pair.
bool isAliasCut(OpOperand &operand, const AnalysisState &state) {
  auto *oneShot = dyn_cast<OneShotAnalysisState>(&state);
  if (!oneShot)
    return false;
  auto &mutableState = const_cast<OneShotAnalysisState &>(*oneShot);
  AliasCutState *cuts = mutableState.getExtension<AliasCutState>();
  if (!cuts)
    cuts = &mutableState.addExtension<AliasCutState>();
  return cuts->isCut(operand);
}

/// tdf.call: reads its operands, writes nothing, allocates every result.
struct CallOpModel
    : public BufferizableOpInterface::ExternalModel<CallOpModel, CallOp> {
  bool bufferizesToMemoryRead(Operation *, OpOperand &,
                              const AnalysisState &) const {
    return true;
  }
  bool bufferizesToMemoryWrite(Operation *, OpOperand &,
                               const AnalysisState &) const {
    return false;
  }
  AliasingValueList getAliasingValues(Operation *, OpOperand &,
                                      const AnalysisState &) const {
    return {};
  }
  bool bufferizesToAllocation(Operation *, Value) const { return true; }
  FailureOr<BufferLikeType> getBufferType(Operation *op, Value value,
                                          const BufferizationOptions &,
                                          const BufferizationState &,
                                          SmallVector<Value> &) const {
    SmallVector<int64_t> indices(op->getNumResults(), -1);
    return kernelResultBufferType(op, value, indices);
  }
  LogicalResult bufferize(Operation *op, RewriterBase &rewriter,
                          const BufferizationOptions &options,
                          BufferizationState &state) const {
    SmallVector<int64_t> indices(op->getNumResults(), -1);
    return bufferizeKernelCall(op, indices, rewriter, options, state);
  }
};

/// tdf.call_inplace: operand `inplace[i]` is read and written and its buffer
/// becomes result `i`; One-Shot Bufferize copies it first when it is still
/// read later (out-of-place bufferization of that operand).
struct CallInplaceOpModel
    : public BufferizableOpInterface::ExternalModel<CallInplaceOpModel,
                                                    CallInplaceOp> {
  bool bufferizesToMemoryRead(Operation *, OpOperand &,
                              const AnalysisState &) const {
    return true;
  }
  bool bufferizesToMemoryWrite(Operation *op, OpOperand &operand,
                               const AnalysisState &) const {
    return static_cast<bool>(
        cast<CallInplaceOp>(op).getInplaceResult(operand.getOperandNumber()));
  }
  AliasingValueList getAliasingValues(Operation *op, OpOperand &operand,
                                      const AnalysisState &state) const {
    OpResult result =
        cast<CallInplaceOp>(op).getInplaceResult(operand.getOperandNumber());
    if (!result || isAliasCut(operand, state))
      return {};
    return {{result, BufferRelation::Equivalent, /*isDefinite=*/true}};
  }
  bool bufferizesToAllocation(Operation *op, Value value) const {
    auto call = cast<CallInplaceOp>(op);
    return call.getInplaceIndices()[cast<OpResult>(value).getResultNumber()] <
           0;
  }
  bool bufferizesToElementwiseAccess(Operation *op, const AnalysisState &,
                                     ArrayRef<OpOperand *>) const {
    return isElementwiseKernel(lookupKernel(op));
  }
  FailureOr<BufferLikeType> getBufferType(Operation *op, Value value,
                                          const BufferizationOptions &,
                                          const BufferizationState &,
                                          SmallVector<Value> &) const {
    return kernelResultBufferType(op, value,
                                  cast<CallInplaceOp>(op).getInplaceIndices());
  }
  LogicalResult bufferize(Operation *op, RewriterBase &rewriter,
                          const BufferizationOptions &options,
                          BufferizationState &state) const {
    return bufferizeKernelCall(op, cast<CallInplaceOp>(op).getInplaceIndices(),
                               rewriter, options, state);
  }
};

/// tdf.call_opaque: unknown effects, unknown aliasing. Every tensor operand
/// is read and written and may alias every result.
struct CallOpaqueOpModel
    : public BufferizableOpInterface::ExternalModel<CallOpaqueOpModel,
                                                    CallOpaqueOp> {
  bool bufferizesToMemoryRead(Operation *, OpOperand &,
                              const AnalysisState &) const {
    return true;
  }
  bool bufferizesToMemoryWrite(Operation *, OpOperand &,
                               const AnalysisState &) const {
    return true;
  }
  AliasingValueList getAliasingValues(Operation *op, OpOperand &,
                                      const AnalysisState &) const {
    AliasingValueList aliases;
    for (OpResult result : op->getResults())
      if (isa<TensorType>(result.getType()))
        aliases.addAlias({result, BufferRelation::Unknown,
                          /*isDefinite=*/false});
    return aliases;
  }
  FailureOr<BufferLikeType> getBufferType(Operation *op, Value value,
                                          const BufferizationOptions &,
                                          const BufferizationState &,
                                          SmallVector<Value> &) const {
    func::FuncOp callee = lookupKernel(op);
    if (!callee)
      return op->emitOpError("callee not found during bufferization");
    return cast<BufferLikeType>(callee.getFunctionType().getResult(
        cast<OpResult>(value).getResultNumber()));
  }
  LogicalResult bufferize(Operation *op, RewriterBase &rewriter,
                          const BufferizationOptions &options,
                          BufferizationState &state) const {
    func::FuncOp callee = lookupKernel(op);
    if (!callee)
      return op->emitOpError("callee not found during bufferization");
    FunctionType fnType = callee.getFunctionType();
    rewriter.setInsertionPoint(op);
    SmallVector<Value> args;
    if (failed(getCallArguments(op, fnType, rewriter, options, state, args)))
      return failure();
    auto call = func::CallOp::create(
        rewriter, op->getLoc(), callee.getSymName(), fnType.getResults(), args);
    replaceOpWithBufferizedValues(rewriter, op, call.getResults());
    return success();
  }
};

/// tdf.assume_unaliased: a no-op on buffers; the result is the operand's
/// buffer.
struct AssumeUnaliasedOpModel
    : public BufferizableOpInterface::ExternalModel<AssumeUnaliasedOpModel,
                                                    AssumeUnaliasedOp> {
  bool bufferizesToMemoryRead(Operation *, OpOperand &,
                              const AnalysisState &) const {
    return false;
  }
  bool bufferizesToMemoryWrite(Operation *, OpOperand &,
                               const AnalysisState &) const {
    return false;
  }
  AliasingValueList getAliasingValues(Operation *op, OpOperand &,
                                      const AnalysisState &) const {
    return {{op->getResult(0), BufferRelation::Equivalent,
             /*isDefinite=*/true}};
  }
  LogicalResult bufferize(Operation *op, RewriterBase &rewriter,
                          const BufferizationOptions &options,
                          BufferizationState &state) const {
    FailureOr<Value> buffer =
        getBuffer(rewriter, op->getOperand(0), options, state);
    if (failed(buffer))
      return failure();
    replaceOpWithBufferizedValues(rewriter, op, *buffer);
    return success();
  }
};

} // namespace

void mlir::tdf::registerBufferizableOpInterfaceExternalModels(
    DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, TDFDialect *) {
    CallOp::attachInterface<CallOpModel>(*ctx);
    CallInplaceOp::attachInterface<CallInplaceOpModel>(*ctx);
    CallOpaqueOp::attachInterface<CallOpaqueOpModel>(*ctx);
    AssumeUnaliasedOp::attachInterface<AssumeUnaliasedOpModel>(*ctx);
  });
}
