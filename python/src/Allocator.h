//===- Allocator.h - the caching allocator of compiled code ----*- C++ -*-===//
//
// The heap of compiled code (memref.alloc lowers to malloc/free, which the
// engine resolves to these) and of result arrays (Allocator.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef TDF_PYTHON_ALLOCATOR_H
#define TDF_PYTHON_ALLOCATOR_H

#include <nanobind/nanobind.h>

#include <cstdint>

extern "C" void *tdf_rt_aligned_alloc(uint64_t alignment, uint64_t bytes);
extern "C" void *tdf_rt_alloc(uint64_t bytes);
extern "C" void *tdf_rt_calloc(uint64_t count, uint64_t size);
extern "C" void tdf_rt_free(void *pointer);

namespace tdfpy {
/// A compiled function came (+1) or went (-1): the cache is emptied when
/// the last one goes.
void addAllocatorUser(int64_t delta);
/// allocator_stats, allocator_reset_stats, allocator_set_limit,
/// allocator_release.
void registerAllocator(nanobind::module_ &m);
} // namespace tdfpy

#endif // TDF_PYTHON_ALLOCATOR_H
