"""Benchmark: the persistent compilation cache (``tdf.cache``) against
``jax.jit``'s cold first call, each first call in a fresh process.

For every model of ``benchmarks/models.py`` (full sizes) and a JAX program
of 2,000 element-wise ops (``ew2000`` on 1,024 elements, ``ew2000_65k`` on
65,536, where running it costs as much as tracing it), fresh Python
processes measure the first call ``f(*args)`` after the same set-up (jax,
numpy and tdf imported, the arguments built as numpy arrays), to the result
(``block_until_ready`` for JAX):

- ``jax_cold``: ``jax.jit(f, donate_argnums=...)``; its first call traces,
  lowers, compiles with XLA and runs (JAX's own persistent cache is off);
- ``tdf_cold``: ``tdf.jax.jit`` with the cache off (``TDF_CACHE_DIR=``):
  trace, translation, the whole tdf pipeline, LLVM and the run;
- ``tdf_tiered``: the same with tiered compilation (``TDF_TIERED=1``,
  ``tdf.tiers``): the first call runs LLVM's ``-O0`` code while the
  optimizing compile runs in the background;
- ``tdf_warm``: ``tdf.jax.jit`` with a cache that a previous process filled
  (``TDF_CACHE_DIR=<tmp>``): trace, translation, the cache lookup and the
  object loaded instead of the pipeline and LLVM, and the run.

Each is repeated ``--reps`` times (fresh processes; medians reported), and
every tdf run's results are checked against ``jax.jit``'s in the same
process after the timed call. The warm runs also report where their time
went: tracing, the jaxpr's cache key, ``tdf.compile`` (the lookup and the
object loaded) and the rest (arguments, the run); a warm run must neither
translate the jaxpr nor compile. The goal (issue 21):
``tdf_warm / jax_cold <= 0.25``.

    .venv/bin/python benchmarks/cache.py              # everything, ~5-10 min
    .venv/bin/python benchmarks/cache.py --only adam,ew2000 --reps 3
    .venv/bin/python benchmarks/cache.py --tiny       # small sizes (smoke test)

Run it on a quiet machine (it prints the load average before and after).
Writes ``benchmarks/results/cache.json`` and prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))

# One timed first call in a fresh process: prints one JSON line. Every
# variant makes its first call from the same line (first_call): tdf.jax.jit's
# cache key includes the call site (the fallback source location).
_CHILD = r"""
import json, os, sys, time
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "10")
if {snapshot!r}:  # tdf from a frozen copy, not the (editable) working tree
    sys.meta_path[:] = [f for f in sys.meta_path
                        if not type(f).__module__.startswith("_editable")]
    sys.path.insert(0, {snapshot!r})
sys.path.insert(0, {here!r})
sys.path.insert(0, os.path.join({here!r}, "..", "examples"))
import numpy as np
import jax, jax.numpy as jnp
import tdf, tdf.jax
import cache as bench
name, variant, tiny = {name!r}, {variant!r}, {tiny!r}
fn, args, donate, atol = bench.workload(name, tiny)
fresh = bench.copy_tree(args)
row = {{"workload": name, "variant": variant}}


def first_call(f, args):
    return f(*args)


if variant == "jax_cold":
    f = jax.jit(fn, donate_argnums=donate)
    t = time.perf_counter()
    jax.block_until_ready(first_call(f, fresh))
    row["seconds"] = time.perf_counter() - t
else:
    stages = bench.instrument()
    f = tdf.jax.jit(fn, donate_argnums=donate)
    t = time.perf_counter()
    out = first_call(f, fresh)
    row["seconds"] = time.perf_counter() - t
    row["stages"] = dict(stages)
    (lowered,) = f._cache.values()
    row["cache"] = lowered._default.report().cache
    row["translated"] = lowered.translated
    ref = jax.jit(fn, donate_argnums=donate)(*jax.tree_util.tree_map(jnp.asarray,
                                                                      bench.copy_tree(args)))
    bench.check(name, out, ref, atol)
