//===- OneDnnMatmul.cpp - GEMMs through oneDNN's matmul primitive ---------===//
//
// A bf16 x bf16 -> f32 GEMM, and an f32 one with a transposed operand
// (Blas.cpp's oneDNN route, when it does not accumulate into C), runs
// oneDNN's matmul primitive rather than its BLAS-like `dnnl_gemm_bf16bf16f32`
// / `dnnl_sgemm`: the primitive picks the brgemm kernels (AMX / AVX512-BF16
// for bf16) for the shape. Measured on this machine's 2 cores, the calls
// side by side in one C++ process: bf16 128x512x4096 480-610 GFLOP/s
// against 360-460 for the BLAS-like call (1024^3 equal); f32 with B
// transposed, 128x4096x512 and 128x512x4096, 210-220 against 160-170
// (without a transpose, equal: those stay with dnnl_sgemm). Every call of a
// geometry takes the same route (the same bits each call); Blas.cpp sends
// only GEMMs of at least 2^26 flops, below which the per-call memory objects
// and stream cost more than the kernels save.
// Each operand is described by its own sizes and strides (a transposed
// operand is a strided one: no copy); the output is written in place. A
// primitive is created once per geometry (sizes, strides, thread count) and
// kept for the process; primitives execute concurrently from several threads.
//
//===----------------------------------------------------------------------===//

#include <array>
#include <map>
#include <mutex>

#include "OneDnn.h"

namespace tdfrt {

namespace {

struct Matmul {
  Primitive primitive;
  Handle a = nullptr, b = nullptr, c = nullptr; // memory descriptors
};

using Key = std::array<int64_t, 11>;

std::mutex matmulLock;
std::map<Key, Matmul> matmuls;

/// The primitive of one geometry, created on first use (the mutex held);
/// null when oneDNN refuses it.
const Matmul *matmulFor(const OneDnnApi &api, const Key &key) {
  auto found = matmuls.find(key);
  if (found != matmuls.end())
    return found->second.primitive.primitive ? &found->second : nullptr;
  Matmul mm;
  int64_t m = key[0], n = key[1], k = key[2];
  int64_t aDims[2] = {m, k}, bDims[2] = {k, n}, cDims[2] = {m, n};
  Handle pd = nullptr;
  int type = int(key[10]);
  bool ok =
      api.mdStrides(&mm.a, 2, aDims, type, &key[3]) == dnnl::kSuccess &&
      api.mdStrides(&mm.b, 2, bDims, type, &key[5]) == dnnl::kSuccess &&
      api.mdStrides(&mm.c, 2, cDims, dnnl::kF32, &key[7]) == dnnl::kSuccess;
  if (ok) {
    // Created under the call's thread count: oneDNN sizes its work split
    // by the threads it sees then.
    OneDnnThreads threads(int(key[9]));
    Handle attr = userScratchpadAttr(api);
    ok = attr &&
         api.matmulPd(&pd, api.engine, mm.a, mm.b, nullptr, mm.c, attr) ==
             dnnl::kSuccess &&
         createPrimitive(api, pd, mm.primitive);
    if (attr)
      api.attrDestroy(attr);
  }
  // The descriptors stay alive with the primitive, for the process.
  if (!ok)
    mm.primitive = Primitive{};
  Matmul &kept = matmuls[key] = mm;
  return kept.primitive.primitive ? &kept : nullptr;
}

} // namespace

bool oneDnnMatmul(int type, int64_t m, int64_t n, int64_t k, const void *a,
                  const int64_t aStrides[2], const void *b,
                  const int64_t bStrides[2], float *c,
                  const int64_t cStrides[2], int threads) {
  if (m <= 0 || n <= 0 || k <= 0 || (type != dnnl::kBf16 && type != dnnl::kF32))
    return false;
  Key key{m,           n,           k,           aStrides[0],
          aStrides[1], bStrides[0], bStrides[1], cStrides[0],
          cStrides[1], threads,     type};
  Matmul mm;
  const OneDnnApi *api = nullptr;
  {
    std::lock_guard<std::mutex> guard(matmulLock);
    api = oneDnnApi();
    if (!api)
      return false;
    const Matmul *found = matmulFor(*api, key);
    if (!found)
      return false;
    mm = *found;
  }
  OneDnnThreads guard(threads);
  return runPrimitive(*api, mm.primitive,
                      {{dnnl::kArgSrc, mm.a, const_cast<void *>(a)},
                       {dnnl::kArgWeights, mm.b, const_cast<void *>(b)},
                       {dnnl::kArgDst, mm.c, c}});
}

} // namespace tdfrt
