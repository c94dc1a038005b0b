"""The element-wise chain of ``tdf.call`` kernels (``programs.ew_chain``: 8
calls of ``x*1.0001`` / ``x+0.5`` on ``[n]`` f32) against ``jax.jit``, with
the runtime's caching allocator on and off.

Usage (from the repository root)::

    .venv/bin/python benchmarks/ew_chain.py                 # 1M and 16M, 5 rounds per mode
    .venv/bin/python benchmarks/ew_chain.py --sizes 1048576 --rounds 2 --reps 3

Every round is one child process for one allocator mode (``cache``: the
default; ``nocache``: ``TDF_ALLOC_CACHE_BYTES=0``, large blocks still
2 MiB-aligned with huge pages advised; ``system``: the runtime before the
caching allocator, emulated by leaving the runtime's ``malloc``/``free``
definitions out of the engines, so the compiled code calls the C library's),
the order of the modes rotates from round to round, and inside a round every
variant of a size is timed side by side (``harness.time_variants``:
interleaved repetitions, median per variant):

- ``tdf``: ``tdf.compile`` of the chain, input not donated (a fresh result
  per call; the result of the previous call is dropped before the next);
- ``tdf_inplace_off``: the same with ``inplace=False``;
- ``tdf_donated``: the chain with ``%x {tdf.donate}``, each result fed back;
- ``jax``: ``jax.jit`` of the same chain, input not donated;
- ``jax_donated``: ``jax.jit(..., donate_argnums=0)``, each result fed back.

A round also records minor page faults per call (``getrusage``) of ``tdf``
and ``jax`` and the allocator's hits and misses over the ``tdf`` calls. The
summary is the median over rounds of each round's medians and side-by-side
ratios. Writes ``--out`` (default ``benchmarks/results``) ``ew_chain.json``
and ``ew_chain.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

CALLS = 8
MODES = ("cache", "nocache", "system")
RATIOS = (("tdf", "jax"), ("tdf", "jax_donated"), ("tdf_donated", "jax_donated"),
          ("tdf", "tdf_inplace_off"))


def _round(sizes, reps, target_s) -> dict:
    """One round in this process: ``{size: _round_one(...)}``."""
    from tdf import runtime

    if os.environ.get("TDF_BENCH_SYSTEM_MALLOC") == "1":
        # The runtime before the caching allocator: engines resolve malloc &
        # co. to the C library (results are still freed through tdf_rt_free,
        # which passes a block it did not hand out to the C free).
        for name in ("malloc", "calloc", "aligned_alloc", "free"):
            runtime._RUNTIME_SYMBOLS.pop(name, None)
    return {str(n): _round_one(n, reps, target_s) for n in sizes}


def _round_one(n, reps, target_s) -> dict:
    """One size: ``{"time": {variant: median s}, "iqr": ..., "faults":
    {...}, "allocator": {...}}``."""
    import resource

    import harness as H
    import jax
    import numpy as np
    import programs as P

    import tdf
    from tdf.allocator import allocator_stats, reset_allocator_stats

    x0 = np.random.default_rng(1).standard_normal(n, dtype=np.float32)
    c1, c2 = np.float32(1.0001), np.float32(0.5)
    want = x0.copy()
    for i in range(CALLS):
        want = want * c1 if i % 2 == 0 else want + c2

    def jf(x):
        for i in range(CALLS):
            x = x * c1 if i % 2 == 0 else x + c2
        return x

    fresh = tdf.compile(P.ew_chain(n, CALLS)).chain
    off = tdf.compile(P.ew_chain(n, CALLS), inplace=False).chain
    donated = tdf.compile(P.ew_chain(n, CALLS, donate=True)).chain
    jn, jd = jax.jit(jf), jax.jit(jf, donate_argnums=0)
    xj = jax.numpy.asarray(x0)
    for name, got in (("tdf", fresh(x0)), ("tdf_inplace_off", off(x0)),
                      ("tdf_donated", donated(x0.copy())), ("jax", jn(xj)),
                      ("jax_donated", jd(jax.numpy.asarray(x0)))):
        if not np.allclose(np.asarray(got), want, rtol=1e-4, atol=1e-4):
            raise AssertionError(f"{name}: result differs from numpy (n={n})")
    box = {"tdf_donated": x0.copy(), "jax_donated": jax.numpy.asarray(x0)}

    def step_donated():
        box["tdf_donated"] = donated(box["tdf_donated"])

    def step_jax_donated():
        box["jax_donated"] = jd(box["jax_donated"])
        box["jax_donated"].block_until_ready()

    variants = {
        "tdf": lambda: fresh(x0),
        "tdf_inplace_off": lambda: off(x0),
        "tdf_donated": step_donated,
        "jax": lambda: jn(xj).block_until_ready(),
        "jax_donated": step_jax_donated,
    }
    timing = H.time_variants(variants, reps, target_s)

    def faults(fn, k=5):
        fn()
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        for _ in range(k):
            fn()
        return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / k
    reset_allocator_stats()
    tdf_faults = faults(variants["tdf"])
    stats = allocator_stats()
    return {
        "time": {name: t["median"] for name, t in timing.items()},
        "iqr": {name: t["iqr"] for name, t in timing.items()},
        "faults": {"tdf": tdf_faults, "jax": faults(variants["jax"])},
        "allocator": {k: stats[k] for k in ("hits", "misses", "limit_bytes")},
    }


def _child(mode, sizes, reps, target_s) -> dict:
    env = dict(os.environ)
    env.pop("TDF_ALLOC_CACHE_BYTES", None)
    env.pop("TDF_BENCH_SYSTEM_MALLOC", None)
    if mode == "nocache":
        env["TDF_ALLOC_CACHE_BYTES"] = "0"
    elif mode == "system":
        env["TDF_BENCH_SYSTEM_MALLOC"] = "1"
    cmd = [sys.executable, os.path.abspath(__file__), "--child", "--sizes",
           ",".join(map(str, sizes)), "--reps", str(reps), "--target-s", str(target_s)]
    run = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    if run.returncode != 0:
        raise RuntimeError(f"round ({mode}) failed:\n{run.stderr[-3000:]}")
    return json.loads(run.stdout.strip().splitlines()[-1])


def _median(xs):
    return statistics.median(xs) if xs else None


def summarize(rounds: dict, sizes) -> dict:
    """Median over rounds of every variant's median and of every ratio
    (ratios are taken within a round, side by side)."""
    summary = {}
    for mode, results in rounds.items():
        for n in map(str, sizes):
            per = [r[n] for r in results]
            entry = {"time": {}, "ratios": {}, "faults": {}, "rounds": len(per)}
            for v in per[0]["time"]:
                entry["time"][v] = _median([p["time"][v] for p in per])
            for a, b in RATIOS:
                entry["ratios"][f"{a}/{b}"] = _median([p["time"][a] / p["time"][b] for p in per])
            for v in per[0]["faults"]:
                entry["faults"][v] = _median([p["faults"][v] for p in per])
            entry["allocator"] = per[-1]["allocator"]
            summary.setdefault(n, {})[mode] = entry
    return summary


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _fmt_t(s):
    return f"{s * 1e3:.2f} ms" if s >= 1e-3 else f"{s * 1e6:.1f} µs"


def markdown(summary: dict, meta: dict) -> str:
    lines = ["# ew_chain: tdf vs jax.jit, caching allocator on/off", "",
             f"{meta['when']}, {meta['machine']}; {meta['rounds']} rounds per mode "
             f"(alternating child processes), {meta['reps']} interleaved repetitions per "
             f"round; medians over rounds of each round's medians (time per program call of "
             f"{CALLS} kernel calls). Ratios are taken within a round (side by side), then "
             f"the median over rounds.", ""]
    variants = ("tdf", "tdf_inplace_off", "tdf_donated", "jax", "jax_donated")
    lines.append("| n | allocator | " + " | ".join(variants) + " | "
                 + " | ".join(f"{a}/{b}" for a, b in RATIOS) + " | faults/call tdf | jax |")
    lines.append("|---" * (2 + len(variants) + len(RATIOS) + 2) + "|")
    for n, modes in summary.items():
        for mode, e in modes.items():
            lines.append(f"| {int(n):,} | {mode} | "
                         + " | ".join(_fmt_t(e["time"][v]) for v in variants) + " | "
                         + " | ".join(f"{e['ratios'][f'{a}/{b}']:.3f}" for a, b in RATIOS)
                         + f" | {e['faults']['tdf']:.0f} | {e['faults']['jax']:.0f} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=f"{1 << 20},{1 << 24}")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--target-s", type=float, default=0.05)
    parser.add_argument("--modes", default=",".join(MODES),
                        help="allocator modes to run (cache,nocache,system)")
    parser.add_argument("--out", default=os.path.join(HERE, "results"))
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    if args.child:
        print(json.dumps(_round(sizes, args.reps, args.target_s)))
        return
    modes = tuple(m for m in args.modes.split(",") if m)
    unknown = [m for m in modes if m not in MODES]
    if unknown or not modes:
        parser.error(f"--modes: unknown mode(s) {', '.join(unknown)} (choose from {', '.join(MODES)})")
    rounds = {mode: [] for mode in modes}
    for r in range(args.rounds):
        for mode in modes[r % len(modes):] + modes[:r % len(modes)]:
            t0 = time.time()
            rounds[mode].append(_child(mode, sizes, args.reps, args.target_s))
            print(f"round {r + 1}/{args.rounds} {mode}: {time.time() - t0:.0f} s", file=sys.stderr)
    summary = summarize(rounds, sizes)
    meta = {"when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "machine": f"{_cpu_name()}, {os.cpu_count()} cores",
            "rounds": args.rounds, "reps": args.reps, "calls": CALLS}
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "ew_chain.json"), "w") as f:
        json.dump({"meta": meta, "summary": summary, "rounds": rounds}, f, indent=1)
    text = markdown(summary, meta)
    with open(os.path.join(args.out, "ew_chain.md"), "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