print(json.dumps(row))
"""


def instrument() -> dict:
    """Seconds spent in the stages of a tdf.jax.jit first call: ``trace``
    (jax.make_jaxpr), ``key`` (the jaxpr's cache key), ``translate``
    (jaxpr to MLIR), ``tdf.compile`` (with the cache lookup and load, or the
    whole compile); filled in as the call runs."""
    import time

    import tdf.compiler
    from tdf.jax import _api, _cache_key

    stages: dict = {}

    def timed(owner, attr, stage):
        inner = getattr(owner, attr)

        def wrapper(*args, **kwargs):
            t = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                stages[stage] = stages.get(stage, 0.0) + time.perf_counter() - t
        setattr(owner, attr, wrapper)

    timed(_api.JitFunction, "_signature", "trace")
    timed(_cache_key, "program_key", "key")
    timed(_api, "_build_module", "translate")
    timed(_api.Lowered, "as_text", "print")
    timed(tdf.compiler, "compile", "tdf.compile")
    return stages


def copy_tree(tree):
    import jax
    import numpy as np
    return jax.tree_util.tree_map(lambda a: np.array(a, copy=True), tree)


def check(name, ours, ref, atol):
    import jax
    import numpy as np
    ours_leaves, ref_leaves = jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(ref)
    assert len(ours_leaves) == len(ref_leaves), name
    for a, b in zip(ours_leaves, ref_leaves):
        a, b = np.asarray(a), np.asarray(b)
        if a.dtype.kind in "iub":
            assert np.array_equal(a, b), f"{name}: integer results differ"
        else:
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=atol, err_msg=name)


EW_OPS = 2000
# The 2,000-op program on 1,024 elements (its run: ~2 ms) and on 65,536
# (its run: ~100 ms of tanh in both jax.jit and tdf, paid by every first call).
EW_SHAPES = {"ew2000": (1024,), "ew2000_65k": (256, 256)}


def ew2000(x):
    """2,000 element-wise ops (400 x: mul, add, tanh, mul, sub)."""
    import jax.numpy as jnp
    for _ in range(EW_OPS // 5):
        x = jnp.tanh(x * 0.9 + 0.1) - x * 0.01
    return x


def workload(name, tiny):
    """(fn, args, donate_argnums, atol) of a workload."""
    import numpy as np
    if name in EW_SHAPES:
        shape = (64,) if tiny else EW_SHAPES[name]
        x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
        return ew2000, (x,), (), 1e-4
    import models
    fn, args, donate, _, atol = models.workloads(tiny)[name]
    return fn, args, donate, atol


def names(tiny):
    sys.path.insert(0, HERE)
    sys.path.insert(0, os.path.join(HERE, "..", "examples"))
    import models
    return list(models.workloads(tiny)) + list(EW_SHAPES)


def snapshot(folder: str) -> str:
    """A frozen copy of the tdf package (sources, passes, native extension)
    in ``folder``: in a working tree that changes during the run, every
    edit of a tdf source would (rightly) miss the cache."""
    import tdf
    from tdf import _tdf
    target = os.path.join(folder, "tdf")
    shutil.copytree(os.path.dirname(tdf.__file__), target,
                    ignore=shutil.ignore_patterns("__pycache__"))
    native = os.path.dirname(_tdf.__file__)
    for root, _, files in os.walk(native):
        for name in files:
            if name.endswith((".so", ".py")):
                dest = os.path.join(target, os.path.relpath(os.path.join(root, name), native))
                os.makedirs(os.path.dirname(dest), exist_ok=True)
                shutil.copy2(os.path.join(root, name), dest)
    return folder


def _run(name, variant, tiny, cache_dir, frozen=""):
    env = dict(os.environ, TDF_CACHE_DIR=cache_dir, JAX_ENABLE_COMPILATION_CACHE="false",
               TDF_TIERED="1" if variant == "tdf_tiered" else "0")
    code = _CHILD.format(here=HERE, name=name, variant=variant, tiny=tiny, snapshot=frozen)
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=900)
    if proc.returncode != 0:
        raise RuntimeError(f"{name} {variant} failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def bench(name, reps, tiny, frozen=""):
    """Medians of ``reps`` fresh-process first calls of each variant."""
    folder = tempfile.mkdtemp(prefix="tdf-bench-cache-")
    try:
        seconds = {"jax_cold": [], "tdf_cold": [], "tdf_tiered": [], "tdf_warm": []}
        warm_stages = []
        row = {"workload": name}
        first = _run(name, "tdf_fill", tiny, folder, frozen)  # fills the cache
        assert first["cache"].startswith("miss"), first
        for _ in range(reps):
            for variant in seconds:
                cold = variant in ("tdf_cold", "tdf_tiered")
                out = _run(name, variant, tiny, "" if cold else folder, frozen)
                if variant == "tdf_warm":
                    assert out["cache"].startswith("hit") and not out["translated"], out
                    warm_stages.append(out["stages"])
                if cold:
                    assert out["cache"] == "off", out
                seconds[variant].append(out["seconds"])
        row["seconds"] = {k: statistics.median(v) for k, v in seconds.items()}
        row["samples"] = seconds
        row["warm_over_jax_cold"] = row["seconds"]["tdf_warm"] / row["seconds"]["jax_cold"]
        row["cold_over_jax_cold"] = row["seconds"]["tdf_cold"] / row["seconds"]["jax_cold"]
        row["tiered_over_jax_cold"] = row["seconds"]["tdf_tiered"] / row["seconds"]["jax_cold"]
        names = sorted({k for st in warm_stages for k in st})
        row["warm_stages"] = {k: statistics.median(st.get(k, 0.0) for st in warm_stages)
                              for k in names}
        s = row["seconds"]
        print(f"{name}: jax.jit cold {s['jax_cold'] * 1e3:.0f} ms, tdf cold "
              f"{s['tdf_cold'] * 1e3:.0f} ms, tiered {s['tdf_tiered'] * 1e3:.0f} ms, "
              f"tdf warm {s['tdf_warm'] * 1e3:.0f} ms "
              f"(warm / jax cold {row['warm_over_jax_cold']:.2f})", flush=True)
        return row
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tiny", action="store_true")
    parser.add_argument("--only", default="")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--out", default=os.path.join(HERE, "results"))
    parser.add_argument("--snapshot", action="store_true",
                        help="run tdf from a frozen copy of the package (a working tree that "
                             "others edit during the run)")
    args = parser.parse_args(argv)
    load_before = os.getloadavg()
    print(f"load average before: {load_before[0]:.2f}", flush=True)
    todo = [n for n in args.only.split(",") if n] or names(args.tiny)
    frozen = snapshot(tempfile.mkdtemp(prefix="tdf-bench-snapshot-")) if args.snapshot else ""
    try:
        rows = [bench(n, args.reps, args.tiny, frozen) for n in todo]
    finally:
        if frozen:
            shutil.rmtree(frozen, ignore_errors=True)
    load_after = os.getloadavg()
    print(f"load average after: {load_after[0]:.2f}")
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "cache.json"), "w") as f:
        json.dump({"rows": rows, "reps": args.reps, "tiny": args.tiny,
                   "load_average": [load_before[0], load_after[0]],
                   "cpus": os.cpu_count()}, f, indent=1)
    print("| workload | jax.jit cold ms | tdf cold ms | cold / jax | tdf tiered ms | "
          "tiered / jax | tdf warm-cache ms | warm / jax cold |"
          "\n|---|---|---|---|---|---|---|---|")
    for r in rows:
        s = r["seconds"]
        print(f"| {r['workload']} | {s['jax_cold'] * 1e3:.0f} | {s['tdf_cold'] * 1e3:.0f} | "
              f"{r['cold_over_jax_cold']:.2f} | {s['tdf_tiered'] * 1e3:.0f} | "
              f"{r['tiered_over_jax_cold']:.2f} | "
              f"{s['tdf_warm'] * 1e3:.0f} | {r['warm_over_jax_cold']:.2f} |")
    print("\nwarm first call by stage (ms, medians; the rest: argument conversion, the run):\n"
          "| workload | trace | cache key | tdf.compile (hit) | rest |\n|---|---|---|---|---|")
    for r in rows:
        st, total = r["warm_stages"], r["seconds"]["tdf_warm"]
        parts = [st.get("trace", 0.0), st.get("key", 0.0), st.get("tdf.compile", 0.0)]
        print(f"| {r['workload']} | " + " | ".join(f"{v * 1e3:.1f}" for v in parts)
              + f" | {(total - sum(parts)) * 1e3:.1f} |")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, HERE)
    sys.exit(main())
