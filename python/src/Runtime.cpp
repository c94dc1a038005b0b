//===- Runtime.cpp - native call path of compiled tdf functions -----------===//
//
// `tdf._tdf.NativeEntry`: calls a JIT-compiled entry function on numpy arrays
// with every argument check in C++ (count, dtype, shape, contiguity,
// writeability and overlaps of donated arrays), per-call memref descriptors
// on the stack (no shared state: several threads may call one function at
// once), the GIL released during the compiled code, and result arrays that
// own the buffers the compiled code allocated.
//
// Run-time checks inserted by tdf-bounds-checks / tdf-alloc-checks call
// `tdf_rt_bounds_error` / `tdf_rt_alloc_error` (defined here): they record
// the failure in thread-local state and longjmp back to the trampoline of
// the current call, which raises IndexError / MemoryError in Python.
//
// Heap memory of the compiled code and of result arrays goes through the
// caching allocator of Allocator.cpp.
//
//===----------------------------------------------------------------------===//

#include "Allocator.h"

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#define NPY_NO_DEPRECATED_API NPY_2_0_API_VERSION
#define PY_ARRAY_UNIQUE_SYMBOL tdf_runtime_numpy_api
#include <numpy/arrayobject.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csetjmp>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include <pthread.h>
#if defined(__SSE__)
#include <xmmintrin.h>
#endif
#include <unistd.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace nb = nanobind;

namespace {

//===----------------------------------------------------------------------===//
// Failure reporting from compiled code
//===----------------------------------------------------------------------===//

enum class FailureKind : int { None = 0, Bounds = 1, Alloc = 2 };

/// What a failed run-time check recorded (thread-local: each call has its
/// own).
struct Failure {
  FailureKind kind = FailureKind::None;
  int64_t site = -1;
  int64_t values[4] = {0, 0, 0, 0};
};

thread_local std::jmp_buf *currentJump = nullptr;
thread_local Failure currentFailure;

[[noreturn]] void fail(FailureKind kind, int64_t site, int64_t a, int64_t b,
                       int64_t c, int64_t d) {
  currentFailure.kind = kind;
  currentFailure.site = site;
  currentFailure.values[0] = a;
  currentFailure.values[1] = b;
  currentFailure.values[2] = c;
  currentFailure.values[3] = d;
  if (!currentJump) {
    // Compiled code run outside tdf's call path (e.g. through the raw
    // ExecutionEngine): nothing to return to.
    std::fprintf(stderr,
                 "tdf: run-time check %lld failed outside a tdf call "
                 "(kind %d, values %lld %lld %lld %lld)\n",
                 (long long)site, (int)kind, (long long)a, (long long)b,
                 (long long)c, (long long)d);
    std::abort();
  }
  std::longjmp(*currentJump, 1);
}

extern "C" void tdf_rt_bounds_error(int64_t site, int64_t value, int64_t size,
                                    int64_t stride, int64_t bound) {
  fail(FailureKind::Bounds, site, value, size, stride, bound);
}

extern "C" void tdf_rt_alloc_error(int64_t site, int64_t bytes) {
  fail(FailureKind::Alloc, site, bytes, 0, 0, 0);
}

using PackedFn = void (*)(void **);

} // namespace

// The thread pool of parallel loop nests (Parallel.cpp).
extern "C" void tdf_rt_parallel_for(void (*fn)(void *, int64_t), void *context,
                                    int64_t n);
// The oneDNN route of convolutions (Convolution.cpp).
extern "C" void tdf_rt_conv(int64_t flags, int64_t desc);
// The BLAS route of contractions (Blas.cpp).
extern "C" void tdf_rt_contract(int64_t, int64_t, int64_t, int64_t, int64_t,
                                int64_t, int64_t, int64_t, int64_t, int64_t,
                                int64_t, int64_t, int64_t, int64_t, int64_t,
                                int64_t, int64_t, int64_t, int64_t, int64_t,
                                int64_t, int64_t, int64_t, int64_t, int64_t,
                                int64_t, int64_t, int64_t, int64_t, int64_t,
                                int64_t, int64_t);

// The stable sort permutation of `sort`/`top_k` (Sort.cpp).
extern "C" void tdf_rt_sort(int64_t *, int64_t *, int64_t, int64_t, int64_t,
                            int64_t, int64_t, int64_t, int64_t, int64_t *,
                            int64_t *, int64_t, int64_t, int64_t, int64_t,
                            int64_t);

