//===- TDFOps.cpp - tdf dialect operations
//---------------------------------===//
//
// Verifiers and symbol checks of the tdf operations.
//
//===----------------------------------------------------------------------===//

#include "TDFOps.h"
#include "TDFDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"

using namespace mlir;
using namespace mlir::tdf;

//===----------------------------------------------------------------------===//
// Shared helpers
//===----------------------------------------------------------------------===//

/// Returns true when memref parameter type `param` can hold tensor `tensor`:
/// same rank and element type (any layout, any memory space), and every
/// dimension of the parameter either equal to the tensor's or dynamic (`?`:
/// a kernel generic in that size). A static parameter dimension never
/// accepts a dynamic tensor dimension: nothing would check the size.
static bool memrefMatchesTensor(Type param, RankedTensorType tensor) {
  auto memref = dyn_cast<MemRefType>(param);
  if (!memref || memref.getRank() != tensor.getRank() ||
      memref.getElementType() != tensor.getElementType())
    return false;
  for (auto [want, have] : llvm::zip(memref.getShape(), tensor.getShape()))
    if (want != have && !ShapedType::isDynamic(want))
      return false;
  return true;
}

/// Describes the memref a tensor of type `tensor` is passed as.
static std::string expectedParamText(Type type) {
  std::string text;
  llvm::raw_string_ostream os(text);
  if (auto tensor = dyn_cast<RankedTensorType>(type))
    os << MemRefType::get(tensor.getShape(), tensor.getElementType());
  else
    os << type;
  return text;
}

/// Checks that `type` (an operand or a fresh output) is accepted by kernel
/// parameter `param`.
static bool paramAccepts(Type param, Type type) {
  if (auto tensor = dyn_cast<RankedTensorType>(type))
    return memrefMatchesTensor(param, tensor);
  return param == type;
}

/// Checks that an opaque callee's result type `param` is exactly the memref
/// of tensor `type` (same shape, `?` only where the tensor has `?`).
static bool resultMatches(Type param, Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor)
    return param == type;
  auto memref = dyn_cast<MemRefType>(param);
  return memref && memref.getShape() == tensor.getShape() &&
         memref.getElementType() == tensor.getElementType();
}

/// Looks up `callee` as a func.func, emitting an error on `op` if it is not
/// one.
static func::FuncOp lookupCallee(Operation *op, FlatSymbolRefAttr callee,
                                 SymbolTableCollection &symbolTable) {
  Operation *symbol = symbolTable.lookupNearestSymbolFrom(op, callee);
  if (!symbol) {
    op->emitOpError() << "references an undefined function " << callee;
    return nullptr;
  }
  auto fn = dyn_cast<func::FuncOp>(symbol);
  if (!fn) {
    op->emitOpError() << "callee " << callee
                      << " must be a func.func, but it is a '"
                      << symbol->getName() << "'";
    return nullptr;
  }
  return fn;
}

/// tdf ops compute on the values of a function body; at module level (or in
/// any region outside a function) they would never run and cannot bufferize.
static LogicalResult verifyInsideFunction(Operation *op) {
  if (op->getParentOfType<FunctionOpInterface>())
    return success();
  Operation *parent = op->getParentOp();
  return op->emitOpError()
         << "must be inside a function body, but its parent is "
         << (parent ? "'" + parent->getName().getStringRef().str() + "'"
                    : std::string("nothing (a top-level op)"));
}

/// The func.func symbols called (through any op with a `callee` symbol
/// reference: func.call, tdf.call*) from the body of `fn`.
static SmallVector<func::FuncOp> calleesOf(func::FuncOp fn,
                                           SymbolTableCollection &symbolTable) {
  SmallVector<func::FuncOp> callees;
  if (fn.isExternal())
    return callees;
  fn.walk([&](Operation *inner) {
    auto ref = inner->getAttrOfType<FlatSymbolRefAttr>("callee");
    if (!ref)
      return;
    if (auto target = dyn_cast_or_null<func::FuncOp>(
            symbolTable.lookupNearestSymbolFrom(inner, ref)))
      callees.push_back(target);
  });
  return callees;
}

