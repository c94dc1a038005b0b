"""Timing, statistics and backends shared by the benchmark workloads.

* :func:`time_variants` times several variants of one workload **side by
  side**: repetitions are interleaved (round robin over the variants) so that
  machine drift hits every variant alike; each repetition runs a variant
  ``inner`` times and records the mean time per call. The summary is the
  median and the inter-quartile range over repetitions.
* :func:`ratio` states a ratio of two medians (None when undefined).
* :class:`TdfBackend` compiles a program with the product's ``tdf.compile``
  when it exists (``python/tdf/compiler.py``), else with the benchmarks' own
  copy of the pipeline (:mod:`minijit`); the JSON records which one ran.
"""

from __future__ import annotations

import gc
import statistics
import time

import numpy as np

__all__ = ["summarize", "time_variants", "ratio", "TdfBackend", "copy_bandwidth", "fit_exponent"]


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
    across variants. Returns ``{name: summarize(seconds per call) | {"inner"}}``.
    """
    inner = {}
    for name, fn in variants.items():
        fn()  # warm-up (JIT code generation, JAX tracing)
        inner[name] = _calibrate(fn, target_s, max_inner)
    samples = {name: [] for name in variants}
    gc_was = gc.isenabled()
    gc.disable()
    try:
        for _ in range(reps):
            for name, fn in variants.items():
                k = inner[name]
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


class TdfBackend:
    """Compiles tdf programs for timing: ``tdf.compile`` when installed, else
    :func:`minijit.compile_text`. ``fn(prog, name)`` returns a callable
    ``(*arrays) -> result``."""

    def __init__(self, prefer_product: bool = True):
        self.name = "minijit"
        self.fallback_reason = None
        self.notes = []
        self.failures = []  # programs tdf.compile failed on (timed with minijit instead)
        self._compile = None
        self._mode = {True: True, False: False}  # requested inplace -> inplace passed
        if not prefer_product:
            self.fallback_reason = "minijit requested"
            return
        try:
            import importlib.util
            if importlib.util.find_spec("tdf.compiler") is None:
                self.fallback_reason = "tdf.compiler not installed"
                return
            import tdf
            from programs import trivial
            ok = {}
            for inplace in (True, False):  # usable end to end in this mode?
                try:
                    prog = tdf.compile(trivial(), target="cpu", inplace=inplace)
                    out = getattr(prog, "tiny")(np.zeros(4, np.float32))
                    ok[inplace] = bool(np.allclose(np.asarray(out), 1.0))
                except Exception as err:
                    ok[inplace] = False
                    self.notes.append(f"tdf.compile(inplace={inplace}) failed: "
                                      f"{type(err).__name__}: {str(err).splitlines()[0][:160]}")
            if not ok[False]:
                raise RuntimeError("; ".join(self.notes) or "tdf.compile probe failed")
            if not ok[True]:
                self._mode[True] = False
                self.notes.append("tdf.compile(inplace=True) unusable (tdf-insert-inplace not "
                                  "registered): 'tdf' was timed with inplace=False, i.e. donation "
                                  "and One-Shot in-place only, no in-place rewrite")
            self._compile = tdf.compile
            self.name = "tdf.compile"
        except Exception as err:  # not there yet / not working: measure with minijit
            self._compile = None
            self.fallback_reason = f"{type(err).__name__}: {str(err).splitlines()[0][:200]}"

    def compile(self, text: str, inplace: bool):
        """A compiled program (product compiler, or minijit)."""
        import minijit
        if self._compile is not None:
            try:
                return self._compile(text, target="cpu", inplace=self._mode[inplace])
            except Exception as err:  # a product bug must not stop the whole run
                self._fail(text, inplace, "tdf.compile", err)
        try:
            return minijit.compile_text(text, inplace=inplace)
        except minijit.UnsupportedProgram:
            raise
        except Exception as err:
            if not inplace:
                raise
            self._fail(text, inplace, "minijit", err)
            # last resort: the same pipeline without tdf-insert-inplace
            return minijit.compile_text(text, inplace=True, insert_inplace=False)

    def _fail(self, text, inplace, who, err):
        head = text.strip().splitlines()
        first = next((ln for ln in head if "func.func @" in ln and "memref" not in ln), head[0])
        detail = [ln for ln in str(err).splitlines() if "error" in ln][:2]
        self.failures.append({"program": first[:120], "inplace": inplace, "compiler": who,
                              "error": f"{type(err).__name__}: " + " | ".join(
                                  d[:240] for d in (detail or str(err).splitlines()[:1]))})

    def fn(self, prog, name: str):
        """The callable for function ``name`` of ``prog``."""
        import minijit
        if not isinstance(prog, minijit.MiniProgram):
            return getattr(prog, name)
        return prog.fast(name)

    def report(self, prog):
        """``prog.report()`` when the product compiler provides it (as text/JSON-able)."""
        rep = getattr(prog, "report", None)
        if rep is None:
            return None
        try:
            r = rep()
        except Exception as err:  # the report is informative only
            return f"report() failed: {err}"
        if isinstance(r, (dict, list, int, float)) or r is None:
            return r
        return str(r)
