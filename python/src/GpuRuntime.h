//===- GpuRuntime.h - tdf's GPU runtime library ---------------*- C++ -*-===//
//
// The API of `libtdf_gpu_runtime.so` (GpuRuntime.cpp): the C functions a GPU
// program's host code and its callers use, and the C++ helpers the Python
// extension's bindings (GpuBlas.cpp) call. Everything else in the library
// is hidden.
//
//===----------------------------------------------------------------------===//

#ifndef TDF_PYTHON_SRC_GPURUNTIME_H
#define TDF_PYTHON_SRC_GPURUNTIME_H

#include "Contraction.h"

#include <cstdint>
#include <string>
#include <vector>

#define TDF_GPU_API __attribute__((visibility("default")))

extern "C" {

/// C (+)= A * B on device buffers through cuBLAS, the call
/// `tdf-contractions-to-cublas` emits (Contraction.h's parameters; the
/// thread-count bits of `flags` are ignored). A failure is recorded for
/// tdf_gpu_take_error and nothing is computed.
TDF_GPU_API void tdf_gpu_contract(TDF_CONTRACT_PARAMETERS);

/// `size` bytes of device memory from device 0's stream-ordered pool,
/// ordered on `stream` (a CUstream; managed memory when `hostShared`):
/// MLIR's `mgpuMemAlloc` with a pool. A failure is recorded for
/// tdf_gpu_take_error and returns null.
TDF_GPU_API void *tdf_gpu_mem_alloc(uint64_t size, void *stream,
                                    bool hostShared);

/// Frees what tdf_gpu_mem_alloc returned, ordered on `stream` (back to the
/// pool); `mgpuMemFree`'s replacement.
TDF_GPU_API void tdf_gpu_mem_free(void *ptr, void *stream);

/// The failure a tdf_gpu_* call of this thread recorded, cleared:
/// returns its length (0: none) and copies it, NUL-terminated and cut to
/// `capacity - 1` characters, into `buffer` when that is not null. A caller
/// of an exported GPU program checks it after each call.
TDF_GPU_API int64_t tdf_gpu_take_error(char *buffer, int64_t capacity);
}

namespace tdfgpu {

/// Loads cuBLAS (TDF_CUBLAS_LIBRARY, else the first of `paths` and
/// libcublas.so.13, .12, .11, libcublas.so that loads) and libcuda, once per
/// process: '' and the cuBLAS library's path in `path`, or why it cannot.
TDF_GPU_API std::string load(const std::vector<std::string> &paths,
                             std::string &path);

/// Why one cuBLAS call cannot run the contraction `flags`, `sizes` and
/// `strides` (A, B, C per dimension) describe, or '' when it can: what
/// tdf_gpu_contract decides at run time, minus the overlap check.
TDF_GPU_API std::string plan(int64_t flags, int64_t rank,
                             const int64_t sizes[tdfrt::kMaxDims],
                             const int64_t strides[tdfrt::kMaxDims][3]);

/// tdf_gpu_take_error as a string.
TDF_GPU_API std::string takeError();

} // namespace tdfgpu

#endif // TDF_PYTHON_SRC_GPURUNTIME_H
