//===- Bridge.h - C++ side of the tdf Python extension ----------*- C++ -*-===//
//
// Plain C++ entry points used by the nanobind module. They are compiled without
// RTTI and exceptions, like MLIR itself, so they may subclass MLIR classes; the
// nanobind module (built with RTTI and exceptions) only sees these declarations
// and C API handles.
//
//===----------------------------------------------------------------------===//

#ifndef TDF_PYTHON_BRIDGE_H
#define TDF_PYTHON_BRIDGE_H

#include "mlir-c/IR.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace llvm {
class Error;
} // namespace llvm

namespace tdfpy {

/// The text of an LLVM error (consumed), without trailing newlines.
std::string errorMessage(llvm::Error error);

/// The value of one option of a Python pass when it runs.
struct PassOptionValue {
  std::string name;
  char kind; // 'b' bool, 'i' integer, 's' string
  bool boolValue = false;
  int64_t intValue = 0;
  std::string stringValue;
};

/// Called when a Python pass runs on `op`. Returns true on success. On failure
/// `error` holds a message to emit on `op` (empty when the pass emitted its own
/// diagnostics). `statistics` has one counter per declared statistic, to be
/// incremented by the callee.
using PythonPassRunFn = bool (*)(void *userData, MlirOperation op,
                                 const std::vector<PassOptionValue> &options,
                                 std::vector<int64_t> &statistics,
                                 std::string &error);

/// A pass implemented in Python, as registered with the MLIR pass registry.
struct PythonPassSpec {
  struct Option {
    std::string name;
    char kind; // 'b', 'i' or 's'
    std::string defaultValue;
    std::string description;
  };
  struct Statistic {
    std::string name;
    std::string description;
  };
  std::string argument;
  std::string description;
  std::vector<Option> options;
  std::vector<Statistic> statistics;
  PythonPassRunFn run = nullptr;
  void *userData = nullptr; // owned by the caller for the process lifetime
};

/// Registers `spec` with the global MLIR pass registry, so that its argument
/// can be named in textual pipelines and on the tdf-opt command line. Returns
/// an error message, empty on success. Option kinds and integer defaults are
/// validated by the caller.
std::string registerPythonPass(const PythonPassSpec &spec);

/// Expands the options string of a pipeline (the text between the braces,
/// possibly empty) to a comma-separated pass list. Returns true on success;
/// on failure `result` holds the error message.
using PipelineExpandFn = bool (*)(void *userData, const std::string &options,
                                  std::string &result);

/// Registers a pass pipeline whose passes are computed from its options by
/// `expand`. Returns an error message, empty on success.
std::string registerPipeline(const std::string &argument,
                             const std::string &description,
                             PipelineExpandFn expand, void *userData);

/// True when a pass or pass pipeline named `argument` is registered.
bool isPassRegistered(const std::string &argument);

/// Registers the tdf dialect and its interface models in `registry`.
void registerDialect(MlirDialectRegistry registry);

/// Emits a diagnostic at `loc` (severity: 0 error, 1 warning, 2 remark) with
/// optional notes at other locations.
void emitDiagnostic(
    MlirLocation loc, int severity, const std::string &message,
    const std::vector<std::pair<MlirLocation, std::string>> &notes);

/// Registers tdf's C++ passes on the math dialect (tdf-math-approximation,
/// tdf-convert-math-to-libm) with the global pass registry; idempotent.
void registerMathPasses();

/// Makes the context tdf-opt processes each input chunk in. `create` returns
/// a fresh context owned by the caller's side (Python: a Python pass wraps
/// its context, and the wrapper owns it) with a `handle` for `release`, which
/// gives it back once the chunk is done; on failure it returns a null context
/// and sets `error`. Called on the driver's thread without the GIL.
struct OptContextFactory {
  MlirContext (*create)(void *userData, void **handle, std::string &error);
  void (*release)(void *userData, void *handle);
  void *userData = nullptr;
};

/// tdf-opt, step 1 (with the GIL: `--help` and bad options exit or return
/// here): registers mlir-opt's options once per process, takes the dialects
/// of `registryContext`, and parses `args` (argv including the program name;
/// `argv` receives the C strings, which must outlive optRun). Returns -1
/// when optRun should follow, else the exit code.
int optParse(MlirContext registryContext, const std::vector<std::string> &args,
             std::vector<const char *> &argv);

/// tdf-opt, step 2 (without the GIL, so that Python passes can run on the
/// pass manager's threads): mlir-opt's driver on the parsed options. Returns
/// the exit code.
int optRun(const OptContextFactory &factory);

/// An LLVM-dialect module made ready for LLVM (prepareModule): the bitcode
/// of each partition, in no MLIR or LLVM context.
struct PreparedModule {
  std::vector<std::string> bitcode;
  unsigned parts = 0; // functions cut out of large ones
  double seconds = 0; // the time prepareModule took
};

/// Seconds spent in each step of compilePrepared.
struct ObjectCompileTimes {
  double translate = 0; // prepareModule's time
  // Each partition is optimized then code-generated on its own thread; the
  // two times are those of the partition that finished last (the wall time).
  double optimize = 0;        // LLVM's default pipeline for the level
  double codegen = 0;         // the host's code generator
  unsigned parts = 0;         // functions cut out of large ones
  unsigned partitions = 0;    // objects compiled (one thread each)
  unsigned fastFunctions = 0; // straight-line functions given to FastISel
};

/// Step 1 of tdf's code generator (ObjectCompiler.cpp): the LLVM-dialect
/// module `module` translated to LLVM IR for the host, the functions not
/// named in `exported` (when given) made internal, with a packed wrapper
/// `_mlir_<f>(void **)` per external function, functions of many loops cut
/// into parts of about `partLoops` loops (0: never), the outermost loops of
/// functions with at least `glueInstructions` instructions outside loops,
/// more than inside, each made a function of its own (0: never), and the
/// functions spread over up to `threads` partitions. Call without the GIL;
/// nothing else may use the module's context meanwhile. Returns false with
/// `error`.
bool prepareModule(MlirOperation module, unsigned partLoops,
                   unsigned glueInstructions, unsigned threads,
                   const std::optional<std::vector<std::string>> &exported,
                   PreparedModule &prepared, std::string &error);

/// Step 2, on any thread (it touches no MLIR): each partition through
/// LLVM's default pipeline and code generator at `optLevel` (0-3) on a
/// thread of its own; one object per partition, to be linked together.
/// At `optLevel` > 0, the optimized functions without a loop of at least
/// `fastInstructions` instructions (0: none) are code-generated by FastISel
/// (ObjectCompiler.cpp, fastCodegen). Returns false with `error`.
bool compilePrepared(const PreparedModule &prepared, unsigned optLevel,
                     unsigned fastInstructions,
                     std::vector<std::string> &objects,
                     ObjectCompileTimes &times, std::string &error);

/// Object code linked into the process by loadObject (ObjectLoader.cpp).
struct LoadedObject;

/// Links `objects` (the relocatable objects of one program, which may refer
/// to each other's symbols) into the process: `symbols` are defined at the
/// given addresses, the other undefined symbols resolve in `libraries` and then
/// in the process. On success returns the loaded code (alive until
/// releaseObject) and the address of each name of `lookups` in `addresses`; on
/// failure returns null and sets `error`. Never aborts on a bad object.
LoadedObject *
loadObject(const std::vector<std::string> &objects,
           const std::vector<std::pair<std::string, uint64_t>> &symbols,
           const std::vector<std::string> &libraries,
           const std::vector<std::string> &lookups,
           std::vector<uint64_t> &addresses, std::string &error);

/// Frees the code of a loadObject result. No thread runs it then: the
/// thread pool (Parallel.cpp) returns from a parallel loop only when every
/// task has returned.
void releaseObject(LoadedObject *object);

/// Whether any type `root` holds (results, block arguments, attributes and
/// the types nested in them) may be a tensor, memref or vector of static
/// shape over INT64_MAX bits (StaticSizes.cpp; false: certainly none).
bool staticSizesMayOverflow(MlirOperation root);

/// The host as the code generator sees it: the process triple, the CPU name
/// and its sorted feature list (`+avx2,-avx512f,...`).
std::string hostCPU();

} // namespace tdfpy

#endif // TDF_PYTHON_BRIDGE_H
