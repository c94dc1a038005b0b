//===- GpuRuntime.cpp - contractions of GPU programs through cuBLAS -------===//
//
// `tdf_gpu_contract`: the host function `tdf-contractions-to-cublas` calls in
// place of a linalg contraction on device buffers, with the descriptor of
// `tdf_rt_contract` (Contraction.h): the operands' device pointers and
// offsets and, per loop dimension, its kind, size and strides. It runs the
// contraction as one `cublasGemmEx` or, with one batch dimension, one
// `cublasGemmStridedBatchedEx`:
//
// 1. unit dimensions out, dimensions of one kind contiguous in every operand
//    merged (Contraction.h); what is left must be at most one batch, M, N
//    and K dimension (the pass only emits calls that plan at compile time:
//    `planGemm` is what it asks, through `gpu_contract_plan`);
// 2. row-major C = A * B is cuBLAS's column-major C^T = B^T * A^T when C's
//    unit stride is along N (C's unit stride along M: C = A * B as it is);
//    each input is passed with the transpose flag and leading dimension its
//    unit stride gives: never a gather, never a copy;
// 3. f32 and f64 GEMMs, and bf16/f16 inputs of an f32 result, all with the
//    result's precision as compute type (CUBLAS_COMPUTE_32F: no TF32).
//
// A layout no single GEMM describes, a result written twice, or a result
// that overlaps an input (cuBLAS is never handed overlapping buffers) is
// refused: an error, nothing is computed.
//
// Ordering with the program's kernels: the MLIR CUDA runtime runs kernels
// and copies on non-blocking streams, which do not wait for work on other
// streams. A call synchronizes the context first (every kernel and copy the
// program issued before it has finished), runs cuBLAS on a stream of its
// own, and synchronizes that stream before it returns (nothing the host code
// issues after it can start early). Both contexts are the primary context of
// device 0, the one `mgpu*` functions use.
//
// The libraries are loaded with dlopen, by tdf.gpu before a program runs
// or on first use (cuBLAS from `TDF_CUBLAS_LIBRARY`, else from the paths
// tdf.gpu finds in NVIDIA's wheels, else libcublas.so.13, .12, .11,
// libcublas.so; then libcuda.so.1);
// no CUDA header is needed to build this file. A failure is recorded in
// thread-local state and the call returns without computing; the caller
// reads it after the call (`tdf_gpu_take_error`; tdf.gpu raises it). A call
// made while an earlier one of the same thread failed does nothing.
//
// Device memory (`tdf_gpu_mem_alloc`, `tdf_gpu_mem_free`: what
// `tdf-gpu-pooled-alloc` makes a program call instead of MLIR's
// `mgpuMemAlloc`/`mgpuMemFree`, same arguments) comes from device 0's
// stream-ordered pool (`cuMemAllocAsync`/`cuMemFreeAsync` on the caller's
// stream, the pool's release threshold at its maximum): a call's buffers
// are the memory the previous call freed, not a driver allocation and a
// synchronizing `cuMemFree` each. Host-shared requests get managed memory;
// a driver without pools, `cuMemAlloc`. A failure is recorded like a
// cuBLAS one.
//
// This file is its own shared library, `libtdf_gpu_runtime.so` (installed
// beside the extension, which links it): the one copy of this state in a
// process, and what a GPU program exported as a shared library
// (`GPUProgram.export_library`) needs besides MLIR's CUDA runtime. Its C
// API is GpuRuntime.h; it depends on nothing but libc, libstdc++ and
// (loaded at run time) libcuda and cuBLAS.
//
//===----------------------------------------------------------------------===//

#include "GpuRuntime.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include <dlfcn.h>

using namespace tdfrt;