namespace {

#if defined(__SSE__)
constexpr unsigned kFlushToZero = 0x8000;      // MXCSR.FTZ
constexpr unsigned kDenormalsAreZero = 0x0040; // MXCSR.DAZ
#endif

/// Runs `fn(args)`; false when a run-time check failed (currentFailure says
/// which). Nothing with a destructor lives in this frame: longjmp skips no
/// cleanup. Nested calls (a kernel calling back into tdf) keep their own
/// jump buffer.
///
/// With `flushDenormals` the call runs with MXCSR's flush-to-zero and
/// denormals-are-zero bits set, as XLA's CPU code does (subnormal results
/// are 0, subnormal inputs read as 0: jax.jit's numerics, and no
/// microcode-assisted slow path); the caller's MXCSR is restored after,
/// also when a check fails.
__attribute__((noinline)) bool invokeGuarded(PackedFn fn, void **args,
                                             bool flushDenormals) {
  std::jmp_buf buffer;
  std::jmp_buf *outer = currentJump;
  currentJump = &buffer;
#if defined(__SSE__)
  unsigned callerCsr = _mm_getcsr();
  if (flushDenormals)
    _mm_setcsr(callerCsr | kFlushToZero | kDenormalsAreZero);
#endif
  bool ok = true;
  if (setjmp(buffer) == 0)
    fn(args);
  else
    ok = false;
#if defined(__SSE__)
  _mm_setcsr(callerCsr);
#endif
  currentJump = outer;
  return ok;
}

//===----------------------------------------------------------------------===//
// NativeEntry
//===----------------------------------------------------------------------===//

bool numpyReady = false;

void ensureNumpy() {
  if (numpyReady)
    return;
  if (_import_array() < 0)
    throw nb::python_error();
  numpyReady = true;
}

/// A memref descriptor in int64 words: allocated, aligned, offset,
/// sizes[rank], strides[rank].
size_t descriptorWords(size_t rank) { return 3 + 2 * rank; }

struct TensorInfo {
  nb::object dtype; // the numpy dtype (its descr pointer is the fast check)
  PyArray_Descr *descr = nullptr;
  std::vector<npy_intp> shape; // -1: a dynamic dimension
  int64_t nbytes = 0;          // -1 when some dimension is dynamic
  bool dynamic = false;
  size_t descWord = 0; // offset of its descriptor in the call frame
};

struct Param {
  bool tensor = false;
  bool donated = false;
  char scalarCode = 0; // d f q i h b ? (x: converted by Python)
  TensorInfo info;
};

struct Result {
  int returnedArg = -1;
  bool scalar = false;   // a scalar result (index, integer, float, i1)
  size_t byteOffset = 0; // a JIT result's offset in the result area
  TensorInfo info; // for JIT results: descWord is within the result struct
};

struct Site {
  std::string kind, function, op, location;
  int64_t dimension = -1;
};

void freeCapsule(PyObject *capsule) {
  void *pointer = PyCapsule_GetPointer(capsule, "tdf.buffer");
  auto freeFn =
      reinterpret_cast<void (*)(void *)>(PyCapsule_GetContext(capsule));
  if (pointer && freeFn)
    freeFn(pointer);
}

/// A buffer freed by a function that lives in a Python object (an
/// AllocationCounter's ctypes callback): the capsule holds a reference to
/// that object's owner (the entry function), so a result array stays valid
/// and freeable after the program is deleted.
struct KeptFree {
  void (*freeFn)(void *);
  PyObject *keeper;
};

void freeKeptCapsule(PyObject *capsule) {
  void *pointer = PyCapsule_GetPointer(capsule, "tdf.kept_buffer");
  auto *kept = reinterpret_cast<KeptFree *>(PyCapsule_GetContext(capsule));
  if (!kept)
    return;
  if (pointer && kept->freeFn)
    kept->freeFn(pointer);
  Py_XDECREF(kept->keeper);
  delete kept;
}

class NativeEntry {
public:
  NativeEntry(
      std::string name, uintptr_t address, const std::vector<nb::tuple> &params,
      const std::vector<nb::tuple> &results, uintptr_t freeAddress,
      const std::vector<std::tuple<std::string, std::string, std::string,
                                   std::string, int64_t>> &sites,
      bool sharedState)
      : name(std::move(name)), fn(reinterpret_cast<PackedFn>(address)),
        freeFn(reinterpret_cast<void (*)(void *)>(freeAddress)),
        sharedState(sharedState) {
    ensureNumpy();
    if (!address)
      throw nb::value_error("NativeEntry: null function address");
    if (!freeAddress)
      freeFn = &tdf_rt_free;
    // Frame layout (int64 words): [result area][descriptors][storage
    // slots][argument pointers]. The result area is the C interface's result
    // struct (natural C layout: a descriptor is 8-aligned, a scalar aligned
    // to its size; an i1 takes one byte), or, when the only JIT result is a
    // scalar, the word the packed wrapper stores the returned value into.
    size_t bytes = 0, jitResults = 0;
    for (const nb::tuple &r : results) {
      Result result;
      result.returnedArg = nb::cast<int>(r[0]);
      if (r.size() > 3)
        result.scalar = nb::cast<std::string>(r[3]) == "scalar";
      if (result.returnedArg < 0) {
        ++jitResults;
        if (result.scalar) {
          result.info.dtype = nb::borrow(r[1]);
          if (!PyArray_DescrCheck(r[1].ptr()))
            throw nb::type_error("NativeEntry: expected a numpy dtype");
          result.info.descr = reinterpret_cast<PyArray_Descr *>(r[1].ptr());
          size_t size = (size_t)PyDataType_ELSIZE(result.info.descr);
          if (size != 1 && size != 2 && size != 4 && size != 8)
            throw nb::value_error(
                "NativeEntry: unsupported scalar result size");
          bytes = (bytes + size - 1) / size * size;
          result.byteOffset = bytes;
          bytes += size;
        } else {
          fillInfo(result.info, r[1], r[2]);
          bytes = (bytes + 7) / 8 * 8;
          result.byteOffset = bytes;
          result.info.descWord = bytes / 8;
          bytes += 8 * descriptorWords(result.info.shape.size());
        }
      }
      this->results.push_back(std::move(result));
    }
    size_t words = (bytes + 7) / 8;
    resultWords = words;
    resultByValue = false;
    for (const Result &result : this->results)
      if (result.returnedArg < 0 && result.scalar && jitResults == 1)
        resultByValue = true;
    for (const nb::tuple &p : params) {
      Param param;
      std::string kind = nb::cast<std::string>(p[0]);
      if (kind == "tensor") {
        param.tensor = true;
        fillInfo(param.info, p[1], p[2]);
        param.donated = nb::cast<bool>(p[3]);
        param.info.descWord = words;
        words += descriptorWords(param.info.shape.size());
        if (param.donated)
          donated.push_back(this->params.size());
        tensors.push_back(this->params.size());
      } else {
        std::string code = nb::cast<std::string>(p[1]);
        param.scalarCode = code.empty() ? 'x' : code[0];
      }
      this->params.push_back(std::move(param));
    }
    storageWord = words;
    size_t slots = this->params.size() + (resultWords ? 1 : 0);
    words += slots; // storage (descriptor pointers / scalar values)
    pointerWord = words;
    words += slots; // argument pointers
    frameWords = words;
    // The template: static sizes and strides of every descriptor.
    frameTemplate.assign(frameWords, 0);
    for (const Param &param : this->params)
      if (param.tensor)
        writeStatic(frameTemplate.data() + param.info.descWord, param.info);
    if (sharedState)
      shared.reset(new int64_t[frameWords]);
    for (const auto &[kind, function, op, location, dimension] : sites)
      this->sites.push_back({kind, function, op, location, dimension});
    tdfpy::addAllocatorUser(1); // last: a constructor that throws is no user
  }

