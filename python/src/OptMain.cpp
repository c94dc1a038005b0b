//===- OptMain.cpp - the tdf-opt driver -----------------------------------===//
//
// tdf-opt is mlir-opt with the tdf dialect and tdf's Python passes. It runs
// inside the Python process (Python passes need the interpreter), where the
// bindings' libMLIRPythonCAPI.so is the one copy of MLIR; MlirOptMain itself
// lives only in libMLIR.so, which cannot be loaded next to it.
//
// So the driver is assembled from MLIR's own pieces:
//  * exported by libMLIRPythonCAPI.so: the asm-printer, context and timing
//    option groups, PassPipelineCLParser, the diagnostic (verifier)
//    handlers, the parser, the bytecode writer, crash reproducers, remarks;
//  * not exported there, linked from the dev wheel's static archives (only
//    those members; every symbol they reference resolves to the shared MLIR,
//    see python/CMakeLists.txt): MlirOptMainConfig and its options
//    (MlirOptMain.cpp), splitAndProcessBuffer (ToolUtilities.cpp), the
//    pass-manager options (PassManagerOptions.cpp), the debug counter and
//    action tracing options (mlir/lib/Debug), the LLVM remark streamer and
//    the plugin loaders.
//
// What is written here is the part of MlirOptMain.cpp that cannot be reused:
// MlirOptMain creates each chunk's MLIRContext on its stack, but a Python
// pass wraps its context in a Python object that owns (and destroys) it. So
// each chunk's context comes from a factory that returns a context owned by
// Python (tdf.Context(): every upstream dialect, tdf, loaded), and the rest
// of processBuffer/performActions follows upstream step by step: the shared
// thread pool, `Parser` and `Output` timers, round-trip verification,
// remarks, reproducers, bytecode output, diagnostic filtering and
// verification.
//
//===----------------------------------------------------------------------===//

#include "Bridge.h"

#include "mlir/Bytecode/BytecodeWriter.h"
#include "mlir/CAPI/IR.h"
#include "mlir/Debug/CLOptionsSetup.h"
#include "mlir/Debug/Counter.h"
#include "mlir/Dialect/IRDL/IR/IRDL.h"
#include "mlir/Dialect/IRDL/IRDLLoading.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Remarks.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Remark/RemarkStreamer.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Support/Timing.h"
#include "mlir/Support/ToolUtilities.h"
#include "mlir/Tools/ParseUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Remarks/RemarkFormat.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/DynamicLibrary.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/Regex.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ThreadPool.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdio>
#include <cstring>
#include <elf.h>
#include <mutex>
#include <optional>
#include <set>

using namespace mlir;

