"""The cost of the call path and of run-time safety checks.

One process, interleaved repetitions (``harness.time_variants``), ratios of
medians. Four measurements:

1. **KV step per Python call** (a donated ``[heads, seq, dim]`` cache, one
   token's row per head written at a dynamic position): tdf with bounds
   checks on and off, the locked shared-descriptor variant, numpy slice
   assignment ``cache[:, pos] = row``, and the bare compiled call with
   prepared arguments (``tdf._tdf.time_bare_calls``: no Python at all).
   Goal: tdf ≤ 2× numpy; call overhead (tdf − bare) ≤ 1 µs.
2. **Bounds-check cost inside a compiled loop**: 256 rows written at
   positions read from an argument tensor (one check per iteration, which no
   interval can prove), checks on vs off.
3. **Per-call state vs a lock**: the same KV step from 4 threads at once,
   per-call descriptors (what ships) vs one shared set under a mutex; and the
   single-thread cost of each.

Run: ``.venv/bin/python benchmarks/runtime_calls.py [--quick] [--out DIR]``;
writes ``runtime_calls.json`` and ``runtime_calls.md`` (default
``benchmarks/results/``).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import sys
import threading
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

import tdf  # noqa: E402
from tdf import _tdf  # noqa: E402
from tdf.runtime import EntryFunction  # noqa: E402


def kv_text(heads, seq, dim):
    return f"""
func.func @step(%cache: tensor<{heads}x{seq}x{dim}xf32> {{tdf.donate}}, %row: tensor<{heads}x1x{dim}xf32>,
                %pos: index) -> tensor<{heads}x{seq}x{dim}xf32> {{
  %new = tensor.insert_slice %row into %cache[0, %pos, 0] [{heads}, 1, {dim}] [1, 1, 1]
      : tensor<{heads}x1x{dim}xf32> into tensor<{heads}x{seq}x{dim}xf32>
  return %new : tensor<{heads}x{seq}x{dim}xf32>
}}
"""


def loop_text(seq, dim, n):
    return f"""