  ~NativeEntry() { tdfpy::addAllocatorUser(-1); }
  NativeEntry(const NativeEntry &) = delete;
  NativeEntry &operator=(const NativeEntry &) = delete;

  PyObject *call(PyObject *self, PyObject *args);

  std::string name;

  /// FTZ/DAZ for the duration of each call (see invokeGuarded).
  bool flushDenormals = true;

  /// Points later calls at another compile of the same function.
  void setAddress(uintptr_t address) {
    fn.store(reinterpret_cast<PackedFn>(address), std::memory_order_release);
  }

private:
  static void fillInfo(TensorInfo &info, nb::handle dtype, nb::handle shape) {
    info.dtype = nb::borrow(dtype);
    if (!PyArray_DescrCheck(dtype.ptr()))
      throw nb::type_error("NativeEntry: expected a numpy dtype");
    info.descr = reinterpret_cast<PyArray_Descr *>(dtype.ptr());
    int64_t count = 1;
    for (nb::handle size : shape) {
      int64_t dim = nb::cast<int64_t>(size);
      info.shape.push_back(dim < 0 ? -1 : dim);
      info.dynamic |= dim < 0;
      count *= dim;
    }
    info.nbytes = info.dynamic ? -1 : count * PyDataType_ELSIZE(info.descr);
  }

  /// Sizes and row-major strides of a descriptor from `dims` (a dynamic
  /// shape's sizes at call time).
  static void writeSizes(int64_t *desc, const npy_intp *dims, size_t rank) {
    int64_t stride = 1;
    for (size_t i = rank; i-- > 0;) {
      desc[3 + i] = dims[i];
      desc[3 + rank + i] = stride;
      stride *= dims[i] > 0 ? dims[i] : 1;
    }
  }

