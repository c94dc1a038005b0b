//===- Allocator.cpp - the caching allocator of compiled code -------------===//
//
// Heap memory of the compiled code (memref.alloc/dealloc lower to malloc and
// free, which `runtime_symbols` defines in each engine as `tdf_rt_alloc` /
// `tdf_rt_free`, with calloc and aligned_alloc) and of result arrays (their
// capsules free through `tdf_rt_free`) goes through a caching allocator:
// freed blocks of at least `kMinCachedBytes` are kept in a bounded cache (by
// size) and handed out again, so that a steady-state call does not
// page-fault a fresh result (glibc serves large blocks with mmap and returns
// them with munmap on every free). A pointer the cache did not hand out is
// passed to the C free.
//
//===----------------------------------------------------------------------===//

#include "Allocator.h"

#include <nanobind/nanobind.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include <pthread.h>
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
// Caching allocator for large buffers
//===----------------------------------------------------------------------===//

/// Blocks of at least this many bytes are cached; smaller ones go straight
/// to malloc (glibc's free lists already reuse them).
constexpr size_t kMinCachedBytes = size_t(256) << 10;
/// Larger requests fail (return NULL: tdf-alloc-checks raises MemoryError)
/// without rounding overflowing.
constexpr size_t kMaxRequestBytes = size_t(1) << 60;
constexpr size_t kHugePageBytes = size_t(2) << 20;
constexpr size_t kDefaultLimitBytes = size_t(1) << 30;

struct CachedBlock {
  void *pointer;
  uint64_t sequence; // larger: freed more recently
};

struct AllocatorState {
  std::mutex lock;
  /// Large blocks handed out and not freed yet: their size class.
  std::unordered_map<void *, size_t> live;
  /// Freed large blocks, by size class.
  std::multimap<size_t, CachedBlock> cached;
  size_t cachedBytes = 0, peakCachedBytes = 0;
  /// Read without the lock by allocations (0: the C allocator, untouched).
  std::atomic<size_t> limit{kDefaultLimitBytes};
  uint64_t sequence = 0;
  /// Live NativeEntry objects (compiled functions): the cache keeps blocks
  /// only while some exist and is emptied when the last one goes.
  int64_t users = 0;
  uint64_t hits = 0, misses = 0, stores = 0, evictions = 0, passthrough = 0;
};

size_t defaultLimit() {
  size_t limit = kDefaultLimitBytes;
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0) {
    size_t physical = (size_t)pages * (size_t)page;
    limit = std::min(limit, physical / 8);
  }
  const char *env = std::getenv("TDF_ALLOC_CACHE_BYTES");
  if (!env || !*env)
    return limit;
  char *end = nullptr;
  errno = 0;
  unsigned long long value = std::strtoull(env, &end, 10);
  size_t scale = 1;
  if (end && *end) {
    std::string suffix(end);
    if (suffix == "K" || suffix == "k" || suffix == "KiB")
      scale = size_t(1) << 10;
    else if (suffix == "M" || suffix == "m" || suffix == "MiB")
      scale = size_t(1) << 20;
    else if (suffix == "G" || suffix == "g" || suffix == "GiB")
      scale = size_t(1) << 30;
    else
      scale = 0;
  }
  if (errno || end == env || env[0] == '-' || scale == 0 ||
      value > (unsigned long long)(kMaxRequestBytes / scale)) {
    std::fprintf(stderr,
                 "tdf: ignoring TDF_ALLOC_CACHE_BYTES=%s (expected a byte "
                 "count such as 0, 268435456, 512M or 2G); the cache limit "
                 "stays %zu bytes\n",
                 env, limit);
    return limit;
  }
  return (size_t)value * scale;
}

AllocatorState *allocatorState = nullptr;

AllocatorState &allocator() {
  // Never destroyed: result arrays may be freed during interpreter teardown.
  static AllocatorState *state = [] {
    auto *s = new AllocatorState();
    s->limit = defaultLimit();
    allocatorState = s;
    // A fork while another thread holds the lock would leave the child's
    // copy locked forever: hold it across fork(), release it on both sides.
    pthread_atfork([] { allocatorState->lock.lock(); },
                   [] { allocatorState->lock.unlock(); },
                   [] { allocatorState->lock.unlock(); });
    return s;
  }();
  return *state;
}

/// Large blocks are allocated in multiples of 64 KiB; a cached block serves
/// a request of up to 25% less (so sizes that vary a little, e.g. dynamic
/// shapes, still reuse; the slack is virtual memory: pages past what a call
/// writes are never touched).
constexpr size_t kBlockGranule = size_t(64) << 10;
size_t sizeClass(size_t bytes) {
  return (bytes + kBlockGranule - 1) / kBlockGranule * kBlockGranule;
}

