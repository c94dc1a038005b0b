//===- Blas.cpp - contractions of compiled code through a tuned BLAS ------===//
//
// `tdf_rt_contract`: the function `tdf-contractions-to-blas` calls in place
// of a linalg contraction on memrefs (C (+)= A * B over any projected
// permutation maps: matmul, batch_matmul, matvec, vecmat, dot and every
// linalg.generic / linalg.contract of that form). It receives the three
// operands' aligned pointers and offsets and, per loop dimension, its kind
// (batch, M, N or K), its size and the stride of each operand along it (0
// where the operand does not have it), and runs:
//
// 1. zero-size and unit dimensions out, then dimensions of one kind that are
//    contiguous in every operand collapsed into one (x[b, s, d] @ w[d, f] is
//    one GEMM with M = b * s);
// 2. one M, N and K dimension chosen as the GEMM's, every other one a loop
//    around the call (or the library's strided-batch entry point); extra K
//    dimensions accumulate (beta = 1 after the first);
// 3. each operand passed to the library with its transpose flag and leading
//    dimension: never a strided gather. An operand no BLAS layout describes
//    (no unit stride, a leading dimension too small, bf16/f16 inputs of an
//    f32 contraction) is packed into a contiguous temporary first; a result
//    that overlaps an input is computed into a temporary and copied back (the
//    library is never handed overlapping buffers);
// 4. gemv when the GEMM has one row or one column, gemm otherwise; a GEMM of
//    bf16 A and B into f32 C goes to oneDNN's `dnnl_gemm_bf16bf16f32`
//    (AVX512-BF16 / AMX kernels) when that library is loaded, instead of
//    converting both operands to f32 for the f32 kernel.
//
// The libraries are loaded at run time (`blas_load`, from Python: OpenBLAS
// of the `scipy-openblas32` package, whose symbols carry a `scipy_` prefix;
// `blas_load_bf16`: oneDNN's `libdnnl.so` of the `onednn-cpu-gomp` package);
// the thread count is OpenBLAS's (`blas_set_threads`), and each oneDNN call
// runs with the same count (its OpenMP threads, set per calling thread); a
// batch loop of GEMMs too small for several threads each runs its GEMMs on
// those OpenMP threads side by side (runBatchOnThreads). A forked child does
// not use oneDNN (GNU OpenMP hangs after a fork).
//
//===----------------------------------------------------------------------===//

#include "Contraction.h"
#include "OneDnn.h"

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include <dlfcn.h>
#include <pthread.h>
#include <xmmintrin.h>

namespace nb = nanobind;
using namespace tdfrt;

extern "C" void tdf_rt_alloc_error(int64_t site, int64_t bytes);