  static void writeStatic(int64_t *desc, const TensorInfo &info) {
    size_t rank = info.shape.size();
    int64_t stride = 1;
    for (size_t i = rank; i-- > 0;) {
      desc[3 + i] = info.shape[i];
      desc[3 + rank + i] = stride;
      stride *= info.shape[i] > 0 ? info.shape[i] : 1;
    }
  }

  bool fastArray(const Param &param, PyObject *value) const;
  static bool fitsDynamic(const TensorInfo &info, PyArrayObject *array) {
    if (PyArray_NDIM(array) != (int)info.shape.size())
      return false;
    for (size_t i = 0; i < info.shape.size(); ++i)
      if (info.shape[i] >= 0 && PyArray_DIMS(array)[i] != info.shape[i])
        return false;
    return true;
  }
  PyObject *slowArgument(PyObject *self, size_t index, PyObject *value) const;
  bool storeScalar(PyObject *self, size_t index, PyObject *value,
                   int64_t *slot) const;
  PyObject *raiseFailure(const Failure &failure) const;
  PyObject *collect(PyObject *self, PyObject *const *arrays,
                    const int64_t *frame) const;
  void fillFrame(int64_t *frame, const int64_t *dataPointers,
                 const int64_t *scalars, PyObject *const *arrays) const;

  // Swapped by set_address while calls run (tiered compilation): each call
  // reads it once.
  std::atomic<PackedFn> fn;
  void (*freeFn)(void *);
  bool sharedState;
  std::vector<Param> params;
  std::vector<Result> results;
  std::vector<size_t> donated, tensors;
  std::vector<Site> sites;
  size_t resultWords = 0, storageWord = 0, pointerWord = 0, frameWords = 0;
  bool resultByValue = false; // the single JIT result is a returned scalar
  std::vector<int64_t> frameTemplate;
  std::unique_ptr<int64_t[]> shared;
  std::mutex sharedLock;
};

bool NativeEntry::fastArray(const Param &param, PyObject *value) const {
  if (!PyArray_CheckExact(value))
    return false;
  auto *array = reinterpret_cast<PyArrayObject *>(value);
  if (PyArray_DESCR(array) != param.info.descr)
    return false;
  int rank = PyArray_NDIM(array);
  if (rank != (int)param.info.shape.size())
    return false;
  const npy_intp *dims = PyArray_DIMS(array);
  for (int i = 0; i < rank; ++i)
    if (dims[i] != param.info.shape[i] && param.info.shape[i] >= 0)
      return false;
  int flags = PyArray_FLAGS(array);
  if (!(flags & NPY_ARRAY_C_CONTIGUOUS))
    return false;
  if (param.donated && !(flags & NPY_ARRAY_WRITEABLE))
    return false;
  return true;
}

/// The Python checks (`EntryFunction._slow_argument`): the exact error
/// message, or the array to pass (e.g. a contiguous copy). New reference.
PyObject *NativeEntry::slowArgument(PyObject *self, size_t index,
                                    PyObject *value) const {
  return PyObject_CallMethod(self, "_slow_argument", "nO", (Py_ssize_t)index,
                             value);
}

bool NativeEntry::storeScalar(PyObject *self, size_t index, PyObject *value,
                              int64_t *slot) const {
  char code = params[index].scalarCode;
  std::memset(slot, 0, sizeof(int64_t));
  if ((code == 'd' || code == 'f') && PyFloat_CheckExact(value)) {
    double v = PyFloat_AS_DOUBLE(value);
    if (code == 'd')
      std::memcpy(slot, &v, sizeof(double));
    else {
      float f = (float)v;
      std::memcpy(slot, &f, sizeof(float));
    }
    return true;
  }
  if (code == '?' && (value == Py_True || value == Py_False)) {
    *reinterpret_cast<bool *>(slot) = value == Py_True;
    return true;
  }
  if (PyLong_CheckExact(value) &&
      (code == 'q' || code == 'i' || code == 'h' || code == 'b')) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
    int bits = code == 'q' ? 64 : code == 'i' ? 32 : code == 'h' ? 16 : 8;
    long long low = bits == 64 ? INT64_MIN : -(1LL << (bits - 1));
    long long high = bits == 64 ? INT64_MAX : (1LL << (bits - 1)) - 1;
    if (!overflow && !(v == -1 && PyErr_Occurred()) && v >= low && v <= high) {
      if (code == 'q')
        *slot = v;
      else if (code == 'i')
        *reinterpret_cast<int32_t *>(slot) = (int32_t)v;
      else if (code == 'h')
        *reinterpret_cast<int16_t *>(slot) = (int16_t)v;
      else
        *reinterpret_cast<int8_t *>(slot) = (int8_t)v;
      return true;
    }
    PyErr_Clear();
  }
  // Anything else: Python converts (or raises) and returns the bytes of
  // the C value.
  PyObject *bytes =
      PyObject_CallMethod(self, "_slow_scalar", "nO", (Py_ssize_t)index, value);
  if (!bytes)
    return false;
  char *data;
  Py_ssize_t size;
  if (PyBytes_AsStringAndSize(bytes, &data, &size) < 0 || size > 8) {
    if (!PyErr_Occurred())
      PyErr_SetString(PyExc_SystemError, "tdf: scalar wider than 8 bytes");
    Py_DECREF(bytes);
    return false;
  }
  std::memcpy(slot, data, size);
  Py_DECREF(bytes);
  return true;
}

