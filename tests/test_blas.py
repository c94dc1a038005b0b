"""Contractions through the BLAS (tdf-specialize-contractions,
tdf-contractions-to-blas, the runtime's tdf_rt_contract) against numpy
(float64 einsum), jax.jit and the same program with the BLAS switched off:

- the runtime on random contractions: up to six loop dimensions of every
  kind (batch, M, N, K, several of one kind), sizes 0-5, operands stored
  transposed and with non-unit steps (leading dimensions, packing), f32,
  f64 and bf16/f16 inputs, accumulate or overwrite, and a result that
  overlaps an input (computed through a temporary, never handed to the
  library overlapping);
- the compiled route: JAX contractions (x @ w.T, attention einsums,
  batched, mat-vec, bf16 inputs) and MLIR programs with strided slices,
  dynamic and zero sizes, all equal to the BLAS-off build and to jax.jit,
  non-donated inputs unchanged, a transpose folded into the call (no
  linalg.transpose left), concurrent calls from several threads;
- f32 and bf16 GEMMs through oneDNN (``dnnl_sgemm``,
  ``dnnl_gemm_bf16bf16f32``, and the matmul primitive for a GEMM that
  overwrites C, bf16 or with a transposed operand): every operand
  layout (transposed, leading dimensions, packed, column-major result),
  accumulate or overwrite, a result overlapping an input, several threads;
- flush-to-zero: subnormal results are 0 as in jax.jit (contractions too,
  whichever library thread computed them), kept with
  ``flush_denormals=False``.
"""

from __future__ import annotations

import ctypes
import threading

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tdf
import tdf.jax
from tdf import _tdf, blas
from tdf.passes.contractions_to_blas import contraction_flags

pytestmark = pytest.mark.skipif(not blas.available(), reason="no BLAS (scipy-openblas32)")

_CONTRACT = ctypes.CFUNCTYPE(None, *[ctypes.c_int64] * 32)(
    _tdf.runtime_symbols()["tdf_rt_contract"])
_DTYPES = {"f32": np.float32, "f64": np.float64, "bf16": ml_dtypes.bfloat16,
           "f16": np.float16}
_LETTERS = "abcdef"
# Operands that carry each kind: batch A B C, M A C, N B C, K A B.
_HAS = {0: (0, 1, 2), 1: (0, 2), 2: (1, 2), 3: (0, 1)}


def _operand(rng, dims, sizes, dtype, step, permute):
    """A random array over loop dimensions ``dims`` (in a random storage
    order, with a step of ``step`` along one axis when ``step``): (view,
    its einsum letters in view order)."""
    order = list(dims)
    if permute:
        rng.shuffle(order)
    shape = [sizes[d] for d in order]
    big = [s * (step if i == 0 and step else 1) for i, s in enumerate(shape)]
    base = np.asarray(rng.standard_normal(big)).astype(dtype)
    view = base[tuple(slice(None, None, step) if i == 0 and step else slice(None)
                      for i in range(len(big)))] if big else base
    return view, order