void *allocateBlock(size_t bytes, size_t alignment) {
  size_t base = std::max<size_t>(
      alignment, bytes >= 2 * kHugePageBytes ? kHugePageBytes : 4096);
  void *pointer = nullptr;
  if (posix_memalign(&pointer, base, bytes) != 0)
    return nullptr;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  // Like numpy's large arrays: transparent huge pages where the system
  // allows them on request, so a first touch faults 2 MiB at a time.
  if (bytes >= 2 * kHugePageBytes) {
    uintptr_t low =
        ((uintptr_t)pointer + kHugePageBytes - 1) & ~(kHugePageBytes - 1);
    uintptr_t high = ((uintptr_t)pointer + bytes) & ~(kHugePageBytes - 1);
    if (high > low)
      madvise(reinterpret_cast<void *>(low), high - low, MADV_HUGEPAGE);
  }
#endif
  return pointer;
}

/// Frees every cached block (outside the lock).
size_t releaseCached() {
  AllocatorState &s = allocator();
  std::vector<void *> blocks;
  size_t bytes;
  {
    std::lock_guard<std::mutex> guard(s.lock);
    for (auto &entry : s.cached)
      blocks.push_back(entry.second.pointer);
    s.cached.clear();
    bytes = s.cachedBytes;
    s.cachedBytes = 0;
  }
  for (void *block : blocks)
    std::free(block);
  return bytes;
}

/// Evicts the least recently freed blocks until `incoming` more bytes fit
/// under the limit (lock held; the evicted blocks are freed by the caller).
void evictFor(AllocatorState &s, size_t incoming,
              std::vector<void *> &evicted) {
  while (!s.cached.empty() && s.cachedBytes + incoming > s.limit) {
    auto oldest = s.cached.begin();
    for (auto it = s.cached.begin(); it != s.cached.end(); ++it)
      if (it->second.sequence < oldest->second.sequence)
        oldest = it;
    s.cachedBytes -= oldest->first;
    evicted.push_back(oldest->second.pointer);
    s.cached.erase(oldest);
    ++s.evictions;
  }
}

void *takeCached(AllocatorState &s, size_t size, size_t alignment);

} // namespace

/// `aligned_alloc`: `bytes` aligned to `alignment` (a power of two), NULL on
/// failure. Large blocks come from the cache when it
/// holds one of the size class.
extern "C" void *tdf_rt_aligned_alloc(uint64_t alignment, uint64_t bytes) {
  if (alignment < alignof(std::max_align_t))
    alignment = alignof(std::max_align_t);
  if ((alignment & (alignment - 1)) != 0 || alignment > kMaxRequestBytes ||
      bytes >= kMaxRequestBytes)
    return nullptr;
  AllocatorState &s = allocator();
  if (bytes < kMinCachedBytes || s.limit.load(std::memory_order_relaxed) == 0) {
    void *pointer = nullptr;
    if (posix_memalign(&pointer, alignment, bytes ? bytes : 1) != 0)
      return nullptr;
    return pointer;
  }
  size_t size = sizeClass(bytes);
  if (void *pointer = takeCached(s, size, alignment))
    return pointer;
  void *pointer = allocateBlock(size, alignment);
  if (!pointer && releaseCached())
    pointer = allocateBlock(size, alignment); // the cache's memory may be it
  if (!pointer)
    return nullptr;
  std::lock_guard<std::mutex> guard(s.lock);
  s.live.emplace(pointer, size);
  return pointer;
}

/// `malloc` of the compiled code (what memref.alloc lowers to).
extern "C" void *tdf_rt_alloc(uint64_t bytes) {
  if (bytes < kMinCachedBytes ||
      allocator().limit.load(std::memory_order_relaxed) == 0)
    return std::malloc(bytes);
  return tdf_rt_aligned_alloc(alignof(std::max_align_t), bytes);
}

/// `calloc` (LLVM may fold a malloc followed by a zeroing memset into it).
extern "C" void *tdf_rt_calloc(uint64_t count, uint64_t size) {
  if (size && count > kMaxRequestBytes / size)
    return nullptr;
  uint64_t bytes = count * size;
  AllocatorState &s = allocator();
  if (bytes < kMinCachedBytes || s.limit.load(std::memory_order_relaxed) == 0)
    return std::calloc(bytes ? bytes : 1, 1);
  size_t cls = sizeClass(bytes);
  if (void *pointer = takeCached(s, cls, alignof(std::max_align_t))) {
    std::memset(pointer, 0, bytes);
    return pointer;
  }
  void *pointer = std::calloc(cls, 1); // fresh pages are zero: no memset
  if (!pointer && releaseCached())
    pointer = std::calloc(cls, 1);
  if (!pointer)
    return nullptr;
  std::lock_guard<std::mutex> guard(s.lock);
  s.live.emplace(pointer, cls);
  return pointer;
}

