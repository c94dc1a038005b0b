//===- OneDnn.h - the oneDNN library the runtime loaded -------------------===//
//
// What Blas.cpp (which loads oneDNN for its GEMMs) gives the runtime's other
// oneDNN routes (Convolution.cpp): the library's handle and its thread
// count setting.
//
//===----------------------------------------------------------------------===//

#ifndef TDF_PYTHON_SRC_ONEDNN_H
#define TDF_PYTHON_SRC_ONEDNN_H

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

} // namespace tdfrt

#endif // TDF_PYTHON_SRC_ONEDNN_H
