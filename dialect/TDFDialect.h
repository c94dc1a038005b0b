//===- TDFDialect.h - tdf dialect declaration -------------------*- C++ -*-===//
//
// Declares the tdf dialect and the registration entry point that also attaches
// its external interface models.
//
//===----------------------------------------------------------------------===//

#ifndef TDF_DIALECT_TDFDIALECT_H
#define TDF_DIALECT_TDFDIALECT_H

#include "mlir/IR/Dialect.h"

#include "TDFOpsDialect.h.inc"

namespace mlir {
class DialectRegistry;
namespace tdf {

/// Registers the tdf dialect and its external models (bufferization) in
/// `registry`.
void registerTDFDialect(DialectRegistry &registry);

} // namespace tdf
} // namespace mlir

#endif // TDF_DIALECT_TDFDIALECT_H
