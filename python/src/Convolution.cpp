//===- Convolution.cpp - convolutions through oneDNN ----------------------===//
//
// `tdf_rt_conv`: the function `tdf-convolutions-to-dnnl` calls in place of
// an upstream named convolution on memrefs (linalg.conv_{1,2,3}d_nwc_wcf /
// nhwc_hwcf / ndhwc_dhwcf, channels last, and conv_{1,2,3}d_ncw_fcw /
// nchw_fchw / ncdhw_fcdhw, channels first), float32, after its output was
// filled with zero. It runs oneDNN's forward convolution primitive (the
// library XLA's CPU backend calls for convolutions) on the operands where
// they are, in destination-passing style: every operand is described to
// oneDNN by its own sizes and strides, so any strided view works, and the
// output buffer is written in place. The weights are given to the primitive
// in the layout it prefers (reordered per call into a scratch buffer when
// that is not the operand's own; weights are small next to the activations).
//
// A primitive is created once per geometry (sizes, strides, window strides,
// dilations, threads) and kept; primitives execute concurrently from several
// threads. When oneDNN is not loaded (no library, or a forked child, whose
// OpenMP runtime does not survive fork) or refuses the geometry, a reference
// loop nest computes the same sums in the same order of reduction
// dimensions (input feature, then kernel positions) as a last resort.
//
//===----------------------------------------------------------------------===//

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <map>
#include <mutex>
#include <vector>

#include <nanobind/nanobind.h>

#include "OneDnn.h"

namespace nb = nanobind;

extern "C" void tdf_rt_alloc_error(int64_t site, int64_t bytes);

