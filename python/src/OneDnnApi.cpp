//===- OneDnnApi.cpp - oneDNN's primitive C API, bound at run time --------===//
//
// The runtime loads oneDNN with dlopen (Blas.cpp: its GEMMs); its primitive
// routes (Convolution.cpp, OneDnnMatmul.cpp) call the library's C API through
// the function pointers bound here, once per loaded library, with one CPU
// engine for the process.
//
//===----------------------------------------------------------------------===//

#include <cstdlib>
#include <dlfcn.h>
#include <mutex>

#include "OneDnn.h"

namespace tdfrt {

namespace {

template <typename Fn> bool bind(void *lib, const char *name, Fn &fn) {
  fn = reinterpret_cast<Fn>(dlsym(lib, name));
  return fn != nullptr;
}

std::mutex apiLock;
OneDnnApi api;
bool apiReady = false;
void *apiLibrary = nullptr;

} // namespace

const OneDnnApi *oneDnnApi() {
  void *lib = oneDnnHandle();
  if (!lib)
    return nullptr;
  std::lock_guard<std::mutex> guard(apiLock);
  if (apiReady && apiLibrary == lib)
    return &api;
  OneDnnApi a{};
  bool ok =
      bind(lib, "dnnl_engine_create", a.engineCreate) &&
      bind(lib, "dnnl_stream_create", a.streamCreate) &&
      bind(lib, "dnnl_stream_wait", a.streamWait) &&
      bind(lib, "dnnl_stream_destroy", a.streamDestroy) &&
      bind(lib, "dnnl_memory_desc_create_with_strides", a.mdStrides) &&
      bind(lib, "dnnl_memory_desc_create_with_tag", a.mdTag) &&
      bind(lib, "dnnl_memory_desc_equal", a.mdEqual) &&
      bind(lib, "dnnl_memory_desc_get_size", a.mdSize) &&
      bind(lib, "dnnl_convolution_forward_primitive_desc_create", a.convPd) &&
      bind(lib, "dnnl_matmul_primitive_desc_create", a.matmulPd) &&
      bind(lib, "dnnl_reorder_primitive_desc_create", a.reorderPd) &&
      bind(lib, "dnnl_primitive_desc_query_md", a.queryMd) &&
      bind(lib, "dnnl_primitive_create", a.primitiveCreate) &&
      bind(lib, "dnnl_memory_create", a.memoryCreate) &&
      bind(lib, "dnnl_memory_destroy", a.memoryDestroy) &&
      bind(lib, "dnnl_primitive_execute", a.execute) &&
      bind(lib, "dnnl_primitive_attr_create", a.attrCreate) &&
      bind(lib, "dnnl_primitive_attr_destroy", a.attrDestroy) &&
      bind(lib, "dnnl_primitive_attr_set_scratchpad_mode",
           a.attrSetScratchpadMode);
  if (!ok || a.engineCreate(&a.engine, dnnl::kCpu, 0) != dnnl::kSuccess)
    return nullptr;
  api = a;
  apiLibrary = lib;
  apiReady = true;
  return &api;
}

Handle userScratchpadAttr(const OneDnnApi &a) {
  Handle attr = nullptr;
  if (a.attrCreate(&attr) != dnnl::kSuccess)
    return nullptr;
  if (a.attrSetScratchpadMode(attr, dnnl::kScratchpadModeUser) !=
      dnnl::kSuccess) {
    a.attrDestroy(attr);
    return nullptr;
  }
  return attr;
}

bool createPrimitive(const OneDnnApi &a, Handle pd, Primitive &primitive) {
  if (a.primitiveCreate(&primitive.primitive, pd) != dnnl::kSuccess) {
    primitive.primitive = nullptr;
    return false;
  }
  primitive.scratchpad = a.queryMd(pd, dnnl::kQueryScratchpadMd, 0);
  primitive.scratchpadBytes =
      primitive.scratchpad ? a.mdSize(primitive.scratchpad) : 0;
  return true;
}

bool runPrimitive(const OneDnnApi &a, const Primitive &primitive,
                  const std::initializer_list<Argument> &arguments) {
  if (arguments.size() > 7)
    return false;
  void *scratchpad = nullptr;
  if (primitive.scratchpadBytes) {
    scratchpad = std::malloc(primitive.scratchpadBytes);
    if (!scratchpad)
      return false;
  }
  Handle stream = nullptr;
  Handle memory[8] = {};
  ExecArg args[8];
  int n = 0;
  bool ok =
      a.streamCreate(&stream, a.engine, dnnl::kStreamInOrder) == dnnl::kSuccess;
  auto add = [&](int arg, Handle desc, void *data) {
    ok = ok &&
         a.memoryCreate(&memory[n], desc, a.engine, data) == dnnl::kSuccess;
    args[n] = {arg, memory[n]};
    ++n;
  };
  for (const Argument &argument : arguments)
    add(argument.arg, argument.desc, argument.data);
  if (scratchpad)
    add(dnnl::kArgScratchpad, primitive.scratchpad, scratchpad);
  ok = ok &&
       a.execute(primitive.primitive, stream, n, args) == dnnl::kSuccess &&
       a.streamWait(stream) == dnnl::kSuccess;
  for (Handle m : memory)
    if (m)
      a.memoryDestroy(m);
  if (stream)
    a.streamDestroy(stream);
  std::free(scratchpad);
  return ok;
}

} // namespace tdfrt
