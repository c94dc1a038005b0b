"""Smoke test of the dense-compute benchmarks: ``benchmarks/models.py --tiny``
(every model workload checked against jax.jit, then timed) and
``benchmarks/gemm.py`` on two small cases (f32 and bf16 inputs; every variant
checked against float64 before timing), ``benchmarks/gemm_libraries.py
--quick`` (oneDNN against OpenBLAS, both checked against float64) and
``benchmarks/threads.py --tiny`` (one thread against all, checked against
jax.jit). No timing is asserted: the test checks that the scripts run,
check their results and write their JSON or table."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(script, *args, out):
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", script), *args,
                           "--out", str(out)], capture_output=True, text=True, timeout=600,
                          cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


def test_models_tiny(tmp_path):
    _run("models.py", "--tiny", "--reps", "1", out=tmp_path)
    rows = json.loads((tmp_path / "models.json").read_text())["rows"]
    assert {r["workload"] for r in rows} == {"gpt2_prefill", "gpt2_decode", "llama_decode",
                                            "mlp_train", "rnn_scan", "adam", "embed_update"}
    assert all(math.isfinite(r["tdf_over_jax"]) and r["tdf_over_jax"] > 0 for r in rows)


def test_gemm_cases(tmp_path):
    _run("gemm.py", "--only", "nn_256,x_wT_1", "--reps", "1", out=tmp_path)
    rows = json.loads((tmp_path / "gemm.json").read_text())["rows"]
    assert {(r["case"], r["dtype"]) for r in rows} == {
        ("nn_256", "f32"), ("nn_256", "bf16"), ("x_wT_1", "f32"), ("x_wT_1", "bf16")}
    assert all(r["gflops"]["tdf"] > 0 for r in rows)


def _table(script, *args):
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", script), *args],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return [line for line in proc.stdout.splitlines() if line.startswith("| ")][1:]


def test_gemm_libraries_quick():
    rows = _table("gemm_libraries.py", "--quick", "--reps", "1")
    assert len(rows) == 4  # two shapes x (f32, bf16)
    assert all(float(r.split("|")[-2]) > 0 for r in rows)


def test_threads_tiny():
    rows = _table("threads.py", "--tiny", "--reps", "1")
    assert {r.split("|")[1].strip() for r in rows} == {
        "tanh_exp_sin", "x_mul_y_add_z", "log_concat_x4", "softmax_rows_1024", "sum_squares"}
