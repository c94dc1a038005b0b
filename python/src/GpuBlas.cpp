//===- GpuBlas.cpp - Python bindings of tdf's GPU runtime -----------------===//
//
// `tdf._tdf.gpu_*`: the functions tdf.gpu and `tdf-contractions-to-cublas`
// call in `libtdf_gpu_runtime.so` (GpuRuntime.h), which the extension links.
//
//===----------------------------------------------------------------------===//

#include "GpuRuntime.h"

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

namespace nb = nanobind;

namespace tdfpy {

void registerGpuBlas(nb::module_ &m) {
  m.def(
      "gpu_blas_load",
      [](const std::vector<std::string> &paths) {
        std::string path;
        std::string error = tdfgpu::load(paths, path);
        if (!error.empty())
          throw std::runtime_error(error);
        return path;
      },
      nb::arg("paths") = std::vector<std::string>(),
      "Loads cuBLAS (TDF_CUBLAS_LIBRARY, else the first of `paths` and "
      "libcublas.so.13, .12, .11, libcublas.so that loads) and libcuda for "
      "tdf_gpu_contract, once per process; returns the cuBLAS library's "
      "path, RuntimeError when it cannot.");
  m.def(
      "gpu_contract_plan",
      [](int64_t flags, const std::vector<int64_t> &sizes,
         const std::vector<std::tuple<int64_t, int64_t, int64_t>> &strides) {
        if (sizes.size() > size_t(tdfrt::kMaxDims) ||
            strides.size() != sizes.size())
          throw std::invalid_argument(
              "gpu_contract_plan: at most 6 sizes and one stride triple each");
        int64_t sizeArray[tdfrt::kMaxDims] = {0},
                strideArray[tdfrt::kMaxDims][3] = {{0}};
        for (size_t i = 0; i < sizes.size(); ++i) {
          sizeArray[i] = sizes[i];
          strideArray[i][0] = std::get<0>(strides[i]);
          strideArray[i][1] = std::get<1>(strides[i]);
          strideArray[i][2] = std::get<2>(strides[i]);
        }
        return tdfgpu::plan(flags, int64_t(sizes.size()), sizeArray,
                            strideArray);
      },
      nb::arg("flags"), nb::arg("sizes"), nb::arg("strides"),
      "Why one cuBLAS call cannot run the contraction `flags`, `sizes` and "
      "`strides` (A, B, C per dimension) describe, or '' when it can: what "
      "tdf_gpu_contract decides at run time, minus the overlap check.");
  m.def("gpu_take_error", &tdfgpu::takeError,
        "The failure a tdf_gpu_contract call of this thread recorded ('' when "
        "none), cleared.");
  m.def(
      "gpu_runtime_symbols",
      []() {
        nb::dict symbols;
        symbols["tdf_gpu_contract"] =
            reinterpret_cast<uintptr_t>(&tdf_gpu_contract);
        symbols["tdf_gpu_mem_alloc"] =
            reinterpret_cast<uintptr_t>(&tdf_gpu_mem_alloc);
        symbols["tdf_gpu_mem_free"] =
            reinterpret_cast<uintptr_t>(&tdf_gpu_mem_free);
        return symbols;
      },
      "Addresses of the runtime functions GPU programs' host code calls.");
}

} // namespace tdfpy