namespace {

//===----------------------------------------------------------------------===//
// The CUDA driver and cuBLAS, declared here
//===----------------------------------------------------------------------===//

using CUresult = int; // CUDA_SUCCESS = 0
using CUdevice = int;
using CUcontext = struct CUctx_st *;
using CUstream = struct CUstream_st *; // the same type as cudaStream_t
using CUdeviceptr = unsigned long long;
using CUmemoryPool = struct CUmemPoolHandle_st *;
using cublasStatus_t = int; // CUBLAS_STATUS_SUCCESS = 0
using cublasHandle_t = struct cublasContext *;

// cublasOperation_t (cublas_api.h): CUBLAS_OP_N, CUBLAS_OP_T.
constexpr int kOpN = 0, kOpT = 1;
// cudaDataType_t (library_types.h): CUDA_R_32F, CUDA_R_64F, CUDA_R_16F,
// CUDA_R_16BF.
constexpr int kR32F = 0, kR64F = 1, kR16F = 2, kR16BF = 14;
// cublasComputeType_t (cublas_api.h): CUBLAS_COMPUTE_32F, CUBLAS_COMPUTE_64F.
constexpr int kCompute32F = 68, kCompute64F = 70;
// cublasGemmAlgo_t (cublas_api.h): CUBLAS_GEMM_DEFAULT.
constexpr int kGemmDefault = -1;
// CUstream_flags (cuda.h): CU_STREAM_NON_BLOCKING.
constexpr unsigned kStreamNonBlocking = 1;
// CUmemAttach_flags (cuda.h): CU_MEM_ATTACH_GLOBAL; CUmemPool_attribute:
// CU_MEMPOOL_ATTR_RELEASE_THRESHOLD.
constexpr unsigned kMemAttachGlobal = 1;
constexpr int kPoolReleaseThreshold = 4;

using GemmExFn = cublasStatus_t (*)(cublasHandle_t, int, int, int, int, int,
                                    const void *, const void *, int, int,
                                    const void *, int, int, const void *,
                                    void *, int, int, int, int);
using GemmStridedBatchedExFn = cublasStatus_t (*)(
    cublasHandle_t, int, int, int, int, int, const void *, const void *, int,
    int, long long, const void *, int, int, long long, const void *, void *,
    int, int, long long, int, int, int);

struct Libraries {
  std::string cublasPath;
  // libcuda.so.1
  CUresult (*init)(unsigned) = nullptr;
  CUresult (*deviceGet)(CUdevice *, int) = nullptr;
  CUresult (*primaryCtxRetain)(CUcontext *, CUdevice) = nullptr;
  CUresult (*ctxPush)(CUcontext) = nullptr;
  CUresult (*ctxPop)(CUcontext *) = nullptr;
  CUresult (*ctxSynchronize)() = nullptr;
  CUresult (*streamCreate)(CUstream *, unsigned) = nullptr;
  CUresult (*streamSynchronize)(CUstream) = nullptr;
  CUresult (*memAlloc)(CUdeviceptr *, size_t) = nullptr;
  CUresult (*memAllocManaged)(CUdeviceptr *, size_t, unsigned) = nullptr;
  CUresult (*memFree)(CUdeviceptr) = nullptr;
  CUresult (*errorString)(CUresult, const char **) = nullptr; // optional
  // The stream-ordered allocator (CUDA 11.2; optional).
  CUresult (*memAllocAsync)(CUdeviceptr *, size_t, CUstream) = nullptr;
  CUresult (*memFreeAsync)(CUdeviceptr, CUstream) = nullptr;
  CUresult (*defaultMemPool)(CUmemoryPool *, CUdevice) = nullptr;
  CUresult (*memPoolSetAttribute)(CUmemoryPool, int, void *) = nullptr;
  // cuBLAS
  cublasStatus_t (*create)(cublasHandle_t *) = nullptr;
  cublasStatus_t (*setStream)(cublasHandle_t, CUstream) = nullptr;
  GemmExFn gemmEx = nullptr;
  GemmStridedBatchedExFn gemmStridedBatchedEx = nullptr;
  const char *(*statusString)(cublasStatus_t) = nullptr; // optional
};

std::mutex loadLock;
Libraries libs;
bool driverLoaded = false, cublasLoaded = false;
std::string driverError; // why libcuda cannot be used, once tried

template <typename Fn> bool resolve(void *handle, const char *name, Fn &fn) {
  fn = reinterpret_cast<Fn>(dlsym(handle, name));
  return fn != nullptr;
}

std::string dlError() {
  const char *why = dlerror();
  return why ? why : "unknown error";
}

/// Loads libcuda once (lock held); an error message, empty on success.
std::string loadDriverLocked() {
  if (driverLoaded || !driverError.empty())
    return driverError;
  void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!cuda)
    return driverError = "cannot load the CUDA driver library libcuda.so.1 (" +
                         dlError() + ")";
  Libraries &lib = libs;
  if (!resolve(cuda, "cuInit", lib.init) ||
      !resolve(cuda, "cuDeviceGet", lib.deviceGet) ||
      !resolve(cuda, "cuDevicePrimaryCtxRetain", lib.primaryCtxRetain) ||
      !resolve(cuda, "cuCtxPushCurrent_v2", lib.ctxPush) ||
      !resolve(cuda, "cuCtxPopCurrent_v2", lib.ctxPop) ||
      !resolve(cuda, "cuCtxSynchronize", lib.ctxSynchronize) ||
      !resolve(cuda, "cuStreamCreate", lib.streamCreate) ||
      !resolve(cuda, "cuStreamSynchronize", lib.streamSynchronize) ||
      !resolve(cuda, "cuMemAlloc_v2", lib.memAlloc) ||
      !resolve(cuda, "cuMemAllocManaged", lib.memAllocManaged) ||
      !resolve(cuda, "cuMemFree_v2", lib.memFree))
    return driverError = "libcuda.so.1 lacks a driver function tdf's GPU "
                         "runtime calls";
  resolve(cuda, "cuGetErrorString", lib.errorString);
  if (!resolve(cuda, "cuMemAllocAsync", lib.memAllocAsync) ||
      !resolve(cuda, "cuMemFreeAsync", lib.memFreeAsync) ||
      !resolve(cuda, "cuDeviceGetDefaultMemPool", lib.defaultMemPool) ||
      !resolve(cuda, "cuMemPoolSetAttribute", lib.memPoolSetAttribute))
    lib.memAllocAsync = nullptr; // a driver before CUDA 11.2: cuMemAlloc
  driverLoaded = true;
  return "";
}