namespace {

/// The dialects of tdf-opt: those of the context handed to optParse (every
/// upstream dialect and extension, and tdf's).
DialectRegistry &toolRegistry() {
  static DialectRegistry *registry = new DialectRegistry();
  return *registry;
}

/// Where `--load-dialect-plugin` registers its dialects (MLIR's option
/// callback keeps a reference to it for the whole process).
DialectRegistry &pluginRegistry() {
  static DialectRegistry *registry = new DialectRegistry();
  return *registry;
}

/// The names of every dialect tdf-opt knows, sorted (as
/// DialectRegistry::getDialectNames lists them).
std::vector<std::string> dialectNames() {
  std::set<std::string> names;
  for (StringRef name : toolRegistry().getDialectNames())
    names.insert(name.str());
  for (StringRef name : pluginRegistry().getDialectNames())
    names.insert(name.str());
  return {names.begin(), names.end()};
}

/// The positional input and `-o`, as mlir-opt declares them.
struct FileOptions {
  llvm::cl::opt<std::string> inputFilename{llvm::cl::Positional,
                                           llvm::cl::desc("<input file>"),
                                           llvm::cl::init("-")};
  llvm::cl::opt<std::string> outputFilename{
      "o", llvm::cl::desc("Output filename"), llvm::cl::value_desc("filename"),
      llvm::cl::init("-")};
};

FileOptions *fileOptions = nullptr;

/// Registers every option mlir-opt registers (once per process).
void registerOptions() {
  if (fileOptions)
    return;
  fileOptions = new FileOptions();
  MlirOptMainConfig::registerCLOptions(pluginRegistry());
  registerAsmPrinterCLOptions();
  registerMLIRContextCLOptions();
  registerPassManagerCLOptions();
  registerDefaultTimingManagerCLOptions();
  tracing::DebugCounter::registerCLOptions();
}

/// A context for one chunk, owned by the factory's side (Python) and given
/// back when the chunk is done.
class ChunkContext {
public:
  explicit ChunkContext(const tdfpy::OptContextFactory &factory)
      : factory(factory) {
    MlirContext context = factory.create(factory.userData, &handle, error);
    if (!mlirContextIsNull(context))
      this->context = unwrap(context);
  }
  ~ChunkContext() {
    if (context) {
      // Detach the shared thread pool before the context may outlive it.
      if (context->isMultithreadingEnabled())
        context->disableMultithreading();
      factory.release(factory.userData, handle);
    }
  }
  MLIRContext *get() const { return context; }
  const std::string &getError() const { return error; }

private:
  const tdfpy::OptContextFactory &factory;
  MLIRContext *context = nullptr;
  void *handle = nullptr;
  std::string error;
};

/// Drops warnings, remarks and notes below the configured verbosity
/// (`--mlir-diagnostic-verbosity-level`, `--mlir-disable-diagnostic-notes`).
class VerbosityFilter : public ScopedDiagnosticHandler {
public:
  VerbosityFilter(MLIRContext *context, VerbosityLevel level, bool showNotes)
      : ScopedDiagnosticHandler(context) {
    setHandler([level, showNotes](Diagnostic &diag) -> LogicalResult {
      // success() swallows the diagnostic; failure() passes it on.
      switch (diag.getSeverity()) {
      case DiagnosticSeverity::Error:
        return failure();
      case DiagnosticSeverity::Warning:
        return success(level == VerbosityLevel::ErrorsOnly);
      case DiagnosticSeverity::Remark:
        return success(level != VerbosityLevel::ErrorsWarningsAndRemarks);
      case DiagnosticSeverity::Note:
        return success(!showNotes);
      }
      return failure();
    });
  }
};

/// `--irdl-file`: parses the file and loads the dialects it defines.
LogicalResult loadIRDLFile(StringRef irdlFile, MLIRContext &context) {
  DialectRegistry registry;
  registry.insert<irdl::IRDLDialect>();
  context.appendDialectRegistry(registry);
  std::string errorMessage;
  std::unique_ptr<llvm::MemoryBuffer> file =
      openInputFile(irdlFile, &errorMessage);
  if (!file) {
    emitError(UnknownLoc::get(&context)) << errorMessage;
    return failure();
  }
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
  SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, &context);
  if (!module)
    return failure();
  return irdl::loadDialects(module.get());
}

/// `--verify-roundtrip` in one format: print `op` (generic text with debug
/// info, or bytecode), parse it back in a fresh context and compare both
/// generic forms.
LogicalResult verifyRoundTrip(Operation *op, const MlirOptMainConfig &config,
                              bool useBytecode) {
  MLIRContext roundtripContext;
  roundtripContext.appendDialectRegistry(
      op->getContext()->getDialectRegistry());
  if (op->getContext()->allowsUnregisteredDialects())
    roundtripContext.allowUnregisteredDialects();
  StringRef irdlFile = config.getIrdlFile();
  if (!irdlFile.empty() && failed(loadIRDLFile(irdlFile, roundtripContext)))
    return failure();

  StringRef kind = useBytecode ? "bytecode" : "textual";
  OwningOpRef<Operation *> roundtripped;
  {
    std::string buffer;
    llvm::raw_string_ostream os(buffer);
    if (useBytecode) {
      if (failed(writeBytecodeToFile(op, os))) {
        op->emitOpError()
            << "failed to write bytecode, cannot verify round-trip.\n";
        return failure();
      }
    } else {
      op->print(os, OpPrintingFlags().printGenericOpForm().enableDebugInfo());
    }
    FallbackAsmResourceMap fallbackResourceMap;
    ParserConfig parseConfig(&roundtripContext, config.shouldVerifyOnParsing(),
                             &fallbackResourceMap);
    roundtripped = parseSourceString<Operation *>(buffer, parseConfig);
    if (!roundtripped) {
      op->emitOpError() << "failed to parse " << kind
                        << " content back, cannot verify round-trip.\n";
      return failure();
    }
  }
  std::string reference, result;
  {
    OpPrintingFlags flags =
        OpPrintingFlags().printGenericOpForm().enableDebugInfo();
    llvm::raw_string_ostream referenceOs(reference);
    op->print(referenceOs, flags);
    llvm::raw_string_ostream resultOs(result);
    roundtripped.get()->print(resultOs, flags);
  }
  if (reference != result)
    return op->emitOpError()
           << kind
           << " roundTrip testing roundtripped module differs from "
              "reference:\n<<<<<<Reference\n"
           << reference << "\n=====\n"
           << result << "\n>>>>>roundtripped\n";
  return success();
}