namespace {

//===----------------------------------------------------------------------===//
// The library
//===----------------------------------------------------------------------===//

// CBLAS enums (cblas.h).
constexpr int kRowMajor = 101, kColMajor = 102;
constexpr int kNoTrans = 111, kTrans = 112;
using blasint = int; // scipy-openblas32: 32-bit integers

using SgemmFn = void (*)(int, int, int, blasint, blasint, blasint, float,
                         const float *, blasint, const float *, blasint, float,
                         float *, blasint);
using DgemmFn = void (*)(int, int, int, blasint, blasint, blasint, double,
                         const double *, blasint, const double *, blasint,
                         double, double *, blasint);
using SgemvFn = void (*)(int, int, blasint, blasint, float, const float *,
                         blasint, const float *, blasint, float, float *,
                         blasint);
using DgemvFn = void (*)(int, int, blasint, blasint, double, const double *,
                         blasint, const double *, blasint, double, double *,
                         blasint);
using SgemmBatchFn = void (*)(int, int, int, blasint, blasint, blasint, float,
                              const float *, blasint, blasint, const float *,
                              blasint, blasint, float, float *, blasint,
                              blasint, blasint);
using DgemmBatchFn = void (*)(int, int, int, blasint, blasint, blasint, double,
                              const double *, blasint, blasint, const double *,
                              blasint, blasint, double, double *, blasint,
                              blasint, blasint);

struct Library {
  std::string path;
  void *handle = nullptr;
  SgemmFn sgemm = nullptr;
  DgemmFn dgemm = nullptr;
  SgemvFn sgemv = nullptr;
  DgemvFn dgemv = nullptr;
  SgemmBatchFn sgemmBatch = nullptr; // optional
  DgemmBatchFn dgemmBatch = nullptr; // optional
  void (*setThreads)(int) = nullptr;
  int (*getThreads)() = nullptr;
  int (*setThreadsLocal)(int) = nullptr; // returns the previous count
};

std::mutex libraryLock;
Library library;
std::atomic<bool> libraryReady{false};

/// Below this many flops a contraction (or one library call of it) runs on
/// one thread ...
constexpr double kParallelFlops = 4.0e6;
/// ... unless it reads at least this many bytes (a large mat-vec is bound by
/// memory bandwidth, which a second core adds to).
constexpr double kParallelBytes = 1.0e6;

/// MXCSR's flush-to-zero (bit 15) and denormals-are-zero (bit 6) bits.
constexpr unsigned kFlushDenormals = 0x8040;

template <typename Fn> Fn symbol(void *handle, const std::string &name) {
  return reinterpret_cast<Fn>(dlsym(handle, name.c_str()));
}

/// Loads the BLAS at `path` with symbol prefix `prefix`; an error message,
/// empty on success. Loading a second library is an error (compiled code
/// may already call the first).
std::string loadLibrary(const std::string &path, const std::string &prefix) {
  std::lock_guard<std::mutex> guard(libraryLock);
  if (libraryReady.load())
    return library.path == path
               ? ""
               : "a BLAS is already loaded from '" + library.path + "'";
  // OpenBLAS starts its worker threads as it loads, and a thread starts
  // with its creator's MXCSR: loaded with flush-to-zero and
  // denormals-are-zero set, the workers flush subnormals as jax.jit does
  // and as compiled calls do on the calling thread (without it, a GEMM
  // whose products are subnormal returned 1e-40 where jax.jit gives 0).
  unsigned csr = _mm_getcsr();
  _mm_setcsr(csr | kFlushDenormals);
  void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  _mm_setcsr(csr);
  if (!handle) {
    const char *why = dlerror();
    return "cannot load '" + path + "': " + (why ? why : "unknown error");
  }
  Library lib;
  lib.path = path;
  lib.handle = handle;
  lib.sgemm = symbol<SgemmFn>(handle, prefix + "cblas_sgemm");
  lib.dgemm = symbol<DgemmFn>(handle, prefix + "cblas_dgemm");
  lib.sgemv = symbol<SgemvFn>(handle, prefix + "cblas_sgemv");
  lib.dgemv = symbol<DgemvFn>(handle, prefix + "cblas_dgemv");
  lib.sgemmBatch =
      symbol<SgemmBatchFn>(handle, prefix + "cblas_sgemm_batch_strided");
  lib.dgemmBatch =
      symbol<DgemmBatchFn>(handle, prefix + "cblas_dgemm_batch_strided");
  lib.setThreads =
      symbol<void (*)(int)>(handle, prefix + "openblas_set_num_threads");
  lib.getThreads =
      symbol<int (*)()>(handle, prefix + "openblas_get_num_threads");
  lib.setThreadsLocal =
      symbol<int (*)(int)>(handle, prefix + "openblas_set_num_threads_local");
  if (!lib.sgemm || !lib.dgemm || !lib.sgemv || !lib.dgemv) {
    dlclose(handle);
    return "'" + path + "' does not define " + prefix + "cblas_sgemm, " +
           prefix + "cblas_dgemm, " + prefix + "cblas_sgemv and " + prefix +
           "cblas_dgemv";
  }
  library = lib;
  libraryReady.store(true);
  return "";
}

/// oneDNN's GEMMs (`dnnl_sgemm`, `dnnl_gemm_bf16bf16f32`): C = alpha *
/// op(A) * op(B) + beta * C, every matrix row-major, sizes and leading
/// dimensions as 64-bit integers; 0 on success.
template <typename In>
using OneDnnGemmFn = int (*)(char, char, int64_t, int64_t, int64_t, float,
                             const In *, int64_t, const In *, int64_t, float,
                             float *, int64_t);

struct OneDnn {
  std::string path;
  void *handle = nullptr;
  OneDnnGemmFn<float> sgemm = nullptr;
  OneDnnGemmFn<uint16_t> bf16gemm = nullptr;
  // The OpenMP runtime the library runs on (its dependency): the thread
  // count is a per-thread setting there.
  void (*setThreads)(int) = nullptr;
  int (*maxThreads)() = nullptr;
  // libgomp's parallel region (GOMP_parallel) and thread number: a batch of
  // small GEMMs runs on the library's threads, one GEMM per thread at a time.
  void (*parallel)(void (*)(void *), void *, unsigned, unsigned) = nullptr;
  int (*threadNum)() = nullptr;
  int (*numThreads)() = nullptr;
};

OneDnn oneDnn;
std::atomic<bool> oneDnnReady{false};
/// Batches run on oneDNN's threads (runBatchOnThreads), for tests.
std::atomic<int64_t> threadedBatches{0};
/// Batches run through OpenBLAS's strided-batch entry point (runBatched),
/// for tests.
std::atomic<int64_t> stridedBatches{0};
/// The flops from which a GEMM runs oneDNN's matmul primitive (2^26):
/// measured side by side on 2 threads, f32 with B transposed, 128x256x512
/// 120-150 GFLOP/s against 150-165 for dnnl_sgemm, 128x512x512 168 against
/// 142; bf16 equal at 128x512x512.
constexpr double kMatmulPrimitiveFlops = 67108864.0;
/// GEMMs run through oneDNN's matmul primitive, for tests.
std::atomic<int64_t> matmulPrimitiveCalls{0};

/// The thread count of the contraction running on this thread (0: the
/// BLAS's own), for the library calls it makes.
thread_local int callThreads = 0;

/// oneDNN's f32 GEMM generates its JIT kernels -- every transpose and
/// beta variant at once, about 27 ms here -- on the first `dnnl_sgemm` of a
/// process. `warmUp` makes that call on a small product on a thread of its
/// own, started when the library loads (during a compile, before a cache
/// hit's object is linked), so that the process's first real GEMM finds the
/// kernels made; a GEMM that comes sooner waits for them inside oneDNN, as
/// it would have. The thread is joined before a fork (a child must not
/// inherit a half-made kernel table or its lock) and when the interpreter
/// exits: tdf.blas registers onednn_warmed_up with Python's atexit. (A C++
/// atexit handler would come too late: the kernel tables are statics
/// constructed on this thread, registered after any handler of ours, so
/// exit() destroys them first, while the thread may still use them.)
std::thread *warmUp = nullptr;
std::mutex warmUpLock;
/// Whether the warm-up ran to its end, for tests.
std::atomic<bool> warmUpDone{false};

void joinWarmUp() {
  std::lock_guard<std::mutex> guard(warmUpLock);
  if (warmUp && warmUp->joinable())
    warmUp->join();
}

void startWarmUp(const OneDnn &lib) {
  std::lock_guard<std::mutex> guard(warmUpLock);
  warmUp = new std::thread([sgemm = lib.sgemm, setThreads = lib.setThreads] {
    // One thread: no OpenMP team of this thread's own (a team keeps the
    // MXCSR of its first master, and this thread goes away).
    setThreads(1);
    constexpr int64_t n = 64;
    std::vector<float> a(n * n, 1.0f), b(n * n, 1.0f), c(n * n, 0.0f);
    sgemm('N', 'N', n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    warmUpDone.store(true);
  });
}

/// Loads oneDNN from `path`; an error message, empty on success.
std::string loadOneDnn(const std::string &path) {
  std::lock_guard<std::mutex> guard(libraryLock);
  if (oneDnnReady.load())
    return oneDnn.path == path
               ? ""
               : "oneDNN is already loaded from '" + oneDnn.path + "'";
  void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char *why = dlerror();
    return "cannot load '" + path + "': " + (why ? why : "unknown error");
  }
  OneDnn lib;
  lib.path = path;
  lib.handle = handle;
  lib.sgemm = symbol<OneDnnGemmFn<float>>(handle, "dnnl_sgemm");
  lib.bf16gemm =
      symbol<OneDnnGemmFn<uint16_t>>(handle, "dnnl_gemm_bf16bf16f32");
  // Found through the library's dependencies (libgomp).
  lib.setThreads = symbol<void (*)(int)>(handle, "omp_set_num_threads");
  lib.maxThreads = symbol<int (*)()>(handle, "omp_get_max_threads");
  // Optional: without them a batch of GEMMs runs one after the other.
  lib.parallel = symbol<void (*)(void (*)(void *), void *, unsigned, unsigned)>(
      handle, "GOMP_parallel");
  lib.threadNum = symbol<int (*)()>(handle, "omp_get_thread_num");
  lib.numThreads = symbol<int (*)()>(handle, "omp_get_num_threads");
  if (!lib.sgemm || !lib.bf16gemm || !lib.setThreads || !lib.maxThreads) {
    dlclose(handle);
    return "'" + path +
           "' does not define dnnl_sgemm, dnnl_gemm_bf16bf16f32, "
           "omp_set_num_threads and omp_get_max_threads";
  }
  oneDnn = lib;
  // GNU OpenMP's workers keep the MXCSR of the thread that created them:
  // create them now, with flush-to-zero and denormals-are-zero as in
  // compiled calls, so that their part of a GEMM flushes subnormal results
  // whichever thread ran the first parallel region (as OpenBLAS's workers,
  // started while it loads).
  if (lib.parallel) {
    unsigned saved = _mm_getcsr();
    _mm_setcsr(saved | kFlushDenormals);
    lib.parallel([](void *) {}, nullptr,
                 unsigned(std::max(1, lib.maxThreads())), 0);
    _mm_setcsr(saved);
  }
  oneDnnReady.store(true);
  // GNU OpenMP does not survive fork(): a child whose parent ran a parallel
  // region hangs in its first one. A forked child runs every GEMM on
  // OpenBLAS (which re-creates its threads after a fork).
  pthread_atfork(joinWarmUp, nullptr, [] { oneDnnReady.store(false); });
  startWarmUp(lib);
  return "";
}

/// Threads of one library call of `batch` products of M x K by K x N (of
/// `esize`-byte elements): one when it is small (a GEMM of a batch loop
/// may be small where the whole contraction is not; waking the library's
/// threads costs more than the work), else this contraction's count (0:
/// the library's own).
int callThreadsFor(int64_t m, int64_t n, int64_t k, int64_t batch,
                   int64_t esize) {
  double b = double(batch), flops = 2.0 * b * double(m) * double(n) * double(k);
  double bytes =
      b * double(esize) * (double(m) * k + double(k) * n + double(m) * n);
  return flops < kParallelFlops && bytes < kParallelBytes ? 1 : callThreads;
}

/// OpenBLAS's thread count set to `threads` (0: left alone) for the guard's
/// lifetime (a thread-local setting in the library: concurrent calls do not
/// race). Set only around OpenBLAS's own calls: setting it wakes its
/// workers, which would then spin against oneDNN's for the cores.
struct BlasThreads {
  int previous = -1;
  explicit BlasThreads(int threads) {
    if (threads > 0 && library.setThreadsLocal)
      previous = library.setThreadsLocal(threads);
  }
  ~BlasThreads() {
    if (previous >= 0)
      library.setThreadsLocal(previous);
  }
};

//===----------------------------------------------------------------------===//
// Operands
//===----------------------------------------------------------------------===//

double loadElement(const char *p, int type) {
  switch (type) {
  case F32:
    return *reinterpret_cast<const float *>(p);
  case F64:
    return *reinterpret_cast<const double *>(p);
  case BF16: {
    uint32_t bits = uint32_t(*reinterpret_cast<const uint16_t *>(p)) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  default:
    return float(*reinterpret_cast<const _Float16 *>(p));
  }
}

/// The scratch buffers of one contraction (freed on every exit).
struct Scratch {
  void *blocks[4] = {nullptr, nullptr, nullptr, nullptr};
  int used = 0;
  void *get(int64_t bytes) {
    void *p = std::malloc(size_t(std::max<int64_t>(bytes, 64)));
    if (!p) {
      release();
      tdf_rt_alloc_error(-1, bytes); // longjmps to the call's trampoline
    }
    blocks[used++] = p;
    return p;
  }
  void release() {
    for (int i = 0; i < used; ++i)
      std::free(blocks[i]);
    used = 0;
  }
  ~Scratch() { release(); }
};

inline float toFloat(float v) { return v; }
inline float toFloat(double v) { return float(v); }
inline float toFloat(uint16_t bf16) {
  uint32_t bits = uint32_t(bf16) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
inline float toFloat(_Float16 v) { return float(v); }

/// Copies rows of `m` (source element type `Src`) into `out`, row-major
/// contiguous, converted to `Dst`: unit-stride rows vectorize.
template <typename Src, typename Dst> void packRows(const Matrix &m, Dst *out) {
  const Src *src = reinterpret_cast<const Src *>(m.base);
  for (int64_t r = 0; r < m.rows; ++r) {
    const Src *row = src + r * m.rowStride;
    Dst *dst = out + r * m.cols;
    if (m.colStride == 1) {
      for (int64_t c = 0; c < m.cols; ++c)
        dst[c] = Dst(toFloat(row[c]));
    } else {
      for (int64_t c = 0; c < m.cols; ++c)
        dst[c] = Dst(toFloat(row[c * m.colStride]));
    }
  }
}

template <> void packRows<double, double>(const Matrix &m, double *out) {
  const double *src = reinterpret_cast<const double *>(m.base);
  for (int64_t r = 0; r < m.rows; ++r)
    for (int64_t c = 0; c < m.cols; ++c)
      out[r * m.cols + c] = src[r * m.rowStride + c * m.colStride];
}

template <> void packRows<uint16_t, uint16_t>(const Matrix &m, uint16_t *out) {
  const uint16_t *src = reinterpret_cast<const uint16_t *>(m.base);
  for (int64_t r = 0; r < m.rows; ++r)
    for (int64_t c = 0; c < m.cols; ++c)
      out[r * m.cols + c] = src[r * m.rowStride + c * m.colStride];
}

/// Copies `m` into a contiguous row-major matrix of `type` (F32, F64, or
/// BF16 for a bf16 `m`, which oneDNN's bf16 GEMM takes):
/// the layout of a column-major matrix is kept by packing its transpose
/// (the rows then run along its unit stride).
Matrix pack(const Matrix &m, int type, Scratch &scratch) {
  bool transposed = m.rowStride == 1 && m.colStride != 1 && m.rows > 1;
  Matrix src = transposed ? Matrix{m.base, m.type,      m.cols,
                                   m.rows, m.colStride, m.rowStride}
                          : m;
  void *out = scratch.get(m.rows * m.cols * elementBytes(type));
  if (type == F64) {
    packRows<double, double>(src, static_cast<double *>(out));
  } else if (type == BF16) {
    packRows<uint16_t, uint16_t>(src, static_cast<uint16_t *>(out));
  } else {
    float *dst = static_cast<float *>(out);
    switch (m.type) {
    case F32:
      packRows<float, float>(src, dst);
      break;
    case BF16:
      packRows<uint16_t, float>(src, dst);
      break;
    default:
      packRows<_Float16, float>(src, dst);
      break;
    }
  }
  if (transposed)
    return Matrix{static_cast<char *>(out), type, m.rows, m.cols, 1, m.rows};
  return Matrix{static_cast<char *>(out), type, m.rows, m.cols, m.cols, 1};
}

//===----------------------------------------------------------------------===//
// One GEMM
//===----------------------------------------------------------------------===//

/// C (+)= A * B for an M x K A, K x N B and M x N C, all of C's type (F32 or
/// F64); `a` and `b` already packed where no BLAS layout describes them.
template <typename T>
void gemm(const Matrix &a, const Matrix &b, Matrix c, bool accumulate) {
  const Library &lib = library;
  T beta = accumulate ? T(1) : T(0);
  T *cp = const_cast<T *>(reinterpret_cast<const T *>(c.base));
  const T *ap = reinterpret_cast<const T *>(a.base);
  const T *bp = reinterpret_cast<const T *>(b.base);
  int64_t m = c.rows, n = c.cols, k = a.cols;
  BlasThreads threads(callThreadsFor(m, n, k, 1, sizeof(T)));
  if (n == 1 || m == 1) {
    // gemv: y = Mat * x, Mat = A (n == 1) or B^T (m == 1).
    Matrix mat =
        n == 1 ? a : Matrix{b.base, b.type, n, k, b.colStride, b.rowStride};
    const T *matp = reinterpret_cast<const T *>(mat.base);
    const T *xp = n == 1 ? bp : ap;
    int64_t incx = n == 1 ? b.rowStride : a.colStride;
    int64_t incy = n == 1 ? c.rowStride : c.colStride;
    if (k == 1)
      incx = 1;
    if (mat.rows == 1)
      incy = 1;
    bool rowMajor = leadingDim(mat, true, false) >= 0;
    int64_t ld = leadingDim(mat, rowMajor, false);
    if (std::is_same<T, float>::value)
      lib.sgemv(rowMajor ? kRowMajor : kColMajor, kNoTrans, blasint(mat.rows),
                blasint(k), 1.0f, reinterpret_cast<const float *>(matp),
                blasint(ld), reinterpret_cast<const float *>(xp), blasint(incx),
                float(beta), reinterpret_cast<float *>(cp), blasint(incy));
    else
      lib.dgemv(rowMajor ? kRowMajor : kColMajor, kNoTrans, blasint(mat.rows),
                blasint(k), 1.0, reinterpret_cast<const double *>(matp),
                blasint(ld), reinterpret_cast<const double *>(xp),
                blasint(incx), double(beta), reinterpret_cast<double *>(cp),
                blasint(incy));
    return;
  }
  bool rowMajor = leadingDim(c, true, false) >= 0;
  int64_t ldc = leadingDim(c, rowMajor, false);
  bool ta = leadingDim(a, rowMajor, false) < 0;
  bool tb = leadingDim(b, rowMajor, false) < 0;
  int64_t lda = leadingDim(a, rowMajor, ta), ldb = leadingDim(b, rowMajor, tb);
  int order = rowMajor ? kRowMajor : kColMajor;
  if (std::is_same<T, float>::value)
    lib.sgemm(order, ta ? kTrans : kNoTrans, tb ? kTrans : kNoTrans, blasint(m),
              blasint(n), blasint(k), 1.0f, reinterpret_cast<const float *>(ap),
              blasint(lda), reinterpret_cast<const float *>(bp), blasint(ldb),
              float(beta), reinterpret_cast<float *>(cp), blasint(ldc));
  else
    lib.dgemm(order, ta ? kTrans : kNoTrans, tb ? kTrans : kNoTrans, blasint(m),
              blasint(n), blasint(k), 1.0, reinterpret_cast<const double *>(ap),
              blasint(lda), reinterpret_cast<const double *>(bp), blasint(ldb),
              double(beta), reinterpret_cast<double *>(cp), blasint(ldc));
}

/// Whether `m` can be handed to the library as it is (for a GEMM of C's
/// storage order `rowMajor`; a gemv operand needs a layout in either order).
bool direct(const Matrix &m, int cType, bool rowMajor) {
  if (m.type != cType)
    return false;
  return leadingDim(m, rowMajor, false) >= 0 ||
         leadingDim(m, rowMajor, true) >= 0;
}

//===----------------------------------------------------------------------===//
// The contraction
//===----------------------------------------------------------------------===//

/// Reference loops (any strides, any overlap): what the linalg op's loops
/// compute, for shapes the library cannot take (sizes beyond 32 bits, a
/// result with a zero or negative stride).
template <typename T> void reference(const Contraction &op) {
  int64_t index[kMaxDims] = {0};
  int64_t es[3] = {elementBytes(op.type[0]), elementBytes(op.type[1]),
                   elementBytes(op.type[2])};
  int64_t total = 1;
  for (int i = 0; i < op.rank; ++i)
    total *= op.dims[i].size;
  if (!op.accumulate) {
    // C = 0 first: every C element once (at K index 0).
    for (int64_t step = 0; step < total; ++step) {
      int64_t off = 0, rem = step;
      bool first = true;
      for (int i = op.rank - 1; i >= 0; --i) {
        int64_t v = rem % op.dims[i].size;
        rem /= op.dims[i].size;
        off += v * op.dims[i].stride[2];
        if (op.dims[i].kind == K && v != 0)
          first = false;
      }
      if (first)
        *reinterpret_cast<T *>(const_cast<char *>(op.base[2]) + off * es[2]) =
            T(0);
    }
  }
  for (int64_t step = 0; step < total; ++step) {
    int64_t off[3] = {0, 0, 0}, rem = step;
    for (int i = op.rank - 1; i >= 0; --i) {
      index[i] = rem % op.dims[i].size;
      rem /= op.dims[i].size;
      for (int o = 0; o < 3; ++o)
        off[o] += index[i] * op.dims[i].stride[o];
    }
    T a = T(loadElement(op.base[0] + off[0] * es[0], op.type[0]));
    T b = T(loadElement(op.base[1] + off[1] * es[1], op.type[1]));
    T *c =
        reinterpret_cast<T *>(const_cast<char *>(op.base[2]) + off[2] * es[2]);
    *c = *c + a * b;
  }
}

bool fitsBlas(const Contraction &op) {
  for (int i = 0; i < op.rank; ++i) {
    if (op.dims[i].size > INT32_MAX)
      return false;
    if (op.dims[i].kind != K && op.dims[i].stride[2] <= 0)
      return false; // a result written twice or backwards: reference order
  }
  return true;
}

/// Copies the elements of `from` into `to` (same shape and type `T`).
template <typename T> void copyMatrix(const Matrix &from, const Matrix &to) {
  for (int64_t r = 0; r < from.rows; ++r)
    for (int64_t q = 0; q < from.cols; ++q)
      reinterpret_cast<T *>(
          const_cast<char *>(to.base))[r * to.rowStride + q * to.colStride] =
          reinterpret_cast<const T *>(
              from.base)[r * from.rowStride + q * from.colStride];
}

/// y[r] (+)= sum_k mat[r, k] * x[k] for a bf16/f16 `mat` whose rows are
/// contiguous, x contiguous f32: converted as it is read (a mat-vec is bound
/// by memory: packing the matrix to f32 first reads it once and writes and
/// reads twice its size again). Sixteen lane sums per row vectorize.
template <typename Src>
void dotRows(const Matrix &mat, const float *x, float *y, int64_t incy,
             bool accumulate) {
  const Src *base = reinterpret_cast<const Src *>(mat.base);
  for (int64_t r = 0; r < mat.rows; ++r) {
    const Src *row = base + r * mat.rowStride;
    float lanes[16] = {0};
    int64_t k = 0;
    for (; k + 16 <= mat.cols; k += 16)
      for (int l = 0; l < 16; ++l)
        lanes[l] += toFloat(row[k + l]) * x[k + l];
    float sum = 0;
    for (int l = 0; l < 16; ++l)
      sum += lanes[l];
    for (; k < mat.cols; ++k)
      sum += toFloat(row[k]) * x[k];
    y[r * incy] = accumulate ? y[r * incy] + sum : sum;
  }
}

/// The same for a `mat` whose columns are contiguous: y += mat[:, k] * x[k]
/// column by column into an f32 accumulator (vectorizes over the rows).
template <typename Src>
void axpyColumns(const Matrix &mat, const float *x, float *y, int64_t incy,
                 bool accumulate, Scratch &scratch) {
  const Src *base = reinterpret_cast<const Src *>(mat.base);
  float *acc = static_cast<float *>(scratch.get(mat.rows * 4));
  for (int64_t r = 0; r < mat.rows; ++r)
    acc[r] = accumulate ? y[r * incy] : 0.0f;
  for (int64_t k = 0; k < mat.cols; ++k) {
    const Src *col = base + k * mat.colStride;
    float xk = x[k];
    for (int64_t r = 0; r < mat.rows; ++r)
      acc[r] += toFloat(col[r]) * xk;
  }
  for (int64_t r = 0; r < mat.rows; ++r)
    y[r * incy] = acc[r];
}

/// A mat-vec (one row or one column of f32 output) whose matrix is bf16 or
/// f16 with contiguous rows or columns, computed without packing the
/// matrix. False when the shapes or types are not that.
template <typename T>
bool fusedGemv(const Matrix &a, const Matrix &b, const Matrix &c,
               bool accumulate, Scratch &scratch) {
  if (!std::is_same<T, float>::value || (c.rows != 1 && c.cols != 1) ||
      c.rows * c.cols <= 1)
    return false;
  bool column = c.cols == 1; // y = A x, else y = B^T x
  Matrix mat = column ? a : Matrix{b.base, b.type,      b.cols,
                                   b.rows, b.colStride, b.rowStride};
  Matrix vec = column ? Matrix{b.base, b.type, b.rows, 1, b.rowStride, 0}
                      : Matrix{a.base, a.type, a.cols, 1, a.colStride, 0};
  if (mat.type != BF16 && mat.type != F16)
    return false;
  bool rows = mat.colStride == 1 || mat.cols == 1;
  bool cols = mat.rowStride == 1 || mat.rows == 1;
  if (!rows && !cols)
    return false;
  const float *x =
      reinterpret_cast<const float *>(pack(vec, F32, scratch).base);
  float *y = reinterpret_cast<float *>(const_cast<char *>(c.base));
  int64_t incy = column ? c.rowStride : c.colStride;
  if (rows)
    (mat.type == BF16 ? dotRows<uint16_t> : dotRows<_Float16>)(mat, x, y, incy,
                                                               accumulate);
  else
    (mat.type == BF16
         ? axpyColumns<uint16_t>
         : axpyColumns<_Float16>)(mat, x, y, incy, accumulate, scratch);
  return true;
}

/// `m` transposed (a view: rows and columns swap).
Matrix transposed(const Matrix &m) {
  return Matrix{m.base, m.type, m.cols, m.rows, m.colStride, m.rowStride};
}

/// C (+)= A * B through oneDNN: f32, or bf16 A and B, into an f32 C of at
/// least two rows and columns (mat-vecs stay with the BLAS's gemv), with this
/// call's thread count; false (nothing written) when oneDNN is not loaded,
/// the types or shapes are not these or it refuses the call. An operand no
/// row-major layout describes is packed (in its own type) first; a
/// column-major C is computed as C^T = B^T * A^T.
bool oneDnnGemm(Matrix a, Matrix b, Matrix c, bool accumulate,
                Scratch &scratch) {
  if (!oneDnnReady.load() || c.type != F32 || a.type != b.type ||
      (a.type != F32 && a.type != BF16) || c.rows < 2 || c.cols < 2)
    return false;
  if (leadingDim(c, true, false) < 0) {
    Matrix at = transposed(b), bt = transposed(a);
    a = at;
    b = bt;
    c = transposed(c);
  }
  int64_t ldc = leadingDim(c, true, false);
  if (ldc < 0)
    return false;
  auto layout = [&](Matrix &m, bool &trans) {
    if (leadingDim(m, true, false) < 0 && leadingDim(m, true, true) < 0)
      m = pack(m, m.type, scratch);
    trans = leadingDim(m, true, false) < 0;
    return leadingDim(m, true, trans);
  };
  bool ta = false, tb = false;
  int64_t lda = layout(a, ta), ldb = layout(b, tb);
  char fa = ta ? 'T' : 'N', fb = tb ? 'T' : 'N';
  float beta = accumulate ? 1.0f : 0.0f;
  float *cp = reinterpret_cast<float *>(const_cast<char *>(c.base));
  const OneDnn &lib = oneDnn;
  int threads = callThreadsFor(c.rows, c.cols, a.cols, 1, elementBytes(a.type));
  if (threads == 0)
    threads = library.getThreads ? library.getThreads() : 1;
  if (!accumulate && (a.type == BF16 || ta || tb) &&
      2.0 * double(c.rows) * double(c.cols) * double(a.cols) >=
          kMatmulPrimitiveFlops) {
    // The matmul primitive (OneDnnMatmul.cpp): faster than the BLAS-like
    // calls below for bf16, and for f32 with a transposed operand, from
    // about 64 MFLOP (below, its per-call memory objects and stream cost
    // more than its kernels save: 4x64x64 ran at a fifth of the speed).
    int64_t as[2] = {ta ? 1 : lda, ta ? lda : 1};
    int64_t bs[2] = {tb ? 1 : ldb, tb ? ldb : 1};
    int64_t cs[2] = {ldc, 1};
    if (tdfrt::oneDnnMatmul(
            a.type == BF16 ? tdfrt::dnnl::kBf16 : tdfrt::dnnl::kF32, c.rows,
            c.cols, a.cols, a.base, as, b.base, bs, cp, cs, threads)) {
      matmulPrimitiveCalls.fetch_add(1);
      return true;
    }
  }
  int previous = lib.maxThreads();
  lib.setThreads(threads);
  int status =
      a.type == F32
          ? lib.sgemm(fa, fb, c.rows, c.cols, a.cols, 1.0f,
                      reinterpret_cast<const float *>(a.base), lda,
                      reinterpret_cast<const float *>(b.base), ldb, beta, cp,
                      ldc)
          : lib.bf16gemm(fa, fb, c.rows, c.cols, a.cols, 1.0f,
                         reinterpret_cast<const uint16_t *>(a.base), lda,
                         reinterpret_cast<const uint16_t *>(b.base), ldb, beta,
                         cp, ldc);
  lib.setThreads(previous);
  return status == 0;
}

/// The GEMMs of one batch loop, each small enough for one thread (see
/// callThreadsFor) and together worth several, run on oneDNN's OpenMP threads
/// (one region of libgomp's, the threads oneDNN's own GEMMs use: the two never
/// oversubscribe the cores), each thread a contiguous run of the steps with
/// the caller's MXCSR. Only when every step is a oneDNN GEMM of direct
/// operands (nothing to pack: no allocation, which could longjmp, on a
/// worker) and distinct steps write disjoint parts of C. `operands(step, a,
/// b, c)` gives step's operands and whether it accumulates. Returns the
/// steps done (one flag each; a step oneDNN refused is left to the caller),
/// or nullptr when the batch is not run this way.
template <typename Operands> struct BatchWork {
  const Operands *operands;
  int64_t total;
  unsigned mxcsr;
  char *done;
};

template <typename Operands> void batchWorker(void *data) {
  auto &work = *static_cast<BatchWork<Operands> *>(data);
  unsigned saved = _mm_getcsr();
  _mm_setcsr(work.mxcsr);
  int64_t team = std::max(1, oneDnn.numThreads()), at = oneDnn.threadNum();
  for (int64_t step = work.total * at / team,
               end = work.total * (at + 1) / team;
       step < end; ++step) {
    Matrix a, b, c;
    bool accumulate = (*work.operands)(step, a, b, c);
    Scratch unused; // direct operands: oneDnnGemm packs nothing
    work.done[step] = oneDnnGemm(a, b, c, accumulate, unused);
  }
  _mm_setcsr(saved);
}

template <typename Operands>
char *runBatchOnThreads(const Contraction &op, const int *outer, int nOuter,
                        int64_t total, int64_t m, int64_t n, int64_t k,
                        const Operands &operands, Scratch &scratch) {
  const OneDnn &lib = oneDnn;
  if (!oneDnnReady.load() || !lib.parallel || !lib.threadNum ||
      !lib.numThreads || total < 2 || m < 2 || n < 2 || op.type[2] != F32 ||
      op.type[0] != op.type[1] || (op.type[0] != F32 && op.type[0] != BF16))
    return nullptr;
  int64_t es = elementBytes(op.type[0]);
  if (callThreadsFor(m, n, k, 1, es) != 1)
    return nullptr; // each GEMM takes the threads itself
  int64_t threads = callThreadsFor(m, n, k, total, es);
  if (threads == 0)
    threads = library.getThreads ? library.getThreads() : 1;
  threads = std::min<int64_t>(threads, total);
  if (threads < 2)
    return nullptr;
  // No outer sum (steps would accumulate into the same C), and the steps'
  // parts of C disjoint: each outer stride of C (sorted) at least the
  // extent of what the smaller ones span.
  int64_t cStrides[kMaxDims], cSizes[kMaxDims];
  for (int i = 0; i < nOuter; ++i) {
    const Dim &d = op.dims[outer[i]];
    if (d.kind == K || d.stride[2] <= 0)
      return nullptr;
    cStrides[i] = d.stride[2];
    cSizes[i] = d.size;
  }
  for (int i = 1; i < nOuter; ++i)
    for (int j = i; j > 0 && cStrides[j] < cStrides[j - 1]; --j) {
      std::swap(cStrides[j], cStrides[j - 1]);
      std::swap(cSizes[j], cSizes[j - 1]);
    }
  Matrix a, b, c;
  operands(0, a, b, c);
  int64_t extent = (c.rows - 1) * c.rowStride + (c.cols - 1) * c.colStride + 1;
  for (int i = 0; i < nOuter; ++i) {
    if (cStrides[i] < extent)
      return nullptr;
    extent += (cSizes[i] - 1) * cStrides[i];
  }
  auto noPacking = [](const Matrix &x) {
    return leadingDim(x, true, false) >= 0 || leadingDim(x, true, true) >= 0;
  };
  if (!noPacking(a) || !noPacking(b))
    return nullptr;
  char *done = static_cast<char *>(scratch.get(total));
  std::memset(done, 0, size_t(total));
  BatchWork<Operands> work{&operands, total, _mm_getcsr(), done};
  lib.parallel(&batchWorker<Operands>, &work, unsigned(threads), 0);
  threadedBatches.fetch_add(1);
  return done;
}

template <typename T> void run(Contraction op) {
  Scratch scratch;
  int core[4] = {-1, pickCore(op, M), pickCore(op, N), pickCore(op, K)};
  int64_t es[3] = {elementBytes(op.type[0]), elementBytes(op.type[1]),
                   elementBytes(op.type[2])};
  auto size = [&](int kind) {
    return core[kind] < 0 ? 1 : op.dims[core[kind]].size;
  };
  auto stride = [&](int kind, int o) {
    return core[kind] < 0 ? 0 : op.dims[core[kind]].stride[o];
  };
  int64_t m = size(M), n = size(N), k = size(K);
  int outer[kMaxDims], nOuter = 0;
  for (int i = 0; i < op.rank; ++i)
    if (i != core[M] && i != core[N] && i != core[K])
      outer[nOuter++] = i;

  // The result: in place, or a contiguous temporary when it overlaps an
  // input (whole extents, every outer index) or has no BLAS layout.
  const char *lo[3], *hi[3];
  for (int o = 0; o < 3; ++o)
    byteRange(op.base[o], o, es[o], op.dims, op.rank, lo[o], hi[o]);
  bool overlaps = false;
  for (int o = 0; o < 2; ++o)
    overlaps |= lo[o] < hi[2] && lo[2] < hi[o];
  Matrix cView{op.base[2], op.type[2], m, n, stride(M, 2), stride(N, 2)};
  bool cDirect = !overlaps && (leadingDim(cView, true, false) >= 0 ||
                               leadingDim(cView, false, false) >= 0);
  bool rowMajor = !cDirect || leadingDim(cView, true, false) >= 0;
  char *cTemp =
      cDirect ? nullptr : static_cast<char *>(scratch.get(m * n * es[2]));

  int64_t total = 1;
  for (int i = 0; i < nOuter; ++i)
    total *= op.dims[outer[i]].size;
  // The operands of batch step `step` (a linear index of the outer
  // dimensions) and whether it accumulates into C.
  auto operands = [&](int64_t step, Matrix &a, Matrix &b, Matrix &c) {
    int64_t off[3] = {0, 0, 0}, rem = step;
    bool laterK = false;
    for (int i = nOuter - 1; i >= 0; --i) {
      const Dim &d = op.dims[outer[i]];
      int64_t at = rem % d.size;
      rem /= d.size;
      for (int o = 0; o < 3; ++o)
        off[o] += at * d.stride[o];
      laterK |= d.kind == K && at != 0;
    }
    a = Matrix{op.base[0] + off[0] * es[0],
               op.type[0],
               m,
               k,
               stride(M, 0),
               stride(K, 0)};
    b = Matrix{op.base[1] + off[1] * es[1],
               op.type[1],
               k,
               n,
               stride(K, 1),
               stride(N, 1)};
    c = Matrix{op.base[2] + off[2] * es[2],
               op.type[2],
               m,
               n,
               stride(M, 2),
               stride(N, 2)};
    return op.accumulate || laterK;
  };
  const char *done = cDirect ? runBatchOnThreads(op, outer, nOuter, total, m, n,
                                                 k, operands, scratch)
                             : nullptr;
  for (int64_t step = 0; step < total; ++step) {
    if (done && done[step])
      continue;
    Matrix a, b, c;
    bool accumulate = operands(step, a, b, c);
    Scratch packs;
    Matrix target = cDirect ? c : Matrix{cTemp, op.type[2], m, n, n, 1};
    if (!cDirect && accumulate)
      copyMatrix<T>(c, target);
    if (!fusedGemv<T>(a, b, target, accumulate, packs) &&
        !oneDnnGemm(a, b, target, accumulate, packs)) {
      if (!direct(a, op.type[2], rowMajor))
        a = pack(a, op.type[2], packs);
      if (!direct(b, op.type[2], rowMajor))
        b = pack(b, op.type[2], packs);
      gemm<T>(a, b, target, accumulate);
    }
    if (!cDirect)
      copyMatrix<T>(target, c);
  }
}

/// The strided-batch entry point for one batch-like outer dimension over
/// direct operands: one library call for the whole batch.
template <typename T> bool runBatched(const Contraction &op) {
  if (op.rank != 4)
    return false;
  int core[4] = {-1, pickCore(op, M), pickCore(op, N), pickCore(op, K)};
  if (core[M] < 0 || core[N] < 0 || core[K] < 0)
    return false;
  int outerDim = 0;
  while (outerDim == core[M] || outerDim == core[N] || outerDim == core[K])
    ++outerDim;
  const Dim &bd = op.dims[outerDim];
  if (bd.kind == K)
    return false;
  for (int o = 0; o < 3; ++o)
    if (op.type[o] != op.type[2] || bd.stride[o] < 0 ||
        bd.stride[o] > INT32_MAX)
      return false;
  const Library &lib = library;
  if ((std::is_same<T, float>::value ? (void *)lib.sgemmBatch
                                     : (void *)lib.dgemmBatch) == nullptr)
    return false;
  auto d = [&](int kind) { return op.dims[core[kind]]; };
  Matrix a{op.base[0], op.type[0],     d(M).size,
           d(K).size,  d(M).stride[0], d(K).stride[0]};
  Matrix b{op.base[1], op.type[1],     d(K).size,
           d(N).size,  d(K).stride[1], d(N).stride[1]};
  Matrix c{op.base[2], op.type[2],     d(M).size,
           d(N).size,  d(M).stride[2], d(N).stride[2]};
  if (leadingDim(c, true, false) < 0 || bd.stride[2] == 0)
    return false;
  // Distinct batch entries of C must not overlap each other or A and B.
  int64_t es = elementBytes(op.type[2]);
  const char *lo[3], *hi[3];
  for (int o = 0; o < 3; ++o)
    byteRange(op.base[o], o, es, op.dims, op.rank, lo[o], hi[o]);
  for (int o = 0; o < 2; ++o)
    if (lo[o] < hi[2] && lo[2] < hi[o])
      return false;
  int64_t cExtent = (c.rows - 1) * c.rowStride + (c.cols - 1) + 1;
  if (bd.stride[2] < cExtent)
    return false;
  bool ta = leadingDim(a, true, false) < 0, tb = leadingDim(b, true, false) < 0;
  int64_t lda = leadingDim(a, true, ta), ldb = leadingDim(b, true, tb);
  if (lda < 0 || ldb < 0)
    return false;
  // A batch one thread suffices for goes step by step (run): OpenBLAS's
  // batch entry point spreads the steps over its threads whatever the
  // thread-local count, and on a small batch waiting for them costs more
  // than the products (a Llama decode step's attention, 2 x 4x32x512:
  // exec_blas_async_wait was a quarter of the step's time).
  int threads = callThreadsFor(c.rows, c.cols, a.cols, bd.size, sizeof(T));
  if (threads == 1)
    return false;
  T beta = op.accumulate ? T(1) : T(0);
  BlasThreads guard(threads);
  stridedBatches.fetch_add(1);
  if (std::is_same<T, float>::value)
    lib.sgemmBatch(kRowMajor, ta ? kTrans : kNoTrans, tb ? kTrans : kNoTrans,
                   blasint(c.rows), blasint(c.cols), blasint(a.cols), 1.0f,
                   reinterpret_cast<const float *>(a.base), blasint(lda),
                   blasint(bd.stride[0]),
                   reinterpret_cast<const float *>(b.base), blasint(ldb),
                   blasint(bd.stride[1]), float(beta),
                   reinterpret_cast<float *>(const_cast<char *>(c.base)),
                   blasint(leadingDim(c, true, false)), blasint(bd.stride[2]),
                   blasint(bd.size));
  else
    lib.dgemmBatch(kRowMajor, ta ? kTrans : kNoTrans, tb ? kTrans : kNoTrans,
                   blasint(c.rows), blasint(c.cols), blasint(a.cols), 1.0,
                   reinterpret_cast<const double *>(a.base), blasint(lda),
                   blasint(bd.stride[0]),
                   reinterpret_cast<const double *>(b.base), blasint(ldb),
                   blasint(bd.stride[1]), double(beta),
                   reinterpret_cast<double *>(const_cast<char *>(c.base)),
                   blasint(leadingDim(c, true, false)), blasint(bd.stride[2]),
                   blasint(bd.size));
  return true;
}

template <typename T> void contract(Contraction op) {
  for (int i = 0; i < op.rank; ++i)
    if (op.dims[i].size == 0 && op.dims[i].kind != K)
      return; // an empty result
  bool emptySum = false;
  for (int i = 0; i < op.rank; ++i)
    emptySum |= op.dims[i].size == 0;
  if (emptySum) {
    if (!op.accumulate) {
      // C = 0: the reference loops over C's dimensions alone.
      Contraction zero = op;
      zero.rank = 0;
      for (int i = 0; i < op.rank; ++i)
        if (op.dims[i].kind != K)
          zero.dims[zero.rank++] = op.dims[i];
      int64_t total = 1;
      for (int i = 0; i < zero.rank; ++i)
        total *= zero.dims[i].size;
      for (int64_t step = 0; step < total; ++step) {
        int64_t off = 0, rem = step;
        for (int i = zero.rank - 1; i >= 0; --i) {
          off += (rem % zero.dims[i].size) * zero.dims[i].stride[2];
          rem /= zero.dims[i].size;
        }
        reinterpret_cast<T *>(const_cast<char *>(op.base[2]))[off] = T(0);
      }
    }
    return;
  }
  if (!libraryReady.load() || !fitsBlas(op))
    return reference<T>(op);
  simplify(op);
  if (runBatched<T>(op))
    return;
  run<T>(op);
}

void runContraction(const Contraction &op) {
  if (op.type[2] == F64)
    contract<double>(op);
  else
    contract<float>(op);
}

} // namespace

namespace tdfrt {

void *oneDnnHandle() { return oneDnnReady.load() ? oneDnn.handle : nullptr; }

OneDnnThreads::OneDnnThreads(int threads) {
  if (threads > 0 && oneDnnReady.load()) {
    previous = oneDnn.maxThreads();
    oneDnn.setThreads(threads);
  }
}

OneDnnThreads::~OneDnnThreads() {
  if (previous > 0)
    oneDnn.setThreads(previous);
}

} // namespace tdfrt

/// C (+)= A * B; see the file comment. `flags`: element types of A, B, C in
/// bits 0-3, 4-7, 8-11 (0 f32, 1 f64, 2 bf16, 3 f16), accumulate into C in
/// bit 12, the kind of dimension i (0 batch, 1 M, 2 N, 3 K) in bits
/// 16 + 2i, 17 + 2i, the BLAS thread count of this call (0: the library's)
/// in bits 32-47. Per dimension: size and the strides of A, B and C in
/// elements (0 where the operand does not have it).
extern "C" void tdf_rt_contract(TDF_CONTRACT_PARAMETERS) {
  Contraction op = decodeContractionCall(TDF_CONTRACT_ARGUMENTS);
  // Threads of this call: the program's count, or (0) the process's; each
  // library call takes one thread when it is small (callThreadsFor).
  callThreads = int((flags >> 32) & 0xffff);
  runContraction(op);
}

namespace tdfpy {

void registerBlas(nb::module_ &m) {
  m.def(
      "blas_load",
      [](const std::string &path, const std::string &prefix) {
        std::string error = loadLibrary(path, prefix);
        if (!error.empty())
          throw std::runtime_error(error);
      },
      nb::arg("path"), nb::arg("prefix") = "",
      "Loads the BLAS that compiled contractions call (once per process).");
  m.def(
      "onednn_load",
      [](const std::string &path) {
        std::string error = loadOneDnn(path);
        if (!error.empty())
          throw std::runtime_error(error);
      },
      nb::arg("path"),
      "Loads oneDNN, whose GEMMs f32 and bf16 contractions call.");
  m.def(
      "onednn_warmed_up",
      []() {
        {
          nb::gil_scoped_release release;
          joinWarmUp();
        }
        return warmUpDone.load();
      },
      "Waits for the thread that makes oneDNN's f32 GEMM kernels when the "
      "library loads; whether it ran (False when oneDNN is not loaded).");
  m.def(
      "onednn_loaded",
      []() { return oneDnnReady.load() ? oneDnn.path : std::string(); },
      "The path of the loaded oneDNN library, or '' when none is.");
  m.def(
      "blas_loaded",
      []() { return libraryReady.load() ? library.path : std::string(); },
      "The path of the loaded BLAS, or '' when none is.");
  m.def(
      "blas_matmul_primitive_calls",
      []() { return matmulPrimitiveCalls.load(); },
      "GEMMs run through oneDNN's matmul primitive in this process.");
  m.def(
      "blas_strided_batches", []() { return stridedBatches.load(); },
      "How many batches of GEMMs ran through OpenBLAS's strided-batch entry "
      "point in this process.");
  m.def(
      "blas_threaded_batches", []() { return threadedBatches.load(); },
      "How many batches of small GEMMs ran on oneDNN's threads (one GEMM "
      "per thread at a time) in this process.");
  m.def(
      "blas_set_threads",
      [](int threads) {
        if (libraryReady.load() && library.setThreads)
          library.setThreads(std::max(1, threads));
      },
      nb::arg("threads"), "Sets the BLAS's thread count.");
  m.def(
      "blas_threads",
      []() {
        return libraryReady.load() && library.getThreads ? library.getThreads()
                                                         : 0;
      },
      "The BLAS's thread count (0 when none is loaded).");
}

} // namespace tdfpy
