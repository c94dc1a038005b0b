"""Smoke test of the benchmark harness: ``benchmarks/run.py --tiny`` runs every
workload at toy sizes and writes results.json / results.md / PNG plots.

No timing is asserted (machines are noisy); the test checks that every
workload is present with numeric fields, that every timed variant was checked
against the numpy reference, and that the byte counts are consistent (the
in-place tdf build never allocates more than the copy-everything build).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUN = os.path.join(ROOT, "benchmarks", "run.py")

ARRAY_WORKLOADS = ["kv_step", "kv_multilayer", "kv_loop", "ew_chain", "log_concat", "embed_update"]
TIMED = ["tdf", "tdf_inplace_off", "jax_donated", "jax", "numpy"]


def _num(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    proc = subprocess.run([sys.executable, RUN, "--tiny", "--out", str(out)],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    with open(out / "results.json") as fh:
        data = json.load(fh)
    return data, out


def test_outputs_written(results):
    _, out = results
    for name in ("results.json", "results.md", "bytes_per_program.png", "time_per_step.png"):
        assert (out / name).stat().st_size > 0, name
    md = (out / "results.md").read_text()
    for wl in ARRAY_WORKLOADS + ["compile_scaling", "call_overhead"]:
        assert f"### {wl}" in md


def test_every_workload_present(results):
    data, _ = results
    assert data["mode"] == "tiny"
    assert _num(data["bandwidth"]["bytes_per_s"]) and data["bandwidth"]["bytes_per_s"] > 0
    for wl in ARRAY_WORKLOADS + ["compile_scaling", "compile_vs_jax", "call_overhead"]:
        assert wl in data["workloads"], wl


@pytest.mark.parametrize("workload", ARRAY_WORKLOADS)
def test_array_workload_fields(results, workload):
    data, _ = results
    rows = data["workloads"][workload]
    assert rows, workload
    for row in rows:
        for v in TIMED:
            t = row["time"][v]
            for k in ("median", "q1", "q3", "iqr"):
                assert _num(t[k]) and t[k] >= 0, (v, k)
            assert t["median"] > 0
        # every timed variant was compared with the numpy reference first
        for v, t in row["time"].items():
            if v != "numpy" and "note" not in t:
                assert row["checked"].get(v) is True, v
        b = row["memory"]["alloc_bytes"]
        for v in ("tdf", "tdf_inplace_off", "jax", "numpy"):
            assert _num(b[v]) and b[v] >= 0, (v, b)
        for key, r in row["ratios"].items():
            assert r is None or _num(r), key
        assert _num(row["ratios"]["time_tdf/jax"])
        assert _num(row["ratios"]["time_tdf/tdf_inplace_off"])
        tmem = row["memory"]["tdf"]
        if "tdf_copy_all" in tmem:  # in place never allocates more than copy-everything
            assert tmem["tdf"]["runtime"]["bytes"] <= tmem["tdf_copy_all"]["runtime"]["bytes"]
            assert tmem["tdf"]["static"]["copy_bytes"] <= tmem["tdf_copy_all"]["static"]["copy_bytes"]


def test_donated_kv_step_allocates_nothing(results):
    """The donated cache is updated in place: zero bytes allocated at run time,
    while the copy-everything build allocates at least one full cache."""
    data, _ = results
    for row in data["workloads"]["kv_step"]:
        tmem = row["memory"]["tdf"]
        assert tmem["tdf"]["runtime"]["bytes"] == 0
        assert tmem["tdf_copy_all"]["runtime"]["bytes"] >= row["cache_bytes"]


def test_compile_scaling_and_overhead_fields(results):
    data, _ = results
    cs = data["workloads"]["compile_scaling"]
    assert len(cs["points"]) >= 3
    for pt in cs["points"]:
        assert _num(pt["ops"]) and pt["ops"] > 0
        for p in cs["passes"] + ["parse", "canonicalize"]:
            assert _num(pt[p]["median"])
    for p in cs["passes"] + ["parse", "canonicalize"]:
        assert _num(cs["exponent"][p])
    cj = data["workloads"]["compile_vs_jax"]
    assert _num(cj["tdf_compile"]["median"]) and _num(cj["jax_compile"]["median"])
    co = data["workloads"]["call_overhead"]
    for k in ("tdf_call", "raw_ctypes", "jax_call"):
        assert _num(co["time"][k]["median"]) and co["time"][k]["median"] > 0
