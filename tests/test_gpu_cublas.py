"""Contractions on the GPU path through cuBLAS: ``compile_nvvm(blas=...)``,
``tdf-contractions-to-cublas`` and the runtime's ``tdf_gpu_contract``.

Without a GPU (this machine kind): the whole pipeline compiles to a module
calling ``tdf_gpu_contract`` next to a ``gpu.binary``; the runtime's planner
decides layouts as the pass does; a call of the runtime function reports a
missing cuBLAS or an overlap as an error, never an abort. With a GPU: the
programs run against numpy / JAX (skipped elsewhere, like test_gpu.py's).
"""

import ctypes
import os
import subprocess
import sys

import numpy as np
import pytest
from test_gpu import GPU_OK, needs_gpu

import tdf
from tdf import _tdf, gpu
from tdf.passes.analysis.contractions import BATCH, K, M, N
from tdf.passes.contractions_to_blas import contraction_flags

# x @ w + bias: one contraction, one element-wise kernel.
DENSE = """
func.func @dense(%x: tensor<64x32xf32>, %w: tensor<32x48xf32>, %bias: tensor<64x48xf32>) -> tensor<64x48xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<64x48xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<64x48xf32>) -> tensor<64x48xf32>
  %y = linalg.matmul ins(%x, %w : tensor<64x32xf32>, tensor<32x48xf32>) outs(%f : tensor<64x48xf32>) -> tensor<64x48xf32>
  %e2 = tensor.empty() : tensor<64x48xf32>
  %r = linalg.add ins(%y, %bias : tensor<64x48xf32>, tensor<64x48xf32>) outs(%e2 : tensor<64x48xf32>) -> tensor<64x48xf32>
  return %r : tensor<64x48xf32>
}
"""
# q @ k^T per batch (k's transpose through the maps), bf16 inputs, f32 result.
ATTENTION = """
func.func @scores(%q: tensor<4x16x32xbf16>, %k: tensor<4x24x32xbf16>) -> tensor<4x16x24xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x16x24xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16x24xf32>) -> tensor<4x16x24xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(b, m, n, d) -> (b, m, d)>,
                                        affine_map<(b, m, n, d) -> (b, n, d)>,
                                        affine_map<(b, m, n, d) -> (b, m, n)>],
                       iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %k : tensor<4x16x32xbf16>, tensor<4x24x32xbf16>) outs(%f : tensor<4x16x24xf32>) {
  ^bb0(%a: bf16, %b: bf16, %acc: f32):
    %a32 = arith.extf %a : bf16 to f32
    %b32 = arith.extf %b : bf16 to f32
    %p = arith.mulf %a32, %b32 : f32
    %sum = arith.addf %acc, %p : f32
    linalg.yield %sum : f32
  } -> tensor<4x16x24xf32>
  return %s : tensor<4x16x24xf32>
}
"""
# f64 batch_matmul accumulating into a donated argument.
BATCHED = """
func.func @bmm(%a: tensor<3x8x5xf64>, %b: tensor<3x5x7xf64>, %c: tensor<3x8x7xf64> {tdf.donate}) -> tensor<3x8x7xf64> {
  %r = linalg.batch_matmul ins(%a, %b : tensor<3x8x5xf64>, tensor<3x5x7xf64>) outs(%c : tensor<3x8x7xf64>) -> tensor<3x8x7xf64>
  return %r : tensor<3x8x7xf64>
}
"""


@pytest.fixture(scope="module")
def compiled():
    return {name: gpu.compile_nvvm(text, blas=True, ptxas=False, filename=f"{name}.mlir")
            for name, text in (("dense", DENSE), ("attention", ATTENTION), ("batched", BATCHED))}


def test_blas_pipeline_compiles_to_call_and_gpu_binary(compiled):
    prog = compiled["dense"]
    assert "llvm.call @tdf_gpu_contract(" in prog.text
    assert "gpu.binary" in prog.text  # the bias add is still a kernel
    assert "linalg.matmul" not in prog.gpu_text
    report = prog.report()
    assert report.cublas_calls == 1 and report.kernels == 1
    assert "cuBLAS calls: 1" in str(report)
    assert prog.uses_cublas


def test_blas_off_keeps_contraction_a_kernel():
    prog = gpu.compile_nvvm(DENSE, blas=False, ptxas=False)
    assert "tdf_gpu_contract" not in prog.text
    assert prog.report().cublas_calls == 0 and prog.report().kernels == 3  # fill, matmul, add
    assert not prog.uses_cublas


def test_blas_default_follows_cublas_availability():
    prog = gpu.compile_nvvm(DENSE, ptxas=False)
    assert prog.uses_cublas == gpu.cublas_available()[0]


