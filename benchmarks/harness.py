"""Timing, statistics and backends shared by the benchmark workloads.

* :func:`time_variants` times several variants of one workload **side by
  side**: repetitions are interleaved (round robin over the variants) so that
  machine drift hits every variant alike; each repetition runs a variant
  ``inner`` times and records the mean time per call. The summary is the
  median and the inter-quartile range over repetitions.
* :func:`ratio` states a ratio of two medians (None when undefined).
* :class:`TdfBackend` compiles a program with the product's ``tdf.compile``
  only, in three builds: in place on, in place off (``inplace=False``) and the
  functional baseline (``copy_before_write=True``); byte counts come from
  separate ``count_allocations=True`` builds (timed builds never count).
"""

from __future__ import annotations

import gc
import statistics
import time

import numpy as np

__all__ = ["summarize", "time_variants", "ratio", "TdfBackend", "BUILDS", "static_counts",
           "has_pass", "copy_bandwidth", "fit_exponent"]


def summarize(samples) -> dict:
    """``{"median", "q1", "q3", "iqr", "min", "n"}`` of a list of seconds."""
    xs = sorted(float(x) for x in samples)
    if len(xs) >= 2:
        q1, _, q3 = statistics.quantiles(xs, n=4, method="inclusive")
    else:
        q1 = q3 = xs[0]
    return {"median": statistics.median(xs), "q1": q1, "q3": q3, "iqr": q3 - q1,
            "min": xs[0], "n": len(xs)}


def _calibrate(fn, target_s: float, max_inner: int) -> int:
    t0 = time.perf_counter()
    fn()
    dt = max(time.perf_counter() - t0, 1e-7)
    return int(max(1, min(max_inner, target_s / dt)))


def time_variants(variants: dict, reps: int, target_s: float = 0.02,
                  max_inner: int = 2000) -> dict:
    """Time every ``variants[name]()`` (one call = one step) side by side.

    Each variant is warmed up once, then ``inner`` is calibrated so that one
    repetition takes about ``target_s``; ``reps`` repetitions are interleaved
    across variants, the order rotated by one each round: whatever runs
    first in a round (after the collector) or right after ``jax.jit`` (whose
    thread pool spins on after its work) is a different variant each time.
    In a fixed order, two builds of one program differed by 5-27% (the
    first listed slower). Returns ``{name: summarize(seconds per call) |
    {"inner"}}``.
    """
    inner = {}
    for name, fn in variants.items():
        fn()  # warm-up (JIT code generation, JAX tracing)
        inner[name] = _calibrate(fn, target_s, max_inner)
    samples = {name: [] for name in variants}
    gc_was = gc.isenabled()
    gc.disable()
    try:
        names = list(variants)
        for rep in range(reps):
            shift = rep % len(names)
            for name in names[shift:] + names[:shift]:
                fn, k = variants[name], inner[name]
                t0 = time.perf_counter()
                for _ in range(k):
                    fn()
                samples[name].append((time.perf_counter() - t0) / k)
            gc.collect()
    finally:
        if gc_was:
            gc.enable()
    out = {}
    for name, xs in samples.items():
        out[name] = summarize(xs)
        out[name]["inner"] = inner[name]
    return out


def ratio(a, b):
    """``a / b`` for two numbers; None when either is missing or ``b`` is 0
    (0/0 is reported as 1.0: both allocate nothing)."""
    if a is None or b is None:
        return None
    if b == 0:
        return 1.0 if a == 0 else None
    return a / b


