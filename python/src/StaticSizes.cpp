//===- StaticSizes.cpp - fast pre-check for oversized static shapes -------===//
//
// `tdf-check-sizes` (passes/check_sizes.py, tdf.limits.static_size_errors)
// reports every tensor/memref/vector type whose static size in bits
// overflows int64, from Python: a callback per op, 0.1 s on a 2,000-op JAX
// program. This walk, in C++, tells whether any type the IR holds (results,
// block arguments, attributes, and every type nested in them) might
// overflow; only then does the Python check run and word its errors. It
// over-approximates: a shaped type whose element it cannot size (anything
// but an integer, float, index or complex of those) counts as a suspect.
//
//===----------------------------------------------------------------------===//

#include "Bridge.h"

#include "mlir/CAPI/IR.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Operation.h"

#include "llvm/Support/MathExtras.h"

#include <algorithm>
#include <limits>

using namespace mlir;

namespace {

/// At least the bits one element of a shaped type is stored in
/// (tdf.vocabulary.element_nbytes: whole bytes, rounded up to the
/// alignment; an i1 takes a byte), or 0 when not known here.
uint64_t elementBits(Type element) {
  if (element.isIntOrFloat())
    return llvm::PowerOf2Ceil(
        std::max<uint64_t>(element.getIntOrFloatBitWidth(), 8));
  if (element.isIndex())
    return 64;
  if (auto complex = dyn_cast<ComplexType>(element)) {
    uint64_t half = elementBits(complex.getElementType());
    return half ? 2 * half : 0;
  }
  return 0;
}

/// Whether the shaped `type` may hold more than INT64_MAX bits.
bool suspect(Type type) {
  auto shaped = dyn_cast<ShapedType>(type);
  if (!shaped || !shaped.hasRank() ||
      !isa<RankedTensorType, MemRefType, VectorType>(type))
    return false;
  uint64_t bits = elementBits(shaped.getElementType());
  if (bits == 0)
    return true;
  constexpr uint64_t kMax = std::numeric_limits<int64_t>::max();
  for (int64_t extent : shaped.getShape()) {
    if (ShapedType::isDynamic(extent))
      return false;
    if (extent != 0 && bits > kMax / static_cast<uint64_t>(extent))
      return true;
    bits *= static_cast<uint64_t>(extent);
  }
  return false;
}

/// Whether `type` or a type nested in it is a suspect.
bool holdsSuspect(Type type) {
  return type
      .walk([](Type nested) {
        return suspect(nested) ? WalkResult::interrupt()
                               : WalkResult::advance();
      })
      .wasInterrupted();
}

} // namespace

namespace tdfpy {

bool staticSizesMayOverflow(MlirOperation root) {
  DenseSet<Type> checked;
  auto check = [&](Type type) {
    return checked.insert(type).second && holdsSuspect(type);
  };
  WalkResult result = unwrap(root)->walk([&](Operation *op) {
    for (Type type : op->getResultTypes())
      if (check(type))
        return WalkResult::interrupt();
    for (Region &region : op->getRegions())
      for (Block &block : region)
        for (BlockArgument argument : block.getArguments())
          if (check(argument.getType()))
            return WalkResult::interrupt();
    bool found = false;
    op->getAttrDictionary().walk([&](Type type) {
      if (!found && check(type))
        found = true;
    });
    return found ? WalkResult::interrupt() : WalkResult::advance();
  });
  return result.wasInterrupted();
}

} // namespace tdfpy
