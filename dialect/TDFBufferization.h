//===- TDFBufferization.h - BufferizableOpInterface models ------*- C++ -*-===//
//
// Declares the registration of the tdf ops' BufferizableOpInterface models.
//
//===----------------------------------------------------------------------===//

#ifndef TDF_DIALECT_TDFBUFFERIZATION_H
#define TDF_DIALECT_TDFBUFFERIZATION_H

namespace mlir {
class DialectRegistry;
namespace tdf {

/// Attaches BufferizableOpInterface external models to tdf.call,
/// tdf.call_inplace, tdf.call_opaque and tdf.assume_unaliased.
void registerBufferizableOpInterfaceExternalModels(DialectRegistry &registry);

} // namespace tdf
} // namespace mlir

#endif // TDF_DIALECT_TDFBUFFERIZATION_H