/// Loads cuBLAS and libcuda once; an error message, empty on success.
/// cuBLAS is `TDF_CUBLAS_LIBRARY` when that is set, else the first of
/// `paths` and the library's sonames that loads.
std::string loadLibraries(const std::vector<std::string> &paths = {}) {
  std::lock_guard<std::mutex> guard(loadLock);
  if (cublasLoaded)
    return "";
  Libraries lib;
  std::vector<std::string> candidates;
  const char *chosen = std::getenv("TDF_CUBLAS_LIBRARY");
  if (chosen && *chosen)
    candidates.push_back(chosen);
  else
    candidates = paths;
  if (!(chosen && *chosen))
    for (const char *name : {"libcublas.so.13", "libcublas.so.12",
                             "libcublas.so.11", "libcublas.so"})
      candidates.push_back(name);
  std::string tried, why;
  void *cublas = nullptr;
  for (const std::string &name : candidates) {
    cublas = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (cublas) {
      lib.cublasPath = name;
      break;
    }
    tried += (tried.empty() ? "" : ", ") + name;
    why = dlError();
  }
  if (!cublas)
    return "cannot load cuBLAS (tried " + tried + "; last: " + why + ")";
  if (!resolve(cublas, "cublasCreate_v2", lib.create) ||
      !resolve(cublas, "cublasSetStream_v2", lib.setStream) ||
      !resolve(cublas, "cublasGemmEx", lib.gemmEx) ||
      !resolve(cublas, "cublasGemmStridedBatchedEx", lib.gemmStridedBatchedEx))
    return "'" + lib.cublasPath +
           "' does not define cublasCreate_v2, cublasSetStream_v2, "
           "cublasGemmEx and cublasGemmStridedBatchedEx";
  resolve(cublas, "cublasGetStatusString", lib.statusString);
  std::string error = loadDriverLocked();
  if (!error.empty())
    return error;
  libs.cublasPath = lib.cublasPath;
  libs.create = lib.create;
  libs.setStream = lib.setStream;
  libs.gemmEx = lib.gemmEx;
  libs.gemmStridedBatchedEx = lib.gemmStridedBatchedEx;
  libs.statusString = lib.statusString;
  cublasLoaded = true;
  return "";
}

//===----------------------------------------------------------------------===//
// The plan: one GEMM or one strided batch of GEMMs, column-major
//===----------------------------------------------------------------------===//

const char *kKindNames[4] = {"batch", "M", "N", "K"};
const char *kOperandNames[3] = {"A", "B", "C"};

