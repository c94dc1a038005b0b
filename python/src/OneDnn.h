//===- OneDnn.h - the oneDNN library the runtime loaded -------------------===//
//
// What Blas.cpp (which loads oneDNN for its GEMMs) gives the runtime's other
// oneDNN routes: the library's handle and its thread count setting; the
// primitive C API bound at run time (OneDnnApi.cpp), used by Convolution.cpp
// and OneDnnMatmul.cpp; the matmul route of GEMMs (OneDnnMatmul.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef TDF_PYTHON_SRC_ONEDNN_H
#define TDF_PYTHON_SRC_ONEDNN_H

#include <cstddef>
#include <cstdint>
#include <initializer_list>

namespace tdfrt {

/// The dlopen handle of the oneDNN library Blas.cpp loaded, or null (none
/// loaded, or a forked child: GNU OpenMP does not survive fork).
void *oneDnnHandle();

/// oneDNN's OpenMP thread count for this thread set to `threads` (0: left
/// alone) for the guard's lifetime (a per-thread setting of the runtime).
struct OneDnnThreads {
  explicit OneDnnThreads(int threads);
  ~OneDnnThreads();
  OneDnnThreads(const OneDnnThreads &) = delete;
  OneDnnThreads &operator=(const OneDnnThreads &) = delete;
  int previous = -1;
};

/// oneDNN C API values (oneapi/dnnl/dnnl_types.h, 3.x).
namespace dnnl {
constexpr int kSuccess = 0;
constexpr int kBf16 = 2, kF32 = 3;
constexpr int kFormatTagAny = 1;
constexpr int kForwardInference = 96;
constexpr int kConvolutionDirect = 1;
constexpr int kCpu = 1;
constexpr unsigned kStreamInOrder = 1;
constexpr int kQueryWeightsMd = 131, kQueryScratchpadMd = 136;
constexpr int kScratchpadModeUser = 1;
constexpr int kArgSrc = 1, kArgDst = 17, kArgWeights = 33, kArgScratchpad = 80;
constexpr int kArgFrom = 1, kArgTo = 17;
} // namespace dnnl

using Handle = void *;
struct ExecArg {
  int arg;
  Handle memory;
};

/// The functions of oneDNN's C API the runtime calls, and its CPU engine.
struct OneDnnApi {
  int (*engineCreate)(Handle *, int, size_t);
  int (*streamCreate)(Handle *, Handle, unsigned);
  int (*streamWait)(Handle);
  int (*streamDestroy)(Handle);
  int (*mdStrides)(Handle *, int, const int64_t *, int, const int64_t *);
  int (*mdTag)(Handle *, int, const int64_t *, int, int);
  int (*mdEqual)(Handle, Handle);
  size_t (*mdSize)(Handle);
  int (*convPd)(Handle *, Handle, int, int, Handle, Handle, Handle, Handle,
                const int64_t *, const int64_t *, const int64_t *,
                const int64_t *, Handle);
  int (*matmulPd)(Handle *, Handle, Handle, Handle, Handle, Handle, Handle);
  int (*reorderPd)(Handle *, Handle, Handle, Handle, Handle, Handle);
  Handle (*queryMd)(Handle, int, int);
  int (*primitiveCreate)(Handle *, Handle);
  int (*memoryCreate)(Handle *, Handle, Handle, void *);
  int (*memoryDestroy)(Handle);
  int (*execute)(Handle, Handle, int, const ExecArg *);
  int (*attrCreate)(Handle *);
  int (*attrDestroy)(Handle);
  int (*attrSetScratchpadMode)(Handle, int);
  Handle engine;
};

/// The API of the loaded oneDNN (bound once per library), or null.
const OneDnnApi *oneDnnApi();

/// One argument of a primitive: its kind (dnnl::kArg*), memory descriptor
/// and data.
struct Argument {
  int arg;
  Handle desc;
  void *data;
};

/// A primitive and its scratchpad: created with a user-managed scratchpad,
/// since oneDNN's own is one buffer for the process (its builds without
/// concurrent execution, as the package's): two primitives running at once
/// from two threads would share it.
struct Primitive {
  Handle primitive = nullptr;
  Handle scratchpad = nullptr; // its memory descriptor (owned by the pd)
  size_t scratchpadBytes = 0;
};

/// A primitive attribute asking for a user-managed scratchpad (destroy it
/// with attrDestroy), or null.
Handle userScratchpadAttr(const OneDnnApi &api);

/// The primitive of primitive descriptor `pd` (created with
/// userScratchpadAttr) and its scratchpad; false when oneDNN refuses.
bool createPrimitive(const OneDnnApi &api, Handle pd, Primitive &primitive);

/// Runs `primitive` on `arguments` (at most 7) with memory objects, a
/// stream and a scratchpad of this call's own (primitives run concurrently
/// from several threads); false when oneDNN refuses or the scratchpad
/// cannot be allocated.
bool runPrimitive(const OneDnnApi &api, const Primitive &primitive,
                  const std::initializer_list<Argument> &arguments);

/// C = A * B of A and B of oneDNN data type `type` (dnnl::kBf16 or kF32)
/// into an f32 C, every matrix given by its sizes and (row, column) strides
/// in elements, through a matmul primitive created once per geometry, type
/// and thread count (OneDnnMatmul.cpp); false (nothing written) when oneDNN
/// is not loaded or refuses it.
bool oneDnnMatmul(int type, int64_t m, int64_t n, int64_t k, const void *a,
                  const int64_t aStrides[2], const void *b,
                  const int64_t bStrides[2], float *c,
                  const int64_t cStrides[2], int threads);

} // namespace tdfrt

#endif // TDF_PYTHON_SRC_ONEDNN_H