@pytest.mark.parametrize("name,calls", [("attention", 1), ("batched", 1)])
def test_batched_transposed_and_bf16_become_one_call(compiled, name, calls):
    prog = compiled[name]
    assert prog.report().cublas_calls == calls
    assert "linalg.generic" not in prog.gpu_text and "linalg.batch_matmul" not in prog.gpu_text


def test_bad_blas_option_raises():
    with pytest.raises(gpu.GPUCompileError, match="blas must be True, False or None"):
        gpu.compile_nvvm(DENSE, blas="yes")
    with pytest.raises(tdf.PipelineError, match="unknown blas 'maybe'"):
        tdf.run_pipeline(tdf.parse(DENSE, tdf.Context()),
                         "builtin.module(tdf-lower-to-nvvm{blas=maybe})")


# ---------------------------------------------------------------------------
# The runtime's planner (what the pass asks at compile time)
# ---------------------------------------------------------------------------

def _plan(kinds, sizes, strides, types=("f32", "f32", "f32")):
    return _tdf.gpu_contract_plan(contraction_flags(types, kinds, True), sizes, strides)


@pytest.mark.parametrize("strides,ok", [
    # (A, B, C) strides along M, N, K: row-major everything.
    ([(4, 0, 16), (0, 1, 1), (1, 16, 0)], True),
    # B transposed (N x K storage), A transposed (K x M storage).
    ([(4, 0, 16), (0, 4, 1), (1, 1, 0)], True),
    ([(1, 0, 16), (0, 1, 1), (8, 16, 0)], True),
    # Column-major C (unit stride along M).
    ([(4, 0, 1), (0, 1, 8), (1, 16, 0)], True),
    # No unit stride in A: a gather, refused.
    ([(8, 0, 16), (0, 1, 1), (2, 16, 0)], False),
    # Leading dimension smaller than the row: rows overlap, refused.
    ([(4, 0, 8), (0, 1, 1), (1, 16, 0)], False),
])
def test_planner_layouts(strides, ok):
    why = _plan([M, N, K], [8, 16, 4], strides)
    assert (why == "") == ok, why


def test_planner_batch_strides():
    kinds, sizes = [BATCH, M, N, K], [3, 8, 16, 4]
    assert _plan(kinds, sizes, [(32, 64, 128), (4, 0, 16), (0, 1, 1), (1, 16, 0)]) == ""
    # A broadcast over the batch (stride 0) is a strided batch too.
    assert _plan(kinds, sizes, [(32, 0, 128), (4, 0, 16), (0, 1, 1), (1, 16, 0)]) == ""
    # Batch entries of C on top of each other: written twice, refused.
    assert "writes an element twice" in _plan(
        kinds, sizes, [(32, 64, 0), (4, 0, 16), (0, 1, 1), (1, 16, 0)])
    assert "negative batch stride" in _plan(
        kinds, sizes, [(-32, 64, 128), (4, 0, 16), (0, 1, 1), (1, 16, 0)])


def test_planner_types():
    strides = [(4, 0, 16), (0, 1, 1), (1, 16, 0)]
    assert _plan([M, N, K], [8, 16, 4], strides, ("bf16", "bf16", "f32")) == ""
    assert _plan([M, N, K], [8, 16, 4], strides, ("f16", "f16", "f32")) == ""
    assert "no cuBLAS GEMM" in _plan([M, N, K], [8, 16, 4], strides, ("bf16", "f32", "f32"))


# ---------------------------------------------------------------------------
# The runtime function, called directly
# ---------------------------------------------------------------------------

_CONTRACT = ctypes.CFUNCTYPE(None, *([ctypes.c_int64] * 32))


def _call(flags, pointers, dims):
    """Calls tdf_gpu_contract with fake device pointers (never dereferenced
    on the host) and ``dims`` = [(size, sa, sb, sc)]; returns the error."""
    fn = _CONTRACT(_tdf.gpu_runtime_symbols()["tdf_gpu_contract"])
    args = [flags]
    for p in pointers:
        args += [p, 0]
    args.append(len(dims))
    for d in range(6):
        args += list(dims[d]) if d < len(dims) else [0, 0, 0, 0]
    _tdf.gpu_take_error()
    fn(*args)
    return _tdf.gpu_take_error()


MATMUL_DIMS = [(8, 4, 0, 16), (16, 0, 1, 1), (4, 1, 16, 0)]


def test_runtime_refuses_overlapping_result():
    flags = contraction_flags(("f32",) * 3, [M, N, K], True)
    base = 1 << 40
    error = _call(flags, [base, base + 4096, base + 64], MATMUL_DIMS)
    assert error == ("tdf_gpu_contract: the result C overlaps operand A (cuBLAS is never "
                     "handed overlapping buffers)")
    assert _tdf.gpu_take_error() == ""  # taken: cleared