/// cuBLAS's view of a contraction: C' = op(A') * op(B'), column-major, for
/// each of `batch` entries `stride*` elements apart.
struct GemmPlan {
  bool empty = false; // nothing to compute
  int transA = kOpN, transB = kOpN;
  int64_t m = 1, n = 1, k = 1, lda = 1, ldb = 1, ldc = 1;
  int64_t batch = 1, strideA = 0, strideB = 0, strideC = 0;
  bool batched = false;
  const char *a = nullptr, *b = nullptr;
  char *c = nullptr;
  int typeA = kR32F, typeB = kR32F, typeC = kR32F, compute = kCompute32F;
};

int cudaType(int type) {
  switch (type) {
  case F32:
    return kR32F;
  case F64:
    return kR64F;
  case BF16:
    return kR16BF;
  default:
    return kR16F;
  }
}

const char *typeName(int type) {
  static const char *names[4] = {"f32", "f64", "bf16", "f16"};
  return type >= 0 && type < 4 ? names[type] : "?";
}

/// Whether no two index tuples of `operand` over `op`'s dimensions (K
/// excluded) reach the same element: sorted by stride, each stride passes
/// the extent of the smaller ones (a sufficient condition).
bool injective(const Contraction &op, int operand) {
  int64_t sizes[kMaxDims], strides[kMaxDims];
  int count = 0;
  for (int i = 0; i < op.rank; ++i)
    if (op.dims[i].kind != K && op.dims[i].size > 1) {
      sizes[count] = op.dims[i].size;
      strides[count++] = op.dims[i].stride[operand];
    }
  for (int i = 1; i < count; ++i)
    for (int j = i; j > 0 && strides[j] < strides[j - 1]; --j) {
      std::swap(strides[j], strides[j - 1]);
      std::swap(sizes[j], sizes[j - 1]);
    }
  int64_t extent = 0; // of the dimensions before i
  for (int i = 0; i < count; ++i) {
    if (strides[i] <= extent)
      return false;
    extent += (sizes[i] - 1) * strides[i];
  }
  return true;
}

/// The GEMM operand `m` is as a column-major matrix: its transpose flag and
/// leading dimension; false when neither layout describes it.
bool columnMajor(const Matrix &m, int &trans, int64_t &ld) {
  if ((ld = leadingDim(m, false, false)) >= 0) {
    trans = kOpN;
    return true;
  }
  if ((ld = leadingDim(m, false, true)) >= 0) {
    trans = kOpT;
    return true;
  }
  return false;
}

Matrix transposed(const Matrix &m) {
  return Matrix{m.base, m.type, m.cols, m.rows, m.colStride, m.rowStride};
}