/// Installs the remark engine `--remark-format`, `--remark-policy` and the
/// `--remarks-filter*` options ask for.
LogicalResult enableRemarks(MLIRContext &context,
                            const MlirOptMainConfig &config) {
  remark::RemarkCategories categories{
      config.getRemarksAllFilter(), config.getRemarksPassedFilter(),
      config.getRemarksMissedFilter(), config.getRemarksAnalyseFilter(),
      config.getRemarksFailedFilter()};
  auto policy =
      [&]() -> std::unique_ptr<remark::detail::RemarkEmittingPolicyBase> {
    if (config.getRemarkPolicy() == RemarkPolicy::REMARK_POLICY_FINAL)
      return std::make_unique<remark::RemarkEmittingPolicyFinal>();
    return std::make_unique<remark::RemarkEmittingPolicyAll>();
  };
  switch (config.getRemarkFormat()) {
  case RemarkFormat::REMARK_FORMAT_STDOUT:
    return remark::enableOptimizationRemarks(context, nullptr, policy(),
                                             categories,
                                             /*printAsEmitRemarks=*/true);
  case RemarkFormat::REMARK_FORMAT_YAML:
    return remark::enableOptimizationRemarksWithLLVMStreamer(
        context,
        config.getRemarksOutputFile().empty() ? "mlir-remarks.yaml"
                                              : config.getRemarksOutputFile(),
        llvm::remarks::Format::YAML, policy(), categories);
  case RemarkFormat::REMARK_FORMAT_BITSTREAM:
    return remark::enableOptimizationRemarksWithLLVMStreamer(
        context,
        config.getRemarksOutputFile().empty() ? "mlir-remarks.bitstream"
                                              : config.getRemarksOutputFile(),
        llvm::remarks::Format::Bitstream, policy(), categories);
  }
  return success();
}

