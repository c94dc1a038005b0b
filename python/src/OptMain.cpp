//===- OptMain.cpp - the tdf-opt driver -----------------------------------===//
//
// An mlir-opt compatible driver that runs inside the Python process, so that
// passes written in Python are available next to every upstream pass. It
// supports the mlir-opt options engineers use in lit tests: an input file or
// `-`, `-o`, `--pass-pipeline=`, one flag per registered pass,
// `--split-input-file`, `--verify-diagnostics` and the usual printing and
// instrumentation flags.
//
//===----------------------------------------------------------------------===//

#include "Bridge.h"

#include "mlir/CAPI/IR.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/ParseUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using llvm::cl::opt;

namespace {

/// Options of the driver. Constructed once per process (tdf-opt runs one
/// command per process, as mlir-opt does).
struct DriverOptions {
  opt<std::string> inputFilename{llvm::cl::Positional,
                                 llvm::cl::desc("<input file>"),
                                 llvm::cl::init("-")};
  opt<std::string> outputFilename{"o", llvm::cl::desc("Output filename"),
                                  llvm::cl::value_desc("filename"),
                                  llvm::cl::init("-")};
  opt<std::string> splitInputFile{
      "split-input-file", llvm::cl::ValueOptional,
      llvm::cl::callback([&](const std::string &str) {
        if (str.empty())
          splitInputFile.setValue(kDefaultSplitMarker);
      }),
      llvm::cl::desc("Split the input file into chunks at the given marker "
                     "(default '// -----') and process each chunk "
                     "independently"),
      llvm::cl::init("")};
  opt<bool> verifyDiagnostics{
      "verify-diagnostics",
      llvm::cl::desc("Check that emitted diagnostics match expected-* lines "
                     "in the input"),
      llvm::cl::init(false)};
  opt<bool> verifyPasses{"verify-each",
                         llvm::cl::desc("Run the verifier after each pass"),
                         llvm::cl::init(true)};
  opt<bool> allowUnregisteredDialects{
      "allow-unregistered-dialect",
      llvm::cl::desc("Allow operations of unregistered dialects"),
      llvm::cl::init(false)};
  opt<bool> noImplicitModule{
      "no-implicit-module",
      llvm::cl::desc("Do not wrap the parsed operations in a builtin.module"),
      llvm::cl::init(false)};
  opt<bool> passStatistics{"mlir-pass-statistics",
                           llvm::cl::desc("Print pass statistics"),
                           llvm::cl::init(false)};
  opt<bool> printIRAfterAll{"mlir-print-ir-after-all",
                            llvm::cl::desc("Print the IR after every pass"),
                            llvm::cl::init(false)};
  opt<bool> printIRBeforeAll{"mlir-print-ir-before-all",
                             llvm::cl::desc("Print the IR before every pass"),
                             llvm::cl::init(false)};
  opt<bool> timing{"mlir-timing",
                   llvm::cl::desc("Display execution times of the passes"),
                   llvm::cl::init(false)};
  PassPipelineCLParser passPipeline{"", "Compiler passes to run", "p"};

