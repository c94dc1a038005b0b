//===- ObjectLoader.cpp - link a program's object code --------------------===//
//
// tdf's CPU loader (python/tdf/objects.py): it links the relocatable objects
// of one program -- just compiled by ObjectCompiler.cpp, or read from the
// compilation cache (python/tdf/cache.py) -- into this process and returns
// the addresses of its entry points.
//
// It links the object the way the ExecutionEngine links the object it
// compiles: an ORC ExecutionSession (materialization on the calling thread)
// with an RTDyldObjectLinkingLayer over a SectionMemoryManager, the tdf
// runtime's functions as absolute symbols, and the process and the shared
// libraries (loaded when first needed) as dlsym-style search generators.
// Each load is its own session: the code lives until `releaseObject`.
//
// Every failure is reported as a message (never an abort): the object is
// checked to be a relocatable ELF object of the host's triple before the
// linker sees it, and ORC's own errors are collected instead of printed.
//
//===----------------------------------------------------------------------===//

#include "Bridge.h"

#include "llvm/ExecutionEngine/Orc/AbsoluteSymbols.h"
#include "llvm/ExecutionEngine/Orc/Core.h"
#include "llvm/ExecutionEngine/Orc/ExecutionUtils.h"
#include "llvm/ExecutionEngine/Orc/RTDyldObjectLinkingLayer.h"
#include "llvm/ExecutionEngine/Orc/SelfExecutorProcessControl.h"
#include "llvm/ExecutionEngine/Orc/TaskDispatch.h"
#include "llvm/ExecutionEngine/SectionMemoryManager.h"
#include "llvm/Object/ELFObjectFile.h"
#include "llvm/Object/ObjectFile.h"
#include "llvm/Support/DynamicLibrary.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/Triple.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <vector>

using namespace llvm;
using namespace llvm::orc;

namespace tdfpy {

struct LoadedObject {
  std::unique_ptr<ExecutionSession> session;
  std::unique_ptr<RTDyldObjectLinkingLayer> layer;
  std::mutex errorsLock;
  std::string errors; // what ORC reported while linking

