//===- TDFOps.h - tdf dialect operations ------------------------*- C++ -*-===//
//
// Declares the generated operation classes of the tdf dialect.
//
//===----------------------------------------------------------------------===//

#ifndef TDF_DIALECT_TDFOPS_H
#define TDF_DIALECT_TDFOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "TDFDialect.h"

#define GET_OP_CLASSES
#include "TDFOps.h.inc"

namespace mlir::tdf {
/// The operand that gives the sizes of the dynamic dimensions of fresh
/// result `resultIndex` of a `tdf.call`/`tdf.call_inplace`: the first ranked
/// tensor operand of the result's rank (dimension `d` of the result has the
/// size of dimension `d` of that operand), or null when there is none.
OpOperand *getFreshResultShapeOperand(Operation *op, unsigned resultIndex);
} // namespace mlir::tdf

#endif // TDF_DIALECT_TDFOPS_H
