//===- Sort.cpp - the stable sort permutation of compiled code -----------===//
//
// `tdf_rt_sort`: the kernel `tdf.jax.jit`'s `sort`/`top_k` translation calls
// (through `tdf.call`, bufferized to a `func.call` whose memref arguments are
// passed as expanded descriptors: allocated pointer, aligned pointer, offset,
// sizes, strides). Its operands:
//
// - `keys`, i64 [K, R, N]: K sort keys for R rows of N elements, each an
//   integer whose signed order is the order wanted (the frontend maps floats,
//   unsigned and narrow integers to such keys);
// - `perm`, i64 [R, M] with M <= N: written with the first M positions of
//   each row's stable lexicographic ascending order (ties keep their index
//   order), i.e. the indices every operand is then gathered with.
//
// Rows are sorted by an LSD radix sort (linear time: four stable 8-bit passes
// per key that fits 32 bits, every key of a 32-bit-or-narrower dtype, eight
// for wider ones); when only a few leading positions are wanted (M <= N / 16,
// top_k) by std::partial_sort of the indices with the lexicographic
// (keys..., index) order, O(N log M).
// Scratch memory comes from malloc; a failed allocation reports through
// `tdf_rt_alloc_error` (longjmp to the call's trampoline: MemoryError).
//
//===----------------------------------------------------------------------===//

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <limits>

extern "C" void tdf_rt_alloc_error(int64_t site, int64_t bytes);

namespace {

/// A strided i64 array of rank 3 or 2 (a memref descriptor's data part).
struct Keys {
  const int64_t *data;
  int64_t count, rows, n, s0, s1, s2;
  int64_t at(int64_t k, int64_t r, int64_t i) const {
    return data[k * s0 + r * s1 + i * s2];
  }
};

struct Perm {
  int64_t *data;
  int64_t rows, m, s0, s1;
  int64_t &at(int64_t r, int64_t i) const { return data[r * s0 + i * s1]; }
};

/// malloc'd scratch, freed on every exit (the failure path frees it before
/// the longjmp: no destructor runs there).
struct Scratch {
  void *blocks[2] = {nullptr, nullptr};
  template <typename T> T *get(int slot, int64_t count) {
    int64_t bytes = std::max<int64_t>(count, 1) * int64_t(sizeof(T));
    blocks[slot] = std::malloc(size_t(bytes));
    if (!blocks[slot]) {
      release();
      tdf_rt_alloc_error(-1, bytes);
    }
    return static_cast<T *>(blocks[slot]);
  }
  void release() {
    for (void *&b : blocks) {
      std::free(b);
      b = nullptr;
    }
  }
  ~Scratch() { release(); }
};

struct Item {
  uint64_t key;  // the key biased to unsigned order
  int64_t index; // the element's position in its row
};

/// Whether key `k` of row `r` fits in int32 (four radix digits suffice).
bool fits32(const Keys &keys, int64_t k, int64_t r) {
  constexpr int64_t lo = std::numeric_limits<int32_t>::min();
  constexpr int64_t hi = std::numeric_limits<int32_t>::max();
  for (int64_t i = 0; i < keys.n; ++i) {
    int64_t v = keys.at(k, r, i);
    if (v < lo || v > hi)
      return false;
  }
  return true;
}

/// One row by LSD radix sort: the keys from the last to the first, each by
/// stable counting-sort passes over its 8-bit digits (4 for a key that fits
/// 32 bits, else 8; a pass whose digit is the same everywhere is skipped).
/// Stable passes from the least significant key on give the lexicographic
/// order with ties in index order.
void radixRow(const Keys &keys, const Perm &perm, int64_t r, Item *a, Item *b) {
  for (int64_t i = 0; i < keys.n; ++i)
    a[i].index = i;
  for (int64_t k = keys.count - 1; k >= 0; --k) {
    bool narrow = fits32(keys, k, r);
    uint64_t bias = narrow ? 0x80000000u : 0x8000000000000000u;
    for (int64_t i = 0; i < keys.n; ++i) {
      int64_t v = keys.at(k, r, a[i].index);
      uint64_t bits = narrow ? uint64_t(uint32_t(int32_t(v))) : uint64_t(v);
      a[i].key = bits ^ bias;
    }
    for (int shift = 0; shift < (narrow ? 32 : 64); shift += 8) {
      int64_t start[257] = {0};
      for (int64_t i = 0; i < keys.n; ++i)
        ++start[((a[i].key >> shift) & 0xff) + 1];
      if (start[((a[0].key >> shift) & 0xff) + 1] == keys.n)
        continue; // one digit value: the pass would not move anything
      for (int d = 0; d < 256; ++d)
        start[d + 1] += start[d];
      for (int64_t i = 0; i < keys.n; ++i)
        b[start[(a[i].key >> shift) & 0xff]++] = a[i];
      std::swap(a, b);
    }
  }
  for (int64_t i = 0; i < perm.m; ++i)
    perm.at(r, i) = a[i].index;
}

/// The first `perm.m` positions of one row by std::partial_sort of the
/// indices with the lexicographic (keys..., index) order: O(n log m), for
/// a few of many (top_k).
void partialRow(const Keys &keys, const Perm &perm, int64_t r, int64_t *index) {
  for (int64_t i = 0; i < keys.n; ++i)
    index[i] = i;
  auto less = [&](int64_t x, int64_t y) {
    for (int64_t k = 0; k < keys.count; ++k) {
      int64_t a = keys.at(k, r, x), b = keys.at(k, r, y);
      if (a != b)
        return a < b;
    }
    return x < y;
  };
  std::partial_sort(index, index + perm.m, index + keys.n, less);
  for (int64_t i = 0; i < perm.m; ++i)
    perm.at(r, i) = index[i];
}

} // namespace

extern "C" void tdf_rt_sort(int64_t *, int64_t *keysData, int64_t keysOffset,
                            int64_t count, int64_t rows, int64_t n,
                            int64_t keysStride0, int64_t keysStride1,
                            int64_t keysStride2, int64_t *, int64_t *permData,
                            int64_t permOffset, int64_t permRows, int64_t m,
                            int64_t permStride0, int64_t permStride1) {
  if (rows <= 0 || n <= 0 || m <= 0 || count <= 0 || permRows != rows || m > n)
    return;
  Keys keys{keysData + keysOffset, count,       rows,       n,
            keysStride0,           keysStride1, keysStride2};
  Perm perm{permData + permOffset, rows, m, permStride0, permStride1};
  Scratch scratch;
  if (m * 16 <= n) {
    int64_t *index = scratch.get<int64_t>(0, n);
    for (int64_t r = 0; r < rows; ++r)
      partialRow(keys, perm, r, index);
    return;
  }
  Item *a = scratch.get<Item>(0, n);
  Item *b = scratch.get<Item>(1, n);
  for (int64_t r = 0; r < rows; ++r)
    radixRow(keys, perm, r, a, b);
}