  ~LoadedObject() {
    if (session)
      consumeError(session->endSession());
    layer.reset(); // deregisters from the session: before the session
    session.reset();
  }
};

std::string errorMessage(Error error) {
  std::string text;
  raw_string_ostream os(text);
  logAllUnhandledErrors(std::move(error), os);
  while (!text.empty() && text.back() == '\n')
    text.pop_back();
  return text;
}

namespace {

/// The x86-64 relocations LLVM's code generator emits for JIT code and
/// RuntimeDyld resolves (anything else is a damaged object).
bool isSupportedRelocation(uint64_t type) {
  switch (type) {
  case ELF::R_X86_64_NONE:
  case ELF::R_X86_64_64:
  case ELF::R_X86_64_PC32:
  case ELF::R_X86_64_PLT32:
  case ELF::R_X86_64_GOTPCREL:
  case ELF::R_X86_64_32:
  case ELF::R_X86_64_32S:
  case ELF::R_X86_64_PC64:
  case ELF::R_X86_64_GOTOFF64:
  case ELF::R_X86_64_GOTPC32:
  case ELF::R_X86_64_GOTPCRELX:
  case ELF::R_X86_64_REX_GOTPCRELX:
    return true;
  default:
    return false;
  }
}

/// Checks, on the raw ELF structures (every read checked), what the object
/// reader and RuntimeDyld would otherwise assert on or crash with: a
/// relocatable little-endian ELF64 object of the host's architecture whose
/// sections lie in the buffer, with valid names, power-of-two alignments,
/// symbols and relocations (supported types, inside their sections).
std::string checkObject(const std::string &bytes) {
  using ELFT = object::ELF64LE;
  MemoryBufferRef ref(StringRef(bytes.data(), bytes.size()), "tdf-cached");
  Expected<std::unique_ptr<object::ObjectFile>> parsed =
      object::ObjectFile::createObjectFile(ref);
  if (!parsed)
    return "not an object file: " + errorMessage(parsed.takeError());
  auto *elf = dyn_cast<object::ELF64LEObjectFile>(parsed->get());
  if (!elf || !elf->isRelocatableObject())
    return "not a relocatable little-endian ELF64 object";
  Triple host(sys::getProcessTriple());
  if (elf->getArch() != host.getArch() || host.getArch() != Triple::x86_64)
    return "not an object for this host's architecture (x86-64)";
  const object::ELFFile<ELFT> &file = elf->getELFFile();
  Expected<typename ELFT::ShdrRange> sections = file.sections();
  if (!sections)
    return "bad section headers: " + errorMessage(sections.takeError());
  const size_t count = sections->size();
  for (const typename ELFT::Shdr &header : *sections) {
    if (header.sh_addralign > 1 && !isPowerOf2_64(header.sh_addralign))
      return "bad section alignment";
    if (header.sh_type != ELF::SHT_NOBITS &&
        (header.sh_offset > bytes.size() ||
         header.sh_size > bytes.size() - header.sh_offset))
      return "a section lies outside the object (truncated?)";
    if (header.sh_link >= count)
      return "bad section link";
    Expected<StringRef> name = file.getSectionName(header);
    if (!name)
      return "bad section name: " + errorMessage(name.takeError());
    if (header.sh_type == ELF::SHT_REL)
      return "unexpected REL section";
    if (header.sh_type == ELF::SHT_SYMTAB) {
      Expected<typename ELFT::SymRange> symbols = file.symbols(&header);
      if (!symbols)
        return "bad symbol table: " + errorMessage(symbols.takeError());
      Expected<StringRef> strings = file.getStringTableForSymtab(header);
      if (!strings)
        return "bad string table: " + errorMessage(strings.takeError());
      for (const typename ELFT::Sym &symbol : *symbols) {
        Expected<StringRef> symbolName = symbol.getName(*strings);
        if (!symbolName)
          return "bad symbol name: " + errorMessage(symbolName.takeError());
        if (symbol.st_shndx < ELF::SHN_LORESERVE && symbol.st_shndx >= count)
          return "symbol in a missing section";
      }
    }
    if (header.sh_type == ELF::SHT_RELA) {
      const typename ELFT::Shdr &symtab = (*sections)[header.sh_link];
      if (header.sh_info >= count || symtab.sh_type != ELF::SHT_SYMTAB)
        return "bad relocation section";
      const typename ELFT::Shdr &target = (*sections)[header.sh_info];
      const uint64_t symbolCount = symtab.sh_size / sizeof(typename ELFT::Sym);
      Expected<typename ELFT::RelaRange> relocations = file.relas(header);
      if (!relocations)
        return "bad relocations: " + errorMessage(relocations.takeError());
      for (const typename ELFT::Rela &relocation : *relocations) {
        if (!isSupportedRelocation(relocation.getType(false)))
          return "unsupported relocation type " +
                 std::to_string(relocation.getType(false));
        if (relocation.r_offset >= target.sh_size)
          return "relocation outside its section";
        if (relocation.getSymbol(false) >= symbolCount)
          return "relocation of a missing symbol";
      }
    }
  }
  return "";
}

/// Resolves symbols in one shared library, which it loads (dlopen, for the
/// process's lifetime) only when asked for a symbol the process lacks: MLIR's
/// runner utilities pull a second libMLIR.so into the process, tens of
/// milliseconds that most programs never need.
class LazyLibraryGenerator : public DefinitionGenerator {
public:
  explicit LazyLibraryGenerator(std::string path) : path(std::move(path)) {}