/// Parses one chunk, runs the pipeline and prints the result (upstream's
/// performActions).
LogicalResult performActions(llvm::raw_ostream &os,
                             const std::shared_ptr<llvm::SourceMgr> &sourceMgr,
                             MLIRContext *context,
                             const MlirOptMainConfig &config) {
  DefaultTimingManager timingManager;
  applyDefaultTimingManagerCLOptions(timingManager);
  TimingScope timing = timingManager.getRootScope();

  // Parse single-threaded, as mlir-opt does.
  bool wasThreadingEnabled = context->isMultithreadingEnabled();
  context->disableMultithreading();

  // Unknown external resources are passed through to the output untouched.
  PassReproducerOptions reproducerOptions;
  FallbackAsmResourceMap fallbackResourceMap;
  ParserConfig parseConfig(context, config.shouldVerifyOnParsing(),
                           &fallbackResourceMap);
  if (config.shouldRunReproducer())
    reproducerOptions.attachResourceParser(parseConfig);

  TimingScope parserTiming = timing.nest("Parser");
  OwningOpRef<Operation *> op = parseSourceFileForTool(
      sourceMgr, parseConfig, !config.shouldUseExplicitModule());
  parserTiming.stop();
  if (!op)
    return failure();

  if (config.shouldVerifyRoundtrip()) {
    LogicalResult textual = verifyRoundTrip(op.get(), config, false);
    LogicalResult bytecode = verifyRoundTrip(op.get(), config, true);
    if (failed(textual) || failed(bytecode))
      return failure();
  }

  context->enableMultithreading(wasThreadingEnabled);
  if (failed(enableRemarks(*context, config)))
    return failure();

  PassManager pm(op.get()->getName(), PassManager::Nesting::Implicit);
  pm.enableVerifier(config.shouldVerifyPasses());
  if (failed(applyPassManagerCLOptions(pm)))
    return failure();
  pm.enableTiming(timing);
  if (config.shouldRunReproducer() && failed(reproducerOptions.apply(pm)))
    return failure();
  if (failed(config.setupPassPipeline(pm)))
    return failure();

  if (failed(pm.run(*op)))
    return failure();

  // `--mlir-generate-reproducer`: a reproducer without a crash.
  if (!config.getReproducerFilename().empty())
    makeReproducer(pm.getOpAnchorName(), pm.getPasses(), op.get(),
                   config.getReproducerFilename());

  TimingScope outputTiming = timing.nest("Output");
  if (config.shouldEmitBytecode()) {
    BytecodeWriterConfig writerConfig(fallbackResourceMap);
    if (std::optional<int64_t> version = config.bytecodeVersionToEmit())
      writerConfig.setDesiredBytecodeVersion(*version);
    if (config.shouldElideResourceDataFromBytecode())
      writerConfig.setElideResourceDataFlag();
    return writeBytecodeToFile(op.get(), os, writerConfig);
  }
  if (config.bytecodeVersionToEmit().has_value())
    return emitError(UnknownLoc::get(pm.getContext()))
           << "bytecode version while not emitting bytecode";
  AsmState asmState(op.get(), OpPrintingFlags(), /*locationMap=*/nullptr,
                    &fallbackResourceMap);
  os << OpWithState(op.get(), asmState) << '\n';

  // With `--remark-policy=final` the remarks are emitted now.
  if (remark::detail::RemarkEngine *engine = context->getRemarkEngine())
    engine->getRemarkEmittingPolicy()->finalize();
  return success();
}

/// MLIR 22's diagnostic verifier aborts (an SMRange assertion in verify())
/// when an `expected-* @unknown {{...}}` directive is not matched by any
/// diagnostic. This watches the diagnostics at locations without a file
/// position and, before verify(), reports each unmatched @unknown directive
/// itself (exit 1) and satisfies it, so that the verifier checks every other
/// directive as usual.
class UnknownLocExpectations {
public:
  explicit UnknownLocExpectations(llvm::MemoryBufferRef buffer) {
    static const llvm::Regex directive(
        "expected-(error|note|remark|warning)(-re)? *@unknown *[{][{](.*)[}][}]"
        "[[:space:]]*$");
    StringRef text = buffer.getBuffer();
    while (!text.empty()) {
      auto [line, rest] = text.split('\n');
      SmallVector<StringRef, 4> groups;
      if (directive.match(line, &groups)) {
        Expectation e;
        e.kind = groups[1].str();
        e.isRegex = !groups[2].empty();
        e.text = groups[3].str();
        e.loc = llvm::SMLoc::getFromPointer(groups[0].data());
        expectations.push_back(std::move(e));
      }
      text = rest;
    }
  }

  bool empty() const { return expectations.empty(); }

  /// Records `diag` (and its notes) when it has no file location.
  void record(Diagnostic &diag) {
    std::lock_guard<std::mutex> lock(mutex);
    auto add = [&](Location loc, DiagnosticSeverity severity, std::string msg) {
      if (!loc->findInstanceOf<FileLineColLoc>())
        seen.push_back({severity, std::move(msg)});
    };
    add(diag.getLocation(), diag.getSeverity(), diag.str());
    for (Diagnostic &note : diag.getNotes())
      add(note.getLocation(), note.getSeverity(), note.str());
  }