namespace {

/// The descriptor `tdf-convolutions-to-dnnl` passes: for src, weights and
/// dst in turn, the aligned pointer, the offset and five sizes and strides
/// (elements; rank = spatial + 2), then the window strides and dilations of
/// three spatial dimensions.
constexpr int kOperandWords = 12;
constexpr int kDescWords = 3 * kOperandWords + 6;

// oneDNN C API values (oneapi/dnnl/dnnl_types.h, 3.x).
constexpr int kDnnlSuccess = 0;
constexpr int kDnnlF32 = 3;
constexpr int kDnnlFormatTagAny = 1;
constexpr int kDnnlForwardInference = 96;
constexpr int kDnnlConvolutionDirect = 1;
constexpr int kDnnlCpu = 1;
constexpr unsigned kDnnlStreamInOrder = 1;
constexpr int kDnnlQueryWeightsMd = 131;
constexpr int kDnnlArgSrc = 1, kDnnlArgDst = 17, kDnnlArgWeights = 33;
constexpr int kDnnlArgFrom = 1, kDnnlArgTo = 17;

using Handle = void *;
using Dims = int64_t[12];
struct ExecArg {
  int arg;
  Handle memory;
};

struct Api {
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
  int (*reorderPd)(Handle *, Handle, Handle, Handle, Handle, Handle);
  Handle (*queryMd)(Handle, int, int);
  int (*primitiveCreate)(Handle *, Handle);
  int (*memoryCreate)(Handle *, Handle, Handle, void *);
  int (*memoryDestroy)(Handle);
  int (*execute)(Handle, Handle, int, const ExecArg *);
};

template <typename Fn> bool bind(void *lib, const char *name, Fn &fn) {
  fn = reinterpret_cast<Fn>(dlsym(lib, name));
  return fn != nullptr;
}

struct Conv {
  Handle primitive = nullptr;
  Handle reorder = nullptr; // weights: operand layout -> the primitive's
  Handle src = nullptr, weights = nullptr, dst = nullptr, packed = nullptr;
  size_t packedBytes = 0;
};

std::mutex convLock;
Api api;
Handle engine = nullptr;
bool apiReady = false;
void *apiLibrary = nullptr;
std::map<std::vector<int64_t>, Conv> primitives;
std::atomic<int64_t> libraryCalls{0}, referenceCalls{0};
/// Tests: every call through the reference loops.
std::atomic<bool> forceReference{false};

/// The API of the loaded oneDNN (once per library), or false.
bool ready() {
  void *lib = tdfrt::oneDnnHandle();
  if (!lib)
    return false;
  if (apiReady && apiLibrary == lib)
    return true;
  Api a{};
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
      bind(lib, "dnnl_reorder_primitive_desc_create", a.reorderPd) &&
      bind(lib, "dnnl_primitive_desc_query_md", a.queryMd) &&
      bind(lib, "dnnl_primitive_create", a.primitiveCreate) &&
      bind(lib, "dnnl_memory_create", a.memoryCreate) &&
      bind(lib, "dnnl_memory_destroy", a.memoryDestroy) &&
      bind(lib, "dnnl_primitive_execute", a.execute);
  Handle e = nullptr;
  if (!ok || a.engineCreate(&e, kDnnlCpu, 0) != kDnnlSuccess)
    return false;
  api = a;
  engine = e;
  apiLibrary = lib;
  apiReady = true;
  return true;
}

/// One operand of the descriptor: oneDNN's logical order is (batch or
/// output feature, channel, spatial...); `channelsLast` operands keep the
/// channel (weights: the output feature) last and the other leading.
struct Operand {
  float *data;
  int64_t sizes[5], strides[5];
};

Operand operand(const int64_t *w, int rank) {
  Operand o;
  o.data = reinterpret_cast<float *>(w[0]) + w[1];
  for (int i = 0; i < 5; ++i) {
    o.sizes[i] = i < rank ? w[2 + i] : 1;
    o.strides[i] = i < rank ? w[7 + i] : 0;
  }
  return o;
}

/// oneDNN's logical (sizes, strides) of an operand: channels-last activations
/// (N, spatial..., C) -> (N, C, spatial...); channels-last weights
/// (spatial..., C, F) -> (F, C, spatial...); channels-first ones as they are.
void logical(const Operand &o, int rank, bool channelsLast, bool weights,
             int64_t *sizes, int64_t *strides) {
  int sp = rank - 2;
  if (!channelsLast) {
    std::copy(o.sizes, o.sizes + rank, sizes);
    std::copy(o.strides, o.strides + rank, strides);
    return;
  }
  int first = weights ? rank - 1 : 0, second = weights ? rank - 2 : rank - 1;
  int spatial0 = weights ? 0 : 1;
  sizes[0] = o.sizes[first];
  strides[0] = o.strides[first];
  sizes[1] = o.sizes[second];
  strides[1] = o.strides[second];
  for (int i = 0; i < sp; ++i) {
    sizes[2 + i] = o.sizes[spatial0 + i];
    strides[2 + i] = o.strides[spatial0 + i];
  }
}

/// One call's convolution, decoded once: each operand's data and oneDNN's
/// logical (sizes, strides) of it, the window strides and dilations.
struct Geometry {
  int rank;
  bool channelsLast;
  Operand ops[3];
  int64_t dims[3][5], str[3][5];
  const int64_t *windowStrides, *dilations;
};

Geometry decode(const int64_t *desc, int rank, bool channelsLast) {
  Geometry g;
  g.rank = rank;
  g.channelsLast = channelsLast;
  for (int k = 0; k < 3; ++k) {
    g.ops[k] = operand(desc + k * kOperandWords, rank);
    logical(g.ops[k], rank, channelsLast, k == 1, g.dims[k], g.str[k]);
  }
  g.windowStrides = desc + 3 * kOperandWords;
  g.dilations = g.windowStrides + 3;
  return g;
}

/// The primitive of one geometry, created on first use; null when oneDNN
/// refuses it.
Conv *primitiveFor(const std::vector<int64_t> &key, int rank,
                   const int64_t (&dims)[3][5], const int64_t (&str)[3][5],
                   const int64_t *windowStrides, const int64_t *dilations) {
  auto found = primitives.find(key);
  if (found != primitives.end())
    return found->second.primitive ? &found->second : nullptr;
  Conv conv;
  Dims zeros = {0};
  Dims dil = {0}, stride = {0};
  int sp = rank - 2;
  for (int i = 0; i < sp; ++i) {
    stride[i] = windowStrides[i];
    dil[i] = dilations[i] - 1; // oneDNN counts the gaps
  }
  Handle any = nullptr;
  bool ok = api.mdStrides(&conv.src, rank, dims[0], kDnnlF32, str[0]) ==
                kDnnlSuccess &&
            api.mdStrides(&conv.weights, rank, dims[1], kDnnlF32, str[1]) ==
                kDnnlSuccess &&
            api.mdStrides(&conv.dst, rank, dims[2], kDnnlF32, str[2]) ==
                kDnnlSuccess &&
            api.mdTag(&any, rank, dims[1], kDnnlF32, kDnnlFormatTagAny) ==
                kDnnlSuccess;
  Handle pd = nullptr;
  if (ok)
    ok = api.convPd(&pd, engine, kDnnlForwardInference, kDnnlConvolutionDirect,
                    conv.src, any, nullptr, conv.dst, stride, dil, zeros, zeros,
                    nullptr) == kDnnlSuccess &&
         api.primitiveCreate(&conv.primitive, pd) == kDnnlSuccess;
  if (ok) {
    Handle chosen = api.queryMd(pd, kDnnlQueryWeightsMd, 0);
    if (!api.mdEqual(chosen, conv.weights)) {
      Handle rpd = nullptr;
      conv.packed = chosen;
      conv.packedBytes = api.mdSize(chosen);
      ok = api.reorderPd(&rpd, conv.weights, engine, chosen, engine, nullptr) ==
               kDnnlSuccess &&
           api.primitiveCreate(&conv.reorder, rpd) == kDnnlSuccess;
    }
  }
  // The descriptors stay alive with the primitive (`packed` belongs to the
  // primitive descriptor, kept too): a few per geometry, for the process.
  if (!ok)
    conv.primitive = nullptr;
  Conv &kept = primitives[key] = conv;
  return kept.primitive ? &kept : nullptr;
}

/// Runs the convolution through oneDNN; false when it cannot (not loaded,
/// geometry refused).
bool runLibrary(const Geometry &g, int threads) {
  const int64_t (&dims)[3][5] = g.dims;
  const int64_t (&str)[3][5] = g.str;
  const Operand(&ops)[3] = g.ops;
  int rank = g.rank;
  Conv conv;
  {
    std::lock_guard<std::mutex> guard(convLock);
    if (!ready())
      return false;
    std::vector<int64_t> key{rank, g.channelsLast, threads};
    for (int k = 0; k < 3; ++k)
      for (int i = 0; i < rank; ++i) {
        key.push_back(dims[k][i]);
        key.push_back(str[k][i]);
      }
    key.insert(key.end(), g.windowStrides, g.windowStrides + 3);
    key.insert(key.end(), g.dilations, g.dilations + 3);
    Conv *found =
        primitiveFor(key, rank, dims, str, g.windowStrides, g.dilations);
    if (!found)
      return false;
    conv = *found;
  }
  // No lock from here: primitives are immutable and may run concurrently;
  // each call has its own memory objects, stream and weights buffer.
  void *packed = nullptr;
  if (conv.reorder) {
    packed = std::malloc(std::max<size_t>(conv.packedBytes, 64));
    if (!packed)
      tdf_rt_alloc_error(-1, int64_t(conv.packedBytes)); // longjmps
  }
  Handle stream = nullptr, mem[4] = {nullptr, nullptr, nullptr, nullptr};
  bool ok =
      api.streamCreate(&stream, engine, kDnnlStreamInOrder) == kDnnlSuccess &&
      api.memoryCreate(&mem[0], conv.src, engine, ops[0].data) ==
          kDnnlSuccess &&
      api.memoryCreate(&mem[1], conv.weights, engine, ops[1].data) ==
          kDnnlSuccess &&
      api.memoryCreate(&mem[2], conv.dst, engine, ops[2].data) ==
          kDnnlSuccess &&
      (!conv.reorder ||
       api.memoryCreate(&mem[3], conv.packed, engine, packed) == kDnnlSuccess);
  {
    tdfrt::OneDnnThreads guard(threads);
    if (ok && conv.reorder) {
      ExecArg args[2] = {{kDnnlArgFrom, mem[1]}, {kDnnlArgTo, mem[3]}};
      ok = api.execute(conv.reorder, stream, 2, args) == kDnnlSuccess;
    }
    if (ok) {
      ExecArg args[3] = {{kDnnlArgSrc, mem[0]},
                         {kDnnlArgWeights, conv.reorder ? mem[3] : mem[1]},
                         {kDnnlArgDst, mem[2]}};
      ok = api.execute(conv.primitive, stream, 3, args) == kDnnlSuccess &&
           api.streamWait(stream) == kDnnlSuccess;
    }
  }
  for (Handle m : mem)
    if (m)
      api.memoryDestroy(m);
  if (stream)
    api.streamDestroy(stream);
  std::free(packed);
  return ok;
}

/// The same convolution as loops (oneDNN unavailable or refusing): dst =
/// sum over input feature and kernel positions of src * weights.
void runReference(const Geometry &g) {
  const int64_t (&dims)[3][5] = g.dims;
  const int64_t (&str)[3][5] = g.str;
  const Operand(&ops)[3] = g.ops;
  int rank = g.rank;
  const int64_t *windowStrides = g.windowStrides, *dilations = g.dilations;
  int sp = rank - 2;
  int64_t out[3] = {1, 1, 1}, ker[3] = {1, 1, 1};
  for (int i = 0; i < sp; ++i) {
    out[i] = dims[2][2 + i];
    ker[i] = dims[1][2 + i];
  }
  int64_t n = dims[2][0], f = dims[2][1], c = dims[0][1];
  for (int64_t b = 0; b < n; ++b)
    for (int64_t o = 0; o < f; ++o)
      for (int64_t y0 = 0; y0 < out[0]; ++y0)
        for (int64_t y1 = 0; y1 < out[1]; ++y1)
          for (int64_t y2 = 0; y2 < out[2]; ++y2) {
            int64_t y[3] = {y0, y1, y2};
            float acc = 0.0f;
            for (int64_t ch = 0; ch < c; ++ch)
              for (int64_t k0 = 0; k0 < ker[0]; ++k0)
                for (int64_t k1 = 0; k1 < ker[1]; ++k1)
                  for (int64_t k2 = 0; k2 < ker[2]; ++k2) {
                    int64_t k[3] = {k0, k1, k2};
                    int64_t xs = b * str[0][0] + ch * str[0][1];
                    int64_t ws = o * str[1][0] + ch * str[1][1];
                    for (int i = 0; i < sp; ++i) {
                      xs += (y[i] * windowStrides[i] + k[i] * dilations[i]) *
                            str[0][2 + i];
                      ws += k[i] * str[1][2 + i];
                    }
                    acc += ops[0].data[xs] * ops[1].data[ws];
                  }
            int64_t ds = b * str[2][0] + o * str[2][1];
            for (int i = 0; i < sp; ++i)
              ds += y[i] * str[2][2 + i];
            ops[2].data[ds] = acc;
          }
}

} // namespace