PyObject *NativeEntry::raiseFailure(const Failure &failure) const {
  const Site *site = failure.site >= 0 && (size_t)failure.site < sites.size()
                         ? &sites[failure.site]
                         : nullptr;
  std::string where = site ? site->op + " at " + site->location : "a check";
  if (site && site->function != name)
    where += " (in @" + site->function + ")";
  const int64_t *v = failure.values;
  std::string dim = site ? std::to_string(site->dimension) : "?";
  std::string message = "@" + name + ": " + where + ": ";
  if (failure.kind == FailureKind::Alloc && site &&
      site->kind == "alloc-size") {
    message += "dimension " + dim + " has size " + std::to_string(v[0]);
    if (v[0] < 0) {
      message += ": a buffer size cannot be negative";
      PyErr_SetString(PyExc_ValueError, message.c_str());
    } else {
      message += ": the buffer's byte size overflows int64";
      PyErr_SetString(PyExc_MemoryError, message.c_str());
    }
    return nullptr;
  }
  if (failure.kind == FailureKind::Alloc) {
    message += "cannot allocate " + std::to_string(v[0]) + " bytes";
    PyErr_SetString(PyExc_MemoryError, message.c_str());
    return nullptr;
  }
  if (site && site->kind == "cast") {
    message += "dimension " + dim + " has size " + std::to_string(v[0]) +
               ", but the cast's result type needs " + std::to_string(v[1]);
    PyErr_SetString(PyExc_ValueError, message.c_str());
    return nullptr;
  }
  if (site && site->kind == "shape") {
    message += "dimension " + dim + " of operand #" + std::to_string(v[2]) +
               " has size " + std::to_string(v[0]) +
               ", but the loop over it has size " + std::to_string(v[1]) +
               " (from operand #" + std::to_string(v[3]) +
               "): dynamic sizes of one loop must agree";
    PyErr_SetString(PyExc_ValueError, message.c_str());
    return nullptr;
  }
  if (site && site->kind == "index")
    message += "index " + std::to_string(v[0]) +
               " is out of bounds for dimension " + dim + " of size " +
               std::to_string(v[3]);
  else
    message += "slice offset " + std::to_string(v[0]) + ", size " +
               std::to_string(v[1]) + ", stride " + std::to_string(v[2]) +
               " is out of bounds for dimension " + dim + " of size " +
               std::to_string(v[3]);
  PyErr_SetString(PyExc_IndexError, message.c_str());
  return nullptr;
}

