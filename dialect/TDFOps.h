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

#endif // TDF_DIALECT_TDFOPS_H