def copy_bandwidth(nbytes: int, reps: int = 5) -> dict:
    """Measured copy bandwidth of this machine: ``np.copyto`` of ``nbytes``
    (bytes copied per second, median over ``reps``; read + write traffic is
    twice that)."""
    src = np.ones(nbytes // 4, np.float32)
    dst = np.empty_like(src)
    np.copyto(dst, src)
    xs = []
    for _ in range(reps):
        t0 = time.perf_counter()
        np.copyto(dst, src)
        xs.append(time.perf_counter() - t0)
    s = summarize(xs)
    return {"bytes": nbytes, "seconds": s, "bytes_per_s": nbytes / s["median"]}


def fit_exponent(sizes, seconds) -> float | None:
    """Least-squares slope of log(seconds) against log(size) (growth exponent)."""
    pts = [(n, t) for n, t in zip(sizes, seconds) if n and t and t > 0]
    if len(pts) < 2:
        return None
    x = np.log([p[0] for p in pts])
    y = np.log([p[1] for p in pts])
    return float(np.polyfit(x, y, 1)[0])


def has_pass(name: str) -> bool:
    """True when a tdf pass or pipeline called ``name`` is registered."""
    from tdf.passes import get_all_passes, get_all_pipelines
    return name in get_all_passes() or name in get_all_pipelines()


# build name -> tdf.compile keyword arguments
BUILDS = {
    "tdf": {"inplace": True},
    "tdf_inplace_off": {"inplace": False},
    "tdf_copy_all": {"copy_before_write": True},
}


def static_counts(report, function: str) -> dict:
    """Static allocation/copy counts of one entry function from
    ``prog.report()``: ``allocs``, ``alloc_bytes``, ``allocs_in_loops``,
    ``copies``, ``copy_bytes`` (every ``memref.copy``) and
    ``update_copy_bytes`` (copies into a slice of their destination: the
    update itself, not a copy of a whole tensor)."""
    allocs = [a for a in report.allocations if a.function == function]
    copies = [c for c in report.copies if c.function == function]
    return {"allocs": len(allocs), "alloc_bytes": report.bytes_allocated(function),
            "allocs_in_loops": sum(1 for a in allocs if a.in_loop),
            "copies": len(copies), "copy_bytes": report.bytes_copied(function),
            "update_copy_bytes": sum(c.nbytes or 0 for c in copies if c.into_view)}


class TdfBackend:
    """Compiles tdf programs with the product's ``tdf.compile`` -- and
    nothing else -- in the three builds of :data:`BUILDS` (in place on, in
    place off, copy-before-write baseline), for timing or with run-time
    allocation counting. A build the product cannot compile is recorded in
    :attr:`failures` (a product bug to report) and left out of the tables."""

    name = "tdf.compile"

    def __init__(self):
        import tdf
        self._tdf = tdf
        self.failures = []

    def compile(self, text: str, build: str = "tdf", count_allocations: bool = False,
                notes: dict | None = None):
        """``tdf.compile(text, **BUILDS[build], count_allocations=...)``;
        on failure None (with the error in ``notes`` and :attr:`failures`)
        when ``notes`` is given, else the exception propagates."""
        try:
            return self._tdf.compile(text, target="cpu", count_allocations=count_allocations,
                                     **BUILDS[build])
        except Exception as err:
            if notes is None:
                raise
            self._fail(text, build, err)
            notes[build] = f"not built: {self.failures[-1]['error']}"
            return None

    def _fail(self, text, build, err):
        head = text.strip().splitlines()
        first = next((ln for ln in head if "func.func @" in ln and "memref" not in ln), head[0])
        detail = [ln for ln in str(err).splitlines() if "error" in ln][:2]
        self.failures.append({"program": first.strip()[:120], "build": build,
                              "error": f"{type(err).__name__}: " + " | ".join(
                                  d[:240] for d in (detail or str(err).splitlines()[:1]))})

    @staticmethod
    def fn(prog, name: str):
        """The callable entry function ``name`` of ``prog``."""
        return getattr(prog, name)

    def memory(self, text: str, fname: str, args_fn, notes: dict) -> dict:
        """Bytes one call of ``fname`` allocates, per build: ``static``
        (:func:`static_counts` of the report) and ``runtime``
        (``prog.allocation_stats()`` of a ``count_allocations=True`` build,
        counted over one call on fresh ``args_fn()``)."""
        out = {}
        for build in BUILDS:
            prog = self.compile(text, build, count_allocations=True, notes=notes)
            if prog is None:
                continue
            args = args_fn()
            prog.reset_allocation_stats()
            res = prog[fname](*args)
            stats = prog.allocation_stats().as_dict()
            del res
            out[build] = {"static": static_counts(prog.report(), fname), "runtime": stats}
        return out

    @staticmethod
    def report(prog):
        """``str(prog.report())``."""
        return str(prog.report())