PyObject *NativeEntry::collect(PyObject *self, PyObject *const *arrays,
                               const int64_t *frame) const {
  size_t count = results.size();
  if (count == 0)
    Py_RETURN_NONE;
  PyObject *outs = count == 1 ? nullptr : PyTuple_New((Py_ssize_t)count);
  if (count > 1 && !outs)
    return nullptr;
  PyObject *single = nullptr;
  // Owners (capsules) of the buffers handed over, by allocated pointer.
  std::vector<std::pair<int64_t, PyObject *>> owners;
  bool ok = true;
  for (size_t r = 0; r < count; ++r) {
    const Result &result = results[r];
    PyObject *array = nullptr;
    if (result.returnedArg >= 0) {
      array = arrays[result.returnedArg];
      Py_INCREF(array);
    } else if (result.scalar) {
      // A numpy scalar of the result's dtype, read from the result area.
      if (ok) {
        const char *data =
            reinterpret_cast<const char *>(frame) + result.byteOffset;
        alignas(8) char value[8] = {0};
        size_t size = (size_t)PyDataType_ELSIZE(result.info.descr);
        std::memcpy(value, data, size);
        if (result.info.descr->type_num == NPY_BOOL)
          value[0] = (value[0] & 1) != 0;
        array = PyArray_Scalar(value, result.info.descr, nullptr);
        if (!array)
          ok = false;
      }
    } else if (ok) {
      const int64_t *desc = frame + result.info.descWord;
      int64_t allocated = desc[0];
      PyObject *owner = nullptr;
      for (auto &[pointer, capsule] : owners)
        if (pointer == allocated)
          owner = capsule;
      if (!owner && allocated) {
        if (freeFn == &tdf_rt_free) {
          owner = PyCapsule_New(reinterpret_cast<void *>(allocated),
                                "tdf.buffer", freeCapsule);
          if (owner)
            PyCapsule_SetContext(owner, reinterpret_cast<void *>(freeFn));
        } else {
          owner = PyCapsule_New(reinterpret_cast<void *>(allocated),
                                "tdf.kept_buffer", freeKeptCapsule);
          if (owner) {
            Py_INCREF(self);
            PyCapsule_SetContext(owner, new KeptFree{freeFn, self});
          }
        }
        if (owner)
          owners.push_back({allocated, owner});
      }
      if (allocated && !owner) {
        ok = false;
      } else {
        PyArray_Descr *descr = result.info.descr;
        // A dynamic result's sizes are those of the returned descriptor
        // (identity layout: row-major strides).
        size_t rank = result.info.shape.size();
        npy_intp dynamicDims[NPY_MAXDIMS];
        const npy_intp *dims = result.info.shape.data();
        int64_t nbytes = result.info.nbytes;
        if (result.info.dynamic) {
          nbytes = PyDataType_ELSIZE(descr);
          for (size_t d = 0; d < rank && d < (size_t)NPY_MAXDIMS; ++d) {
            dynamicDims[d] = desc[3 + d];
            nbytes *= desc[3 + d];
          }
          dims = dynamicDims;
        }
        Py_INCREF(descr);
        char *data = nullptr;
        if (nbytes)
          data = reinterpret_cast<char *>(desc[1]) +
                 desc[2] * PyDataType_ELSIZE(descr);
        array = PyArray_NewFromDescr(&PyArray_Type, descr, (int)rank,
                                     const_cast<npy_intp *>(dims), nullptr,
                                     data, NPY_ARRAY_CARRAY, nullptr);
        if (array && data) {
          Py_INCREF(owner);
          if (PyArray_SetBaseObject(reinterpret_cast<PyArrayObject *>(array),
                                    owner) < 0) {
            Py_DECREF(array);
            array = nullptr;
          }
        }
        if (!array)
          ok = false;
      }
    } else {
      // An earlier result failed: still take ownership of this buffer.
      int64_t allocated = frame[result.info.descWord];
      bool known = false;
      for (auto &[pointer, capsule] : owners)
        known |= pointer == allocated;
      if (allocated && !known)
        freeFn(reinterpret_cast<void *>(allocated));
    }
    if (count == 1)
      single = array;
    else if (array)
      PyTuple_SET_ITEM(outs, (Py_ssize_t)r, array);
  }
  for (auto &[pointer, capsule] : owners)
    Py_DECREF(capsule); // arrays hold their own references
  if (!ok) {
    Py_XDECREF(outs);
    Py_XDECREF(single);
    if (!PyErr_Occurred())
      PyErr_SetString(PyExc_MemoryError, "tdf: cannot wrap a result buffer");
    return nullptr;
  }
  return count == 1 ? single : outs;
}

/// Copies the template (static sizes and strides) into `frame` and stores
/// the data pointers, scalar values and argument pointers of this call.
void NativeEntry::fillFrame(int64_t *frame, const int64_t *dataPointers,
                            const int64_t *scalars,
                            PyObject *const *arrays) const {
  std::memcpy(frame, frameTemplate.data(), frameWords * sizeof(int64_t));
  int64_t *storage = frame + storageWord;
  int64_t *slots = frame + pointerWord;
  size_t slot = 0;
  if (resultWords && !resultByValue) {
    storage[0] = reinterpret_cast<int64_t>(frame);
    slots[0] = reinterpret_cast<int64_t>(&storage[0]);
    slot = 1;
  }
  for (size_t i = 0; i < params.size(); ++i, ++slot) {
    const Param &param = params[i];
    if (param.tensor) {
      int64_t *desc = frame + param.info.descWord;
      desc[0] = desc[1] = dataPointers[i];
      // Dynamic shape: sizes and strides of this call's array (a plain read
      // of an array this call holds a reference to; no GIL needed).
      if (param.info.dynamic)
        writeSizes(desc,
                   PyArray_DIMS(reinterpret_cast<PyArrayObject *>(arrays[i])),
                   param.info.shape.size());
      storage[slot] = reinterpret_cast<int64_t>(desc);
    } else {
      storage[slot] = scalars[i];
    }
    slots[slot] = reinterpret_cast<int64_t>(&storage[slot]);
  }
  // A returned scalar: the packed wrapper stores it through the pointer in
  // the slot after the arguments.
  if (resultByValue)
    slots[slot] = reinterpret_cast<int64_t>(frame);
}

