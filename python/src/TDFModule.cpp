//===- TDFModule.cpp - nanobind module tdf._tdf ---------------------------===//
//
// The native part of the tdf Python package: dialect registration, the bridge
// that registers Python passes with MLIR's pass registry, diagnostics with
// any severity, and the tdf-opt driver.
//
//===----------------------------------------------------------------------===//

#include "Bridge.h"

#include "mlir/Bindings/Python/Nanobind.h"
#include "mlir/Bindings/Python/NanobindAdaptors.h"
#include "mlir/CAPI/IR.h"
#include "mlir/IR/Operation.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"

#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <string_view>

namespace nb = nanobind;

namespace tdfpy {
/// The native call path of compiled functions (Runtime.cpp).
void registerRuntime(nb::module_ &m);
/// Contractions through a BLAS loaded at run time (Blas.cpp).
void registerBlas(nb::module_ &m);
void registerConvolution(nb::module_ &m);
void registerGpuBlas(nb::module_ &m);
} // namespace tdfpy

namespace {

/// Calls the Python runner of a pass. The runner is
/// `run(op, options: dict) -> (ok: bool, error: str, statistics: list[int])`
/// and should not raise; if it does, the exception text becomes the error.
bool runPythonPass(void *userData, MlirOperation op,
                   const std::vector<tdfpy::PassOptionValue> &options,
                   std::vector<int64_t> &statistics, std::string &error) {
  nb::gil_scoped_acquire gil;
  try {
    nb::dict values;
    for (const tdfpy::PassOptionValue &option : options) {
      if (option.kind == 'b')
        values[option.name.c_str()] = nb::bool_(option.boolValue);
      else if (option.kind == 'i')
        values[option.name.c_str()] = nb::int_(option.intValue);
      else
        values[option.name.c_str()] = nb::str(option.stringValue.c_str());
    }
    nb::handle runner(static_cast<PyObject *>(userData));
    nb::object result = runner(nb::cast(op), values);
    auto [ok, message, counts] =
        nb::cast<std::tuple<bool, std::string, std::vector<int64_t>>>(result);
    for (size_t i = 0; i < counts.size() && i < statistics.size(); ++i)
      statistics[i] += counts[i];
    error = message;
    return ok;
  } catch (nb::python_error &e) {
    error = std::string("python pass raised: ") + e.what();
    return false;
  } catch (std::exception &e) {
    error = std::string("python pass failed: ") + e.what();
    return false;
  }
}

/// Calls the Python expander of a pipeline:
/// `expand(options: str) -> (ok: bool, text: str)`.
bool expandPipeline(void *userData, const std::string &options,
                    std::string &result) {
  nb::gil_scoped_acquire gil;
  try {
    nb::handle expand(static_cast<PyObject *>(userData));
    auto [ok, text] =
        nb::cast<std::tuple<bool, std::string>>(expand(options.c_str()));
    result = text;
    return ok;
  } catch (nb::python_error &e) {
    result = std::string("pipeline expansion raised: ") + e.what();
    return false;
  } catch (std::exception &e) {
    result = std::string("pipeline expansion failed: ") + e.what();
    return false;
  }
}

/// tdf-opt's context factory: `userData` is a Python callable returning a
/// fresh mlir.ir.Context; the Python object owns the context and is kept
/// alive (the handle) until the driver gives it back.
MlirContext createOptContext(void *userData, void **handle,
                             std::string &error) {
  nb::gil_scoped_acquire gil;
  try {
    nb::object context = nb::handle(static_cast<PyObject *>(userData))();
    MlirContext raw = nb::cast<MlirContext>(context);
    *handle = context.release().ptr();
    return raw;
  } catch (nb::python_error &e) {
    error = e.what();
  } catch (std::exception &e) {
    error = e.what();
  }
  return MlirContext{nullptr};
}

void releaseOptContext(void *, void *handle) {
  nb::gil_scoped_acquire gil;
  nb::handle(static_cast<PyObject *>(handle)).dec_ref();
}

/// Object code of a cached program linked into the process (ObjectLoader.cpp):
/// the code lives as long as this object.
class LoadedObjectHandle {
public:
  explicit LoadedObjectHandle(tdfpy::LoadedObject *object) : object(object) {}
  LoadedObjectHandle(const LoadedObjectHandle &) = delete;
  LoadedObjectHandle &operator=(const LoadedObjectHandle &) = delete;
  ~LoadedObjectHandle() { tdfpy::releaseObject(object); }

private:
  tdfpy::LoadedObject *object;
};

void registerObjectLoader(nb::module_ &m) {
  nb::class_<LoadedObjectHandle>(
      m, "LoadedObject",
      "Object code linked by load_object; freed with this object.");
  m.def(
      "load_object",
      [](const std::vector<nb::bytes> &objects,
         const std::vector<std::pair<std::string, uint64_t>> &symbols,
         const std::vector<std::string> &libraries,
         const std::vector<std::string> &lookups) {
        std::vector<std::string> bytes;
        for (const nb::bytes &object : objects)
          bytes.emplace_back(object.c_str(), object.size());
        std::vector<uint64_t> addresses;
        std::string error;
        tdfpy::LoadedObject *loaded;
        {
          nb::gil_scoped_release release;
          loaded = tdfpy::loadObject(bytes, symbols, libraries, lookups,
                                     addresses, error);
        }
        if (!loaded) {
          // The message may quote bytes of a damaged object: keep it ASCII.
          for (char &c : error)
            if (static_cast<unsigned char>(c) >= 0x80 ||
                (c < 0x20 && c != '\n'))
              c = '?';
          throw std::runtime_error("cannot link the object: " + error);
        }
        auto *handle = new LoadedObjectHandle(loaded);
        return nb::make_tuple(nb::cast(handle, nb::rv_policy::take_ownership),
                              addresses);
      },
      nb::arg("objects"), nb::arg("symbols"), nb::arg("libraries"),
      nb::arg("lookups"),
      "Links the relocatable objects of one program (compile_prepared's) into "
      "the process: `symbols` (name, address) are defined, other symbols "
      "resolve in `libraries` and then the process. Returns (LoadedObject, "
      "[address of each name of `lookups`]); RuntimeError when it cannot.");
  nb::class_<tdfpy::PreparedModule>(
      m, "PreparedModule",
      "A module ready for LLVM (prepare_module): partitions as bitcode.")
      .def_prop_ro("partitions",
                   [](const tdfpy::PreparedModule &prepared) {
                     return prepared.bitcode.size();
                   })
      .def_ro("parts", &tdfpy::PreparedModule::parts);
  m.def(
      "prepare_module",
      [](MlirOperation module, unsigned partLoops, unsigned threads,
         std::optional<std::vector<std::string>> exported,
         unsigned glueInstructions) {
        auto prepared = std::make_unique<tdfpy::PreparedModule>();
        std::string error;
        bool ok;
        {
          nb::gil_scoped_release release;
          ok = tdfpy::prepareModule(module, partLoops, glueInstructions,
                                    threads, exported, *prepared, error);
        }
        if (!ok)
          throw std::runtime_error(error);
        return prepared.release();
      },
      nb::arg("module"), nb::arg("part_loops"), nb::arg("threads"),
      nb::arg("exported") = nb::none(), nb::arg("glue_instructions") = 0,
      nb::rv_policy::take_ownership,
      "Translates an LLVM-dialect module for the host, without the GIL: "
      "the functions not named in `exported` (when given) made internal, "
      "functions of many loops cut into parts of about `part_loops` loops, "
      "the outermost loops of functions with at least `glue_instructions` "
      "instructions outside loops, more than inside, made functions of "
      "their own (0: never), the functions spread over up to `threads` "
      "partitions. RuntimeError when it cannot.");
  m.def(
      "compile_prepared",
      [](const tdfpy::PreparedModule &prepared, unsigned optLevel,
         unsigned fastInstructions) {
        if (optLevel > 3)
          throw nb::value_error("opt_level must be in 0..3");
        std::vector<std::string> objects;
        std::string error;
        tdfpy::ObjectCompileTimes times;
        bool ok;
        {
          nb::gil_scoped_release release;
          ok = tdfpy::compilePrepared(prepared, optLevel, fastInstructions,
                                      objects, times, error);
        }
        if (!ok)
          throw std::runtime_error(error);
        nb::list list;
        for (const std::string &object : objects)
          list.append(nb::bytes(object.data(), object.size()));
        nb::dict stats;
        stats["translate"] = times.translate;
        stats["optimize"] = times.optimize;
        stats["codegen"] = times.codegen;
        stats["parts"] = times.parts;
        stats["partitions"] = times.partitions;
        stats["fast_functions"] = times.fastFunctions;
        return nb::make_tuple(list, stats);
      },
      nb::arg("prepared"), nb::arg("opt_level"),
      nb::arg("fast_instructions") = 0,
      "Compiles a prepared module into relocatable objects for the host (what "
      "load_object links), one per partition, each on a thread of its own, "
      "without the GIL; at opt_level > 0, optimized functions without a loop "
      "of at least `fast_instructions` instructions (0: none) go to the fast "
      "instruction selector. Returns ([object bytes], {translate, optimize, "
      "codegen: seconds, parts, partitions, fast_functions}); RuntimeError "
      "when it cannot.");
  m.def("static_sizes_may_overflow", &tdfpy::staticSizesMayOverflow,
        nb::arg("root"),
        "Whether a type at or under `root` may be a tensor, memref or vector "
        "of static shape over INT64_MAX bits (False: certainly none; True: "
        "tdf.limits.static_size_errors says which).");
  m.def("host_cpu", &tdfpy::hostCPU,
        "The process triple, host CPU name and sorted CPU features, as "
        "LLVM's code generator sees them.");
  m.def(
      "collect_ops",
      [](MlirOperation root, std::optional<std::vector<std::string>> names) {
        // The walk and the name test in C++: a Python callback per op
        // (Operation.walk) costs more than most passes' own work.
        struct Walk {
          const std::vector<std::string> *names;
          std::vector<MlirOperation> found;
        } walk{names ? &*names : nullptr, {}};
        mlirOperationWalk(
            root,
            [](MlirOperation op, void *data) {
              auto &walk = *static_cast<Walk *>(data);
              MlirStringRef name = mlirIdentifierStr(mlirOperationGetName(op));
              std::string_view view(name.data, name.length);
              if (!walk.names ||
                  std::find(walk.names->begin(), walk.names->end(), view) !=
                      walk.names->end())
                walk.found.push_back(op);
              return MlirWalkResultAdvance;
            },
            &walk, MlirWalkPostOrder);
        return walk.found;
      },
      nb::arg("root"), nb::arg("names").none(),
      "The ops at or under `root`, in post-order, whose name is one of "
      "`names` (None: every op).");
  m.def(
      "used_from_outside",
      [](const std::vector<MlirOperation> &ops) {
        // What tdf.passes.ir_utils.used_from_outside computed with a Python
        // loop over every operand of every nested op (30 ms of
        // tdf-share-loop-nests on 16 fused loops of a 2,000-op program).
        llvm::DenseSet<mlir::Value> inside;
        std::vector<std::vector<mlir::Operation *>> nests;
        for (MlirOperation handle : ops) {
          mlir::Operation *root = unwrap(handle);
          std::vector<mlir::Operation *> nest{root};
          root->walk([&](mlir::Operation *inner) {
            if (inner != root)
              nest.push_back(inner);
          });
          for (mlir::Operation *inner : nest) {
            for (mlir::Value result : inner->getResults())
              inside.insert(result);
            for (mlir::Region &region : inner->getRegions())
              for (mlir::Block &block : region)
                for (mlir::BlockArgument argument : block.getArguments())
                  inside.insert(argument);
          }
          nests.push_back(std::move(nest));
        }
        llvm::SetVector<mlir::Value> used;
        for (const std::vector<mlir::Operation *> &nest : nests)
          for (mlir::Operation *inner : nest)
            for (mlir::Value value : inner->getOperands())
              if (!inside.contains(value))
                used.insert(value);
        std::vector<MlirValue> out;
        for (mlir::Value value : used)
          out.push_back(wrap(value));
        return out;
      },
      nb::arg("ops"),
      "The values `ops` and the ops nested in them use but none of them "
      "defines, in order of first use (each op's operands before those of "
      "the ops nested in it, those in post-order), each once.");
  m.def(
      "last_user_in_block",
      [](MlirValue value, MlirBlock block,
         MlirOperation skip) -> std::optional<MlirOperation> {
        // tdf-schedule-for-memory asked this of every operand of every
        // candidate op with a Python loop over the value's uses.
        mlir::Block *owner = unwrap(block);
        mlir::Operation *skipped = unwrap(skip);
        mlir::Operation *last = nullptr;
        for (mlir::OpOperand &use : unwrap(value).getUses()) {
          mlir::Operation *top = owner->findAncestorOpInBlock(*use.getOwner());
          if (!top || top == skipped)
            continue;
          if (!last || last->isBeforeInBlock(top))
            last = top;
        }
        if (!last)
          return std::nullopt;
        return wrap(last);
      },
      nb::arg("value"), nb::arg("block"), nb::arg("skip"),
      "The last op of `block` (in block order) that is, or holds, a user of "
      "`value`, `skip` not counted; None when there is none.");
  m.def(
      "remap_operands",
      [](const std::vector<MlirOperation> &roots,
         const std::vector<MlirValue> &from, const std::vector<MlirValue> &to) {
        if (from.size() != to.size())
          throw nb::value_error("remap_operands: `old` and `new` differ in "
                                "length");
        llvm::DenseMap<mlir::Value, mlir::Value> mapping;
        for (size_t i = 0; i < from.size(); ++i)
          mapping[unwrap(from[i])] = unwrap(to[i]);
        for (MlirOperation handle : roots)
          unwrap(handle)->walk([&](mlir::Operation *inner) {
            for (mlir::OpOperand &operand : inner->getOpOperands()) {
              auto it = mapping.find(operand.get());
              if (it != mapping.end())
                operand.set(it->second);
            }
          });
      },
      nb::arg("roots"), nb::arg("old"), nb::arg("new"),
      "Every operand of an op at or under one of `roots` that is `old[i]` "
      "reads `new[i]` instead.");
}

} // namespace