  /// Reports the unmatched @unknown directives on `sourceMgr` and emits a
  /// matching diagnostic into `verifierContext` for each (so the verifier
  /// does not reach its abort). Returns failure when any was unmatched;
  /// `canVerify` is false when one of them is a regex the verifier would
  /// still trip on.
  LogicalResult settle(llvm::SourceMgr &sourceMgr, MLIRContext *verifierContext,
                       bool &canVerify) {
    canVerify = true;
    LogicalResult result = success();
    for (const Expectation &e : expectations) {
      if (matched(e))
        continue;
      result = failure();
      sourceMgr.PrintMessage(llvm::errs(), e.loc, llvm::SourceMgr::DK_Error,
                             "expected " + e.kind + " \"" + e.text +
                                 "\" was not produced");
      if (e.isRegex) {
        canVerify = false;
        continue;
      }
      Diagnostic diag(UnknownLoc::get(verifierContext), severity(e.kind));
      diag << e.text;
      verifierContext->getDiagEngine().emit(std::move(diag));
    }
    return result;
  }

private:
  struct Expectation {
    std::string kind, text;
    bool isRegex = false;
    llvm::SMLoc loc;
  };

  static DiagnosticSeverity severity(StringRef kind) {
    if (kind == "error")
      return DiagnosticSeverity::Error;
    if (kind == "warning")
      return DiagnosticSeverity::Warning;
    if (kind == "remark")
      return DiagnosticSeverity::Remark;
    return DiagnosticSeverity::Note;
  }

  /// `-re` directives: literal text with `{{regex}}` parts.
  static std::string toRegex(StringRef text) {
    std::string regex;
    while (!text.empty()) {
      size_t open = text.find("{{");
      if (open == StringRef::npos) {
        regex += llvm::Regex::escape(text);
        break;
      }
      regex += llvm::Regex::escape(text.take_front(open));
      text = text.drop_front(open + 2);
      size_t close = text.find("}}");
      regex += "(" + text.take_front(close).str() + ")";
      text =
          close == StringRef::npos ? StringRef() : text.drop_front(close + 2);
    }
    return regex;
  }

  bool matched(const Expectation &e) {
    std::lock_guard<std::mutex> lock(mutex);
    DiagnosticSeverity wanted = severity(e.kind);
    for (const auto &[sev, msg] : seen) {
      if (sev != wanted)
        continue;
      if (e.isRegex ? llvm::Regex(toRegex(e.text)).match(msg)
                    : StringRef(msg).contains(e.text))
        return true;
    }
    return false;
  }

  std::vector<Expectation> expectations;
  std::vector<std::pair<DiagnosticSeverity, std::string>> seen;
  std::mutex mutex;
};

/// Processes one chunk of the input in a fresh context (upstream's
/// processBuffer, with the context from `factory`).
LogicalResult processBuffer(llvm::raw_ostream &os,
                            std::unique_ptr<llvm::MemoryBuffer> chunkBuffer,
                            llvm::MemoryBufferRef sourceBuffer,
                            const MlirOptMainConfig &config,
                            SourceMgrDiagnosticVerifierHandler *verifyHandler,
                            UnknownLocExpectations *unknownLocExpectations,
                            llvm::ThreadPoolInterface *threadPool,
                            const tdfpy::OptContextFactory &factory) {
  // The whole input comes first: diagnostics are located in it.
  auto sourceMgr = std::make_shared<llvm::SourceMgr>();
  sourceMgr->AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBuffer(sourceBuffer,
                                       /*RequiresNullTerminator=*/false),
      llvm::SMLoc());
  sourceMgr->AddNewSourceBuffer(std::move(chunkBuffer), llvm::SMLoc());

  ChunkContext chunkContext(factory);
  MLIRContext *context = chunkContext.get();
  if (!context) {
    llvm::errs() << "tdf-opt: cannot create an MLIR context: "
                 << chunkContext.getError() << "\n";
    return failure();
  }
  if (!pluginRegistry().getDialectNames().empty())
    context->appendDialectRegistry(pluginRegistry());
  // The factory's contexts are single-threaded; share the driver's pool
  // unless `--mlir-disable-threading`.
  if (threadPool && !context->isMultithreadingEnabled())
    context->setThreadPool(*threadPool);
  if (verifyHandler)
    verifyHandler->registerInContext(context);
  // Registered after the verifier, so it sees each diagnostic first.
  std::optional<ScopedDiagnosticHandler> watcher;
  if (verifyHandler && unknownLocExpectations)
    watcher.emplace(context, [unknownLocExpectations](Diagnostic &diag) {
      unknownLocExpectations->record(diag);
      return failure(); // on to the verifier
    });

  StringRef irdlFile = config.getIrdlFile();
  if (!irdlFile.empty() && failed(loadIRDLFile(irdlFile, *context)))
    return failure();

  context->allowUnregisteredDialects(config.shouldAllowUnregisteredDialects());
  if (config.shouldVerifyDiagnostics())
    context->printOpOnDiagnostic(false);

  tracing::InstallDebugHandler debugHandler(*context, config.getDebugConfig());

  if (!config.shouldVerifyDiagnostics()) {
    SourceMgrDiagnosticHandler sourceMgrHandler(*sourceMgr, context);
    VerbosityFilter filter(context, config.getDiagnosticVerbosityLevel(),
                           config.shouldShowNotes());
    return performActions(os, sourceMgr, context, config);
  }
  // Only the diagnostics matter here, checked once the whole input is done.
  (void)performActions(os, sourceMgr, context, config);
  return success();
}

