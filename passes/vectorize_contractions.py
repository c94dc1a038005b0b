"""``tdf-vectorize-contractions``: GEMMs on memrefs as register-blocked vector
code, instead of the scalar triple loop that ``convert-linalg-to-loops``
makes of them.

Runs after bufferization (and, in ``tdf-lower-to-cpu``, after
``tdf-share-loop-nests``, so that identical GEMMs are one function, emitted
once), right before ``convert-linalg-to-loops``. Every GEMM
``C[m, n] += A[m, k] * B[k, n]`` on static f32/f64 memrefs -- a
``linalg.matmul`` with its default maps, or a ``linalg.contract`` /
contraction ``linalg.generic`` with the same maps in any loop order (what
the JAX frontend's ``dot_general`` becomes) -- whose B and C rows are
contiguous (innermost stride 1; A may have any strides) is replaced by the
micro-kernel scheme of tuned BLAS libraries, written directly in the vector
dialect:

- C is cut into blocks of ``rows`` rows and two vector registers of columns
  (``vector-bits``, by default the machine's: 512 on AVX-512, 32 f32 or 16
  f64 columns; ``rows`` by default 8 there, 6 with 16 registers); the last
  block of rows and of columns takes what is left (any size: no masks, no
  remainder loops of scalars);
- each block of C is loaded into ``rows`` vectors once, then a loop over k
  loads one row of B's block and, per row of the block, broadcasts
  ``A[i, k]`` and accumulates with ``vector.fma``; the block is stored
  after the loop. The accumulators stay in registers for the whole
  reduction (2 x ``rows`` registers of ``vector-bits``; 8 x 2 of AVX-512's
  32 registers by default).

An operand that may share bytes with C (one root -- an allocation or
argument under views -- other than two disjoint slots of a planned arena),
a dynamic shape, a transposed operand, an
integer or mixed element type, a batch dimension and non-unit innermost
strides of B or C leave the op alone (it stays loops, or is the BLAS's
when ``tdf-contractions-to-blas`` runs first: that pass leaves to this one
exactly the GEMMs :func:`gemm_sizes` accepts, when they are small).
``remarks`` reports each matmul left alone. Statistic ``vectorized``.

Before::

    linalg.matmul ins(%a, %b : memref<16x64xf32>, memref<64x64xf32>)
                  outs(%c : memref<16x64xf32>)

After (sketch, ``rows=8 vector-bits=512``)::

    scf.for %i = %c0 to %c16 step %c8 {
      scf.for %j = %c0 to %c64 step %c32 {
        %c0v = vector.load %c[%i, %j] : memref<16x64xf32>, vector<32xf32>
        ... 8 rows ...
        %acc:8 = scf.for %k = %c0 to %c64 step %c1 iter_args(...) {
          %bv = vector.load %b[%k, %j] : memref<64x64xf32>, vector<32xf32>
          %a0 = memref.load %a[%i, %k] : memref<16x64xf32>
          %a0v = vector.broadcast %a0 : f32 to vector<32xf32>
          %f0 = vector.fma %a0v, %bv, %acc0 : vector<32xf32>
          ... 8 rows ...
        }
        vector.store %acc#0, %c[%i, %j] ...
"""

from __future__ import annotations

import functools

from mlir import ir
from mlir.dialects import arith, memref, scf, vector

from .analysis.contractions import Contraction, K, M, N, classify, dim_positions, is_strided
from .ir_utils import collect_ops, iterator_types, may_share_storage
from .registry import PassContext, PassOption, register_pass

__all__ = ["vectorize_contractions", "gemm_sizes", "is_gemm", "host_vector_bits", "ROWS_FOR_BITS"]

_OPS = ("linalg.matmul", "linalg.contract", "linalg.generic")
#: Rows of a block of C by vector register width (option ``rows=0``): 2 x
#: rows accumulators, plus B's row and a broadcast, fit AVX-512's 32
#: registers and AVX2's / SSE's 16.
ROWS_FOR_BITS = {512: 8, 256: 6, 128: 6}


def is_gemm(op, found: Contraction | None = None) -> bool:
    """Whether ``op`` is ``C[m, n] += A[m, k] * B[k, n]`` over three loops
    (a ``linalg.matmul`` with its default maps, or a ``linalg.contract`` /
    contraction ``linalg.generic`` with the same maps up to the loop order)
    with A, B and C of one element type. ``found``: ``classify(op)``, when
    the caller has it already."""
    if op.name == "linalg.matmul" and "indexing_maps" not in op.attributes:
        return len(op.regions) == 1 and len({str(_element(v)) for v in op.operands}) == 1
    if op.name not in _OPS:
        return False
    if op.name == "linalg.generic" and "reduction" not in (iterator_types(op) or []):
        return False  # element-wise: the common case, decided without classify
    gemm = found if found is not None else classify(op)
    if isinstance(gemm, str) or sorted(gemm.kinds) != [M, N, K]:
        return False
    if len(set(gemm.types)) != 1:
        return False
    m, n, k = (gemm.kinds.index(kind) for kind in (M, N, K))
    return [dim_positions(amap) for amap in gemm.maps] == [[m, k], [k, n], [m, n]]


def _element(value):
    t = value.type
    return ir.MemRefType(t).element_type if isinstance(t, ir.MemRefType) else None


def _unit_inner_stride(t: ir.MemRefType) -> bool:
    try:
        strides, _ = t.get_strides_and_offset()
    except RuntimeError:  # not a strided layout
        return False
    return strides[-1] == 1