def test_runtime_refuses_layout_the_pass_would_not_emit():
    flags = contraction_flags(("f32",) * 3, [M, N, K], True)
    dims = [(8, 8, 0, 16), (16, 0, 1, 1), (4, 2, 16, 0)]
    error = _call(flags, [1 << 40, 2 << 40, 3 << 40], dims)
    assert "operand A has no unit stride along M and K" in error


def test_runtime_reports_missing_cublas_without_abort():
    """A valid call where cuBLAS cannot be loaded: a clear error for the
    caller (tdf.gpu raises it), the process goes on; a later call of the
    same thread does nothing while the error is pending."""
    code = f"""
import ctypes, mlir.ir
from tdf import _tdf
from tdf.passes.contractions_to_blas import contraction_flags
fn = ctypes.CFUNCTYPE(None, *([ctypes.c_int64] * 32))(_tdf.gpu_runtime_symbols()["tdf_gpu_contract"])
flags = contraction_flags(("f32",) * 3, [1, 2, 3], False)
args = [flags, 1 << 40, 0, 2 << 40, 0, 3 << 40, 0, 3]
for dim in {MATMUL_DIMS!r}:
    args += list(dim)
args += [0] * (32 - len(args))
fn(*args)
fn(*args)
print("error:", _tdf.gpu_take_error())
print("then:", repr(_tdf.gpu_take_error()))
try:
    _tdf.gpu_blas_load(["/nonexistent/libcublas.so.12"])
except RuntimeError as err:
    print("load:", err)
"""
    env = dict(os.environ, TDF_CUBLAS_LIBRARY="/nonexistent/libcublas.so.12")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env=env)
    assert done.returncode == 0, (done.returncode, done.stderr)
    lines = done.stdout.splitlines()
    assert lines[0].startswith("error: tdf_gpu_contract: cannot load cuBLAS "
                               "(tried /nonexistent/libcublas.so.12; last: ")
    assert lines[1] == "then: ''"
    assert lines[2].startswith("load: cannot load cuBLAS (tried /nonexistent/libcublas.so.12;")


@needs_gpu
def test_program_without_cublas_raises_before_running():
    code = f"""
import numpy as np
import tdf.gpu as g
prog = g.compile_nvvm({DENSE!r}, blas=True, ptxas=False)
x = np.ones((64, 32), np.float32)
try:
    prog.dense(x, np.ones((32, 48), np.float32), np.ones((64, 48), np.float32))
except g.GPUUnavailableError as err:
    print("raised:", err)
"""
    env = dict(os.environ, TDF_CUBLAS_LIBRARY="/nonexistent/libcublas.so.12")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, env=env)
    assert done.returncode == 0, (done.returncode, done.stderr)
    assert "raised: cannot run the GPU program: its contractions call cuBLAS" in done.stdout


# ---------------------------------------------------------------------------
# Execution on a GPU (only where one is present), against numpy / JAX.
# ---------------------------------------------------------------------------

needs_cublas = pytest.mark.skipif(
    GPU_OK and not gpu.cublas_available()[0],
    reason="cuBLAS cannot be loaded here (a GPU without cuBLAS)")


@needs_gpu
@needs_cublas
def test_gpu_dense_matches_jax(compiled):
    import jax.numpy as jnp

    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 32), dtype=np.float32)
    w = rng.standard_normal((32, 48), dtype=np.float32)
    bias = rng.standard_normal((64, 48), dtype=np.float32)
    expected = np.asarray(jnp.matmul(x.astype(np.float64), w.astype(np.float64)) + bias)
    out = compiled["dense"].dense(x, w, bias)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


@needs_gpu
@needs_cublas
def test_gpu_bf16_scores_match_numpy(compiled):
    import ml_dtypes

    rng = np.random.default_rng(1)
    q = rng.standard_normal((4, 16, 32)).astype(ml_dtypes.bfloat16)
    k = rng.standard_normal((4, 24, 32)).astype(ml_dtypes.bfloat16)
    expected = np.einsum("bmd,bnd->bmn", q.astype(np.float64), k.astype(np.float64))
    out = compiled["attention"].scores(q, k)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)


@needs_gpu
@needs_cublas
def test_gpu_batched_accumulates_into_donated(compiled):
    rng = np.random.default_rng(2)
    a = rng.standard_normal((3, 8, 5))
    b = rng.standard_normal((3, 5, 7))
    c = rng.standard_normal((3, 8, 7))
    expected = c + a @ b
    a_before, b_before = a.copy(), b.copy()
    out = compiled["batched"].bmm(a, b, c)
    np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-12)
    assert out is c
    assert np.array_equal(a, a_before) and np.array_equal(b, b_before)
