"""Benchmark: the two GEMM libraries tdf can call, side by side in one process.

tdf's runtime (``python/src/Blas.cpp``) sends a GEMM either to oneDNN
(``dnnl_sgemm``, ``dnnl_gemm_bf16bf16f32``) or to OpenBLAS
(``cblas_sgemm``; bf16 operands converted to f32 first). This script calls
both libraries directly, as loaded by ``tdf.blas`` (the same files, the same
environment: ``OMP_WAIT_POLICY=PASSIVE`` for oneDNN's OpenMP threads, a short
OpenBLAS spin), on the same row-major operands, with two threads and with one,
checks each result against float64 and times them in interleaved rounds
(``harness.time_variants``, median). It is the measurement behind the choice
of library per case in ``docs/Codegen.md``.

    .venv/bin/python benchmarks/gemm_libraries.py           # ~1 min
    .venv/bin/python benchmarks/gemm_libraries.py --quick   # two small shapes

Prints a markdown table: GFLOP/s of each library and oneDNN's time over
OpenBLAS's (below 1: oneDNN is faster). The bf16 rows time OpenBLAS on the
operands already converted to f32 (tdf's conversion costs extra).
"""

from __future__ import annotations

import argparse
import ctypes
import os
import sys

import ml_dtypes
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import harness as H  # noqa: E402

from tdf import blas  # noqa: E402

#: (M, K, N, threads): the shapes of the models (8-32 rows: decode and small
#: batches; 16x256x256: the RNN cell), square ones, one thread and two.
SHAPES = [(8, 512, 4096, 2), (32, 512, 4096, 2), (128, 512, 4096, 2), (256, 256, 256, 2),
          (1024, 1024, 1024, 2), (16, 256, 256, 1), (32, 128, 128, 1), (8, 512, 512, 1),
          (16, 64, 64, 1)]

_I64, _PTR, _F = ctypes.c_int64, ctypes.c_void_p, ctypes.c_float
_I = ctypes.c_int
_ROW_MAJOR, _NO_TRANS = 101, 111


def _libraries():
    if not blas.available() or not blas.onednn_path():
        raise SystemExit(f"needs both libraries: BLAS {blas.library_path()!r}, "
                         f"oneDNN {blas.onednn_path()!r} ({blas.onednn_error()})")
    # The same files tdf loaded: dlopen returns the loaded copies.
    dnnl = ctypes.CDLL(blas.onednn_path())
    openblas = ctypes.CDLL(blas.library_path())
    for fn in (dnnl.dnnl_sgemm, dnnl.dnnl_gemm_bf16bf16f32):
        fn.argtypes = [ctypes.c_char, ctypes.c_char, _I64, _I64, _I64, _F, _PTR, _I64, _PTR,
                       _I64, _F, _PTR, _I64]
    openblas.scipy_cblas_sgemm.argtypes = [_I, _I, _I, _I, _I, _I, _F, _PTR, _I, _PTR, _I,
                                           _F, _PTR, _I]
    return dnnl, openblas


def _set_threads(dnnl, openblas, threads):
    dnnl.omp_set_num_threads(threads)  # found through libdnnl's libgomp
    openblas.scipy_openblas_set_num_threads(threads)


def run_case(dnnl, openblas, shape, dtype, reps):
    m, k, n, threads = shape
    rng = np.random.default_rng(0)
    a32 = rng.standard_normal((m, k)).astype(np.float32)
    b32 = rng.standard_normal((k, n)).astype(np.float32)
    if dtype == "bf16":
        a_in, b_in = a32.astype(ml_dtypes.bfloat16), b32.astype(ml_dtypes.bfloat16)
        a32, b32 = a_in.astype(np.float32), b_in.astype(np.float32)
        onednn_gemm = dnnl.dnnl_gemm_bf16bf16f32
    else:
        a_in, b_in = a32, b32
        onednn_gemm = dnnl.dnnl_sgemm
    c_dnnl, c_blas = np.zeros((m, n), np.float32), np.zeros((m, n), np.float32)

    def run_onednn():
        onednn_gemm(b"N", b"N", m, n, k, 1.0, a_in.ctypes.data, k, b_in.ctypes.data, n, 0.0,
                    c_dnnl.ctypes.data, n)

    def run_openblas():
        openblas.scipy_cblas_sgemm(_ROW_MAJOR, _NO_TRANS, _NO_TRANS, m, n, k, 1.0,
                                   a32.ctypes.data, k, b32.ctypes.data, n, 0.0,
                                   c_blas.ctypes.data, n)

    _set_threads(dnnl, openblas, threads)
    run_onednn()
    run_openblas()
    ref = a32.astype(np.float64) @ b32.astype(np.float64)
    for got in (c_dnnl, c_blas):
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-3 * np.sqrt(k))
    times = H.time_variants({"onednn": run_onednn, "openblas": run_openblas}, reps)
    flops = 2.0 * m * n * k
    return {"shape": f"{m}x{k}x{n}", "threads": threads, "dtype": dtype,
            "gflops": {v: flops / times[v]["median"] / 1e9 for v in times},
            "onednn_over_openblas": times["onednn"]["median"] / times["openblas"]["median"]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=9)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    shapes = [(32, 128, 128, 1), (64, 64, 64, 2)] if args.quick else SHAPES
    dnnl, openblas = _libraries()
    threads_before = blas.num_threads()
    rows = []
    try:
        for shape in shapes:
            for dtype in ("f32", "bf16"):
                rows.append(run_case(dnnl, openblas, shape, dtype, args.reps))
    finally:
        _set_threads(dnnl, openblas, threads_before)
    print("| M x K x N | threads | dtype | oneDNN GFLOP/s | OpenBLAS GFLOP/s | oneDNN / OpenBLAS time |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        g = r["gflops"]
        print(f"| {r['shape']} | {r['threads']} | {r['dtype']} | {g['onednn']:.1f} "
              f"| {g['openblas']:.1f} | {r['onednn_over_openblas']:.2f} |")
    print(f"\nload average: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
