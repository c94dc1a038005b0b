/*===- TDFCAPI.h - C API of the tdf dialect -----------------------*- C -*-===*\
|*                                                                            *|
|* C entry points to register the tdf dialect, for bindings in any language.  *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef TDF_C_DIALECT_H
#define TDF_C_DIALECT_H

#include "mlir-c/IR.h"

#ifdef __cplusplus
extern "C" {
#endif

MLIR_DECLARE_CAPI_DIALECT_REGISTRATION(TDF, tdf);

/// Registers the tdf dialect with its external interface models.
MLIR_CAPI_EXPORTED void tdfRegisterDialect(MlirDialectRegistry registry);

#ifdef __cplusplus
}
#endif

#endif // TDF_C_DIALECT_H
