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
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"

using namespace mlir;
using namespace mlir::bufferization;
using namespace mlir::tdf;

namespace {

/// Unit attribute on a kernel declaring that every output element depends
/// only on the input elements at the same index (the kernel is element-wise on
/// all same-shaped memref parameters).
constexpr llvm::StringLiteral kElementwiseAttr = "tdf.elementwise";

func::FuncOp lookupKernel(Operation *op) {
  auto callee = op->getAttrOfType<FlatSymbolRefAttr>("callee");
  return SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(op, callee);
}

/// The memref type of kernel parameter or result `type` with an identity
/// layout, used to allocate fresh outputs.
MemRefType identityType(Type type) {
  auto memref = cast<MemRefType>(type);
  return MemRefType::get(memref.getShape(), memref.getElementType(),
                         MemRefLayoutAttrInterface(),
                         memref.getMemorySpace());
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
LogicalResult bufferizeKernelCall(Operation *op, ArrayRef<int64_t> inplaceIndices,
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
  for (int64_t operandIndex : inplaceIndices) {
    if (operandIndex >= 0) {
      results.push_back(args[operandIndex]);
      continue;
    }
    Type paramType = fnType.getInput(nextOutput++);
    FailureOr<Value> alloc = options.createAlloc(
        rewriter, op->getLoc(), identityType(paramType), ValueRange());
    if (failed(alloc))
      return failure();
    FailureOr<Value> adapted = adaptBuffer(rewriter, *alloc, paramType, options);
    if (failed(adapted))
      return failure();
    results.push_back(*adapted);
    freshOutputs.push_back(*adapted);
  }
  // Output parameters follow the operands, in result order.
  args.append(freshOutputs);
  func::CallOp::create(rewriter, op->getLoc(), kernel.getSymName(),
                       TypeRange(), args);
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
  if (indices[resultIndex] >= 0)
    return cast<BufferLikeType>(fnType.getInput(indices[resultIndex]));
  unsigned paramIndex = op->getNumOperands();
  for (unsigned i = 0; i < resultIndex; ++i)
    if (indices[i] < 0)
      ++paramIndex;
  return cast<BufferLikeType>(fnType.getInput(paramIndex));
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
  FailureOr<BufferLikeType>
  getBufferType(Operation *op, Value value, const BufferizationOptions &,
                const BufferizationState &, SmallVector<Value> &) const {
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
                                      const AnalysisState &) const {
    OpResult result =
        cast<CallInplaceOp>(op).getInplaceResult(operand.getOperandNumber());
    if (!result)
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
    func::FuncOp kernel = lookupKernel(op);
    return kernel && kernel->hasAttr(kElementwiseAttr);
  }
  FailureOr<BufferLikeType>
  getBufferType(Operation *op, Value value, const BufferizationOptions &,
                const BufferizationState &, SmallVector<Value> &) const {
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
  FailureOr<BufferLikeType>
  getBufferType(Operation *op, Value value, const BufferizationOptions &,
                const BufferizationState &, SmallVector<Value> &) const {
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
    auto call = func::CallOp::create(rewriter, op->getLoc(),
                                     callee.getSymName(),
                                     fnType.getResults(), args);
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