  static constexpr const char *kDefaultSplitMarker = "// -----";
};

/// Splits `buffer` at lines equal to `marker`. Each chunk keeps its line
/// numbers: it is preceded by as many newlines as lines before it, so that
/// diagnostics point into the original file.
std::vector<std::string> splitBuffer(StringRef buffer, StringRef marker) {
  std::vector<std::string> chunks;
  std::string current;
  unsigned line = 0, chunkStartLine = 0;
  auto flush = [&]() {
    chunks.push_back(std::string(chunkStartLine, '\n') + current);
    current.clear();
  };
  while (!buffer.empty()) {
    auto [text, rest] = buffer.split('\n');
    bool hasNewline = text.size() < buffer.size();
    buffer = rest;
    if (text.rtrim() == marker) {
      flush();
      chunkStartLine = line + 1;
      current.clear();
    } else {
      current += text.str();
      if (hasNewline)
        current += '\n';
    }
    ++line;
  }
  flush();
  return chunks;
}

LogicalResult processChunk(const DriverOptions &options, MLIRContext *context,
                           std::shared_ptr<llvm::SourceMgr> sourceMgr,
                           llvm::raw_ostream &os) {
  ParserConfig config(context, /*verifyAfterParse=*/true);
  OwningOpRef<Operation *> op =
      parseSourceFileForTool(sourceMgr, config, !options.noImplicitModule);
  if (!op)
    return failure();
  PassManager pm(op.get()->getName(), OpPassManager::Nesting::Implicit);
  pm.enableVerifier(options.verifyPasses);
  if (options.passStatistics)
    pm.enableStatistics();
  bool printBefore = options.printIRBeforeAll;
  bool printAfter = options.printIRAfterAll;
  if (printBefore || printAfter)
    pm.enableIRPrinting(
        [printBefore](Pass *, Operation *) { return printBefore; },
        [printAfter](Pass *, Operation *) { return printAfter; },
        /*printModuleScope=*/true, /*printAfterOnlyOnChange=*/false,
        /*printAfterOnlyOnFailure=*/false, llvm::errs());
  if (options.timing)
    pm.enableTiming();
  auto errorHandler = [&](const Twine &message) {
    // Option parse errors may already have been printed by the parser.
    std::string text = message.str();
    if (!text.empty())
      emitError(UnknownLoc::get(context)) << text;
    return failure();
  };
  if (failed(options.passPipeline.addToPipeline(pm, errorHandler)))
    return failure();
  if (failed(pm.run(op.get())))
    return failure();
  op.get()->print(os, OpPrintingFlags());
  os << '\n';
  return success();
}

} // namespace

int tdfpy::optMain(MlirContext cContext, const std::vector<std::string> &args) {
  MLIRContext *context = unwrap(cContext);
  static DriverOptions *options = [] {
    registerAsmPrinterCLOptions();
    return new DriverOptions();
  }();
  llvm::cl::ResetAllOptionOccurrences();
  std::vector<const char *> argv;
  for (const std::string &arg : args)
    argv.push_back(arg.c_str());
  if (!llvm::cl::ParseCommandLineOptions(
          (int)argv.size(), argv.data(),
          "tdf modular optimizer driver: mlir-opt with the tdf dialect and "
          "tdf's Python passes\n",
          &llvm::errs()))
    return 1;

  context->allowUnregisteredDialects(options->allowUnregisteredDialects);
  // As mlir-opt: expected-* lines match diagnostics without the op dump.
  context->printOpOnDiagnostic(!options->verifyDiagnostics);
  std::string errorMessage;
  std::unique_ptr<llvm::MemoryBuffer> input =
      openInputFile(options->inputFilename, &errorMessage);
  if (!input) {
    llvm::errs() << errorMessage << "\n";
    return 1;
  }
  std::unique_ptr<llvm::ToolOutputFile> output =
      openOutputFile(options->outputFilename, &errorMessage);
  if (!output) {
    llvm::errs() << errorMessage << "\n";
    return 1;
  }

  std::vector<std::string> chunks;
  if (options->splitInputFile.empty())
    chunks.push_back(input->getBuffer().str());
  else
    chunks = splitBuffer(input->getBuffer(), options->splitInputFile);
  std::string bufferName = input->getBufferIdentifier().str();

  bool hadFailure = false;
  for (size_t index = 0; index < chunks.size(); ++index) {
    auto sourceMgr = std::make_shared<llvm::SourceMgr>();
    sourceMgr->AddNewSourceBuffer(
        llvm::MemoryBuffer::getMemBufferCopy(chunks[index], bufferName),
        llvm::SMLoc());
    LogicalResult result = success();
    if (options->verifyDiagnostics) {
      SourceMgrDiagnosticVerifierHandler handler(*sourceMgr, context);
      (void)processChunk(*options, context, sourceMgr, output->os());
      result = handler.verify();
    } else {
      SourceMgrDiagnosticHandler handler(*sourceMgr, context);
      result = processChunk(*options, context, sourceMgr, output->os());
    }
    if (failed(result))
      hadFailure = true;
    if (index + 1 < chunks.size())
      output->os() << options->splitInputFile << "\n";
  }
  if (hadFailure)
    return 1;
  output->keep();
  return 0;
}