namespace {
/// The smallest cached block of at least `size` bytes (and at most a
/// quarter more) aligned to `alignment`, the most recently freed among
/// equals, now live; NULL (a miss) when there is none.
void *takeCached(AllocatorState &s, size_t size, size_t alignment) {
  std::lock_guard<std::mutex> guard(s.lock);
  auto best = s.cached.end();
  for (auto it = s.cached.lower_bound(size);
       it != s.cached.end() && it->first <= size + size / 4; ++it) {
    if (best != s.cached.end() && it->first > best->first)
      break;
    if (((uintptr_t)it->second.pointer & (alignment - 1)) == 0 &&
        (best == s.cached.end() || it->second.sequence > best->second.sequence))
      best = it;
  }
  if (best == s.cached.end()) {
    ++s.misses;
    return nullptr;
  }
  void *pointer = best->second.pointer;
  size_t blockSize = best->first;
  s.cached.erase(best);
  s.cachedBytes -= blockSize;
  s.live.emplace(pointer, blockSize);
  ++s.hits;
  return pointer;
}
} // namespace

/// `free` of the compiled code, and what result arrays free their buffer
/// with: a large block goes back to the cache (when it fits under the
/// limit, evicting the least recently freed blocks), anything else to free.
extern "C" void tdf_rt_free(void *pointer) {
  if (!pointer)
    return;
#if defined(__GLIBC__)
  // A block the cache handed out is at least kMinCachedBytes long: smaller
  // ones skip the lock.
  if (malloc_usable_size(pointer) < kMinCachedBytes) {
    std::free(pointer);
    return;
  }
#endif
  AllocatorState &s = allocator();
  std::vector<void *> evicted;
  bool kept = false;
  {
    std::lock_guard<std::mutex> guard(s.lock);
    auto it = s.live.find(pointer);
    if (it != s.live.end()) {
      size_t size = it->second;
      s.live.erase(it);
      bool whole = true;
#if defined(__GLIBC__)
      // Only a block at least as long as its class is ever reused (an entry
      // left behind by a block freed elsewhere never is).
      whole = malloc_usable_size(pointer) >= size;
#endif
      if (whole && s.users > 0 && size <= s.limit) {
        evictFor(s, size, evicted);
        s.cached.emplace(size, CachedBlock{pointer, ++s.sequence});
        s.cachedBytes += size;
        s.peakCachedBytes = std::max(s.peakCachedBytes, s.cachedBytes);
        ++s.stores;
        kept = true;
      } else {
        ++s.passthrough;
      }
    }
  }
  if (!kept)
    std::free(pointer);
  for (void *block : evicted)
    std::free(block);
}

void tdfpy::addAllocatorUser(int64_t delta) {
  AllocatorState &s = allocator();
  bool empty;
  {
    std::lock_guard<std::mutex> guard(s.lock);
    s.users += delta;
    empty = s.users <= 0;
  }
  if (empty)
    releaseCached();
}

void tdfpy::registerAllocator(nb::module_ &m) {
  m.def(
      "allocator_stats",
      []() {
        AllocatorState &s = allocator();
        std::lock_guard<std::mutex> guard(s.lock);
        nb::dict stats;
        stats["hits"] = s.hits;
        stats["misses"] = s.misses;
        stats["stores"] = s.stores;
        stats["evictions"] = s.evictions;
        stats["uncached_frees"] = s.passthrough;
        stats["cached_bytes"] = s.cachedBytes;
        stats["cached_blocks"] = s.cached.size();
        stats["peak_cached_bytes"] = s.peakCachedBytes;
        stats["live_blocks"] = s.live.size();
        stats["limit_bytes"] = s.limit.load();
        stats["min_block_bytes"] = kMinCachedBytes;
        stats["users"] = s.users;
        return stats;
      },
      "Counters of the caching allocator (see docs/Runtime.md).");
  m.def(
      "allocator_reset_stats",
      []() {
        AllocatorState &s = allocator();
        std::lock_guard<std::mutex> guard(s.lock);
        s.hits = s.misses = s.stores = s.evictions = s.passthrough = 0;
        s.peakCachedBytes = s.cachedBytes;
      },
      "Zeroes the caching allocator's counters.");
  m.def(
      "allocator_set_limit",
      [](uint64_t limit) {
        AllocatorState &s = allocator();
        std::vector<void *> evicted;
        size_t previous;
        {
          std::lock_guard<std::mutex> guard(s.lock);
          previous = s.limit;
          s.limit = std::min<uint64_t>(limit, kMaxRequestBytes);
          evictFor(s, 0, evicted);
        }
        for (void *block : evicted)
          std::free(block);
        return previous;
      },
      nb::arg("limit"),
      "Sets the cache's byte limit (0: cache nothing), evicting what no "
      "longer fits; returns the previous limit.");
  m.def(
      "allocator_release", []() { return releaseCached(); },
      "Frees every cached block; returns the bytes released.");
}