/// Upstream's MlirOptMain on an opened input.
LogicalResult runDriver(llvm::raw_ostream &outputStream,
                        std::unique_ptr<llvm::MemoryBuffer> buffer,
                        const MlirOptMainConfig &config,
                        const tdfpy::OptContextFactory &factory) {
  // This context only tells whether `--mlir-disable-threading` is set and
  // owns the thread pool every chunk shares; Python never sees it.
  MLIRContext threadPoolContext;
  llvm::ThreadPoolInterface *threadPool = nullptr;
  if (threadPoolContext.isMultithreadingEnabled())
    threadPool = &threadPoolContext.getThreadPool();

  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBuffer(buffer->getMemBufferRef(),
                                       /*RequiresNullTerminator=*/false),
      llvm::SMLoc());
  // One verifier for the whole input; each chunk's context reports to it.
  SourceMgrDiagnosticVerifierHandler verifier(sourceMgr, &threadPoolContext,
                                              config.verifyDiagnosticsLevel());
  UnknownLocExpectations unknownLocExpectations(buffer->getMemBufferRef());
  auto processChunk = [&](std::unique_ptr<llvm::MemoryBuffer> chunk,
                          const llvm::MemoryBufferRef &source,
                          llvm::raw_ostream &os) {
    return processBuffer(
        os, std::move(chunk), source, config,
        config.shouldVerifyDiagnostics() ? &verifier : nullptr,
        unknownLocExpectations.empty() ? nullptr : &unknownLocExpectations,
        threadPool, factory);
  };
  LogicalResult status = splitAndProcessBuffer(
      llvm::MemoryBuffer::getMemBuffer(buffer->getMemBufferRef(),
                                       /*RequiresNullTerminator=*/false),
      processChunk, outputStream, config.inputSplitMarker(),
      config.outputSplitMarker());
  if (config.shouldVerifyDiagnostics()) {
    bool canVerify = true;
    if (failed(unknownLocExpectations.settle(sourceMgr, &threadPoolContext,
                                             canVerify)))
      status = failure();
    if (canVerify && failed(verifier.verify()))
      status = failure();
  }
  return status;
}

