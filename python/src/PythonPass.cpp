//===- PythonPass.cpp - MLIR passes implemented in Python -----------------===//
//
// A generic mlir::Pass whose body is a Python callable, with real MLIR pass
// options and statistics, registered in the global pass registry so that the
// pass can be named in textual pipelines (Python and tdf-opt alike).
//
//===----------------------------------------------------------------------===//

#include "Bridge.h"

#include "TDFDialect.h"

#include "mlir/CAPI/IR.h"
#include "mlir/CAPI/Support.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Support/TypeID.h"

#include <deque>
#include <memory>

using namespace mlir;

namespace {

/// A pass whose runOnOperation calls back into Python.
class PythonPass : public Pass {
public:
  PythonPass(TypeID id, const tdfpy::PythonPassSpec &spec)
      : Pass(id), spec(spec) {
    for (const auto &opt : spec.options) {
      switch (opt.kind) {
      case 'b':
        boolOptions.push_back(std::make_unique<Option<bool>>(
            *this, opt.name, llvm::cl::desc(opt.description),
            llvm::cl::init(opt.defaultValue == "true")));
        break;
      case 'i':
        intOptions.push_back(std::make_unique<Option<int64_t>>(
            *this, opt.name, llvm::cl::desc(opt.description),
            llvm::cl::init(
                (int64_t)std::strtoll(opt.defaultValue.c_str(), nullptr, 10))));
        break;
      default:
        stringOptions.push_back(std::make_unique<Option<std::string>>(
            *this, opt.name, llvm::cl::desc(opt.description),
            llvm::cl::init(opt.defaultValue)));
        break;
      }
    }
    for (const auto &stat : spec.statistics)
      statistics.push_back(std::make_unique<Statistic>(
          this, stat.name.c_str(), stat.description.c_str()));
  }

  StringRef getName() const override { return spec.argument; }
  StringRef getArgument() const override { return spec.argument; }
  StringRef getDescription() const override { return spec.description; }
  bool canScheduleOn(RegisteredOperationName) const override { return true; }
  std::unique_ptr<Pass> clonePass() const override {
    return std::make_unique<PythonPass>(getTypeID(), spec);
  }

  void runOnOperation() override {
    std::vector<tdfpy::PassOptionValue> values;
    size_t b = 0, i = 0, s = 0;
    for (const auto &opt : spec.options) {
      tdfpy::PassOptionValue value;
      value.name = opt.name;
      value.kind = opt.kind;
      if (opt.kind == 'b')
        value.boolValue = *boolOptions[b++];
      else if (opt.kind == 'i')
        value.intValue = *intOptions[i++];
      else
        value.stringValue = *stringOptions[s++];
      values.push_back(std::move(value));
    }
    std::vector<int64_t> counters(statistics.size(), 0);
    std::string error;
    bool ok =
        spec.run(spec.userData, wrap(getOperation()), values, counters, error);
    for (size_t k = 0; k < counters.size(); ++k)
      *statistics[k] += counters[k];
    if (ok)
      return;
    if (!error.empty())
      getOperation()->emitError() << error;
    signalPassFailure();
  }

private:
  const tdfpy::PythonPassSpec &spec;
  std::vector<std::unique_ptr<Option<bool>>> boolOptions;
  std::vector<std::unique_ptr<Option<int64_t>>> intOptions;
  std::vector<std::unique_ptr<Option<std::string>>> stringOptions;
  std::vector<std::unique_ptr<Statistic>> statistics;
};

/// Specs live for the whole process: registered passes refer to them.
std::deque<tdfpy::PythonPassSpec> &registeredSpecs() {
  static std::deque<tdfpy::PythonPassSpec> specs;
  return specs;
}

TypeIDAllocator &typeIDAllocator() {
  static TypeIDAllocator allocator;
  return allocator;
}

} // namespace

bool tdfpy::isPassRegistered(const std::string &argument) {
  return PassInfo::lookup(argument) || PassPipelineInfo::lookup(argument);
}

std::string tdfpy::registerPythonPass(const PythonPassSpec &spec) {
  if (spec.argument.empty())
    return "a pass needs a non-empty argument";
  if (isPassRegistered(spec.argument))
    return "a pass named '" + spec.argument + "' is already registered";
  for (const auto &opt : spec.options) {
    if (opt.kind != 'b' && opt.kind != 'i' && opt.kind != 's')
      return "option '" + opt.name + "' has unknown kind '" +
             std::string(1, opt.kind) + "'";
  }
  const PythonPassSpec &stored = registeredSpecs().emplace_back(spec);
  TypeID id = typeIDAllocator().allocate();
  registerPass([id, &stored]() -> std::unique_ptr<Pass> {
    return std::make_unique<PythonPass>(id, stored);
  });
  return "";
}

std::string tdfpy::registerPipeline(const std::string &argument,
                                    const std::string &description,
                                    PipelineExpandFn expand, void *userData) {
  if (argument.empty())
    return "a pipeline needs a non-empty argument";
  if (isPassRegistered(argument))
    return "a pass named '" + argument + "' is already registered";
  // The registry keeps references to the argument and description.
  static std::deque<std::string> names;
  StringRef arg = names.emplace_back(argument);
  StringRef desc = names.emplace_back(description);
  std::string name = argument;
  registerPassPipeline(
      arg, desc,
      [expand, userData,
       name](OpPassManager &pm, StringRef options,
             function_ref<LogicalResult(const Twine &)> errorHandler)
          -> LogicalResult {
        std::string expanded;
        if (!expand(userData, options.str(), expanded))
          return errorHandler(expanded);
        std::string errors;
        llvm::raw_string_ostream os(errors);
        if (failed(parsePassPipeline(expanded, pm, os)))
          return errorHandler("pipeline '" + name + "' expanded to '" +
                              expanded +
                              "', which does not parse: " + os.str());
        return success();
      },
      [](function_ref<void(const detail::PassOptions &)>) {});
  return "";
}

void tdfpy::registerDialect(MlirDialectRegistry registry) {
  mlir::tdf::registerTDFDialect(*unwrap(registry));
}

void tdfpy::emitDiagnostic(
    MlirLocation loc, int severity, const std::string &message,
    const std::vector<std::pair<MlirLocation, std::string>> &notes) {
  Location location = unwrap(loc);
  auto attach = [&](InFlightDiagnostic &&diag) {
    diag << message;
    for (const auto &[noteLoc, note] : notes)
      diag.attachNote(unwrap(noteLoc)) << note;
  };
  switch (severity) {
  case 0:
    attach(emitError(location));
    break;
  case 1:
    attach(emitWarning(location));
    break;
  default:
    attach(emitRemark(location));
    break;
  }
}