/// dst = conv(src, weights); see the file comment. `flags`: the spatial
/// rank (1-3) in bits 0-1, channels first in bit 2, the thread count of
/// this call (0: the library's) in bits 32-47. `desc`: the address of the
/// descriptor (kDescWords i64 values).
extern "C" void tdf_rt_conv(int64_t flags, int64_t desc) {
  int rank = int(flags & 3) + 2;
  bool channelsLast = !((flags >> 2) & 1);
  int threads = int((flags >> 32) & 0xffff);
  Geometry g =
      decode(reinterpret_cast<const int64_t *>(desc), rank, channelsLast);
  if (!forceReference.load() && runLibrary(g, threads)) {
    libraryCalls.fetch_add(1);
    return;
  }
  referenceCalls.fetch_add(1);
  runReference(g);
}

namespace tdfpy {

void registerConvolution(nb::module_ &m) {
  m.def(
      "conv_calls",
      []() {
        return nb::make_tuple(libraryCalls.load(), referenceCalls.load());
      },
      "(calls through oneDNN, calls through the reference loops) of "
      "tdf_rt_conv in this process.");
  m.def(
      "conv_force_reference", [](bool on) { forceReference.store(on); },
      nb::arg("on"),
      "Tests: run every tdf_rt_conv call through the reference loops.");
  m.def(
      "conv_primitives",
      []() {
        std::lock_guard<std::mutex> guard(convLock);
        return primitives.size();
      },
      "Convolution geometries tdf_rt_conv has asked oneDNN for.");
}

} // namespace tdfpy