func.func @fill(%cache: tensor<{seq}x{dim}xf32> {{tdf.donate}}, %rows: tensor<{n}x{dim}xf32>,
                %positions: tensor<{n}xindex>) -> tensor<{seq}x{dim}xf32> {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %cn = arith.constant {n} : index
  %r = scf.for %i = %c0 to %cn step %c1 iter_args(%c = %cache) -> tensor<{seq}x{dim}xf32> {{
    %p = tensor.extract %positions[%i] : tensor<{n}xindex>
    %row = tensor.extract_slice %rows[%i, 0] [1, {dim}] [1, 1] : tensor<{n}x{dim}xf32> to tensor<1x{dim}xf32>
    %u = tensor.insert_slice %row into %c[%p, 0] [1, {dim}] [1, 1] : tensor<1x{dim}xf32> into tensor<{seq}x{dim}xf32>
    scf.yield %u : tensor<{seq}x{dim}xf32>
  }}
  return %r : tensor<{seq}x{dim}xf32>
}}
"""


def locked_copy(fn, keep):
    return EntryFunction(fn.name, fn.params, fn.results, fn.returned_args, fn.address,
                         keepalive=keep, shared_state=True)


def bench_kv_step(cfg):
    heads, seq, dim = cfg["kv"]
    text = kv_text(heads, seq, dim)
    on = tdf.compile(text, filename="kv.mlir")
    off = tdf.compile(text, filename="kv.mlir", bounds_checks=False)
    locked = locked_copy(on.step, on)
    cache = np.zeros((heads, seq, dim), np.float32)
    row = np.ones((heads, 1, dim), np.float32)
    reference = cache.copy()
    reference[:, 5] = row[:, 0]
    for fn in (on.step, off.step, locked):
        c = np.zeros_like(cache)
        assert fn(c, row, 5) is c and np.array_equal(c, reference)
    packed = on.step.packed_arguments(cache, row, 5)
    bare_address, packed_address = on.step.address, ctypes.addressof(packed)
    pos = 5

    def numpy_step():
        cache[:, pos] = row[:, 0]

    variants = {
        "numpy_slice_assign": numpy_step,
        "tdf_bounds_on": lambda: on.step(cache, row, pos),
        "tdf_bounds_off": lambda: off.step(cache, row, pos),
        "tdf_locked_shared_state": lambda: locked(cache, row, pos),
        "raw_ctypes": lambda: on.step._cfunc(packed),
    }
    timing = H.time_variants(variants, cfg["reps"], cfg["target_s"], max_inner=cfg["max_inner"])
    bare = [_tdf.time_bare_calls(bare_address, packed_address, cfg["bare_calls"])
            for _ in range(cfg["reps"])]
    timing["bare_compiled_call"] = H.summarize(bare)
    med = {k: v["median"] for k, v in timing.items()}
    return {
        "shape": [heads, seq, dim],
        "time": timing,
        "ratio_tdf/numpy": H.ratio(med["tdf_bounds_on"], med["numpy_slice_assign"]),
        "ratio_bounds_on/off": H.ratio(med["tdf_bounds_on"], med["tdf_bounds_off"]),
        "call_overhead_s": med["tdf_bounds_on"] - med["bare_compiled_call"],
        "call_overhead_bounds_off_s": med["tdf_bounds_off"] - med["bare_compiled_call"],
        "locked_minus_per_call_s": med["tdf_locked_shared_state"] - med["tdf_bounds_on"],
    }


def bench_loop(cfg):
    seq, dim, n = cfg["loop"]
    text = loop_text(seq, dim, n)
    on = tdf.compile(text, filename="loop.mlir")
    off = tdf.compile(text, filename="loop.mlir", bounds_checks=False)
    rng = np.random.default_rng(0)
    cache = np.zeros((seq, dim), np.float32)
    rows = rng.standard_normal((n, dim)).astype(np.float32)
    positions = rng.integers(0, seq, n).astype(np.int64)
    expected = cache.copy()
    for i, p in enumerate(positions):
        expected[p] = rows[i]
    for prog in (on, off):
        c = np.zeros_like(cache)
        assert np.array_equal(prog.fill(c, rows, positions), expected)
    variants = {
        "bounds_on": lambda: on.fill(cache, rows, positions),
        "bounds_off": lambda: off.fill(cache, rows, positions),
    }
    timing = H.time_variants(variants, cfg["reps"], cfg["target_s"], max_inner=cfg["max_inner"])
    return {"shape": [seq, dim, n], "time": timing,
            "ratio_bounds_on/off": H.ratio(timing["bounds_on"]["median"],
                                           timing["bounds_off"]["median"])}


def _threaded_rate(fn, threads, calls, shape):
    heads, seq, dim = shape
    caches = [np.zeros((heads, seq, dim), np.float32) for _ in range(threads)]
    row = np.ones((heads, 1, dim), np.float32)
    barrier = threading.Barrier(threads + 1)

    def worker(t):
        cache = caches[t]
        barrier.wait()
        for k in range(calls):
            fn(cache, row, (k + t) % seq)

    pool = [threading.Thread(target=worker, args=(t,)) for t in range(threads)]
    for t in pool:
        t.start()
    barrier.wait()
    start = time.perf_counter()
    for t in pool:
        t.join()
    return (time.perf_counter() - start) / (threads * calls)


def bench_threads(cfg):
    heads, seq, dim = cfg["kv"]
    prog = tdf.compile(kv_text(heads, seq, dim))
    locked = locked_copy(prog.step, prog)
    samples = {"per_call_state_4_threads": [], "locked_shared_state_4_threads": []}
    for _ in range(cfg["reps"]):
        samples["per_call_state_4_threads"].append(
            _threaded_rate(prog.step, 4, cfg["thread_calls"], (heads, seq, dim)))
        samples["locked_shared_state_4_threads"].append(
            _threaded_rate(locked, 4, cfg["thread_calls"], (heads, seq, dim)))
    timing = {k: H.summarize(v) for k, v in samples.items()}
    return {"time_per_call": timing,
            "ratio_locked/per_call": H.ratio(timing["locked_shared_state_4_threads"]["median"],
                                             timing["per_call_state_4_threads"]["median"])}


def _us(s):
    return f"{s * 1e6:.3f} µs"


def markdown(result):
    kv, loop, threads = result["kv_step"], result["loop"], result["threads"]
    lines = ["# Runtime calls: call path, bounds checks, threads", "",
             f"KV step, cache {kv['shape']} f32, one row per head at a dynamic position (median per call):", "",
             "| variant | time |", "| --- | --- |"]
    for name, t in kv["time"].items():
        lines.append(f"| {name} | {_us(t['median'])} |")
    lines += ["",
              f"- tdf / numpy slice assignment: **{kv['ratio_tdf/numpy']:.2f}×** (goal ≤ 2×)",
              f"- call overhead over the bare compiled call: **{_us(kv['call_overhead_s'])}** "
              f"(bounds off: {_us(kv['call_overhead_bounds_off_s'])}; goal ≤ 1 µs)",
              f"- bounds checks on / off (per call): **{kv['ratio_bounds_on/off']:.3f}×**",
              f"- locked shared state − per-call state (1 thread): {_us(kv['locked_minus_per_call_s'])}",
              "",
              f"Compiled loop writing {loop['shape'][2]} rows of a {loop['shape'][:2]} cache at positions "
              f"from an argument (one check per iteration): bounds on / off = "
              f"**{loop['ratio_bounds_on/off']:.3f}×** "
              f"({_us(loop['time']['bounds_on']['median'])} vs {_us(loop['time']['bounds_off']['median'])})",
              "",
              "4 threads calling the KV step at once (wall time per call):", "",
              "| variant | time |", "| --- | --- |"]
    for name, t in threads["time_per_call"].items():
        lines.append(f"| {name} | {_us(t['median'])} |")
    lines += ["", f"- locked / per-call: **{threads['ratio_locked/per_call']:.2f}×**", ""]
    return "\n".join(lines)


CONFIGS = {
    "full": {"kv": (8, 1024, 64), "loop": (1024, 64, 256), "reps": 7, "target_s": 0.02,
             "max_inner": 200000, "bare_calls": 200000, "thread_calls": 20000},
    "quick": {"kv": (8, 256, 64), "loop": (256, 64, 64), "reps": 5, "target_s": 0.01,
              "max_inner": 50000, "bare_calls": 50000, "thread_calls": 5000},
    "tiny": {"kv": (2, 16, 8), "loop": (16, 8, 8), "reps": 3, "target_s": 0.002,
             "max_inner": 1000, "bare_calls": 1000, "thread_calls": 200},
}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--tiny", action="store_true")
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results"))
    args = parser.parse_args(argv)
    cfg = CONFIGS["tiny" if args.tiny else "quick" if args.quick else "full"]
    result = {"config": {k: list(v) if isinstance(v, tuple) else v for k, v in cfg.items()},
              "kv_step": bench_kv_step(cfg), "loop": bench_loop(cfg), "threads": bench_threads(cfg)}
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "runtime_calls.json"), "w") as f:
        json.dump(result, f, indent=2)
    text = markdown(result)
    with open(os.path.join(args.out, "runtime_calls.md"), "w") as f:
        f.write(text)
    print(text)
    return result


if __name__ == "__main__":
    main()