/// Plans `op` as one cuBLAS call; an error message, empty on success.
/// `checkOverlap`: the operands' pointers are real (at run time) and a
/// result that overlaps an input is refused.
std::string planGemm(Contraction op, bool checkOverlap, GemmPlan &plan) {
  int ta = op.type[0], tb = op.type[1], tc = op.type[2];
  bool types =
      ta == tb && ((tc == F32 && (ta == F32 || ta == BF16 || ta == F16)) ||
                   (tc == F64 && ta == F64));
  if (!types)
    return std::string("element types ") + typeName(ta) + ", " + typeName(tb) +
           " -> " + typeName(tc) +
           " are no cuBLAS GEMM (f32, f64, or bf16/f16 inputs of f32)";
  bool emptySum = false;
  for (int i = 0; i < op.rank; ++i) {
    if (op.dims[i].size < 0)
      return "a negative size";
    if (op.dims[i].size == 0) {
      if (op.dims[i].kind != K) {
        plan.empty = true; // an empty result
        return "";
      }
      emptySum = true;
    }
  }
  if (emptySum) {
    if (op.accumulate) {
      plan.empty = true; // C += 0
      return "";
    }
    return "an empty sum (a K dimension of size 0)";
  }
  simplify(op);
  int core[4] = {-1, -1, -1, -1};
  for (int i = 0; i < op.rank; ++i) {
    int kind = op.dims[i].kind;
    if (core[kind] >= 0)
      return std::string("two ") + kKindNames[kind] +
             " dimensions that no single GEMM dimension describes";
    core[kind] = i;
    if (op.dims[i].size > INT32_MAX)
      return std::string("the ") + kKindNames[kind] +
             " dimension's size exceeds 2^31 - 1";
  }
  if (!injective(op, 2))
    return "the result C writes an element twice";
  auto size = [&](int kind) {
    return core[kind] < 0 ? 1 : op.dims[core[kind]].size;
  };
  auto stride = [&](int kind, int o) {
    return core[kind] < 0 ? 0 : op.dims[core[kind]].stride[o];
  };
  Matrix a{op.base[0], ta, size(M), size(K), stride(M, 0), stride(K, 0)};
  Matrix b{op.base[1], tb, size(K), size(N), stride(K, 1), stride(N, 1)};
  Matrix c{op.base[2], tc, size(M), size(N), stride(M, 2), stride(N, 2)};
  // Column-major C: C = A * B. Row-major C: C^T = B^T * A^T.
  bool swap = leadingDim(c, false, false) < 0;
  if (swap && leadingDim(c, true, false) < 0)
    return "the result C has no unit stride along M or N";
  Matrix first = swap ? transposed(b) : a;
  Matrix second = swap ? transposed(a) : b;
  Matrix result = swap ? transposed(c) : c;
  const char *names[2] = {swap ? "B" : "A", swap ? "A" : "B"};
  const char *dims[2] = {swap ? "K and N" : "M and K",
                         swap ? "M and K" : "K and N"};
  if (!columnMajor(first, plan.transA, plan.lda))
    return std::string("operand ") + names[0] + " has no unit stride along " +
           dims[0] + " (or a leading dimension out of range)";
  if (!columnMajor(second, plan.transB, plan.ldb))
    return std::string("operand ") + names[1] + " has no unit stride along " +
           dims[1] + " (or a leading dimension out of range)";
  plan.ldc = leadingDim(result, false, false);
  plan.m = result.rows;
  plan.n = result.cols;
  plan.k = size(K);
  plan.a = first.base;
  plan.b = second.base;
  plan.c = const_cast<char *>(result.base);
  plan.typeA = cudaType(first.type);
  plan.typeB = cudaType(second.type);
  plan.typeC = cudaType(tc);
  plan.compute = tc == F64 ? kCompute64F : kCompute32F;
  if (core[Batch] >= 0) {
    const Dim &d = op.dims[core[Batch]];
    for (int o = 0; o < 2; ++o)
      if (d.stride[o] < 0)
        return std::string("operand ") + kOperandNames[o] +
               " has a negative batch stride";
    plan.batched = true;
    plan.batch = d.size;
    plan.strideA = d.stride[swap ? 1 : 0];
    plan.strideB = d.stride[swap ? 0 : 1];
    plan.strideC = d.stride[2];
  }
  if (checkOverlap) {
    const char *lo[3], *hi[3];
    for (int o = 0; o < 3; ++o)
      byteRange(op.base[o], o, elementBytes(op.type[o]), op.dims, op.rank,
                lo[o], hi[o]);
    for (int o = 0; o < 2; ++o)
      if (lo[o] < hi[2] && lo[2] < hi[o])
        return std::string("the result C overlaps operand ") +
               kOperandNames[o] +
               " (cuBLAS is never handed overlapping "
               "buffers)";
  }
  return "";
}

//===----------------------------------------------------------------------===//
// The call
//===----------------------------------------------------------------------===//

/// This thread's cuBLAS handle and stream, in the primary context of
/// device 0 (created on first use; they live as long as the thread).
struct ThreadState {
  CUcontext context = nullptr;
  cublasHandle_t handle = nullptr;
  CUstream stream = nullptr;
  std::string error; // the pending failure, see gpu_take_error
};

thread_local ThreadState state;

std::string cudaError(const char *what, CUresult status) {
  const char *text = nullptr;
  if (libs.errorString)
    libs.errorString(status, &text);
  return std::string(what) + " failed with CUDA error " +
         std::to_string(status) + (text ? std::string(" (") + text + ")" : "");
}

std::string cublasError(const char *what, cublasStatus_t status) {
  const char *text = libs.statusString ? libs.statusString(status) : nullptr;
  return std::string(what) + " failed with cuBLAS status " +
         std::to_string(status) + (text ? std::string(" (") + text + ")" : "");
}