/// Kernels are leaf computations: a kernel that (directly or through the
/// functions it calls) reaches a call cycle is rejected, naming the cycle.
/// Iterative depth-first search, so deep call chains cannot overflow the
/// stack.
static LogicalResult verifyNotRecursive(Operation *op, func::FuncOp kernel,
                                        SymbolTableCollection &symbolTable) {
  struct Frame {
    func::FuncOp fn;
    SmallVector<func::FuncOp> callees;
    unsigned next = 0;
  };
  enum : int { Unvisited = 0, OnStack = 1, Done = 2 };
  llvm::DenseMap<Operation *, int> state;
  SmallVector<Frame> stack;
  stack.push_back({kernel, calleesOf(kernel, symbolTable)});
  state[kernel] = OnStack;
  while (!stack.empty()) {
    if (stack.back().next == stack.back().callees.size()) {
      state[stack.back().fn] = Done;
      stack.pop_back();
      continue;
    }
    func::FuncOp target = stack.back().callees[stack.back().next++];
    int seen = state.lookup(target);
    if (seen == Done)
      continue;
    if (seen == OnStack) {
      std::string path;
      llvm::raw_string_ostream os(path);
      bool inCycle = false;
      for (Frame &frame : stack) {
        inCycle = inCycle || frame.fn == target;
        if (inCycle)
          os << "@" << frame.fn.getSymName() << " -> ";
      }
      os << "@" << target.getSymName();
      InFlightDiagnostic diag = op->emitOpError();
      if (target == kernel)
        diag << "kernel @" << kernel.getSymName()
             << " is recursive (call cycle " << path
             << "): kernels must not call themselves";
      else
        diag << "kernel @" << kernel.getSymName()
             << " reaches recursive calls (call cycle " << path
             << "): kernels must not call themselves";
      diag.attachNote(target.getLoc())
          << "@" << target.getSymName() << " is defined here";
      return diag;
    }
    state[target] = OnStack;
    stack.push_back({target, calleesOf(target, symbolTable)});
  }
  return success();
}

/// `tdf.donate` marks a function argument whose storage the caller gives
/// away; a kernel only receives buffers from its caller and owns none.
static LogicalResult verifyNoDonatedParam(Operation *op, func::FuncOp kernel) {
  for (unsigned i = 0, e = kernel.getNumArguments(); i < e; ++i) {
    if (!kernel.getArgAttr(i, TDFDialect::getDonateAttrName()))
      continue;
    InFlightDiagnostic diag = op->emitOpError();
    diag << "kernel @" << kernel.getSymName() << " marks parameter #" << i
         << " 'tdf.donate', but a kernel owns no buffer to donate (donate the "
            "caller's tensor argument instead)";
    diag.attachNote(kernel.getLoc())
        << "kernel @" << kernel.getSymName() << " is defined here";
    return diag;
  }
  return success();
}

/// Verifies a destination-passing kernel signature: the callee takes one
/// parameter per operand followed by one output memref per type in
/// `freshOutputs` (the result indices are `freshResultIndices`), and returns
/// nothing.
static LogicalResult verifyKernelSignature(Operation *op,
                                           FlatSymbolRefAttr calleeName,
                                           ValueRange operands,
                                           ArrayRef<unsigned> freshResults,
                                           SymbolTableCollection &symbolTable) {
  func::FuncOp callee = lookupCallee(op, calleeName, symbolTable);
  if (!callee)
    return failure();
  if (failed(verifyNoDonatedParam(op, callee)) ||
      failed(verifyNotRecursive(op, callee, symbolTable)))
    return failure();
  FunctionType fnType = callee.getFunctionType();
  if (fnType.getNumResults() != 0)
    return op->emitOpError()
           << "kernel " << calleeName
           << " must return nothing (kernels write their outputs through "
              "memref parameters), but it returns "
           << fnType.getNumResults() << " value(s)";
  size_t expected = operands.size() + freshResults.size();
  if (fnType.getNumInputs() != expected)
    return op->emitOpError()
           << "kernel " << calleeName << " takes " << fnType.getNumInputs()
           << " parameter(s), but the call passes " << operands.size()
           << " operand(s) and " << freshResults.size() << " fresh output(s)";
  for (auto [index, operand] : llvm::enumerate(operands)) {
    Type param = fnType.getInput(index);
    if (!paramAccepts(param, operand.getType()))
      return op->emitOpError()
             << "operand #" << index << " of type " << operand.getType()
             << " does not match parameter #" << index << " of kernel "
             << calleeName << ": expected "
             << expectedParamText(operand.getType()) << ", got " << param;
  }
  for (auto [position, resultIndex] : llvm::enumerate(freshResults)) {
    unsigned paramIndex = operands.size() + position;
    Type param = fnType.getInput(paramIndex);
    Type resultType = op->getResult(resultIndex).getType();
    if (!paramAccepts(param, resultType))
      return op->emitOpError()
             << "result #" << resultIndex << " of type " << resultType
             << " does not match output parameter #" << paramIndex
             << " of kernel " << calleeName << ": expected "
             << expectedParamText(resultType) << ", got " << param;
  }
  return success();
}