NB_MODULE(_tdf, m) {
  m.doc() = "native part of tdf: dialect registration, Python pass bridge, "
            "tdf-opt driver";
  tdfpy::registerMathPasses();
  tdfpy::registerRuntime(m);
  tdfpy::registerBlas(m);
  tdfpy::registerConvolution(m);
  tdfpy::registerGpuBlas(m);
  registerObjectLoader(m);

  m.def(
      "register_dialect",
      [](MlirDialectRegistry registry) { tdfpy::registerDialect(registry); },
      nb::arg("registry"),
      "Registers the tdf dialect and its interface models in a "
      "DialectRegistry.");

  m.def(
      "register_pass",
      [](const std::string &argument, const std::string &description,
         const std::vector<std::tuple<std::string, std::string, std::string,
                                      std::string>> &options,
         const std::vector<std::pair<std::string, std::string>> &statistics,
         nb::object runner) {
        tdfpy::PythonPassSpec spec;
        spec.argument = argument;
        spec.description = description;
        for (const auto &[name, kind, defaultValue, desc] : options) {
          if (kind.size() != 1)
            throw nb::value_error(("option '" + name + "' has kind '" + kind +
                                   "'; expected 'b', 'i' or 's'")
                                      .c_str());
          spec.options.push_back({name, kind[0], defaultValue, desc});
        }
        for (const auto &[name, desc] : statistics)
          spec.statistics.push_back({name, desc});
        spec.run = runPythonPass;
        spec.userData = runner.release().ptr(); // kept for the process
        std::string error = tdfpy::registerPythonPass(spec);
        if (!error.empty()) {
          nb::handle(static_cast<PyObject *>(spec.userData)).dec_ref();
          throw nb::value_error(error.c_str());
        }
      },
      nb::arg("argument"), nb::arg("description"), nb::arg("options"),
      nb::arg("statistics"), nb::arg("runner"),
      "Registers a pass implemented in Python with MLIR's pass registry.");

  m.def(
      "register_pipeline",
      [](const std::string &argument, const std::string &description,
         nb::object expand) {
        void *userData = expand.release().ptr(); // kept for the process
        std::string error = tdfpy::registerPipeline(argument, description,
                                                    expandPipeline, userData);
        if (!error.empty()) {
          nb::handle(static_cast<PyObject *>(userData)).dec_ref();
          throw nb::value_error(error.c_str());
        }
      },
      nb::arg("argument"), nb::arg("description"), nb::arg("expand"),
      "Registers a pipeline whose pass list `expand(options)` computes.");

  m.def("is_pass_registered", &tdfpy::isPassRegistered, nb::arg("argument"),
        "True when a pass or pipeline with this argument is registered.");

  m.def(
      "emit_diagnostic",
      [](MlirLocation loc, int severity, const std::string &message,
         const std::vector<std::pair<MlirLocation, std::string>> &notes) {
        if (severity < 0 || severity > 2)
          throw nb::value_error("severity must be 0 (error), 1 (warning) or "
                                "2 (remark)");
        tdfpy::emitDiagnostic(loc, severity, message, notes);
      },
      nb::arg("location"), nb::arg("severity"), nb::arg("message"),
      nb::arg("notes") = std::vector<std::pair<MlirLocation, std::string>>(),
      "Emits a diagnostic (0 error, 1 warning, 2 remark) with notes.");

  m.def(
      "opt_main",
      [](MlirContext context, const std::vector<std::string> &args,
         nb::object newContext) {
        std::vector<const char *> argv;
        int code = tdfpy::optParse(context, args, argv);
        if (code >= 0)
          return code;
        tdfpy::OptContextFactory factory;
        factory.create = createOptContext;
        factory.release = releaseOptContext;
        factory.userData = newContext.ptr();
        // Python passes may run on the pass manager's threads.
        nb::gil_scoped_release release;
        return tdfpy::optRun(factory);
      },
      nb::arg("context"), nb::arg("args"), nb::arg("new_context"),
      "Runs the tdf-opt driver with argv `args` (the dialects of `context`; "
      "each input chunk in a fresh context from `new_context()`); returns "
      "the exit code.");
}
