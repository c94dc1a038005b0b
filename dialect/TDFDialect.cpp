//===- TDFDialect.cpp - tdf dialect definition ----------------------------===//
//
// Defines the tdf dialect: initialization, the verifiers of `tdf.donate`
// (argument and result attributes) and registration.
//
//===----------------------------------------------------------------------===//

#include "TDFDialect.h"
#include "TDFBufferization.h"
#include "TDFOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

using namespace mlir;
using namespace mlir::tdf;

#include "TDFOpsDialect.cpp.inc"

void TDFDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "TDFOps.cpp.inc"
      >();
}

LogicalResult TDFDialect::verifyRegionArgAttribute(Operation *op,
                                                   unsigned regionIndex,
                                                   unsigned argIndex,
                                                   NamedAttribute attribute) {
  if (attribute.getName() != getDonateAttrName())
    return op->emitError() << "unknown tdf argument attribute '"
                           << attribute.getName().getValue() << "'";
  if (!isa<UnitAttr>(attribute.getValue()))
    return op->emitError() << "'" << getDonateAttrName()
                           << "' must be a unit attribute, got "
                           << attribute.getValue();
  auto fn = dyn_cast<FunctionOpInterface>(op);
  if (!fn || regionIndex != 0)
    return op->emitError() << "'" << getDonateAttrName()
                           << "' is only valid on function arguments";
  if (fn.isExternal())
    return op->emitError() << "'" << getDonateAttrName() << "' on argument #"
                           << argIndex
                           << " of a function declaration: only a function "
                              "with a body can reuse a donated buffer";
  Type type = fn.getArgumentTypes()[argIndex];
  // Memref arguments appear once the function has been bufferized.
  if (!isa<RankedTensorType, MemRefType>(type))
    return op->emitError() << "'" << getDonateAttrName()
                           << "' is only valid on ranked tensor arguments, "
                              "but argument #"
                           << argIndex << " has type " << type;
  return success();
}

LogicalResult
TDFDialect::verifyRegionResultAttribute(Operation *op, unsigned regionIndex,
                                        unsigned resultIndex,
                                        NamedAttribute attribute) {
  if (attribute.getName() == getDonateAttrName())
    return op->emitError() << "'" << getDonateAttrName()
                           << "' is only valid on function arguments, not on "
                              "result #"
                           << resultIndex
                           << " (donation gives an argument's buffer away; "
                              "results are the ones that reuse it)";
  return op->emitError() << "unknown tdf result attribute '"
                         << attribute.getName().getValue() << "'";
}

void mlir::tdf::registerTDFDialect(DialectRegistry &registry) {
  registry.insert<TDFDialect>();
  registerBufferizableOpInterfaceExternalModels(registry);
}
