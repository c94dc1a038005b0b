//===- TDFCAPI.cpp - C API of the tdf dialect -----------------------------===//
//
// Implements the C entry points declared in TDFCAPI.h.
//
//===----------------------------------------------------------------------===//

#include "TDFCAPI.h"
#include "TDFDialect.h"

#include "mlir/CAPI/IR.h"
#include "mlir/CAPI/Registration.h"

MLIR_DEFINE_CAPI_DIALECT_REGISTRATION(TDF, tdf, mlir::tdf::TDFDialect)

void tdfRegisterDialect(MlirDialectRegistry registry) {
  mlir::tdf::registerTDFDialect(*unwrap(registry));
}
