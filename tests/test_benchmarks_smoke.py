"""Smoke test of the benchmark harness: ``benchmarks/run.py --tiny`` runs every
workload at toy sizes and writes results.json / results.md / PNG plots.

No timing is asserted (machines are noisy); the test checks that every
workload is present with numeric fields, that every tdf build (in place on,
in place off, copy-before-write) was made by the product's ``tdf.compile``
and checked against the numpy reference, and that the byte counts (run-time
counts of ``count_allocations=True`` builds) are consistent: the in-place
build never allocates more than the copy-before-write baseline, and a donated
KV-cache update allocates nothing.
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
TIMED = ["tdf", "tdf_inplace_off", "tdf_copy_all", "jax_donated", "jax", "numpy"]
TDF_BUILDS = ["tdf", "tdf_inplace_off", "tdf_copy_all"]


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
    assert data["backend"] == "tdf.compile"
    assert data["backend_failures"] == [], data["backend_failures"]
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
        assert row["notes"] == {}, row["notes"]  # every tdf build was compiled
        b = row["memory"]["alloc_bytes"]
        for v in TDF_BUILDS + ["jax", "numpy"]:
            assert _num(b[v]) and b[v] >= 0, (v, b)
        for key, r in row["ratios"].items():
            assert r is None or _num(r), key
        assert _num(row["ratios"]["time_tdf/jax"])
        assert _num(row["ratios"]["time_tdf/tdf_inplace_off"])
        tmem = row["memory"]["tdf"]
        for v in TDF_BUILDS:
            stats = tmem[v]["runtime"]
            for k in ("calls", "frees", "bytes", "live_bytes", "peak_bytes"):
                assert _num(stats[k]) and stats[k] >= 0, (v, k)
            assert stats["bytes"] == b[v]
        # in place never allocates or copies more than the copy-before-write baseline
        assert tmem["tdf"]["runtime"]["bytes"] <= tmem["tdf_copy_all"]["runtime"]["bytes"]
        assert tmem["tdf"]["static"]["copy_bytes"] <= tmem["tdf_copy_all"]["static"]["copy_bytes"]
        assert "copy-before-write" not in row["report"]


def test_donated_kv_step_allocates_nothing(results):
    """The donated cache is updated in place: zero bytes allocated at run time,
    while the copy-everything build allocates at least one full cache."""
    data, _ = results
    for wl in ("kv_step", "kv_multilayer", "kv_loop"):
        for row in data["workloads"][wl]:
            tmem = row["memory"]["tdf"]
            assert tmem["tdf"]["runtime"]["bytes"] == 0, wl
            assert tmem["tdf"]["static"]["alloc_bytes"] == 0, wl
            assert tmem["tdf_copy_all"]["runtime"]["bytes"] >= row["cache_bytes"], wl
            assert tmem["tdf_copy_all"]["static"]["copy_bytes"] >= row["cache_bytes"], wl


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
    for k in ("tdf_call", "tdf_call_counting", "raw_ctypes", "jax_call"):
        assert _num(co["time"][k]["median"]) and co["time"][k]["median"] > 0


def test_benchmarks_use_only_the_product(monkeypatch):
    """The benchmarks measure what ships: every build the harness times or
    counts is one call of ``tdf.compile`` with that build's options, and the
    program it runs is what ``tdf.compile`` returned."""
    import importlib.util

    import numpy as np

    import tdf

    spec = importlib.util.spec_from_file_location(
        "benchmark_harness", os.path.join(ROOT, "benchmarks", "harness.py"))
    harness = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(harness)
    calls = []
    real_compile = tdf.compile

    def recording_compile(text, **options):
        prog = real_compile(text, **options)
        calls.append((options, prog))
        return prog

    monkeypatch.setattr(tdf, "compile", recording_compile)
    text = """
    func.func @f(%x: tensor<4xf32> {tdf.donate}) -> tensor<4xf32> {
      %e = tensor.empty() : tensor<4xf32>
      %y = linalg.add ins(%x, %x : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
      return %y : tensor<4xf32>
    }"""
    backend = harness.TdfBackend()
    for build, build_options in harness.BUILDS.items():
        for counting in (False, True):
            calls.clear()
            prog = backend.compile(text, build, count_allocations=counting)
            assert len(calls) == 1, build
            options, made = calls[0]
            assert made is prog
            assert options == {"target": "cpu", "count_allocations": counting, **build_options}
            x = np.arange(4, dtype=np.float32)
            np.testing.assert_array_equal(backend.fn(prog, "f")(x.copy()), 2 * x)


def test_whole_compile_scaling_script(tmp_path):
    """``benchmarks/compile_scaling.py --tiny``: every workload is checked
    against ``inplace=False`` and timed through ``tdf.compile`` and
    ``tdf-opt --tdf-lower-to-cpu``; the JSON and the Markdown table are written."""
    script = os.path.join(ROOT, "benchmarks", "compile_scaling.py")
    proc = subprocess.run([sys.executable, script, "--tiny", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    with open(tmp_path / "compile_scaling.json") as fh:
        data = json.load(fh)
    assert data["mode"] == "tiny" and _num(data["tdf_opt_startup_s"]["median"])
    assert set(data["workloads"]) == {"call_inplace_chain", "ew_chain", "mix", "named_chain_donated",
                                      "nested_if", "nested_for", "nested_while", "many_functions"}
    for name, wl in data["workloads"].items():
        assert wl["check"] == "ok", name
        assert len(wl["points"]) + len(wl["skipped_sizes"]) == len(data["sizes"]), name
        for pt in wl["points"]:
            assert _num(pt["ops"]) and pt["ops"] > 0
            assert _num(pt["tdf_compile"]["median"]) and _num(pt["tdf_opt"]["median"])
    md = (tmp_path / "compile_scaling.md").read_text()
    for name in data["workloads"]:
        assert f"#### {name}" in md
