"""Small GEMMs as compiled vector code (``tdf-vectorize-contractions``, left
to it by ``tdf-contractions-to-blas{codegen-flops}``, cut into row chunks
by ``tdf-parallelize``): the default build against itself with every GEMM
through the libraries (``codegen_flops=0``), without the libraries
(``blas=False``), on one thread, and against ``jax.jit``."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tdf
import tdf.jax
from tdf import blas as tdf_blas

pytestmark = pytest.mark.skipif(not tdf_blas.available(), reason="needs the BLAS route")


def _builds(fn, *args):
    lowered = tdf.jax.jit(fn).lower(*args)
    return {"default": lowered.compile(), "library": lowered.compile(codegen_flops=0),
            "codegen": lowered.compile(blas=False), "one_thread": lowered.compile(num_threads=1)}


def _run_all(fn, args, rtol, atol):
    copies = [np.array(a, copy=True) for a in args]
    ref = np.asarray(jax.jit(fn)(*args))
    builds = _builds(fn, *args)
    results = {}
    for name, prog in builds.items():
        results[name] = np.asarray(prog.main(*args))
        np.testing.assert_allclose(results[name], ref, rtol=rtol, atol=atol, err_msg=name)
        for a, c in zip(args, copies):  # non-donated inputs unchanged
            np.testing.assert_array_equal(a, c)
    return builds, results


@settings(max_examples=25, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(m=st.integers(1, 48), k=st.sampled_from([1, 7, 64, 200, 256]),
       n=st.sampled_from([1, 5, 32, 40, 256, 300]), bias=st.booleans(),
       dtype=st.sampled_from([np.float32, np.float64]), seed=st.integers(0, 2**16))
def test_property_gemm_builds_agree(m, k, n, bias, dtype, seed):
    """``x @ w (+ b)`` of random sizes (several big enough to be cut into
    row chunks): every build within rounding of jax.jit and of each other;
    the compiled build (cut or not) equals the one-thread build bit for bit
    (a chunk computes whole rows, in the same order)."""
    if dtype == np.float64 and not jax.config.jax_enable_x64:
        dtype = np.float32
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((m, k)).astype(dtype)
    w = rng.standard_normal((k, n)).astype(dtype)
    b = rng.standard_normal((n,)).astype(dtype)

    def fn(x, w, b):
        y = jnp.matmul(x, w, precision="highest")
        return y + b if bias else y

    tol = 1e-5 * np.sqrt(k) + 1e-6
    _, results = _run_all(fn, (x, w, b), rtol=tol, atol=tol)
    np.testing.assert_array_equal(results["default"], results["one_thread"])


def test_gemm_cut_into_row_chunks_on_two_threads():
    """16x256x256 (2^21 flops): compiled, no library call, cut into two
    chunks of 8 rows that run on tdf's thread pool."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((16, 256)).astype(np.float32)
    w = rng.standard_normal((256, 256)).astype(np.float32)
    fn = lambda x, w: jnp.tanh(x @ w)  # noqa: E731
    builds, _ = _run_all(fn, (x, w), rtol=1e-5, atol=1e-5)
    default = builds["default"].llvm_ir
    assert "tdf_rt_contract" not in default
    if tdf_blas.default_threads() > 1:
        assert "tdf_rt_parallel_for" in default
    assert "tdf_rt_contract" in builds["library"].llvm_ir
    assert "tdf_rt_parallel_for" not in builds["one_thread"].llvm_ir


def test_negative_uneven_rows_not_cut():
    """15 rows would be chunks of 8 and 7 (a dynamic size, not vectorized):
    the GEMM stays whole, compiled, on the calling thread."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((15, 256)).astype(np.float32)
    w = rng.standard_normal((256, 256)).astype(np.float32)
    builds, _ = _run_all(lambda x, w: x @ w, (x, w), rtol=1e-5, atol=1e-5)
    default = builds["default"].llvm_ir
    assert "tdf_rt_contract" not in default and "tdf_rt_parallel_for" not in default
    assert "vector<32xf32>" in default


@pytest.mark.parametrize("m,k,n", [(512, 512, 512), (128, 256, 2048), (4, 1024, 1024)])
def test_negative_large_gemm_goes_to_the_library(m, k, n):
    """Above 2^23 flops (the default, for compile time), rows wider than
    1024 columns, or operands over 3 MiB: each is a library call."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((m, k)).astype(np.float32)
    w = rng.standard_normal((k, n)).astype(np.float32)
    builds, _ = _run_all(lambda x, w: x @ w, (x, w), rtol=1e-4, atol=1e-4)
    assert "tdf_rt_contract" in builds["default"].llvm_ir


def test_gemms_of_a_scan_step():
    """A tanh RNN over lax.scan: each step's x[t] @ wx reads a row block of
    xs at a dynamic offset, h @ wh accumulates into it; both compiled."""
    rng = np.random.default_rng(4)
    wx = rng.standard_normal((64, 256)).astype(np.float32) * 0.1
    wh = rng.standard_normal((256, 256)).astype(np.float32) * 0.05
    xs = rng.standard_normal((12, 16, 64)).astype(np.float32)
    h0 = np.zeros((16, 256), np.float32)

    def rnn(wx, wh, xs, h0):
        def cell(h, x):
            h = jnp.tanh(x @ wx + h @ wh)
            return h, h
        return jax.lax.scan(cell, h0, xs)[1]

    builds, _ = _run_all(rnn, (wx, wh, xs, h0), rtol=1e-5, atol=1e-5)
    assert "tdf_rt_contract" not in builds["default"].llvm_ir


def test_codegen_flops_validated():
    with pytest.raises(ValueError, match="codegen_flops"):
        tdf.compile("func.func @f() { return }", codegen_flops=-1)
    with pytest.raises(ValueError, match="codegen_flops"):
        tdf.compile("func.func @f() { return }", codegen_flops=True)