/// Fresh results are allocated by bufferization: a dynamic dimension takes
/// its size from the same dimension of the shape operand
/// (`getFreshResultShapeOperand`), which must exist.
static LogicalResult verifyStaticFreshResult(Operation *op,
                                             unsigned resultIndex) {
  auto type = cast<RankedTensorType>(op->getResult(resultIndex).getType());
  if (type.hasStaticShape() ||
      mlir::tdf::getFreshResultShapeOperand(op, resultIndex))
    return success();
  return op->emitOpError()
         << "result #" << resultIndex << " gets fresh storage of dynamic "
         << "shape " << type << ", but no tensor operand has rank "
         << type.getRank()
         << " (a dynamic dimension of a fresh result takes the size of the "
            "same dimension of the first tensor operand of the same rank)";
}

OpOperand *mlir::tdf::getFreshResultShapeOperand(Operation *op,
                                                 unsigned resultIndex) {
  auto type = dyn_cast<RankedTensorType>(op->getResult(resultIndex).getType());
  if (!type)
    return nullptr;
  for (OpOperand &operand : op->getOpOperands())
    if (auto tensor = dyn_cast<RankedTensorType>(operand.get().getType()))
      if (tensor.getRank() == type.getRank())
        return &operand;
  return nullptr;
}

//===----------------------------------------------------------------------===//
// CallOp
//===----------------------------------------------------------------------===//

LogicalResult CallOp::verify() {
  if (failed(verifyInsideFunction(*this)))
    return failure();
  for (unsigned i = 0, e = getNumResults(); i < e; ++i)
    if (failed(verifyStaticFreshResult(*this, i)))
      return failure();
  return success();
}

LogicalResult CallOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  SmallVector<unsigned> fresh;
  for (unsigned i = 0, e = getNumResults(); i < e; ++i)
    fresh.push_back(i);
  return verifyKernelSignature(*this, getCalleeAttr(), getOperands(), fresh,
                               symbolTable);
}

//===----------------------------------------------------------------------===//
// CallInplaceOp
//===----------------------------------------------------------------------===//

