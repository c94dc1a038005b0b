"""Benchmark: dense contractions, tdf against jax.jit, numpy's BLAS and tdf
with the BLAS route switched off, side by side in one process.

Each case is one JAX function (``x @ w``, ``x @ w.T``, ``x.T @ y``, attention
einsums, mat-vecs; f32 and bf16 inputs with f32 results), compiled by
``tdf.jax.jit`` three times (``blas`` on: the product's default, small GEMMs
compiled, the rest through the libraries; ``codegen_flops=0``: every GEMM
through the libraries; ``blas=False``: MLIR codegen only) and by ``jax.jit``; numpy runs the same product on f32 arrays.
Every variant is checked against a float64 reference, then timed in
interleaved rounds (``harness.time_variants``: median seconds per call).
Reported per case: GFLOP/s of each variant and the ratios
``tdf / jax.jit`` (time: below 1 is faster) and ``tdf / numpy`` (GFLOP/s).

    .venv/bin/python benchmarks/gemm.py            # the whole sweep
    .venv/bin/python benchmarks/gemm.py --quick    # fewer, smaller cases
    .venv/bin/python benchmarks/gemm.py --only nn_128x512x4096,x_wT_1

Writes ``benchmarks/results/gemm.json`` and prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

# numpy's bundled OpenBLAS (a variant here) spins its worker threads for
# ~0.1 s after every multi-threaded call, taking a core from whatever the
# interleaved timing runs next; tdf loads its own OpenBLAS with a short spin
# (tdf.blas). Give numpy's the same, before numpy loads it.
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "10")

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import harness as H  # noqa: E402

import tdf.jax  # noqa: E402
from tdf import blas  # noqa: E402


def _case(eq, a_shape, b_shape):
    return {"eq": eq, "a": a_shape, "b": b_shape}


#: name -> (einsum, lhs shape, rhs shape); "_T" cases read an operand transposed.
CASES = {
    "nn_16x64x256": _case("mk,kn->mn", (16, 64), (64, 256)),
    "nn_16x256x256": _case("mk,kn->mn", (16, 256), (256, 256)),
    "nn_64x256x256": _case("mk,kn->mn", (64, 256), (256, 256)),
    "nn_128x256x256": _case("mk,kn->mn", (128, 256), (256, 256)),
    "nn_8x1024x512": _case("mk,kn->mn", (8, 1024), (1024, 512)),
    "nn_8x512x4096": _case("mk,kn->mn", (8, 512), (512, 4096)),
    "nn_32x512x4096": _case("mk,kn->mn", (32, 512), (512, 4096)),
    "nn_128x512x4096": _case("mk,kn->mn", (128, 512), (512, 4096)),
    "nn_256": _case("mk,kn->mn", (256, 256), (256, 256)),
    "nn_512": _case("mk,kn->mn", (512, 512), (512, 512)),
    "nn_1024": _case("mk,kn->mn", (1024, 1024), (1024, 1024)),
    "x_wT_1": _case("mk,nk->mn", (1, 512), (4096, 512)),
    "x_wT_128": _case("mk,nk->mn", (128, 512), (4096, 512)),
    "xT_y_512x128x256": _case("km,kn->mn", (512, 128), (512, 256)),
    "dy_WT_128x4096x512": _case("mn,kn->mk", (128, 4096), (512, 4096)),
    "dense_3d_4x32x512x2048": _case("bsd,df->bsf", (4, 32, 512), (512, 2048)),
    "batched_12x128x64x128": _case("bqd,bdk->bqk", (12, 128, 64), (12, 64, 128)),
    "attn_scores_1x12x128x64": _case("bhqd,bhkd->bhqk", (1, 12, 128, 64), (1, 12, 128, 64)),
    "attn_values_1x12x128x64": _case("bhqk,bhkd->bhqd", (1, 12, 128, 128), (1, 12, 128, 64)),
    "matvec_4096x512": _case("mk,k->m", (4096, 512), (512,)),
    "vecmat_512x4096": _case("k,kn->n", (512,), (512, 4096)),
}
QUICK = ("nn_16x256x256", "nn_8x512x4096", "nn_256", "x_wT_1", "x_wT_128", "batched_12x128x64x128",
         "matvec_4096x512")
#: Cases also run with bf16 inputs and f32 results.
BF16 = ("nn_128x512x4096", "nn_1024", "x_wT_128", "nn_256")


def flops(case) -> float:
    sizes = {}
    for letters, shape in zip(case["eq"].split("->")[0].split(","), (case["a"], case["b"])):
        sizes.update(zip(letters, shape))
    return 2.0 * float(np.prod(list(sizes.values())))


def run_case(name, case, dtype, reps) -> dict:
    rng = np.random.default_rng(0)
    a32 = rng.standard_normal(case["a"]).astype(np.float32)
    b32 = rng.standard_normal(case["b"]).astype(np.float32)
    in_dtype = ml_dtypes.bfloat16 if dtype == "bf16" else np.float32
    a, b = a32.astype(in_dtype), b32.astype(in_dtype)
    eq = case["eq"]

    def fn(x, y):
        return jnp.einsum(eq, x, y, preferred_element_type=jnp.float32)

    lowered = tdf.jax.jit(fn).lower(a, b)
    on = lowered.compile().main
    library = lowered.compile(codegen_flops=0).main
    off = lowered.compile(blas=False).main
    jfn = jax.jit(fn)
    ja, jb = jnp.asarray(a), jnp.asarray(b)
    na, nb = a.astype(np.float32), b.astype(np.float32)
    exact = np.einsum(eq, a.astype(np.float64), b.astype(np.float64))
    variants = {
        "tdf": lambda: on(a, b),
        "tdf_library": lambda: library(a, b),
        "tdf_codegen": lambda: off(a, b),
        "jax": lambda: jfn(ja, jb).block_until_ready(),
        "numpy": lambda: np.einsum(eq, na, nb, optimize=True),
    }
    scale = np.abs(exact).max() + 1
    for vname, v in variants.items():
        err = float(np.abs(np.asarray(v(), np.float64) - exact).max() / scale)
        if err > 1e-3:
            raise AssertionError(f"{name} ({dtype}) {vname}: max error {err:.2e}")
    timing = H.time_variants(variants, reps=reps)
    fl = flops(case)
    gflops = {k: fl / t["median"] / 1e9 for k, t in timing.items()}
    return {"case": name, "dtype": dtype, "eq": eq, "a": case["a"], "b": case["b"],
            "flops": fl, "seconds": {k: t["median"] for k, t in timing.items()},
            "iqr": {k: t["iqr"] for k, t in timing.items()}, "gflops": gflops,
            "tdf_over_jax": H.ratio(timing["tdf"]["median"], timing["jax"]["median"]),
            "tdf_over_codegen": H.ratio(timing["tdf"]["median"],
                                        timing["tdf_codegen"]["median"]),
            "tdf_over_library": H.ratio(timing["tdf"]["median"],
                                        timing["tdf_library"]["median"]),
            "tdf_gflops_over_numpy": H.ratio(gflops["tdf"], gflops["numpy"])}


def table(rows) -> str:
    lines = ["| case | dtype | tdf GFLOP/s | library | codegen | jax.jit | numpy | tdf/jax time "
             "| tdf/library time | tdf/numpy GFLOP/s |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        g = r["gflops"]
        lines.append(f"| {r['case']} | {r['dtype']} | {g['tdf']:.1f} | {g['tdf_library']:.1f} "
                     f"| {g['tdf_codegen']:.1f} | {g['jax']:.1f} | {g['numpy']:.1f} "
                     f"| {r['tdf_over_jax']:.2f} | {r['tdf_over_library']:.2f} "
                     f"| {r['tdf_gflops_over_numpy']:.2f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", default="")
    parser.add_argument("--reps", type=int, default=0)
    parser.add_argument("--out", default=os.path.join(HERE, "results"))
    args = parser.parse_args(argv)
    names = [n for n in (args.only.split(",") if args.only else
                         (QUICK if args.quick else CASES)) if n]
    reps = args.reps or (5 if args.quick else 7)
    rows = []
    for name in names:
        for dtype in ("f32", "bf16") if name in BF16 or args.only else ("f32",):
            row = run_case(name, CASES[name], dtype, reps)
            rows.append(row)
            print(f"{name} {dtype}: tdf {row['gflops']['tdf']:.1f} GFLOP/s, "
                  f"tdf/jax {row['tdf_over_jax']:.2f}", flush=True)
    geo = float(np.exp(np.mean([np.log(r["tdf_over_jax"]) for r in rows])))
    result = {"machine": {"cpus": os.cpu_count(), "blas": blas.library_path(),
                          "blas_threads": blas.num_threads()},
              "rows": rows, "geomean_tdf_over_jax": geo}
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "gemm.json"), "w") as f:
        json.dump(result, f, indent=1)
    print(table(rows))
    print(f"\ngeometric mean tdf/jax.jit time: {geo:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