/// Runs `plan` (accumulating into C or overwriting it) with the context
/// current; an error message, empty on success.
std::string runGemm(const GemmPlan &plan, bool accumulate) {
  CUresult status;
  if (!state.handle) {
    if ((status = libs.streamCreate(&state.stream, kStreamNonBlocking)))
      return cudaError("cuStreamCreate", status);
    cublasHandle_t handle = nullptr;
    cublasStatus_t made = libs.create(&handle);
    if (made)
      return cublasError("cublasCreate_v2", made);
    if ((made = libs.setStream(handle, state.stream)))
      return cublasError("cublasSetStream_v2", made);
    state.handle = handle;
  }
  // Every kernel and copy the program issued before this call has finished.
  if ((status = libs.ctxSynchronize()))
    return cudaError("cuCtxSynchronize", status);
  float alpha32 = 1.0f, beta32 = accumulate ? 1.0f : 0.0f;
  double alpha64 = 1.0, beta64 = accumulate ? 1.0 : 0.0;
  bool f64 = plan.compute == kCompute64F;
  const void *alpha = f64 ? static_cast<const void *>(&alpha64) : &alpha32;
  const void *beta = f64 ? static_cast<const void *>(&beta64) : &beta32;
  cublasStatus_t done =
      plan.batched
          ? libs.gemmStridedBatchedEx(
                state.handle, plan.transA, plan.transB, int(plan.m),
                int(plan.n), int(plan.k), alpha, plan.a, plan.typeA,
                int(plan.lda), plan.strideA, plan.b, plan.typeB, int(plan.ldb),
                plan.strideB, beta, plan.c, plan.typeC, int(plan.ldc),
                plan.strideC, int(plan.batch), plan.compute, kGemmDefault)
          : libs.gemmEx(state.handle, plan.transA, plan.transB, int(plan.m),
                        int(plan.n), int(plan.k), alpha, plan.a, plan.typeA,
                        int(plan.lda), plan.b, plan.typeB, int(plan.ldb), beta,
                        plan.c, plan.typeC, int(plan.ldc), plan.compute,
                        kGemmDefault);
  if (done)
    return cublasError(
        plan.batched ? "cublasGemmStridedBatchedEx" : "cublasGemmEx", done);
  // The GEMM has finished before the host code issues anything after it.
  if ((status = libs.streamSynchronize(state.stream)))
    return cudaError("cuStreamSynchronize", status);
  return "";
}

/// Makes the primary context of device 0 (the one MLIR's `mgpu*`
/// functions use) current on this thread, loading libcuda first; an error
/// message, empty on success. popContext() undoes it.
std::string pushContext() {
  {
    std::lock_guard<std::mutex> guard(loadLock);
    std::string error = loadDriverLocked();
    if (!error.empty())
      return error;
  }
  CUresult status;
  if (!state.context) {
    CUdevice device;
    CUcontext context;
    if ((status = libs.init(0)))
      return cudaError("cuInit", status);
    if ((status = libs.deviceGet(&device, 0)))
      return cudaError("cuDeviceGet", status);
    if ((status = libs.primaryCtxRetain(&context, device)))
      return cudaError("cuDevicePrimaryCtxRetain", status);
    state.context = context;
  }
  if ((status = libs.ctxPush(state.context)))
    return cudaError("cuCtxPushCurrent", status);
  return "";
}

void popContext() {
  CUcontext popped;
  libs.ctxPop(&popped);
}

/// Runs `plan` in the primary context of device 0; an error message, empty
/// on success.
std::string execute(const GemmPlan &plan, bool accumulate) {
  std::string error = loadLibraries();
  if (error.empty() && (error = pushContext()).empty()) {
    error = runGemm(plan, accumulate);
    popContext();
  }
  return error;
}

//===----------------------------------------------------------------------===//
// Device memory: the stream-ordered pool
//===----------------------------------------------------------------------===//

std::mutex poolLock;
bool poolTried = false, poolUsable = false;
std::unordered_set<CUdeviceptr> managed; // freed with cuMemFree

/// Whether device 0's default memory pool serves allocations (the first
/// call sets its release threshold to the maximum: memory a call frees stays
/// in the pool for the next call instead of going back to the driver).
/// Context current.
bool poolReady() {
  std::lock_guard<std::mutex> guard(poolLock);
  if (!poolTried) {
    poolTried = true;
    CUdevice device;
    CUmemoryPool pool;
    uint64_t threshold = UINT64_MAX;
    poolUsable =
        libs.memAllocAsync && !libs.deviceGet(&device, 0) &&
        !libs.defaultMemPool(&pool, device) &&
        !libs.memPoolSetAttribute(pool, kPoolReleaseThreshold, &threshold);
  }
  return poolUsable;
}