LogicalResult CallInplaceOp::verify() {
  if (failed(verifyInsideFunction(*this)))
    return failure();
  ArrayRef<int64_t> indices = getInplaceIndices();
  unsigned numOperands = getNumOperands();
  if (indices.size() != getNumResults())
    return emitOpError() << "expects one in-place index per result, but got "
                         << indices.size() << " index(es) for "
                         << getNumResults() << " result(s)";
  llvm::DenseMap<int64_t, unsigned> resultOfOperand;
  bool anyInPlace = false;
  for (auto [resultIndex, operandIndex] : llvm::enumerate(indices)) {
    if (operandIndex < -1 || operandIndex >= (int64_t)numOperands)
      return emitOpError() << "in-place index " << operandIndex
                           << " of result #" << resultIndex
                           << " is out of range [-1, " << numOperands << ")";
    if (operandIndex == -1) {
      if (failed(verifyStaticFreshResult(*this, resultIndex)))
        return failure();
      continue;
    }
    anyInPlace = true;
    auto [it, inserted] =
        resultOfOperand.try_emplace(operandIndex, (unsigned)resultIndex);
    if (!inserted)
      return emitOpError() << "operand #" << operandIndex
                           << " is used in place by both result #" << it->second
                           << " and result #" << resultIndex;
    Type operandType = getOperand(operandIndex).getType();
    Type resultType = getResult(resultIndex).getType();
    if (!isa<RankedTensorType>(operandType))
      return emitOpError() << "in-place operand #" << operandIndex
                           << " of result #" << resultIndex
                           << " must be a ranked tensor, got " << operandType;
    if (operandType != resultType)
      return emitOpError() << "result #" << resultIndex << " has type "
                           << resultType << ", but its in-place operand #"
                           << operandIndex << " has type " << operandType;
  }
  if (!anyInPlace)
    return emitOpError() << "needs at least one in-place index >= 0 (every "
                            "result gets fresh storage: use tdf.call)";
  return success();
}

LogicalResult
CallInplaceOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  SmallVector<unsigned> fresh;
  for (auto [resultIndex, operandIndex] : llvm::enumerate(getInplaceIndices()))
    if (operandIndex == -1)
      fresh.push_back(resultIndex);
  return verifyKernelSignature(*this, getCalleeAttr(), getOperands(), fresh,
                               symbolTable);
}

OpOperand *CallInplaceOp::getInplaceOperand(unsigned resultIndex) {
  int64_t operandIndex = getInplaceIndices()[resultIndex];
  if (operandIndex < 0)
    return nullptr;
  return &getOperation()->getOpOperand(operandIndex);
}

OpResult CallInplaceOp::getInplaceResult(unsigned operandIndex) {
  for (auto [resultIndex, index] : llvm::enumerate(getInplaceIndices()))
    if (index == (int64_t)operandIndex)
      return getOperation()->getResult(resultIndex);
  return nullptr;
}

//===----------------------------------------------------------------------===//
// CallOpaqueOp
//===----------------------------------------------------------------------===//

LogicalResult CallOpaqueOp::verify() { return verifyInsideFunction(*this); }

LogicalResult
CallOpaqueOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  func::FuncOp callee = lookupCallee(*this, getCalleeAttr(), symbolTable);
  if (!callee)
    return failure();
  FunctionType fnType = callee.getFunctionType();
  if (fnType.getNumInputs() != getNumOperands())
    return emitOpError() << "callee " << getCalleeAttr() << " takes "
                         << fnType.getNumInputs()
                         << " parameter(s), but the call passes "
                         << getNumOperands() << " operand(s)";
  if (fnType.getNumResults() != getNumResults())
    return emitOpError() << "callee " << getCalleeAttr() << " returns "
                         << fnType.getNumResults()
                         << " value(s), but the call has " << getNumResults()
                         << " result(s)";
  for (auto [index, operand] : llvm::enumerate(getOperands()))
    if (!paramAccepts(fnType.getInput(index), operand.getType()))
      return emitOpError() << "operand #" << index << " of type "
                           << operand.getType() << " does not match parameter #"
                           << index << " of callee " << getCalleeAttr()
                           << ": expected "
                           << expectedParamText(operand.getType()) << ", got "
                           << fnType.getInput(index);
  // A result must match exactly: nothing checks the sizes an opaque callee
  // returns against a static result type.
  for (auto [index, result] : llvm::enumerate(getResults()))
    if (!resultMatches(fnType.getResult(index), result.getType()))
      return emitOpError() << "result #" << index << " of type "
                           << result.getType() << " does not match result #"
                           << index << " of callee " << getCalleeAttr()
                           << ": expected "
                           << expectedParamText(result.getType()) << ", got "
                           << fnType.getResult(index);
  return success();
}

//===----------------------------------------------------------------------===//
// AssumeUnaliasedOp
//===----------------------------------------------------------------------===//

LogicalResult AssumeUnaliasedOp::verify() {
  return verifyInsideFunction(*this);
}

#define GET_OP_CLASSES
#include "TDFOps.cpp.inc"
