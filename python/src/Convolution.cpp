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
// threads, each call with scratchpad memory of its own (OneDnnApi.cpp). When
// oneDNN is not loaded (no library, or a forked child, whose OpenMP runtime
// does not survive fork) or refuses the geometry, a reference loop nest
// computes the same sums in the same order of reduction dimensions (input
// feature, then kernel positions) as a last resort.
//
//===----------------------------------------------------------------------===//

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
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

using tdfrt::Handle;
using tdfrt::OneDnnApi;
namespace dnnl = tdfrt::dnnl;
using Dims = int64_t[12];

struct Conv {
  tdfrt::Primitive primitive;
  tdfrt::Primitive reorder; // weights: operand layout -> the primitive's
  Handle src = nullptr, weights = nullptr, dst = nullptr, packed = nullptr;
  size_t packedBytes = 0;
};

std::mutex convLock;
std::map<std::vector<int64_t>, Conv> primitives;
std::atomic<int64_t> libraryCalls{0}, referenceCalls{0};
/// Tests: every call through the reference loops.
std::atomic<bool> forceReference{false};

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
Conv *primitiveFor(const OneDnnApi &api, const std::vector<int64_t> &key,
                   int rank, const int64_t (&dims)[3][5],
                   const int64_t (&str)[3][5], const int64_t *windowStrides,
                   const int64_t *dilations) {
  auto found = primitives.find(key);
  if (found != primitives.end())
    return found->second.primitive.primitive ? &found->second : nullptr;
  Conv conv;
  Dims zeros = {0};
  Dims dil = {0}, stride = {0};
  int sp = rank - 2;
  for (int i = 0; i < sp; ++i) {
    stride[i] = windowStrides[i];
    dil[i] = dilations[i] - 1; // oneDNN counts the gaps
  }
  Handle any = nullptr;
  bool ok = api.mdStrides(&conv.src, rank, dims[0], dnnl::kF32, str[0]) ==
                dnnl::kSuccess &&
            api.mdStrides(&conv.weights, rank, dims[1], dnnl::kF32, str[1]) ==
                dnnl::kSuccess &&
            api.mdStrides(&conv.dst, rank, dims[2], dnnl::kF32, str[2]) ==
                dnnl::kSuccess &&
            api.mdTag(&any, rank, dims[1], dnnl::kF32, dnnl::kFormatTagAny) ==
                dnnl::kSuccess;
  Handle pd = nullptr;
  Handle attr = ok ? tdfrt::userScratchpadAttr(api) : nullptr;
  ok = ok && attr &&
       api.convPd(&pd, api.engine, dnnl::kForwardInference,
                  dnnl::kConvolutionDirect, conv.src, any, nullptr, conv.dst,
                  stride, dil, zeros, zeros, attr) == dnnl::kSuccess &&
       tdfrt::createPrimitive(api, pd, conv.primitive);
  if (ok) {
    Handle chosen = api.queryMd(pd, dnnl::kQueryWeightsMd, 0);
    if (!api.mdEqual(chosen, conv.weights)) {
      Handle rpd = nullptr;
      conv.packed = chosen;
      conv.packedBytes = api.mdSize(chosen);
      ok = api.reorderPd(&rpd, conv.weights, api.engine, chosen, api.engine,
                         attr) == dnnl::kSuccess &&
           tdfrt::createPrimitive(api, rpd, conv.reorder);
    }
  }
  if (attr)
    api.attrDestroy(attr);
  // The descriptors stay alive with the primitive (`packed` belongs to the
  // primitive descriptor, kept too): a few per geometry, for the process.
  if (!ok)
    conv.primitive = tdfrt::Primitive{};
  Conv &kept = primitives[key] = conv;
  return kept.primitive.primitive ? &kept : nullptr;
}

/// Runs the convolution through oneDNN; false when it cannot (not loaded,
/// geometry refused).
bool runLibrary(const Geometry &g, int threads) {
  const int64_t (&dims)[3][5] = g.dims;
  const int64_t (&str)[3][5] = g.str;
  const Operand(&ops)[3] = g.ops;
  int rank = g.rank;
  const OneDnnApi *api = tdfrt::oneDnnApi();
  if (!api)
    return false;
  Conv conv;
  {
    std::lock_guard<std::mutex> guard(convLock);
    std::vector<int64_t> key{rank, g.channelsLast, threads};
    for (int k = 0; k < 3; ++k)
      for (int i = 0; i < rank; ++i) {
        key.push_back(dims[k][i]);
        key.push_back(str[k][i]);
      }
    key.insert(key.end(), g.windowStrides, g.windowStrides + 3);
    key.insert(key.end(), g.dilations, g.dilations + 3);
    Conv *found =
        primitiveFor(*api, key, rank, dims, str, g.windowStrides, g.dilations);
    if (!found)
      return false;
    conv = *found;
  }
  // No lock from here: primitives are immutable and may run concurrently;
  // each call has its own memory objects, stream and weights buffer.
  void *packed = nullptr;
  if (conv.reorder.primitive) {
    packed = std::malloc(std::max<size_t>(conv.packedBytes, 64));
    if (!packed)
      tdf_rt_alloc_error(-1, int64_t(conv.packedBytes)); // longjmps
  }
  bool ok;
  {
    tdfrt::OneDnnThreads guard(threads);
    ok = !conv.reorder.primitive ||
         tdfrt::runPrimitive(*api, conv.reorder,
                             {{dnnl::kArgFrom, conv.weights, ops[1].data},
                              {dnnl::kArgTo, conv.packed, packed}});
    ok = ok && tdfrt::runPrimitive(
                   *api, conv.primitive,
                   {{dnnl::kArgSrc, conv.src, ops[0].data},
                    {dnnl::kArgWeights,
                     conv.reorder.primitive ? conv.packed : conv.weights,
                     conv.reorder.primitive ? packed : ops[1].data},
                    {dnnl::kArgDst, conv.dst, ops[2].data}});
  }
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