/// The shared libraries an ELF file names as DT_NEEDED (empty when it is not
/// a readable 64-bit little-endian ELF file).
std::vector<std::string> neededLibraries(StringRef path) {
  std::vector<std::string> needed;
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> file =
      llvm::MemoryBuffer::getFile(path);
  if (!file)
    return needed;
  StringRef data = (*file)->getBuffer();
  auto read = [&](uint64_t offset, uint64_t size) -> const char * {
    if (offset > data.size() || size > data.size() - offset)
      return nullptr;
    return data.data() + offset;
  };
  const auto *header =
      reinterpret_cast<const Elf64_Ehdr *>(read(0, sizeof(Elf64_Ehdr)));
  if (!header || memcmp(header->e_ident, ELFMAG, SELFMAG) != 0 ||
      header->e_ident[EI_CLASS] != ELFCLASS64 ||
      header->e_ident[EI_DATA] != ELFDATA2LSB ||
      header->e_shentsize != sizeof(Elf64_Shdr))
    return needed;
  const auto *sections = reinterpret_cast<const Elf64_Shdr *>(
      read(header->e_shoff, uint64_t(header->e_shnum) * sizeof(Elf64_Shdr)));
  if (!sections)
    return needed;
  for (unsigned i = 0; i < header->e_shnum; ++i) {
    const Elf64_Shdr &dynamic = sections[i];
    if (dynamic.sh_type != SHT_DYNAMIC || dynamic.sh_link >= header->e_shnum)
      continue;
    const Elf64_Shdr &strings = sections[dynamic.sh_link];
    const auto *entries = reinterpret_cast<const Elf64_Dyn *>(
        read(dynamic.sh_offset, dynamic.sh_size));
    const char *table = read(strings.sh_offset, strings.sh_size);
    if (!entries || !table)
      continue;
    for (uint64_t k = 0; k < dynamic.sh_size / sizeof(Elf64_Dyn); ++k) {
      if (entries[k].d_tag == DT_NULL)
        break;
      if (entries[k].d_tag == DT_NEEDED &&
          entries[k].d_un.d_val < strings.sh_size)
        needed.emplace_back(table + entries[k].d_un.d_val,
                            strnlen(table + entries[k].d_un.d_val,
                                    strings.sh_size - entries[k].d_un.d_val));
    }
  }
  return needed;
}

/// `--load-pass-plugin` / `--load-dialect-plugin` load a shared library into
/// this process. Two cases that abort it are refused here, before MLIR's
/// option callback loads anything: a plugin linked against libMLIR.so (a
/// second copy of MLIR next to the bindings' one), and a library that cannot
/// be loaded or has no plugin entry point (upstream's loader leaves that
/// error unchecked, which aborts mlir-opt too: "Expected<T> must be checked").
/// Returns false after printing the reason.
bool checkPlugins(ArrayRef<std::string> args) {
  for (size_t i = 1; i < args.size(); ++i) {
    StringRef arg = args[i];
    if (!arg.consume_front("-"))
      continue;
    arg.consume_front("-");
    StringRef entry;
    if (arg.starts_with("load-pass-plugin"))
      entry = "mlirGetPassPluginInfo";
    else if (arg.starts_with("load-dialect-plugin"))
      entry = "mlirGetDialectPluginInfo";
    else
      continue;
    auto [flag, path] = arg.split('=');
    if (flag != "load-pass-plugin" && flag != "load-dialect-plugin")
      continue;
    if (!arg.contains('=')) {
      if (i + 1 >= args.size())
        continue; // the option parser reports the missing value
      path = args[++i];
    }
    for (const std::string &library : neededLibraries(path)) {
      if (StringRef(library).starts_with("libMLIR.so")) {
        llvm::errs() << args[0] << ": plugin '" << path
                     << "' links libMLIR.so, a second copy of MLIR that "
                        "cannot be loaded next to the Python bindings' one; "
                        "build it against the bindings' "
                        "libMLIRPythonCAPI.so instead\n";
        return false;
      }
    }
    std::string error;
    llvm::sys::DynamicLibrary library =
        llvm::sys::DynamicLibrary::getPermanentLibrary(path.str().c_str(),
                                                       &error);
    if (!library.isValid()) {
      llvm::errs() << args[0] << ": cannot load plugin '" << path
                   << "': " << error << "\n";
      return false;
    }
    if (!library.getAddressOfSymbol(entry.str().c_str())) {
      llvm::errs() << args[0] << ": plugin '" << path << "' has no " << entry
                   << " entry point\n";
      return false;
    }
  }
  return true;
}