  Error tryToGenerate(LookupState &state, LookupKind kind, JITDylib &dylib,
                      JITDylibLookupFlags flags,
                      const SymbolLookupSet &symbols) override {
    if (!library) {
      auto loaded = DynamicLibrarySearchGenerator::Load(path.c_str(), '\0');
      if (!loaded)
        return loaded.takeError();
      library = std::move(*loaded);
    }
    return library->tryToGenerate(state, kind, dylib, flags, symbols);
  }

private:
  std::string path;
  std::unique_ptr<DynamicLibrarySearchGenerator> library;
};

/// True when the shared library at `path` exports MLIR's execution-engine
/// init hook, read from its dynamic symbol table without loading it.
bool exportsInitHook(const std::string &path) {
  Expected<object::OwningBinary<object::Binary>> binary =
      object::createBinary(path);
  if (!binary) {
    consumeError(binary.takeError());
    return false;
  }
  auto *elf = dyn_cast<object::ELFObjectFileBase>(binary->getBinary());
  if (!elf)
    return false;
  for (const object::ELFSymbolRef &symbol : elf->getDynamicSymbolIterators()) {
    Expected<StringRef> name = symbol.getName();
    if (!name) {
      consumeError(name.takeError());
      continue;
    }
    if (*name != "__mlir_execution_engine_init")
      continue;
    Expected<uint32_t> flags = symbol.getFlags();
    if (!flags) {
      consumeError(flags.takeError());
      return false;
    }
    return !(*flags & object::SymbolRef::SF_Undefined);
  }
  return false;
}

} // namespace

LoadedObject *
loadObject(const std::vector<std::string> &objects,
           const std::vector<std::pair<std::string, uint64_t>> &symbols,
           const std::vector<std::string> &libraries,
           const std::vector<std::string> &lookups,
           std::vector<uint64_t> &addresses, std::string &error) {
  if (objects.empty()) {
    error = "no object";
    return nullptr;
  }
  for (const std::string &bytes : objects) {
    error = checkObject(bytes);
    if (!error.empty())
      return nullptr;
  }

  Expected<std::unique_ptr<SelfExecutorProcessControl>> control =
      SelfExecutorProcessControl::Create(
          nullptr, std::make_unique<InPlaceTaskDispatcher>());
  if (!control) {
    error = errorMessage(control.takeError());
    return nullptr;
  }
  auto loaded = std::make_unique<LoadedObject>();
  loaded->session = std::make_unique<ExecutionSession>(std::move(*control));
  ExecutionSession &session = *loaded->session;
  LoadedObject *raw = loaded.get();
  session.setErrorReporter([raw](Error err) {
    std::lock_guard<std::mutex> lock(raw->errorsLock);
    if (!raw->errors.empty())
      raw->errors += "; ";
    raw->errors += errorMessage(std::move(err));
  });
  loaded->layer = std::make_unique<RTDyldObjectLinkingLayer>(
      session, [](const MemoryBuffer &) {
        return std::make_unique<SectionMemoryManager>();
      });
  JITDylib &dylib = session.createBareJITDylib("tdf-program");

  // The tdf runtime and allocation counter: absolute symbols (they take
  // precedence over the generators below). Then what the init hooks of
  // MLIR's runtime libraries give (`__mlir_execution_engine_init`, as the
  // ExecutionEngine calls them), unless defined already. Their destroy
  // hooks are not called: the libraries stay loaded, and their state may
  // serve other programs.
  SymbolMap map;
  for (const auto &[name, address] : symbols)
    map[session.intern(name)] = {ExecutorAddr(address),
                                 JITSymbolFlags::Exported};
  for (const std::string &path : libraries) {
    if (!exportsInitHook(path))
      continue; // loaded only when a symbol needs it (LazyLibraryGenerator)
    std::string loadError;
    sys::DynamicLibrary library =
        sys::DynamicLibrary::getPermanentLibrary(path.c_str(), &loadError);
    if (!library.isValid())
      continue; // resolved (and reported) by the generator below
    auto init = reinterpret_cast<void (*)(StringMap<void *> &)>(
        library.getAddressOfSymbol("__mlir_execution_engine_init"));
    if (!init)
      continue;
    StringMap<void *> exported;
    init(exported);
    for (const auto &entry : exported) {
      SymbolStringPtr name = session.intern(entry.getKey());
      if (!map.count(name))
        map[name] = {ExecutorAddr::fromPtr(entry.getValue()),
                     JITSymbolFlags::Exported};
    }
  }
  if (Error err = dylib.define(absoluteSymbols(std::move(map)))) {
    error = errorMessage(std::move(err));
    return nullptr;
  }
  // The process first (libc, libm and every library loaded for the process,
  // as the ExecutionEngine resolves symbols), then the shared libraries.
  auto process = DynamicLibrarySearchGenerator::GetForCurrentProcess('\0');
  if (!process) {
    error = errorMessage(process.takeError());
    return nullptr;
  }
  dylib.addGenerator(std::move(*process));
  for (const std::string &path : libraries)
    dylib.addGenerator(std::make_unique<LazyLibraryGenerator>(path));

  for (const std::string &bytes : objects)
    if (Error err = loaded->layer->add(
            dylib, MemoryBuffer::getMemBufferCopy(bytes, "tdf-program"))) {
      error = errorMessage(std::move(err));
      return nullptr;
    }
  addresses.clear();
  for (const std::string &name : lookups) {
    Expected<ExecutorSymbolDef> symbol = session.lookup({&dylib}, name);
    if (!symbol) {
      error = errorMessage(symbol.takeError());
      std::lock_guard<std::mutex> lock(raw->errorsLock);
      if (!raw->errors.empty())
        error += " (" + raw->errors + ")";
      return nullptr;
    }
    addresses.push_back(symbol->getAddress().getValue());
  }
  return loaded.release();
}

void releaseObject(LoadedObject *object) { delete object; }

std::string hostCPU() {
  std::string text =
      sys::getProcessTriple() + " " + sys::getHostCPUName().str() + " ";
  StringMap<bool> features = sys::getHostCPUFeatures();
  std::vector<std::string> names;
  for (const auto &entry : features)
    names.push_back((entry.getValue() ? "+" : "-") + entry.getKey().str());
  std::sort(names.begin(), names.end());
  for (size_t i = 0; i < names.size(); ++i)
    text += (i ? "," : "") + names[i];
  return text;
}

} // namespace tdfpy
