//===- ObjectCompiler.cpp - LLVM dialect to host object code -------------===//
//
// tdf's CPU code generator: an LLVM-dialect module becomes relocatable
// objects for the host, which ObjectLoader.cpp links into the process (the
// same loader the compilation cache uses, so a fresh compile and a cache hit
// run the same bytes).
//
// The steps are the MLIR ExecutionEngine's -- translation to LLVM IR, the
// host's triple and data layout, a packed wrapper `_mlir_<f>(void **)` for
// every externally visible function, LLVM's default optimisation pipeline
// for the level, the code generator at the same level -- split in two:
// prepareModule (with the MLIR module) and compilePrepared (bitcode only,
// so it may run on any thread, twice for a tiered compile). Neither holds
// the GIL. Three additions:
//
//  * Parts. Several LLVM loop passes cost time in proportion to the loops
//    times the size of the function they are in: IndVarSimplify asks
//    ScalarEvolution whether each loop comparison is implied by a branch on
//    the path from the entry, climbing every earlier loop; the loop
//    vectorizer of an assertions build (the pinned wheel's) verifies the
//    whole function after each loop it vectorizes. A function of many loops
//    is cut into noinline parts of a few loops each (CodeExtractor).
//  * Partitions. The functions are spread over one module per thread, each
//    optimized and compiled in an LLVMContext of its own.
//  * Glue. A function of much straight-line code gives its loops to
//    functions of their own (outlineLoops); optimized functions without a
//    loop go to the fast instruction selector (fastCodegen).
//
//===----------------------------------------------------------------------===//

#include "Bridge.h"

#include "mlir/CAPI/IR.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"

#include "llvm/ADT/StringSet.h"
#include "llvm/Analysis/LoopInfo.h"
#include "llvm/Bitcode/BitcodeReader.h"
#include "llvm/Bitcode/BitcodeWriter.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/IR/Dominators.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/Verifier.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Transforms/Utils/Cloning.h"
#include "llvm/Transforms/Utils/CodeExtractor.h"

#include <algorithm>
#include <chrono>
#include <thread>

using namespace llvm;

