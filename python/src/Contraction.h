//===- Contraction.h - the contraction descriptor of the tdf runtime ------===//
//
// What `tdf-contractions-to-blas` (`tdf_rt_contract`, Blas.cpp) and
// `tdf-contractions-to-cublas` (`tdf_gpu_contract`, GpuBlas.cpp) pass for a
// linalg contraction C (+)= A * B, decoded: each operand's base pointer and
// element type, and per loop dimension its kind (batch, M, N or K), its size
// and the stride of each operand along it; and the layout helpers both
// library routes share (unit and merged dimensions, leading dimensions, the
// bytes an operand covers).
//
//===----------------------------------------------------------------------===//

#ifndef TDF_PYTHON_SRC_CONTRACTION_H
#define TDF_PYTHON_SRC_CONTRACTION_H

#include <algorithm>
#include <cstdint>

namespace tdfrt {

enum ElementType : int { F32 = 0, F64 = 1, BF16 = 2, F16 = 3 };
enum DimKind : int { Batch = 0, M = 1, N = 2, K = 3 };
constexpr int kMaxDims = 6;

inline int64_t elementBytes(int type) {
  return type == F32 ? 4 : type == F64 ? 8 : 2;
}

struct Dim {
  int kind;
  int64_t size;
  int64_t stride[3]; // in elements, of A, B, C
};

/// A 2-d view of one operand for one call: element (r, c) at
/// base + (r * rowStride + c * colStride) elements.
struct Matrix {
  const char *base;
  int type;
  int64_t rows, cols, rowStride, colStride;
};

struct Contraction {
  const char *base[3];
  int type[3];
  bool accumulate;
  Dim dims[kMaxDims];
  int rank;
};

/// The contraction a `tdf_rt_contract`-style call describes. `flags`:
/// element types of A, B, C in bits 0-3, 4-7, 8-11 (0 f32, 1 f64, 2 bf16,
/// 3 f16), accumulate into C in bit 12, the kind of dimension i (0 batch, 1
/// M, 2 N, 3 K) in bits 16 + 2i, 17 + 2i. `pointers` and `offsets` (in
/// elements) of A, B, C; per dimension, its size and the strides of A, B
/// and C in elements (0 where the operand does not have it).
inline Contraction decodeContraction(int64_t flags, const int64_t pointers[3],
                                     const int64_t offsets[3], int64_t rank,
                                     const int64_t sizes[kMaxDims],
                                     const int64_t strides[kMaxDims][3]) {
  Contraction op;
  op.type[0] = int(flags & 15);
  op.type[1] = int((flags >> 4) & 15);
  op.type[2] = int((flags >> 8) & 15);
  op.accumulate = (flags >> 12) & 1;
  op.rank = int(std::min<int64_t>(std::max<int64_t>(rank, 0), kMaxDims));
  for (int i = 0; i < op.rank; ++i) {
    op.dims[i].kind = int((flags >> (16 + 2 * i)) & 3);
    op.dims[i].size = sizes[i];
    for (int o = 0; o < 3; ++o)
      op.dims[i].stride[o] = strides[i][o];
  }
  for (int o = 0; o < 3; ++o)
    op.base[o] = reinterpret_cast<const char *>(pointers[o]) +
                 offsets[o] * elementBytes(op.type[o]);
  return op;
}

/// The parameter list of the runtime's contraction entry points
/// (`tdf_rt_contract`, `tdf_gpu_contract`: the call `tdf-contractions-to-blas`
/// and `tdf-contractions-to-cublas` emit): `flags`, pointer and offset of A,
/// B and C, the rank, then per dimension i its size and the strides of A, B
/// and C (six dimensions, unused ones zero). Written once here so that the
/// two entry points cannot drift apart.
#define TDF_CONTRACT_PARAMETERS                                                \
  int64_t flags, int64_t a, int64_t aOffset, int64_t b, int64_t bOffset,       \
      int64_t c, int64_t cOffset, int64_t rank, int64_t s0, int64_t a0,        \
      int64_t b0, int64_t c0, int64_t s1, int64_t a1, int64_t b1, int64_t c1,  \
      int64_t s2, int64_t a2, int64_t b2, int64_t c2, int64_t s3, int64_t a3,  \
      int64_t b3, int64_t c3, int64_t s4, int64_t a4, int64_t b4, int64_t c4,  \
      int64_t s5, int64_t a5, int64_t b5, int64_t c5

/// The arguments of TDF_CONTRACT_PARAMETERS, in order.
#define TDF_CONTRACT_ARGUMENTS                                                 \
  flags, a, aOffset, b, bOffset, c, cOffset, rank, s0, a0, b0, c0, s1, a1, b1, \
      c1, s2, a2, b2, c2, s3, a3, b3, c3, s4, a4, b4, c4, s5, a5, b5, c5

/// The contraction an entry point was called with (decodeContraction of
/// TDF_CONTRACT_PARAMETERS).
inline Contraction decodeContractionCall(TDF_CONTRACT_PARAMETERS) {
  const int64_t sizes[kMaxDims] = {s0, s1, s2, s3, s4, s5};
  const int64_t strides[kMaxDims][3] = {{a0, b0, c0}, {a1, b1, c1},
                                        {a2, b2, c2}, {a3, b3, c3},
                                        {a4, b4, c4}, {a5, b5, c5}};
  const int64_t pointers[3] = {a, b, c},
                offsets[3] = {aOffset, bOffset, cOffset};
  return decodeContraction(flags, pointers, offsets, rank, sizes, strides);
}

/// Leading dimension of `m` as a BLAS operand of storage order `rowMajor`
/// with transpose flag `trans`, or -1 when that layout does not describe it.
/// A unit dimension's stride is free (any valid leading dimension).
inline int64_t leadingDim(const Matrix &m, bool rowMajor, bool trans) {
  // Row-major no-trans and column-major trans: unit column stride, the row
  // stride is the leading dimension (at least cols).
  bool rowsLead = rowMajor != trans;
  int64_t unit = rowsLead ? m.colStride : m.rowStride;
  int64_t lead = rowsLead ? m.rowStride : m.colStride;
  int64_t unitSize = rowsLead ? m.cols : m.rows;
  int64_t leadSize = rowsLead ? m.rows : m.cols;
  if (unit != 1 && unitSize > 1)
    return -1;
  int64_t least = std::max<int64_t>(1, unitSize);
  if (leadSize <= 1)
    return least;
  if (lead < least || lead > INT32_MAX)
    return -1;
  return lead;
}

/// Byte range [lo, hi) an operand covers over `dims`.
inline void byteRange(const char *base, int operand, int64_t esize,
                      const Dim *dims, int rank, const char *&lo,
                      const char *&hi) {
  int64_t low = 0, high = 0;
  for (int i = 0; i < rank; ++i) {
    int64_t extent = (dims[i].size - 1) * dims[i].stride[operand];
    (extent < 0 ? low : high) += extent;
  }
  lo = base + low * esize;
  hi = base + (high + 1) * esize;
}

/// Drops unit dimensions and merges dimensions of one kind that are
/// contiguous in every operand (outer stride = inner size * inner stride).
inline void simplify(Contraction &op) {
  int rank = 0;
  for (int i = 0; i < op.rank; ++i)
    if (op.dims[i].size != 1)
      op.dims[rank++] = op.dims[i];
  op.rank = rank;
  bool merged = true;
  while (merged) {
    merged = false;
    for (int x = 0; x < op.rank && !merged; ++x)
      for (int y = 0; y < op.rank && !merged; ++y) {
        Dim &outer = op.dims[x], &inner = op.dims[y];
        if (x == y || outer.kind != inner.kind)
          continue;
        bool contiguous = true;
        for (int o = 0; o < 3; ++o)
          contiguous &= outer.stride[o] == inner.size * inner.stride[o];
        if (!contiguous)
          continue;
        inner.size *= outer.size;
        op.dims[x] = op.dims[--op.rank];
        merged = true;
      }
  }
}

/// The dimension of `kind` the GEMM takes: a unit stride in the operands
/// that have it first, then the largest. -1 when there is none.
inline int pickCore(const Contraction &op, int kind) {
  int best = -1;
  int64_t bestScore = -1;
  for (int i = 0; i < op.rank; ++i) {
    const Dim &d = op.dims[i];
    if (d.kind != kind)
      continue;
    int units = 0;
    for (int o = 0; o < 3; ++o)
      units += d.stride[o] == 1;
    // Units dominate, size breaks ties.
    int64_t score =
        int64_t(units) << 56 | std::min<int64_t>(d.size, (int64_t(1) << 55));
    if (score > bestScore) {
      bestScore = score;
      best = i;
    }
  }
  return best;
}

} // namespace tdfrt

#endif // TDF_PYTHON_SRC_CONTRACTION_H