PyObject *NativeEntry::call(PyObject *self, PyObject *args) {
  Py_ssize_t given = PyTuple_GET_SIZE(args);
  size_t count = params.size();
  if ((size_t)given != count) {
    PyErr_Format(PyExc_TypeError, "@%s takes %zu argument(s), got %zd",
                 name.c_str(), count, given);
    return nullptr;
  }
  // Per-call state: the frame lives on this stack (or, in the measured
  // shared-state variant, in the object under a lock).
  int64_t local[256];
  std::unique_ptr<int64_t[]> heap;
  int64_t *frame = local;
  if (!sharedState && frameWords > 256) {
    heap.reset(new int64_t[frameWords]);
    frame = heap.get();
  }
  // Arrays actually passed (a slow-path conversion may replace one).
  PyObject *stackArrays[32];
  std::unique_ptr<PyObject *[]> heapArrays;
  PyObject **arrays = stackArrays;
  if (count > 32) {
    heapArrays.reset(new PyObject *[count]);
    arrays = heapArrays.get();
  }
  std::vector<PyObject *> converted; // new references to release
  auto release = [&]() {
    for (PyObject *o : converted)
      Py_DECREF(o);
  };
  int64_t scalarValues[64];
  std::unique_ptr<int64_t[]> heapScalars;
  int64_t *scalars = scalarValues;
  if (count > 64) {
    heapScalars.reset(new int64_t[count]);
    scalars = heapScalars.get();
  }
  int64_t counts[64];
  std::unique_ptr<int64_t[]> heapCounts;
  int64_t *byteCounts = counts;
  if (count > 64) {
    heapCounts.reset(new int64_t[count]);
    byteCounts = heapCounts.get();
  }
  int64_t pointers[64];
  std::unique_ptr<int64_t[]> heapPointers;
  int64_t *dataPointers = pointers;
  if (count > 64) {
    heapPointers.reset(new int64_t[count]);
    dataPointers = heapPointers.get();
  }
  for (size_t i = 0; i < count; ++i) {
    PyObject *value = PyTuple_GET_ITEM(args, (Py_ssize_t)i);
    const Param &param = params[i];
    if (param.tensor) {
      if (!fastArray(param, value)) {
        PyObject *checked = slowArgument(self, i, value);
        if (!checked) {
          release();
          return nullptr;
        }
        converted.push_back(checked);
        auto *array = reinterpret_cast<PyArrayObject *>(checked);
        if (!PyArray_Check(checked) ||
            !(PyArray_FLAGS(array) & NPY_ARRAY_C_CONTIGUOUS) ||
            (param.info.dynamic ? !fitsDynamic(param.info, array)
                                : PyArray_NBYTES(array) != param.info.nbytes)) {
          release();
          PyErr_Format(PyExc_SystemError,
                       "@%s: argument #%zu: the argument check returned an "
                       "unusable array",
                       name.c_str(), i);
          return nullptr;
        }
        value = checked;
      }
      arrays[i] = value;
      dataPointers[i] = reinterpret_cast<int64_t>(
          PyArray_DATA(reinterpret_cast<PyArrayObject *>(value)));
      byteCounts[i] = PyArray_NBYTES(reinterpret_cast<PyArrayObject *>(value));
    } else {
      arrays[i] = value;
      if (!storeScalar(self, i, value, &scalars[i])) {
        release();
        return nullptr;
      }
    }
  }
  // A donated array is written: it must not share memory with any other
  // tensor argument (the program would read what it already overwrote).
  for (size_t i : donated) {
    int64_t low = dataPointers[i], high = low + byteCounts[i];
    for (size_t j : tensors) {
      if (j == i || !byteCounts[i] || !byteCounts[j])
        continue;
      int64_t other = dataPointers[j];
      if (other < high && low < other + byteCounts[j]) {
        release();
        return PyObject_CallMethod(self, "_raise_overlap", "nn", (Py_ssize_t)i,
                                   (Py_ssize_t)j);
      }
    }
  }

  // Everything below until the results runs without the GIL (the frame
  // only holds C values). The shared-state variant takes its mutex only
  // after releasing the GIL: a thread holding the mutex may need the GIL
  // back, so taking the mutex with the GIL held could deadlock.
  std::vector<int64_t> resultCopy;
  bool ok;
  Failure failure;
  Py_BEGIN_ALLOW_THREADS std::unique_lock<std::mutex> lock;
  if (sharedState) {
    lock = std::unique_lock<std::mutex>(sharedLock);
    frame = shared.get();
  }
  fillFrame(frame, dataPointers, scalars, arrays);
  ok = invokeGuarded(fn.load(std::memory_order_acquire),
                     reinterpret_cast<void **>(frame + pointerWord),
                     flushDenormals);
  if (!ok)
    failure = currentFailure;
  else if (sharedState)
    resultCopy.assign(frame, frame + resultWords);
  if (lock.owns_lock())
    lock.unlock(); // before taking the GIL back
  Py_END_ALLOW_THREADS

      if (!ok) {
    release();
    return raiseFailure(failure);
  }
  PyObject *out =
      collect(self, arrays, sharedState ? resultCopy.data() : frame);
  release();
  return out;
}