namespace tdfpy {

namespace {

/// Modules of less `compileWeight` than this are compiled on one thread
/// (about 30 ms of LLVM here; a split costs a clone of the module and a
/// bitcode round trip per partition).
constexpr size_t kSplitWeight = 2000;

/// What an instruction inside a loop costs LLVM against one outside, when
/// functions are spread over partitions: loops are vectorized, interleaved
/// and unrolled, straight-line code mostly shrinks. (GPT-2 prefill: its
/// 2,729-instruction entry function took 0.12 s of optimisation and code
/// generation, its 22 loop functions of 1,577 instructions 0.60 s; split by
/// instruction count, one partition held the first and the other the rest.)
constexpr size_t kLoopWeight = 16;

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

/// Restricts `module`'s interface to `exported`: every other defined
/// function gets internal linkage, so LLVM may specialize it for its callers
/// (constant arguments) and drop it once inlined. A defined function with a
/// loop called from more than one place stays a call (`noinline`): inlining
/// it (a loop nest tdf-share-loop-nests made one function of) would compile
/// the loop nest once per call. Without `exported`, every externally
/// visible function stays so.
void internalize(Module &module,
                 const std::optional<std::vector<std::string>> &exported) {
  if (!exported)
    return;
  StringSet<> keep;
  for (const std::string &name : *exported)
    keep.insert(name);
  for (Function &function : module)
    if (!function.isDeclaration() && !function.hasLocalLinkage() &&
        !keep.contains(function.getName()))
      function.setLinkage(GlobalValue::InternalLinkage);
  for (Function &function : module) {
    if (function.isDeclaration() || !function.hasLocalLinkage() ||
        function.hasFnAttribute(Attribute::AlwaysInline))
      continue;
    unsigned calls = 0;
    for (const Use &use : function.uses())
      if (auto *call = dyn_cast<CallBase>(use.getUser()))
        calls += call->isCallee(&use);
    if (calls < 2)
      continue;
    DominatorTree dominators(function);
    LoopInfo loops(dominators);
    if (!loops.empty())
      function.addFnAttr(Attribute::NoInline);
  }
}

/// `void _mlir_<name>(void **args)` for each defined, externally visible
/// function: args[i] points at argument i, args[n] at the result slot.
void addPackedWrappers(Module &module) {
  LLVMContext &ctx = module.getContext();
  IRBuilder<> builder(ctx);
  std::vector<Function *> functions;
  for (Function &function : module)
    if (!function.isDeclaration() && !function.hasLocalLinkage())
      functions.push_back(&function);
  for (Function *function : functions) {
    auto *type = FunctionType::get(builder.getVoidTy(), builder.getPtrTy(),
                                   /*isVarArg=*/false);
    Function *wrapper =
        Function::Create(type, GlobalValue::ExternalLinkage,
                         "_mlir_" + function->getName(), module);
    builder.SetInsertPoint(BasicBlock::Create(ctx, "entry", wrapper));
    Value *packed = wrapper->getArg(0);
    SmallVector<Value *> args;
    for (Argument &arg : function->args()) {
      Value *slot = builder.CreateLoad(
          builder.getPtrTy(), builder.CreateConstGEP1_64(
                                  builder.getPtrTy(), packed, arg.getArgNo()));
      args.push_back(builder.CreateLoad(arg.getType(), slot));
    }
    CallInst *call = builder.CreateCall(function, args);
    if (!function->getReturnType()->isVoidTy()) {
      Value *slot = builder.CreateLoad(
          builder.getPtrTy(),
          builder.CreateConstGEP1_64(builder.getPtrTy(), packed,
                                     function->arg_size()));
      builder.CreateStore(call, slot);
    }
    builder.CreateRetVoid();
  }
}

/// Moves each of `regions` (blocks of `function`, single-entry) into a
/// private `noinline` function named after `suffix` (LLVM's CodeExtractor;
/// the values a region uses from before become parameters). Returns how
/// many moved.
unsigned extractRegions(Function &function,
                        std::vector<std::vector<BasicBlock *>> &regions,
                        DominatorTree &dominators, const std::string &suffix) {
  CodeExtractorAnalysisCache cache(function);
  unsigned made = 0;
  for (std::vector<BasicBlock *> &region : regions) {
    CodeExtractor extractor(region, &dominators, /*AggregateArgs=*/false,
                            nullptr, nullptr, nullptr, false, false, nullptr,
                            suffix);
    if (!extractor.isEligible())
      continue;
    if (Function *part = extractor.extractCodeRegion(cache)) {
      part->addFnAttr(Attribute::NoInline);
      ++made;
    }
  }
  return made;
}

/// Cuts `function` into parts of about `partLoops` loops each: the blocks
/// between two consecutive cut points -- blocks outside every loop that
/// dominate the return -- move into a private `noinline` function
/// (LLVM's CodeExtractor; the values they use from before become its
/// parameters). Returns the number of parts made.
unsigned outlineParts(Function &function, unsigned partLoops) {
  ReturnInst *ret = nullptr;
  for (BasicBlock &block : function)
    if (auto *r = dyn_cast<ReturnInst>(block.getTerminator())) {
      if (ret)
        return 0; // several returns: not the straight-line shape
      ret = r;
    }
  if (!ret)
    return 0;
  DominatorTree dominators(function);
  LoopInfo loops(dominators);
  unsigned total = 0;
  for (Loop *loop : loops.getLoopsInPreorder()) {
    (void)loop;
    ++total;
  }
  if (total <= 2 * partLoops)
    return 0;
  // The cut points, entry first.
  std::vector<BasicBlock *> cuts;
  for (DomTreeNode *node = dominators.getNode(ret->getParent()); node;
       node = node->getIDom())
    if (!loops.getLoopFor(node->getBlock()))
      cuts.push_back(node->getBlock());
  std::reverse(cuts.begin(), cuts.end());
  // Loops by the cut point that dominates their header last.
  std::vector<unsigned> loopsAfter(cuts.size(), 0);
  for (Loop *loop : loops.getLoopsInPreorder()) {
    for (size_t i = cuts.size(); i-- > 0;)
      if (dominators.dominates(cuts[i], loop->getHeader())) {
        ++loopsAfter[i];
        break;
      }
  }
  std::vector<std::pair<size_t, size_t>> regions; // [first cut, end cut)
  size_t begin = 0;
  unsigned count = 0;
  for (size_t i = 0; i + 1 < cuts.size(); ++i) {
    count += loopsAfter[i];
    if (count >= partLoops) {
      regions.push_back({begin, i + 1});
      begin = i + 1;
      count = 0;
    }
  }
  if (count > 0 && begin + 1 < cuts.size())
    regions.push_back({begin, cuts.size() - 1});
  std::vector<std::vector<BasicBlock *>> blocks;
  for (auto [first, end] : regions) {
    std::vector<BasicBlock *> region;
    for (BasicBlock &block : function)
      if (dominators.dominates(cuts[first], &block) &&
          !dominators.dominates(cuts[end], &block))
        region.push_back(&block);
    blocks.push_back(std::move(region));
  }
  return extractRegions(function, blocks, dominators, "part");
}

/// A function of much straight-line glue (at least `glueInstructions`
/// instructions outside loops, more than those in loops: a
/// program's entry function, descriptors built and kernels called, with a
/// few loop nests of its own) gives each of its outermost loops to a
/// private `noinline` function (LLVM's CodeExtractor, as `loop-extract`
/// does). The function is then loop-free, and `fastCodegen` sends it to the
/// fast instruction selector: the SelectionDAG of its large blocks was most
/// of the code generation time of a GPT-2 prefill. Returns the number of
/// loops taken out.
unsigned outlineLoops(Function &function, size_t glueInstructions) {
  DominatorTree dominators(function);
  LoopInfo loops(dominators);
  if (loops.empty())
    return 0;
  size_t inLoops = 0, total = 0;
  for (BasicBlock &block : function) {
    total += block.size();
    if (loops.getLoopFor(&block))
      inLoops += block.size();
  }
  size_t glue = total - inLoops;
  if (glue < glueInstructions || glue <= inLoops)
    return 0;
  std::vector<std::vector<BasicBlock *>> regions;
  for (Loop *loop : loops)
    regions.emplace_back(loop->getBlocks().begin(), loop->getBlocks().end());
  return extractRegions(function, regions, dominators, "loop");
}

/// The host's target machine with code generation at `level`.
Expected<std::unique_ptr<TargetMachine>> hostMachine(unsigned level) {
  Expected<orc::JITTargetMachineBuilder> builder =
      orc::JITTargetMachineBuilder::detectHost();
  if (!builder)
    return builder.takeError();
  builder->setCodeGenOptLevel(static_cast<CodeGenOptLevel>(level));
  return builder->createTargetMachine();
}

/// LLVM's default pipeline at `optLevel`, as the MLIR ExecutionEngine
/// builds it (mlir::makeOptimizingTransformer).
void optimize(Module &module, TargetMachine &target, unsigned optLevel) {
  LoopAnalysisManager loops;
  FunctionAnalysisManager functions;
  CGSCCAnalysisManager sccs;
  ModuleAnalysisManager modules;
  PipelineTuningOptions tuning;
  tuning.LoopUnrolling = true;
  tuning.LoopInterleaving = true;
  tuning.LoopVectorization = true;
  tuning.SLPVectorization = true;
  PassBuilder passes(&target, tuning);
  passes.registerModuleAnalyses(modules);
  passes.registerCGSCCAnalyses(sccs);
  passes.registerFunctionAnalyses(functions);
  passes.registerLoopAnalyses(loops);
  passes.crossRegisterProxies(loops, functions, sccs, modules);
  OptimizationLevel level = optLevel == 0   ? OptimizationLevel::O0
                            : optLevel == 1 ? OptimizationLevel::O1
                            : optLevel == 2 ? OptimizationLevel::O2
                                            : OptimizationLevel::O3;
  ModulePassManager pipeline =
      optLevel == 0 ? passes.buildO0DefaultPipeline(level)
                    : passes.buildPerModuleDefaultPipeline(level);
  pipeline.run(module, modules);
}

/// Marks the functions of the optimized `module` that have no loop and at
/// least `minInstructions` instructions `optnone`: the code
/// generator then selects their instructions with FastISel, one instruction
/// at a time, instead of building and scheduling a SelectionDAG per basic
/// block, whose cost grows faster than the block. Such functions are a
/// program's straight-line glue (descriptors built, runtime and loop
/// functions called, one large block each); they already went through the
/// optimisation pipeline, and the time that matters is in the loops. GPT-2
/// decode: code generation 0.107 -> 0.070 s, run time unchanged (0.52-0.66
/// ms per call both ways). Returns how many were marked.
unsigned fastCodegen(Module &module, unsigned minInstructions) {
  unsigned marked = 0;
  for (Function &function : module) {
    if (function.isDeclaration() ||
        function.hasFnAttribute(Attribute::OptimizeNone) ||
        function.getInstructionCount() < minInstructions)
      continue;
    DominatorTree dominators(function);
    LoopInfo loops(dominators);
    if (!loops.empty())
      continue;
    function.removeFnAttr(Attribute::AlwaysInline);
    function.addFnAttr(Attribute::NoInline);
    function.addFnAttr(Attribute::OptimizeNone);
    ++marked;
  }
  return marked;
}

/// The module's object code, or an error message.
bool emitObject(Module &module, TargetMachine &target, std::string &object,
                std::string &error) {
  SmallVector<char, 0> buffer;
  raw_svector_ostream os(buffer);
  legacy::PassManager codegen;
  if (target.addPassesToEmitFile(codegen, os, nullptr,
                                 CodeGenFileType::ObjectFile)) {
    error = "the host's code generator cannot emit an object file";
    return false;
  }
  codegen.run(module);
  object.assign(buffer.begin(), buffer.end());
  return true;
}

/// One partition of a module, compiled on its own thread in its own
/// LLVMContext (the module is carried over as bitcode).
struct Partition {
  const std::string *bitcode = nullptr;
  std::unique_ptr<LLVMContext> context;
  std::unique_ptr<Module> module;
  std::unique_ptr<TargetMachine> target;
  std::string object;
  std::string error;
  unsigned fast = 0; // functions given to the fast instruction selector
  double optimizeSeconds = 0, codegenSeconds = 0;
};

/// The expected cost of compiling `function`: its instructions, those in
/// loops `kLoopWeight` times.
size_t compileWeight(Function &function) {
  DominatorTree dominators(function);
  LoopInfo loops(dominators);
  size_t weight = 0;
  for (BasicBlock &block : function)
    weight += block.size() * (loops.getLoopFor(&block) ? kLoopWeight : 1);
  return weight;
}

/// Splits `module` into at most `count` partitions of about equal expected
/// cost (`compileWeight`; the functions, heaviest first, each to the
/// lightest partition; the global variables with the first) and returns the
/// bitcode of each: one, the whole module, when splitting would not pay. Local
/// symbols become hidden external ones so that the partitions' objects link to
/// each other.
std::vector<std::string> split(Module &module, unsigned count) {
  std::vector<Function *> functions;
  for (Function &function : module)
    if (!function.isDeclaration())
      functions.push_back(&function);
  DenseMap<const Function *, size_t> weights;
  size_t total = 0;
  for (Function *function : functions)
    total += weights[function] = compileWeight(*function);
  bool appending = false;
  for (const GlobalVariable &global : module.globals())
    appending |= global.hasAppendingLinkage();
  count = std::min<unsigned>(count, functions.size());
  if (total < kSplitWeight || appending || count <= 1) {
    std::string bitcode;
    raw_string_ostream os(bitcode);
    WriteBitcodeToFile(module, os);
    return {bitcode};
  }

  unsigned unnamed = 0;
  for (GlobalValue &value : module.global_values()) {
    if (value.isDeclaration() || !value.hasLocalLinkage())
      continue;
    if (!value.hasName())
      value.setName("__tdf_unnamed_" + Twine(unnamed++));
    value.setLinkage(GlobalValue::ExternalLinkage);
    value.setVisibility(GlobalValue::HiddenVisibility);
  }
  std::sort(functions.begin(), functions.end(),
            [&](const Function *a, const Function *b) {
              size_t wa = weights[a], wb = weights[b];
              return wa != wb ? wa > wb : a->getName() < b->getName();
            });
  DenseMap<const GlobalValue *, unsigned> owner;
  std::vector<size_t> load(count, 0);
  for (const Function *function : functions) {
    unsigned least = static_cast<unsigned>(
        std::min_element(load.begin(), load.end()) - load.begin());
    owner[function] = least;
    load[least] += weights[function];
  }
  std::vector<std::string> partitions(count);
  for (unsigned i = 0; i < count; ++i) {
    ValueToValueMapTy map;
    std::unique_ptr<Module> part =
        CloneModule(module, map, [&](const GlobalValue *value) {
          auto it = owner.find(value);
          return it == owner.end() ? i == 0 : it->second == i;
        });
    raw_string_ostream os(partitions[i]);
    WriteBitcodeToFile(*part, os);
  }
  return partitions;
}

/// Runs `step` on every partition, one thread each (the calling thread
/// takes the first).
template <typename Step>
void forEachPartition(std::vector<Partition> &partitions, Step step) {
  std::vector<std::thread> threads;
  for (size_t i = 1; i < partitions.size(); ++i)
    threads.emplace_back([&, i] { step(partitions[i]); });
  step(partitions[0]);
  for (std::thread &thread : threads)
    thread.join();
}

} // namespace

bool prepareModule(MlirOperation moduleOp, unsigned partLoops,
                   unsigned glueInstructions, unsigned threads,
                   const std::optional<std::vector<std::string>> &exported,
                   PreparedModule &prepared, std::string &error) {
  static const bool targetsReady = [] {
    InitializeNativeTarget();
    InitializeNativeTargetAsmPrinter();
    return true;
  }();
  (void)targetsReady;

  auto start = std::chrono::steady_clock::now();
  Expected<std::unique_ptr<TargetMachine>> machine = hostMachine(2);
  if (!machine) {
    error = errorMessage(machine.takeError());
    return false;
  }
  mlir::Operation *op = unwrap(moduleOp);
  mlir::MLIRContext &mlirContext = *op->getContext();
  mlir::registerBuiltinDialectTranslation(mlirContext);
  mlir::registerLLVMDialectTranslation(mlirContext);
  LLVMContext context;
  std::unique_ptr<Module> module =
      mlir::translateModuleToLLVMIR(op, context, "tdf-program");
  if (!module) {
    error = "cannot translate the LLVM dialect module to LLVM IR";
    return false;
  }
  module->setDataLayout((*machine)->createDataLayout());
  module->setTargetTriple((*machine)->getTargetTriple());
  prepared.parts = 0;
  // The defined functions now (the outlining below adds some).
  auto defined = [&] {
    std::vector<Function *> functions;
    for (Function &function : *module)
      if (!function.isDeclaration())
        functions.push_back(&function);
    return functions;
  };
  if (partLoops > 0)
    for (Function *function : defined())
      prepared.parts += outlineParts(*function, partLoops);
  // Then the loops of the glue-heavy functions, the parts just made among
  // them (each is glue around up to `partLoops` loop nests).
  if (glueInstructions > 0)
    for (Function *function : defined())
      prepared.parts += outlineLoops(*function, glueInstructions);
  internalize(*module, exported);
  addPackedWrappers(*module);
  if (verifyModule(*module, nullptr)) {
    error = "the translated LLVM IR does not verify";
    return false;
  }
  prepared.bitcode = split(*module, std::max(threads, 1u));
  prepared.seconds = secondsSince(start);
  return true;
}

bool compilePrepared(const PreparedModule &prepared, unsigned optLevel,
                     unsigned fastInstructions,
                     std::vector<std::string> &objects,
                     ObjectCompileTimes &times, std::string &error) {
  std::vector<Partition> partitions(prepared.bitcode.size());
  for (size_t i = 0; i < partitions.size(); ++i)
    partitions[i].bitcode = &prepared.bitcode[i];
  times.translate = prepared.seconds;
  times.parts = prepared.parts;
  times.partitions = static_cast<unsigned>(partitions.size());

  // Each partition goes from optimisation straight to code generation on
  // its own thread: no barrier between the two steps, so a partition whose
  // optimisation ends early does not wait for the others before emitting.
  forEachPartition(partitions, [&](Partition &partition) {
    auto start = std::chrono::steady_clock::now();
    partition.context = std::make_unique<LLVMContext>();
    Expected<std::unique_ptr<Module>> parsed =
        parseBitcodeFile(MemoryBufferRef(*partition.bitcode, "tdf-partition"),
                         *partition.context);
    if (!parsed) {
      partition.error = errorMessage(parsed.takeError());
      return;
    }
    partition.module = std::move(*parsed);
    Expected<std::unique_ptr<TargetMachine>> target = hostMachine(optLevel);
    if (!target) {
      partition.error = errorMessage(target.takeError());
      return;
    }
    partition.target = std::move(*target);
    optimize(*partition.module, *partition.target, optLevel);
    if (optLevel > 0 && fastInstructions > 0)
      partition.fast = fastCodegen(*partition.module, fastInstructions);
    partition.optimizeSeconds = secondsSince(start);
    start = std::chrono::steady_clock::now();
    emitObject(*partition.module, *partition.target, partition.object,
               partition.error);
    partition.codegenSeconds = secondsSince(start);
  });
  // The stages of the partition that finished last (the wall time).
  const Partition *last = &partitions.front();
  for (const Partition &partition : partitions)
    if (partition.optimizeSeconds + partition.codegenSeconds >
        last->optimizeSeconds + last->codegenSeconds)
      last = &partition;
  times.optimize = last->optimizeSeconds;
  times.codegen = last->codegenSeconds;
  for (Partition &partition : partitions) {
    if (!partition.error.empty()) {
      error = partition.error;
      return false;
    }
    objects.push_back(std::move(partition.object));
    times.fastFunctions += partition.fast;
  }
  return true;
}

} // namespace tdfpy