def _strides(view, order, dims):
    """Element stride of ``view`` along each loop dimension (0 where absent)."""
    item = view.dtype.itemsize
    return {d: view.strides[order.index(d)] // item for d in dims}


def _call(flags, views, orders, sizes, kinds):
    args = [flags]
    for v in views:
        args += [v.ctypes.data, 0]
    args.append(len(kinds))
    for d in range(6):
        if d >= len(kinds):
            args += [0, 0, 0, 0]
            continue
        args.append(sizes[d])
        for v, order in zip(views, orders):
            args.append(_strides(v, order, [d])[d] if d in order else 0)
    _CONTRACT(*args)


def _reference(views, orders, c_before, accumulate):
    eq = ",".join("".join(_LETTERS[d] for d in o) for o in orders[:2]) + "->" + \
        "".join(_LETTERS[d] for d in orders[2])
    a, b = (np.asarray(v, np.float64) for v in views[:2])
    out = np.einsum(eq, a, b) if a.size and b.size else np.zeros(c_before.shape)
    return out + (c_before.astype(np.float64) if accumulate else 0)


@st.composite
def contractions(draw):
    rank = draw(st.integers(1, 6))
    kinds = draw(st.lists(st.sampled_from([0, 1, 2, 3]), min_size=rank, max_size=rank))
    sizes = draw(st.lists(st.integers(0, 5), min_size=rank, max_size=rank))
    ctype = draw(st.sampled_from(["f32", "f64"]))
    itype = draw(st.sampled_from(["f32", "bf16", "f16"])) if ctype == "f32" else "f64"
    steps = draw(st.lists(st.sampled_from([0, 0, 2, 3]), min_size=3, max_size=3))
    permute = draw(st.lists(st.booleans(), min_size=3, max_size=3))
    accumulate = draw(st.booleans())
    seed = draw(st.integers(0, 2**16))
    return kinds, sizes, ctype, itype, steps, permute, accumulate, seed


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(contractions())
def test_runtime_matches_einsum(case):
    kinds, sizes, ctype, itype, steps, permute, accumulate, seed = case
    rng = np.random.default_rng(seed)
    dims = [[d for d, k in enumerate(kinds) if o in _HAS[k]] for o in range(3)]
    types = (itype, itype, ctype)
    views, orders = [], []
    for o in range(3):
        v, order = _operand(rng, dims[o], sizes, _DTYPES[types[o]], steps[o], permute[o])
        views.append(v)
        orders.append(order)
    c_before = np.array(views[2], copy=True)
    inputs = [np.array(v, copy=True) for v in views[:2]]
    _call(contraction_flags(types, kinds, accumulate), views, orders, sizes, kinds)
    expected = _reference(inputs, orders, c_before, accumulate)
    tol = 2e-2 if itype in ("bf16", "f16") else 1e-4
    np.testing.assert_allclose(np.asarray(views[2], np.float64), expected, rtol=tol, atol=tol)
    for v, before in zip(views[:2], inputs):  # inputs are never written
        assert np.array_equal(np.asarray(v), before, equal_nan=True)


@pytest.mark.parametrize("accumulate", [False, True])
@pytest.mark.parametrize("where", ["a", "b"])
def test_runtime_result_overlapping_an_input(where, accumulate):
    """C shares memory with A (or B): the runtime computes into a temporary
    from the inputs as they were before the call."""
    rng = np.random.default_rng(1)
    buf = rng.standard_normal(64 * 64).astype(np.float32)
    c = buf[:32 * 32].reshape(32, 32)
    other = rng.standard_normal((32, 32)).astype(np.float32)
    shared = buf[16:16 + 32 * 32].reshape(32, 32)  # overlaps c
    a, b = (shared, other) if where == "a" else (other, shared)
    a0, b0, c0 = a.copy(), b.copy(), c.copy()
    kinds = [1, 2, 3]  # m n k
    orders = [[0, 2], [2, 1], [0, 1]]
    _call(contraction_flags(("f32",) * 3, kinds, accumulate), [a, b, c], orders,
          [32, 32, 32], kinds)
    expected = a0.astype(np.float64) @ b0 + (c0 if accumulate else 0)
    np.testing.assert_allclose(c, expected, rtol=1e-4, atol=1e-4)


def test_onednn_is_loaded():
    assert blas.onednn_path(), (
        f"oneDNN (onednn-cpu-gomp) is a pinned requirement: {blas.onednn_error()}")
    assert blas.onednn_error() is None


# A: M x K, B: K x N, C: M x N as (storage order, step) per operand:
# "rm" row-major, "cm" column-major (the transpose stored), step 2 = every
# other element along the unit axis (no BLAS layout: packed).
_LAYOUTS = [
    ("rm", "rm", "rm", 1), ("cm", "rm", "rm", 1), ("rm", "cm", "rm", 1),
    ("cm", "cm", "rm", 1), ("rm", "rm", "cm", 1), ("cm", "rm", "cm", 1),
    ("rm", "rm", "rm", 2), ("cm", "cm", "cm", 2),
]


def _matrix(rng, rows, cols, order, step, dtype):
    shape = (rows, cols * step) if order == "rm" else (cols, rows * step)
    base = rng.standard_normal(shape).astype(dtype)
    view = base[:, ::step]
    return view if order == "rm" else view.T


@pytest.mark.parametrize("size", ["small", "large"])
@pytest.mark.parametrize("accumulate", [False, True])
@pytest.mark.parametrize("layout", _LAYOUTS, ids=lambda la: "-".join(map(str, la)))
@pytest.mark.parametrize("itype", ["f32", "bf16"])
def test_onednn_gemm_layouts(itype, layout, accumulate, size):
    """f32 or bf16 A and B, f32 C of every storage order, with leading
    dimensions larger than the rows and strided columns, against float64;
    small (oneDNN's GEMM calls) and from 2^26 flops (its matmul primitive
    where that applies)."""
    rng = np.random.default_rng(3)
    m, n, k = (67, 45, 130) if size == "small" else (261, 301, 430)
    a = _matrix(rng, m, k, layout[0], layout[3], _DTYPES[itype])
    b = _matrix(rng, k, n, layout[1], layout[3], _DTYPES[itype])
    c = _matrix(rng, m, n, layout[2], 1, np.float32)
    a0, b0, c0 = a.copy(), b.copy(), c.copy()
    kinds = [1, 2, 3]  # m n k
    orders = [[0, 2], [2, 1], [0, 1]]
    expected = a0.astype(np.float64) @ b0.astype(np.float64) + (c0 if accumulate else 0)
    primitive_calls = _tdf.blas_matmul_primitive_calls()
    _call(contraction_flags((itype, itype, "f32"), kinds, accumulate), [a, b, c], orders,
          [m, n, k], kinds)
    np.testing.assert_allclose(c, expected, rtol=1e-5, atol=1e-4)
    assert np.array_equal(a, a0) and np.array_equal(b, b0)
    # GEMMs that overwrite C run oneDNN's matmul primitive when bf16 or when
    # an operand is transposed (each operand described by its strides); the
    # others its GEMM calls. A column-major C is computed as C^T = B^T A^T;
    # an operand with strided columns (step 2) is packed row-major first.
    a_order, b_order = layout[0], layout[1]
    if layout[2] == "cm":
        flip = {"rm": "cm", "cm": "rm"}
        a_order, b_order = flip[b_order], flip[a_order]
    transposed = layout[3] == 1 and "cm" in (a_order, b_order)
    used = _tdf.blas_matmul_primitive_calls() > primitive_calls
    assert used == (size == "large" and not accumulate and bool(blas.onednn_path())
                    and (itype == "bf16" or transposed))


# Loop dimensions: batch 0 (3), batch 1 (4), M 2, N 3, K 4; storage orders of
# A, B, C (outermost first). Each GEMM (96x64 by 64x80) is too small for two
# threads, the 12 together are not.
_BATCH_KINDS = [0, 0, 1, 2, 3]
_BATCH_SIZES = [3, 4, 96, 80, 64]
_BATCH_ORDERS = {
    "row_major": ([0, 1, 2, 4], [0, 1, 4, 3], [0, 1, 2, 3]),
    "b_transposed": ([0, 1, 2, 4], [0, 1, 3, 4], [0, 1, 2, 3]),
    "a_transposed_c_column_major": ([0, 1, 4, 2], [0, 1, 4, 3], [0, 1, 3, 2]),
    "batches_swapped_in_c": ([0, 1, 2, 4], [1, 0, 4, 3], [1, 0, 2, 3]),
    "c_rows_interleaved": ([0, 1, 2, 4], [0, 1, 4, 3], [2, 0, 1, 3]),
}


def _batch_call(itype, orders, accumulate, kinds=_BATCH_KINDS, sizes=_BATCH_SIZES, seed=5):
    rng = np.random.default_rng(seed)
    types = (itype, itype, "f32")
    views = [rng.standard_normal([sizes[d] for d in order]).astype(_DTYPES[t])
             for order, t in zip(orders, types)]
    before = [v.copy() for v in views]
    _call(contraction_flags(types, kinds, accumulate), views, list(orders), sizes, kinds)
    expected = _reference(before[:2], list(orders), before[2], accumulate)
    tol = 1e-3 if itype == "f32" else 2e-2
    np.testing.assert_allclose(views[2], expected, rtol=tol, atol=tol)
    assert all(np.array_equal(v, b) for v, b in zip(views[:2], before[:2]))


@pytest.mark.parametrize("accumulate", [False, True])
@pytest.mark.parametrize("orders", list(_BATCH_ORDERS.values()), ids=list(_BATCH_ORDERS))
@pytest.mark.parametrize("itype", ["f32", "bf16"])
def test_batch_of_small_gemms_on_threads(itype, orders, accumulate):
    """A batch whose GEMMs are each too small for two threads runs them on
    oneDNN's threads, one GEMM per thread at a time, when the steps write
    disjoint parts of C (an interleaving of C's rows across steps runs them
    one after the other): every storage order, against float64."""
    threaded = _tdf.blas_threaded_batches()
    _batch_call(itype, orders, accumulate)
    ran_on_threads = _tdf.blas_threaded_batches() > threaded
    # (f32 batches that merge into one batch dimension go to OpenBLAS's
    # strided batch instead.)
    if itype == "bf16":
        assert ran_on_threads == (blas.default_threads() > 1 and orders[2][0] != 2)


def test_batch_summing_over_an_outer_dimension():
    """An outer K dimension: its steps accumulate into the same C, one after
    the other (never on several threads at once)."""
    kinds, sizes = [3, 0, 1, 2, 3], [4, 3, 96, 80, 64]
    orders = ([0, 1, 2, 4], [0, 1, 4, 3], [1, 2, 3])
    threaded = _tdf.blas_threaded_batches()
    for itype in ("f32", "bf16"):
        _batch_call(itype, orders, False, kinds, sizes)
    assert _tdf.blas_threaded_batches() == threaded


@pytest.mark.parametrize("accumulate", [False, True])
@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_small_batch_runs_step_by_step_on_the_calling_thread(dtype, accumulate):
    """A batch one thread suffices for (a decode step's attention: 2 x
    4x32 by 32x512, B transposed) runs step by step, not through OpenBLAS's
    strided-batch entry point, which spreads the steps over its threads
    whatever the thread count and then waits for them; a batch worth
    several threads still takes it. Against float64 einsum, inputs
    unchanged."""
    kinds = [0, 1, 2, 3]  # batch, M, N, K
    orders = ([0, 1, 3], [0, 2, 3], [0, 1, 2])
    for sizes, strided in (([2, 4, 512, 32], False), ([8, 256, 256, 256], True)):
        rng = np.random.default_rng(21)
        views = [rng.standard_normal([sizes[d] for d in order]).astype(_DTYPES[dtype])
                 for order in orders]
        before = [v.copy() for v in views]
        calls = _tdf.blas_strided_batches()
        _call(contraction_flags((dtype,) * 3, kinds, accumulate), views, list(orders), sizes,
              kinds)
        expected = _reference(before[:2], list(orders), before[2], accumulate)
        np.testing.assert_allclose(views[2], expected, rtol=1e-4, atol=1e-3)
        assert all(np.array_equal(v, b) for v, b in zip(views[:2], before[:2]))
        assert (_tdf.blas_strided_batches() > calls) == strided, sizes


@pytest.mark.parametrize("accumulate", [False, True])
def test_bf16_result_overlapping_an_input(accumulate):
    """C (f32) shares bytes with the bf16 A: computed from A as it was."""
    rng = np.random.default_rng(4)
    raw = np.zeros(40 * 40 * 4, np.uint8)
    c = raw[:32 * 32 * 4].view(np.float32).reshape(32, 32)
    a = raw[256:256 + 32 * 48 * 2].view(ml_dtypes.bfloat16).reshape(32, 48)
    c[...] = rng.standard_normal((32, 32))
    a[...] = rng.standard_normal((32, 48)).astype(ml_dtypes.bfloat16)
    assert np.shares_memory(a, c)
    b = rng.standard_normal((48, 32)).astype(ml_dtypes.bfloat16)
    a0, c0 = a.copy(), c.copy()
    kinds = [1, 2, 3]
    _call(contraction_flags(("bf16", "bf16", "f32"), kinds, accumulate), [a, b, c],
          [[0, 2], [2, 1], [0, 1]], [32, 32, 48], kinds)
    expected = a0.astype(np.float64) @ b.astype(np.float64) + (c0 if accumulate else 0)
    np.testing.assert_allclose(c, expected, rtol=1e-5, atol=1e-4)


# ----------------------------------------------------------- compiled route


JAX_CASES = {
    "matvec": ("ij,j->i", (24, 40), (40,)),
    "vecmat": ("i,ij->j", (40,), (40, 24)),
    "matmul": ("ij,jk->ik", (33, 20), (20, 13)),
    "x_wT": ("ij,kj->ik", (8, 64), (96, 64)),
    "xT_y": ("ji,jk->ik", (40, 12), (40, 17)),
    "scores": ("bhqd,bhkd->bhqk", (2, 3, 5, 16), (2, 3, 7, 16)),
    "values": ("bhqk,bhkd->bhqd", (2, 3, 5, 7), (2, 3, 7, 16)),
    "dense_3d": ("bsd,df->bsf", (2, 5, 16), (16, 24)),
    "rhs_fcb": ("bij,kjb->bik", (3, 5, 7), (9, 7, 3)),
    "two_contracting": ("ijk,ljk->il", (4, 5, 6), (3, 5, 6)),
    "zero_k": ("ij,jk->ik", (4, 0), (0, 5)),
    "zero_m": ("ij,jk->ik", (0, 3), (3, 5)),
}


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("name", sorted(JAX_CASES))
def test_jax_contractions_through_blas(name, dtype):
    eq, a_shape, b_shape = JAX_CASES[name]
    rng = np.random.default_rng(7)
    a = rng.standard_normal(a_shape).astype(np.float32).astype(jnp.dtype(dtype))
    b = rng.standard_normal(b_shape).astype(np.float32).astype(jnp.dtype(dtype))
    out = jnp.float32 if dtype == "bfloat16" else None

    def fn(x, y):
        return jnp.einsum(eq, x, y, preferred_element_type=out)

    lowered = tdf.jax.jit(fn).lower(a, b)
    # Every contraction through the libraries (codegen_flops=0: these are
    # small GEMMs, which the default build compiles where it can), the
    # default build, and no library at all.
    on, default, off = (lowered.compile(codegen_flops=0), lowered.compile(),
                        lowered.compile(blas=False))
    a0, b0 = a.copy(), b.copy()
    got = np.asarray(on.main(a, b))
    base = np.asarray(off.main(a, b))
    ref = np.asarray(jax.jit(fn)(a, b))
    exact = np.einsum(eq, a.astype(np.float64), b.astype(np.float64))
    assert got.dtype == ref.dtype and got.shape == ref.shape
    np.testing.assert_allclose(got, exact, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got, base, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np.asarray(default.main(a, b)), exact, rtol=1e-4, atol=1e-4)
    assert np.array_equal(a, a0) and np.array_equal(b, b0)
    if a.size and b.size and got.size:
        assert "tdf_rt_contract" in on.llvm_ir
        assert "tdf_rt_contract" not in off.llvm_ir


def test_transpose_is_folded_not_copied():
    """x @ w.T: the transpose JAX emits is folded into the call's layout."""
    x = np.ones((4, 32), np.float32)
    w = np.arange(64 * 32, dtype=np.float32).reshape(64, 32) / 1000
    prog = tdf.jax.jit(lambda x, w: x @ w.T).lower(x, w).compile()
    assert "linalg.transpose" not in prog.buffer_ir
    assert "memref.copy" not in prog.buffer_ir
    np.testing.assert_allclose(prog.main(x, w), x @ w.T, rtol=1e-5)


def test_fused_producer_stays_out_of_the_contraction():
    """relu(x) @ w: the relu is not fused into the contraction's body (which
    would take it off the BLAS route)."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((16, 32)).astype(np.float32)
    w = rng.standard_normal((32, 8)).astype(np.float32)
    fn = lambda x, w: jax.nn.relu(x) @ w  # noqa: E731
    lowered = tdf.jax.jit(fn).lower(x, w)
    prog = lowered.compile(codegen_flops=0)
    assert "tdf_rt_contract" in prog.llvm_ir
    np.testing.assert_allclose(prog.main(x, w), jax.jit(fn)(x, w), rtol=1e-5, atol=1e-5)
    # Compiled (a small GEMM), it is vectorized: blocks of C 8 columns wide.
    compiled = lowered.compile()
    assert "tdf_rt_contract" not in compiled.llvm_ir and "vector<8xf32>" in compiled.llvm_ir
    np.testing.assert_allclose(compiled.main(x, w), jax.jit(fn)(x, w), rtol=1e-5, atol=1e-5)


STRIDED = """
func.func @f(%x: tensor<{m}x{k2}xf32>, %w: tensor<{n}x{k}xf32>, %acc: tensor<{m}x{n}xf32>)
    -> tensor<{m}x{n}xf32> {{
  %xs = tensor.extract_slice %x[0, 1] [{m}, {k}] [1, 2] : tensor<{m}x{k2}xf32> to tensor<{m}x{k}xf32>
  %e = tensor.empty() : tensor<{k}x{n}xf32>
  %wt = linalg.transpose ins(%w : tensor<{n}x{k}xf32>) outs(%e : tensor<{k}x{n}xf32>)
      permutation = [1, 0]
  %y = linalg.matmul ins(%xs, %wt : tensor<{m}x{k}xf32>, tensor<{k}x{n}xf32>)
      outs(%acc : tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf32>
  return %y : tensor<{m}x{n}xf32>
}}
"""


@pytest.mark.parametrize("m,n,k", [(4, 8, 16), (1, 8, 5), (7, 1, 3), (9, 33, 17)])
def test_strided_slice_operand_accumulating_init(m, n, k):
    """A column-strided slice as A (packed by the runtime), a transposed B
    and an accumulating, non-donated init."""
    text = STRIDED.format(m=m, n=n, k=k, k2=2 * k + 1)
    rng = np.random.default_rng(m * n + k)
    x = rng.standard_normal((m, 2 * k + 1)).astype(np.float32)
    w = rng.standard_normal((n, k)).astype(np.float32)
    acc = rng.standard_normal((m, n)).astype(np.float32)
    before = [v.copy() for v in (x, w, acc)]
    on, off = tdf.compile(text), tdf.compile(text, blas=False)
    got, base = on.f(x, w, acc), off.f(x, w, acc)
    expected = x[:, 1::2].astype(np.float64) @ w.T.astype(np.float64) + acc
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got, base, rtol=1e-4, atol=1e-4)
    for v, b in zip((x, w, acc), before):
        assert np.array_equal(v, b)
    assert "tdf_rt_contract" in on.llvm_ir


DYNAMIC = """
func.func @f(%a: tensor<?x?xf32>, %b: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %m = tensor.dim %a, %c0 : tensor<?x?xf32>
  %n = tensor.dim %b, %c1 : tensor<?x?xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty(%m, %n) : tensor<?x?xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<?x?xf32>) -> tensor<?x?xf32>
  %y = linalg.matmul ins(%a, %b : tensor<?x?xf32>, tensor<?x?xf32>)
      outs(%z : tensor<?x?xf32>) -> tensor<?x?xf32>
  return %y : tensor<?x?xf32>
}
"""


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("m,k,n", [(3, 4, 5), (0, 4, 5), (3, 0, 5), (1, 64, 1), (65, 3, 2)])
def test_dynamic_shapes(m, k, n, dtype):
    text = DYNAMIC.replace("f32", dtype)
    prog, off = tdf.compile(text), tdf.compile(text, blas=False)
    rng = np.random.default_rng(5)
    a = rng.standard_normal((m, k)).astype(_DTYPES[dtype])
    b = rng.standard_normal((k, n)).astype(_DTYPES[dtype])
    got = prog.f(a, b)
    assert got.dtype == a.dtype
    np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got, off.f(a, b), rtol=1e-4, atol=1e-4)
    assert "tdf_rt_contract" in prog.llvm_ir


@pytest.mark.parametrize("shape", [(64, 256, 192), (128, 512, 640)])
@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16])
def test_calls_from_several_threads(dtype, shape):
    rng = np.random.default_rng(9)
    # 64x256x192: above the size where a contraction takes several threads;
    # 128x512x640: oneDNN's matmul primitive (h @ w.T transposed, and x @ w
    # too for bf16), primitives shared by the threads.
    m, k, n = shape
    w = rng.standard_normal((k, n)).astype(dtype)
    xs = [rng.standard_normal((m, k)).astype(dtype) for _ in range(8)]

    def fn(x, w):
        h = jnp.tanh(jnp.matmul(x, w, preferred_element_type=jnp.float32)).astype(w.dtype)
        return jnp.matmul(h, w.T, preferred_element_type=jnp.float32)
    prog = tdf.jax.jit(fn).lower(xs[0], w).compile()
    # One call per input on this thread first, checked against jax.jit (the
    # bf16 rounding of tanh may differ in the last place); the threads must
    # then reproduce it.
    expected = [np.asarray(prog.main(x, w)) for x in xs]
    for x, exp in zip(xs, expected):
        np.testing.assert_allclose(exp, np.asarray(jax.jit(fn)(x, w)), rtol=2e-2, atol=2e-2)
    results = [None] * len(xs)

    def work(i):
        for _ in range(5):
            results[i] = prog.main(xs[i], w)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(xs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for got, exp in zip(results, expected):
        np.testing.assert_allclose(got, exp, rtol=1e-5, atol=1e-5)
    if m == 128 and blas.onednn_path():
        assert _tdf.blas_matmul_primitive_calls() > 0


def _gemms_in_child(prog_f32, prog_bf16, args, expected, queue):
    got = [np.asarray(prog_f32.main(*args[0])), np.asarray(prog_bf16.main(*args[1]))]
    queue.put(all(np.allclose(g, e, rtol=1e-5, atol=1e-4) for g, e in zip(got, expected)))


def test_gemms_in_a_forked_child():
    """GNU OpenMP (oneDNN's runtime) hangs in a child forked after the
    parent ran a parallel region: the child runs its GEMMs on OpenBLAS and
    gets the same results."""
    import multiprocessing

    rng = np.random.default_rng(11)
    args = []
    progs = []
    for dtype in (np.float32, ml_dtypes.bfloat16):
        a = rng.standard_normal((256, 256)).astype(dtype)
        fn = lambda x: jnp.matmul(x, x, preferred_element_type=jnp.float32)  # noqa: E731
        progs.append(tdf.jax.jit(fn).lower(a).compile())
        args.append((a,))
    expected = [np.asarray(p.main(*a)) for p, a in zip(progs, args)]  # parallel regions run
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_gemms_in_child, args=(*progs, args, expected, queue))
    child.start()
    child.join(60)
    if child.is_alive():
        child.kill()
        pytest.fail("the forked child hung in its GEMM")
    assert child.exitcode == 0 and queue.get(timeout=5)
    assert blas.onednn_path()  # the parent still uses oneDNN


def test_onednn_kernels_made_on_a_thread_of_their_own():
    """Loading oneDNN starts the thread that makes its f32 GEMM kernels;
    a process forked at once (the fork waits for that thread) and the
    parent's first GEMMs, made while it may still run, give the right
    results; the thread ran to its end. Fresh process: the library loads
    there."""
    if not blas.onednn_path():
        pytest.skip("oneDNN is not installed")
    import subprocess
    import sys
    script = """
import os, numpy as np, tdf.blas as blas, tdf.jax
from tdf import _tdf
assert blas.available() and blas.onednn_path()
pid = os.fork()  # while the kernels may still be being made
if pid == 0:
    x = np.arange(64 * 64, dtype=np.float32).reshape(64, 64) / 4096
    ok = np.allclose(tdf.jax.jit(lambda a: a @ a.T)(x), x @ x.T, rtol=1e-5)
    os._exit(0 if ok else 3)
x = np.random.default_rng(0).standard_normal((16, 256)).astype(np.float32)
w = np.random.default_rng(1).standard_normal((256, 256)).astype(np.float32)
prog = tdf.jax.jit(lambda a, b: (a @ b, a @ b.T)).lower(x, w).compile()
got = prog.main(x, w)
assert np.allclose(got[0], x @ w, rtol=1e-4, atol=1e-4)
assert np.allclose(got[1], x @ w.T, rtol=1e-4, atol=1e-4)
assert _tdf.onednn_warmed_up()
_, status = os.waitpid(pid, 0)
print("ok" if status == 0 else f"child status {status}")
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120)
    assert out.stdout.strip() == "ok", out.stderr[-2000:]


def test_exit_while_onednn_makes_its_kernels():
    """Processes that load oneDNN and exit at once, on cores kept busy (the
    kernel-making thread is then still running as the interpreter
    finalizes): every one exits cleanly. It crashed 3-16 times in 60 when
    only the C++ side joined the thread (at exit(), after the kernel tables'
    destructors had run); a race, so this test catches it often, not
    always."""
    if not blas.onednn_path():
        pytest.skip("oneDNN is not installed")
    import subprocess
    import sys
    busy = [subprocess.Popen([sys.executable, "-c", "import time\nt = time.time()\n"
                              "while time.time() - t < 20: pass"]) for _ in range(2)]
    try:
        for _ in range(16):
            child = subprocess.run([sys.executable, "-c",
                                    "import tdf.blas as b; assert b.onednn_path()"],
                                   stderr=subprocess.PIPE, timeout=120)
            assert child.returncode == 0, child.stderr.decode()[-2000:]
    finally:
        for proc in busy:
            proc.kill()
            proc.wait()


def test_num_threads_option_and_knob():
    x = np.ones((64, 64), np.float32)
    before = blas.num_threads()
    prog = tdf.jax.jit(lambda a: a @ a).lower(x).compile(num_threads=1)
    np.testing.assert_allclose(prog.main(x), x @ x)
    assert blas.num_threads() == before  # the program's count is per call
    with pytest.raises(ValueError, match="num_threads"):
        tdf.compile(DYNAMIC, num_threads=0)
    with pytest.raises(ValueError, match="positive"):
        blas.set_num_threads(0)


# -------------------------------------------------------------- denormals


def test_subnormal_results_flush_to_zero_like_jax():
    x = np.full(8, 1e-20, np.float32)
    fn = lambda a: a * a  # noqa: E731
    lowered = tdf.jax.jit(fn).lower(x)
    ref = np.asarray(jax.jit(fn)(x))
    assert np.array_equal(np.asarray(lowered.compile().main(x)), ref)
    assert np.all(ref == 0)
    kept = np.asarray(lowered.compile(flush_denormals=False).main(x))
    assert np.all(kept == np.float32(1e-20) * np.float32(1e-20)) and np.all(kept > 0)


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16])
@pytest.mark.parametrize("shapes", [((2048, 2), (2, 2048)), ((4096, 2), (2,)),
                                    ((12, 128, 2), (12, 2, 128)),
                                    ((3, 4, 96, 64), (3, 4, 64, 80))],
                         ids=["gemm_two_threads", "gemv", "batched", "batch_on_threads"])
def test_subnormal_contraction_results_flush_like_jax(shapes, dtype):
    """Every product is 1e-40 (subnormal): jax.jit flushes it to zero, and so
    must tdf on every library route, including the parts the libraries'
    worker threads compute (they do not take the caller's MXCSR)."""
    a = np.full(shapes[0], 1e-20, dtype)
    b = np.full(shapes[1], 1e-20, dtype)

    def fn(x, y):
        return jnp.matmul(x, y, preferred_element_type=jnp.float32)
    expected = np.asarray(jax.jit(fn)(a, b))
    assert not np.any(expected)
    np.testing.assert_array_equal(np.asarray(tdf.jax.jit(fn)(a, b)), expected)


def test_subnormal_inputs_read_as_zero_like_jax():
    x = np.array([1e-40, -1e-40, 1.0, 0.0], np.float32)
    fn = lambda a: a * np.float32(1e30)  # noqa: E731
    got = np.asarray(tdf.jax.jit(fn)(x))
    np.testing.assert_array_equal(got, np.asarray(jax.jit(fn)(x)))