PyObject *entryCall(PyObject *self, PyObject *args, PyObject *kwargs) {
  if (kwargs && PyDict_GET_SIZE(kwargs)) {
    PyErr_SetString(PyExc_TypeError,
                    "compiled tdf functions take positional arguments only");
    return nullptr;
  }
  NativeEntry *entry = nb::inst_ptr<NativeEntry>(self);
  if (!nb::inst_ready(self)) {
    PyErr_SetString(PyExc_TypeError, "NativeEntry is not initialized");
    return nullptr;
  }
  return entry->call(self, args);
}

PyType_Slot entrySlots[] = {{Py_tp_call, (void *)entryCall}, {0, nullptr}};

} // namespace

namespace tdfpy {
void registerRuntime(nb::module_ &m);
} // namespace tdfpy

void tdfpy::registerRuntime(nb::module_ &m) {
  using tdfpy::registerAllocator;
  nb::class_<NativeEntry>(m, "NativeEntry", nb::type_slots(entrySlots),
                          "A compiled entry function called natively (see "
                          "tdf.runtime.EntryFunction).")
      .def(nb::init<std::string, uintptr_t, const std::vector<nb::tuple> &,
                    const std::vector<nb::tuple> &, uintptr_t,
                    const std::vector<
                        std::tuple<std::string, std::string, std::string,
                                   std::string, int64_t>> &,
                    bool>(),
           nb::arg("name"), nb::arg("address"), nb::arg("params"),
           nb::arg("results"), nb::arg("free_address"), nb::arg("sites"),
           nb::arg("shared_state") = false)
      .def(
          "set_address",
          [](NativeEntry &entry, uintptr_t address) {
            if (!address)
              throw nb::value_error("NativeEntry: null function address");
            entry.setAddress(address);
          },
          nb::arg("address"),
          "Points later calls at another compile of the same function (the "
          "caller keeps both codes alive; calls running finish on the old).")
      .def_rw("flush_denormals", &NativeEntry::flushDenormals,
              "Run calls with flush-to-zero / denormals-are-zero (XLA's "
              "numerics; default true).");
  m.def(
      "runtime_symbols",
      []() {
        nb::dict symbols;
        symbols["tdf_rt_bounds_error"] =
            reinterpret_cast<uintptr_t>(&tdf_rt_bounds_error);
        symbols["tdf_rt_alloc_error"] =
            reinterpret_cast<uintptr_t>(&tdf_rt_alloc_error);
        symbols["tdf_rt_contract"] =
            reinterpret_cast<uintptr_t>(&tdf_rt_contract);
        symbols["tdf_rt_conv"] = reinterpret_cast<uintptr_t>(&tdf_rt_conv);
        symbols["tdf_rt_parallel_for"] =
            reinterpret_cast<uintptr_t>(&tdf_rt_parallel_for);
        symbols["tdf_rt_sort"] = reinterpret_cast<uintptr_t>(&tdf_rt_sort);
        // The heap functions of the compiled code (memref.alloc lowers to
        // malloc/free; LLVM may form calloc): the caching allocator.
        symbols["malloc"] = reinterpret_cast<uintptr_t>(&tdf_rt_alloc);
        symbols["calloc"] = reinterpret_cast<uintptr_t>(&tdf_rt_calloc);
        symbols["aligned_alloc"] =
            reinterpret_cast<uintptr_t>(&tdf_rt_aligned_alloc);
        symbols["free"] = reinterpret_cast<uintptr_t>(&tdf_rt_free);
        return symbols;
      },
      "Addresses of the runtime functions compiled checks call.");
  registerAllocator(m);
  m.def(
      "time_bare_calls",
      [](uintptr_t address, uintptr_t packed, int64_t calls) {
        auto fn = reinterpret_cast<PackedFn>(address);
        auto args = reinterpret_cast<void **>(packed);
        nb::gil_scoped_release release;
        auto start = std::chrono::steady_clock::now();
        for (int64_t i = 0; i < calls; ++i)
          fn(args);
        std::chrono::duration<double> elapsed =
            std::chrono::steady_clock::now() - start;
        return elapsed.count() / (calls > 0 ? calls : 1);
      },
      nb::arg("address"), nb::arg("packed"), nb::arg("calls"),
      "Seconds per call of `calls` bare calls of a packed C interface with "
      "prepared arguments, no checks (the floor benchmarks compare with). "
      "Only for functions that allocate nothing.");
}