/// `--mlir-debug-counter` values that MLIR 22's DebugCounter turns into a
/// fatal error (an abort) when the first context is set up: each
/// comma-separated entry must be `<name>-skip=<int>` or `<name>-count=<int>`.
/// Checked up front; returns false after printing the reason.
bool checkDebugCounters(ArrayRef<std::string> args) {
  for (size_t i = 1; i < args.size(); ++i) {
    StringRef arg = args[i];
    if (!arg.consume_front("-"))
      continue;
    arg.consume_front("-");
    StringRef value;
    if (arg == "mlir-debug-counter") {
      if (i + 1 >= args.size())
        continue; // the option parser reports the missing value
      value = args[++i];
    } else if (!arg.consume_front("mlir-debug-counter=")) {
      continue;
    } else {
      value = arg;
    }
    SmallVector<StringRef> entries;
    value.split(entries, ',');
    for (StringRef entry : entries) {
      auto [name, number] = entry.split('=');
      std::string problem;
      long parsed;
      if (!entry.contains('='))
        problem = ("expected DebugCounter argument to have an `=` separating "
                   "the counter name and value, but the provided argument "
                   "was: `" +
                   entry + "`")
                      .str();
      else if (number.getAsInteger(0, parsed))
        problem = ("expected DebugCounter counter value to be numeric, but "
                   "got `" +
                   number + "`")
                      .str();
      else if (!name.ends_with("-skip") && !name.ends_with("-count"))
        problem = ("expected DebugCounter counter name to end with either "
                   "`-skip` or `-count`, but got `" +
                   name + "`")
                      .str();
      if (!problem.empty()) {
        llvm::errs() << args[0]
                     << ": for the --mlir-debug-counter option: " << problem
                     << "\n";
        return false;
      }
    }
  }
  return true;
}

} // namespace

int tdfpy::optParse(MlirContext registryContext,
                    const std::vector<std::string> &args,
                    std::vector<const char *> &argv) {
  static bool registryCopied = false;
  if (!registryCopied) {
    unwrap(registryContext)->getDialectRegistry().appendTo(toolRegistry());
    registryCopied = true;
  }
  registerOptions();
  // tdf.cli.main may run more than once in a process.
  llvm::cl::ResetAllOptionOccurrences();

  std::string helpHeader =
      "tdf modular optimizer driver: mlir-opt with the tdf dialect and tdf's "
      "Python passes\n\nAvailable Dialects: ";
  {
    llvm::raw_string_ostream os(helpHeader);
    llvm::interleaveComma(dialectNames(), os);
  }
  if (!checkPlugins(args) || !checkDebugCounters(args))
    return 1;
  argv.clear();
  for (const std::string &arg : args)
    argv.push_back(arg.c_str());
  if (!llvm::cl::ParseCommandLineOptions((int)argv.size(), argv.data(),
                                         helpHeader, &llvm::errs()))
    return 1;
  return -1;
}

int tdfpy::optRun(const OptContextFactory &factory) {
  MlirOptMainConfig config = MlirOptMainConfig::createFromCLOptions();
  if (config.shouldShowDialects()) {
    llvm::outs() << "Available Dialects: ";
    llvm::interleave(dialectNames(), llvm::outs(), ",");
    llvm::outs() << "\n";
    return 0;
  }
  if (config.shouldListPasses()) {
    printRegisteredPasses();
    return 0;
  }

  StringRef inputFilename = fileOptions->inputFilename;
  if (inputFilename == "-" &&
      llvm::sys::Process::FileDescriptorIsDisplayed(fileno(stdin)))
    llvm::errs() << "(processing input from stdin now, hit ctrl-c/ctrl-d to "
                    "interrupt)\n";
  std::string errorMessage;
  std::unique_ptr<llvm::MemoryBuffer> input =
      openInputFile(inputFilename, &errorMessage);
  if (!input) {
    llvm::errs() << errorMessage << "\n";
    return 1;
  }
  std::unique_ptr<llvm::ToolOutputFile> output =
      openOutputFile(fileOptions->outputFilename, &errorMessage);
  if (!output) {
    llvm::errs() << errorMessage << "\n";
    return 1;
  }
  if (failed(runDriver(output->os(), std::move(input), config, factory)))
    return 1;
  output->keep();
  return 0;
}