def gemm_sizes(op, found: Contraction | None = None) -> tuple[int, int, int] | None:
    """(M, N, K) of a GEMM this pass vectorizes (see the module docstring);
    None for any other op (``found``: as for :func:`is_gemm`).
    ``tdf-contractions-to-blas`` leaves the small ones to this pass."""
    operands = list(op.operands)
    if len(operands) != 3 or not all(isinstance(v.type, ir.MemRefType) for v in operands):
        return None
    a, b, c = (ir.MemRefType(v.type) for v in operands)
    if str(c.element_type) not in ("f32", "f64") or not is_gemm(op, found):
        return None
    if not all(t.has_static_shape and t.rank == 2 for t in (a, b, c)):
        return None
    if not (is_strided(a) and _unit_inner_stride(b) and _unit_inner_stride(c)):
        return None
    if may_share_storage(operands[0], operands[2]) or may_share_storage(operands[1], operands[2]):
        return None
    sizes = a.shape[0], b.shape[1], a.shape[1]
    return sizes if min(sizes) > 0 else None


@functools.cache
def host_vector_bits() -> int:
    """The widest vector registers of this machine (LLVM's host CPU
    features): 512 with AVX-512, 256 with AVX, else 128."""
    from tdf import _tdf

    features = set(_tdf.host_cpu().split()[-1].split(","))
    if "+avx512f" in features:
        return 512
    return 256 if "+avx" in features else 128


def _index(n: int):
    return arith.constant(ir.IndexType.get(), n)


def _blocks(size: int, step: int) -> list[tuple[int, int, int]]:
    """(start, count, width) of the full blocks of ``step`` and the rest."""
    full, rest = divmod(size, step)
    blocks = [(0, full, step)] if full else []
    if rest:
        blocks.append((full * step, 1, rest))
    return blocks


def _loop(start: int, count: int, width: int, body) -> None:
    """``body(position)`` for ``count`` blocks of ``width`` from ``start``:
    straight-line code for one block, an ``scf.for`` for several."""
    if count == 1:
        body(_index(start))
        return
    loop = scf.ForOp(_index(start), _index(start + count * width), _index(width))
    with ir.InsertionPoint(loop.body):
        body(loop.induction_variable)
        scf.YieldOp([])


def _emit_block(a, b, c, k_size: int, i, j, rows: int, width: int) -> None:
    """One ``rows`` x ``width`` block of C at (i, j): loaded, accumulated
    over k in registers, stored."""
    element = ir.MemRefType(c.type).element_type
    vtype = ir.VectorType.get([width], element)
    row_index = [i] + [arith.addi(i, _index(r)) for r in range(1, rows)]
    acc = [vector.load(vtype, c, [row_index[r], j]) for r in range(rows)]
    loop = scf.ForOp(_index(0), _index(k_size), _index(1), acc)
    with ir.InsertionPoint(loop.body):
        k = loop.induction_variable
        bv = vector.load(vtype, b, [k, j])
        updated = []
        for r in range(rows):
            av = vector.broadcast(vtype, memref.load(a, [row_index[r], k]))
            updated.append(vector.fma(av, bv, loop.inner_iter_args[r]))
        scf.YieldOp(updated)
    for r in range(rows):
        vector.store(loop.results[r], c, [row_index[r], j])


def _emit(op, sizes, rows: int, vector_bits: int) -> None:
    m_size, n_size, k_size = sizes
    a, b, c = list(op.operands)
    element_bits = 64 if str(_element(c)) == "f64" else 32
    columns = max(1, 2 * vector_bits // element_bits)
    with ir.InsertionPoint(op), op.location:
        for r0, rcount, height in _blocks(m_size, rows):
            for c0, ccount, width in _blocks(n_size, columns):
                def body(i, c0=c0, ccount=ccount, width=width, height=height):
                    _loop(c0, ccount, width,
                          lambda j: _emit_block(a, b, c, k_size, i, j, height, width))
                _loop(r0, rcount, height, body)
    op.operation.erase()


@register_pass(
    "tdf-vectorize-contractions",
    "GEMMs on static f32/f64 memrefs (matmul, contraction generics) as "
    "register-blocked vector code (vector.fma over blocks of C kept in registers)",
    options=[PassOption("rows", int, 0, "Rows of a block of C (0: 8 for 512-bit vectors, else 6)"),
             PassOption("vector-bits", int, 0,
                        "Vector register width in bits, 128, 256 or 512 (0: this machine's "
                        "widest); a block is two registers wide"),
             PassOption("remarks", bool, False, "A remark for every matmul left as loops")],
    statistics=[("vectorized", "GEMMs replaced by vector code")],
)
def vectorize_contractions(op, ctx: PassContext) -> None:
    """See the module docstring. Ops on tensors (not yet bufferized) or on
    other element types are left alone."""
    rows, bits = ctx.option("rows"), ctx.option("vector-bits")
    if not 0 <= rows <= 32:
        ctx.error(op, f"rows must be in 0..32, got {rows}")
        return
    if bits not in (0, 128, 256, 512):
        ctx.error(op, f"vector-bits must be 0, 128, 256 or 512, got {bits}")
        return
    bits = bits or host_vector_bits()
    rows = rows or ROWS_FOR_BITS[bits]
    done = 0
    for target in collect_ops(op, _OPS):
        sizes = gemm_sizes(target)
        if sizes is None:
            if ctx.option("remarks") and target.name == "linalg.matmul":
                ctx.remark(target, "not vectorized: not a GEMM on static f32/f64 memrefs with "
                                   "contiguous rows of B and C (the op stays loops)")
            continue
        _emit(target, sizes, rows, bits)
        done += 1
    if done:
        ctx.statistic("vectorized", done)