/// `size` bytes of device memory (host-shared: managed memory) for
/// tdf_gpu_mem_alloc; an error message, empty on success. Context current.
std::string allocate(uint64_t size, CUstream stream, bool hostShared,
                     CUdeviceptr &ptr) {
  CUresult status;
  if (hostShared) {
    if ((status = libs.memAllocManaged(&ptr, size, kMemAttachGlobal)))
      return cudaError("cuMemAllocManaged", status);
    std::lock_guard<std::mutex> guard(poolLock);
    managed.insert(ptr);
    return "";
  }
  if (poolReady()) {
    status = libs.memAllocAsync(&ptr, size, stream);
    return status ? cudaError("cuMemAllocAsync", status) : "";
  }
  status = libs.memAlloc(&ptr, size);
  return status ? cudaError("cuMemAlloc", status) : "";
}

/// Frees what allocate() returned; an error message, empty on success.
std::string release(CUdeviceptr ptr, CUstream stream) {
  bool wasManaged;
  {
    std::lock_guard<std::mutex> guard(poolLock);
    wasManaged = managed.erase(ptr) > 0;
  }
  CUresult status;
  if (!wasManaged && poolReady()) {
    status = libs.memFreeAsync(ptr, stream);
    return status ? cudaError("cuMemFreeAsync", status) : "";
  }
  status = libs.memFree(ptr);
  return status ? cudaError("cuMemFree", status) : "";
}

} // namespace

//===----------------------------------------------------------------------===//
// The API (GpuRuntime.h)
//===----------------------------------------------------------------------===//

extern "C" TDF_GPU_API void tdf_gpu_contract(TDF_CONTRACT_PARAMETERS) {
  if (!state.error.empty())
    return; // an earlier contraction of this call failed
  Contraction op = decodeContractionCall(TDF_CONTRACT_ARGUMENTS);
  GemmPlan plan;
  std::string error = planGemm(op, /*checkOverlap=*/true, plan);
  if (error.empty() && !plan.empty)
    error = execute(plan, op.accumulate);
  if (!error.empty())
    state.error = "tdf_gpu_contract: " + error;
}

extern "C" TDF_GPU_API void *tdf_gpu_mem_alloc(uint64_t size, void *stream,
                                               bool hostShared) {
  if (size == 0)
    return nullptr;
  CUdeviceptr ptr = 0;
  std::string error = pushContext();
  if (error.empty()) {
    error = allocate(size, static_cast<CUstream>(stream), hostShared, ptr);
    popContext();
  }
  if (!error.empty() && state.error.empty())
    state.error = "tdf_gpu_mem_alloc: " + error;
  return reinterpret_cast<void *>(ptr);
}

extern "C" TDF_GPU_API void tdf_gpu_mem_free(void *ptr, void *stream) {
  if (!ptr)
    return;
  std::string error = pushContext();
  if (error.empty()) {
    error = release(reinterpret_cast<CUdeviceptr>(ptr),
                    static_cast<CUstream>(stream));
    popContext();
  }
  if (!error.empty() && state.error.empty())
    state.error = "tdf_gpu_mem_free: " + error;
}

extern "C" TDF_GPU_API int64_t tdf_gpu_take_error(char *buffer,
                                                  int64_t capacity) {
  int64_t length = int64_t(state.error.size());
  if (buffer && capacity > 0) {
    size_t copied = size_t(std::min(length, capacity - 1));
    std::memcpy(buffer, state.error.data(), copied);
    buffer[copied] = '\0';
  }
  state.error.clear();
  return length;
}

namespace tdfgpu {

std::string load(const std::vector<std::string> &paths, std::string &path) {
  std::string error = loadLibraries(paths);
  if (error.empty())
    path = libs.cublasPath;
  return error;
}

std::string plan(int64_t flags, int64_t rank, const int64_t sizes[],
                 const int64_t strides[][3]) {
  const int64_t none[3] = {0, 0, 0};
  Contraction op = decodeContraction(flags, none, none, rank, sizes, strides);
  GemmPlan gemm;
  return planGemm(op, /*checkOverlap=*/false, gemm);
}

std::string takeError() {
  std::string error;
  error.swap(state.error);
  return error;
}

} // namespace tdfgpu
