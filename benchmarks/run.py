"""Run every tdf benchmark and write results.json, results.md and PNG plots.

Usage (from the repository root)::

    .venv/bin/python benchmarks/run.py            # full run (~5 min on 2 cores)
    .venv/bin/python benchmarks/run.py --quick    # < ~1 min
    .venv/bin/python benchmarks/run.py --tiny     # seconds (the smoke test)

Options: ``--out DIR`` (default ``benchmarks/results``), ``--only a,b`` (run a
subset of: kv_step, kv_multilayer, kv_loop, ew_chain, log_concat,
embed_update, compile_scaling, compile_vs_jax, call_overhead), ``--no-plots``.

Every tdf number comes from the product's ``tdf.compile``: in place on
(``tdf``), ``inplace=False`` (``tdf_inplace_off``), ``copy_before_write=True``
(``tdf_copy_all``, the functional baseline); bytes from separate
``count_allocations=True`` builds. Every figure of one workload is measured
side by side in one process with interleaved repetitions (see :mod:`harness`); the JSON holds medians, IQRs,
byte counts and the ratios the README quotes. See ``benchmarks/README.md``
for what each number means.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
import tracemalloc
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
# Compile times are measured: never a compilation cache hit (tdf.cache).
os.environ["TDF_CACHE_DIR"] = ""
sys.path.insert(0, HERE)

import harness as H  # noqa: E402
import numpy as np  # noqa: E402
import programs as P  # noqa: E402

SIZES = {
    "tiny": {
        "reps": 3, "target_s": 0.002, "bw_bytes": 8 << 20,
        "kv_step": [(2, 32, 16)], "kv_multilayer": [(2, 2, 32, 16)],
        "kv_loop": [(2, 32, 16, 8)], "ew_chain": [(4096, 4)], "log_concat": [(3, 1024)],
        "embed_update": [(256, 16, 4)], "compile_scaling": [200, 800, 3200],
        "compile_vs_jax": (4096, 4), "overhead_calls": 200,
    },
    "quick": {
        "reps": 5, "target_s": 0.01, "bw_bytes": 64 << 20,
        "kv_step": [(8, 256, 64), (16, 1024, 128)], "kv_multilayer": [(4, 8, 256, 64)],
        "kv_loop": [(8, 256, 64, 32)], "ew_chain": [(1 << 20, 8)], "log_concat": [(4, 1 << 18)],
        "embed_update": [(10000, 128, 16)], "compile_scaling": [1000, 4000, 16000],
        "compile_vs_jax": (1 << 20, 8), "overhead_calls": 2000,
    },
    "full": {
        "reps": 7, "target_s": 0.02, "bw_bytes": 256 << 20,
        "kv_step": [(8, 256, 64), (16, 1024, 128), (32, 2048, 128)],
        "kv_multilayer": [(4, 8, 256, 64), (8, 16, 1024, 64)],
        "kv_loop": [(8, 256, 64, 64), (16, 1024, 128, 64)],
        "ew_chain": [(1 << 20, 8), (1 << 24, 8)],
        "log_concat": [(4, 1 << 18), (4, 1 << 22)],
        "embed_update": [(10000, 128, 16), (100000, 256, 64)],
        "compile_scaling": [1000, 10000, 100000],
        "compile_vs_jax": (1 << 20, 8), "overhead_calls": 5000,
    },
}

WORKLOADS = ["kv_step", "kv_multilayer", "kv_loop", "ew_chain", "log_concat",
             "embed_update", "compile_scaling", "compile_vs_jax", "call_overhead"]

# ----------------------------------------------------------------- helpers


def _jax():
    import jax
    return jax


def jax_memory(fn, args, donate) -> dict:
    """``compiled.memory_analysis()`` of ``jax.jit(fn, donate_argnums=donate)``:
    argument/output/temp/alias bytes, and ``alloc_bytes`` = output + temp -
    alias (what one call allocates)."""
    jax = _jax()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled = jax.jit(fn, donate_argnums=donate).lower(*args).compile()
    ma = compiled.memory_analysis()
    if ma is None:
        return {"available": False}
    out = {k: int(getattr(ma, k + "_size_in_bytes", 0) or 0)
           for k in ("argument", "output", "temp", "alias", "generated_code")}
    out["alloc_bytes"] = out["output"] + out["temp"] - out["alias"]
    return out


def builds(backend, text: str, fname: str, notes: dict):
    """The three timed tdf builds of ``text`` (``tdf.compile``: in place on,
    in place off, copy-before-write): ``({variant: entry function},
    str(report of the in-place build))``; a build the product cannot compile
    is left out (recorded in ``notes``)."""
    fns, report = {}, None
    for build in H.BUILDS:
        prog = backend.compile(text, build, notes=notes)
        if prog is None:
            continue
        fns[build] = backend.fn(prog, fname)
        if build == "tdf":
            report = backend.report(prog)
    return fns, report


def tdf_variants(fns: dict, make) -> dict:
    """``{variant: make(entry function)}`` for every tdf build that exists."""
    return {name: make(f) for name, f in fns.items()}


def numpy_bytes(fn) -> int:
    """Peak bytes numpy allocates in one call of ``fn`` (tracemalloc)."""
    tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    r = fn()
    peak = tracemalloc.get_traced_memory()[1] - base
    del r
    tracemalloc.stop()
    return int(peak)


def check(name, got, want, tol=1e-5):
    """Numeric check of one variant against the numpy reference."""
    got = np.asarray(got)
    ok = got.shape == want.shape and np.allclose(got, want, rtol=tol, atol=tol)
    if not ok:
        raise AssertionError(f"{name}: result differs from the numpy reference")
    return True


def ratios(timing: dict, mem: dict | None, base="tdf") -> dict:
    """tdf / baseline ratios for time (medians) and bytes (run-time allocated)."""
    t = {k: v["median"] for k, v in timing.items() if v is not None}
    b = (mem or {}).get("alloc_bytes", {})
    out = {}
    for other in ("jax_donated", "jax", "tdf_inplace_off", "tdf_copy_all", "numpy"):
        out[f"time_{base}/{other}"] = H.ratio(t.get(base), t.get(other))
        out[f"bytes_{base}/{other}"] = H.ratio(b.get(base), b.get(other))
    return out


def alloc_bytes_table(tmem: dict, jmem: dict, np_bytes: int | None) -> dict:
    """One ``{variant: bytes allocated per call}`` map for the ratio table."""
    out = {k: v["runtime"]["bytes"] for k, v in tmem.items() if isinstance(v, dict)}
    for k in ("jax_donated", "jax"):
        if k in jmem and jmem[k].get("available", True):
            out[k] = jmem[k]["alloc_bytes"]
    if np_bytes is not None:
        out["numpy"] = np_bytes
    return out


# ----------------------------------------------------------------- workloads


def _stateful(step, state, *rest):
    """Wraps ``state = step(state, *rest)`` as a zero-argument callable."""
    box = [state]

    def call():
        box[0] = step(box[0], *rest)
    call.box = box
    return call


def _row(size, checked, timing, tmem, jmem, npb, notes, report, **extra) -> dict:
    """One result row of a workload: timings, bytes allocated per call (tdf
    counted, JAX memory_analysis, numpy peak) and the ratios of both."""
    bytes_map = alloc_bytes_table(tmem, jmem, npb)
    return {
        "size": size, **extra,
        "checked": checked, "time": timing,
        "memory": {"tdf": tmem, "jax": jmem, "numpy_peak_bytes": npb, "alloc_bytes": bytes_map},
        "ratios": ratios(timing, {"alloc_bytes": bytes_map}),
        "notes": notes,
        "report": report,
    }


def bench_kv(cfg, backend, sizes, layers_mode: bool, loop: bool):
    """KV-cache decode step (``loop``: ``steps`` steps in one compiled loop)."""
    return [_bench_kv_one(cfg, backend, size, layers_mode, loop) for size in sizes]


def _bench_kv_one(cfg, backend, size, layers_mode: bool, loop: bool) -> dict:
    """One size of :func:`bench_kv`."""
    jax = _jax()
    import jax.numpy as jnp
    from jax import lax
    notes = {}
    if layers_mode:
        layers, heads, seq, dim = size[:4]
        steps = None
    elif loop:
        heads, seq, dim, steps = size
        layers = None
    else:
        heads, seq, dim = size
        layers, steps = None, None
    lead = (layers,) if layers else ()
    shape = lead + (heads, seq, dim)
    one = lead + (heads, 1, dim)
    rng = np.random.default_rng(0)
    cache0 = rng.standard_normal(shape, dtype=np.float32)
    pos = seq // 2
    if loop:
        news = rng.standard_normal((steps,) + one, dtype=np.float32)
        text, fname = P.kv_loop(heads, seq, dim, steps, layers), "loop"
        fargs = (news, 0)

        def ref_np(c, news=news):
            for t in range(steps):
                c[..., t:t + 1, :] = news[t]
            return c

        def jf(c, n, p):
            def body(t, c):
                start = (0,) * len(lead) + (0, p + t, 0)
                return lax.dynamic_update_slice(c, n[t], start)
            return lax.fori_loop(0, steps, body, c)
    else:
        new = rng.standard_normal(one, dtype=np.float32)
        text, fname = P.kv_step(heads, seq, dim, layers), "step"
        fargs = (new, pos)

        def ref_np(c, new=new):
            c[..., pos:pos + 1, :] = new
            return c

        def jf(c, n, p):
            return lax.dynamic_update_slice(c, n, (0,) * len(lead) + (0, p, 0))
    want = ref_np(cache0.copy())
    # --- tdf builds (timed)
    fns, report = builds(backend, text, fname, notes)
    oks = {nm: check(nm, f(cache0.copy(), *fargs), want) for nm, f in fns.items()}
    # --- JAX
    jd = jax.jit(jf, donate_argnums=0)
    jn = jax.jit(jf)
    jargs = tuple(jnp.asarray(a) for a in fargs[:1]) + (fargs[1],)
    for nm, f in (("jax_donated", jd), ("jax", jn)):
        oks[nm] = check(nm, np.asarray(f(jnp.asarray(cache0), *jargs)), want)
    jax_mem = {"jax_donated": jax_memory(jf, (jnp.asarray(cache0),) + jargs, (0,)),
               "jax": jax_memory(jf, (jnp.asarray(cache0),) + jargs, ())}

    def jstep(f):
        def s(c):
            r = f(c, *jargs)
            r.block_until_ready()
            return r
        return s

    def npstep(c):
        return ref_np(c)
    variants = tdf_variants(fns, lambda f: _stateful(lambda c: f(c, *fargs), cache0.copy()))
    variants.update({
        "jax_donated": _stateful(jstep(jd), jnp.asarray(cache0)),
        "jax": _stateful(jstep(jn), jnp.asarray(cache0)),
        "numpy": _stateful(npstep, cache0.copy()),
    })
    timing = H.time_variants(variants, cfg["reps"], cfg["target_s"])
    per = steps or 1
    for v in timing.values():
        v["per_step"] = v["median"] / per
    tmem = backend.memory(text, fname, lambda: (cache0.copy(),) + fargs, notes)
    npb = numpy_bytes(lambda: ref_np(cache0.copy())) - cache0.nbytes
    row_bytes = int(np.prod(one)) * 4 * per
    bw = cfg["bandwidth"]["bytes_per_s"]
    return _row(
        {"layers": layers, "heads": heads, "seq": seq, "dim": dim, "steps": steps},
        oks, timing, tmem, jax_mem, max(0, npb), notes, report,
        cache_bytes=int(cache0.nbytes),
        bound={"row_bytes": row_bytes, "row_write_s": row_bytes / bw,
               "full_copy_s": cache0.nbytes / bw})


def bench_ew_chain(cfg, backend, sizes):
    """Element-wise chain of ``calls`` kernel calls on a ``[n]`` tensor, with
    the input not donated (a fresh result, against ``jax.jit``) and donated
    (in place, against ``jax.jit(donate_argnums=0)``; every variant feeds its
    result back as the next input)."""
    return [row for n, calls in sizes for row in _bench_ew_chain_one(cfg, backend, n, calls)]


def _bench_ew_chain_one(cfg, backend, n, calls) -> list[dict]:
    """One size of :func:`bench_ew_chain`: its rows without and with donation."""
    jax = _jax()
    import jax.numpy as jnp
    x0 = np.random.default_rng(1).standard_normal(n, dtype=np.float32)
    c1, c2 = np.float32(1.0001), np.float32(0.5)

    def ref(x):
        y = x.copy()
        for i in range(calls):
            if i % 2 == 0:
                np.multiply(y, c1, out=y)
            else:
                np.add(y, c2, out=y)
        return y

    def jf(x):
        for i in range(calls):
            x = x * c1 if i % 2 == 0 else x + c2
        return x
    want = ref(x0)
    jd, jn = jax.jit(jf, donate_argnums=0), jax.jit(jf)

    def jstep(f):
        def s(x):
            r = f(x)
            r.block_until_ready()
            return r
        return s
    xj = jnp.asarray(x0)
    jmem = {"jax_donated": jax_memory(jf, (jnp.asarray(x0),), (0,)),
            "jax": jax_memory(jf, (jnp.asarray(x0),), ())}
    npb = numpy_bytes(lambda: ref(x0))
    rows = []
    for donate in (False, True):
        notes = {}
        text = P.ew_chain(n, calls, donate=donate)
        fns, report = builds(backend, text, "chain", notes)
        # A donated build may update its argument: check on copies.
        oks = {nm: check(nm, f(x0.copy()), want, 1e-4) for nm, f in fns.items()}
        oks["jax"] = check("jax", np.asarray(jn(jnp.asarray(x0))), want, 1e-4)
        oks["jax_donated"] = check("jax_donated", np.asarray(jd(jnp.asarray(x0))), want, 1e-4)
        if donate:
            variants = tdf_variants(fns, lambda f: _stateful(f, x0.copy()))
        else:
            variants = tdf_variants(fns, lambda f: lambda: f(x0))
        variants.update({
            # donation consumes the input: feed each result back as the next input
            "jax_donated": _stateful(jstep(jd), jnp.asarray(x0)),
            "jax": lambda: jn(xj).block_until_ready(),
            "numpy": lambda: ref(x0),
        })
        timing = H.time_variants(variants, cfg["reps"], cfg["target_s"])
        for v in timing.values():
            v["per_step"] = v["median"] / calls
        tmem = backend.memory(text, "chain", lambda: (x0.copy(),), notes)
        rows.append(_row({"n": n, "calls": calls, "donated": donate}, oks, timing, tmem, jmem,
                         npb, notes, report, tensor_bytes=int(x0.nbytes)))
    return rows


def bench_log_concat(cfg, backend, sizes):
    """A log-concat of ``parts`` computed parts of length ``n``."""
    return [_bench_log_concat_one(cfg, backend, parts, n) for parts, n in sizes]


def _bench_log_concat_one(cfg, backend, parts, n) -> dict:
    """One size of :func:`bench_log_concat`."""
    jax = _jax()
    import jax.numpy as jnp
    notes = {}
    text = P.log_concat(parts, n)
    rng = np.random.default_rng(2)
    ys = [rng.uniform(0.5, 2.0, n).astype(np.float32) for _ in range(parts)]

    def ref(*ys):
        out = np.empty((parts, n), np.float32)
        for i, y in enumerate(ys):
            np.log(y, out=out[i])
        return out

    def jf(*ys):
        return jnp.stack([jnp.log(y) for y in ys])
    want = ref(*ys)
    fns, report = builds(backend, text, "concat", notes)
    jn = jax.jit(jf)
    oks = {nm: check(nm, f(*ys), want, 1e-4) for nm, f in fns.items()}
    yj = [jnp.asarray(y) for y in ys]
    oks["jax"] = check("jax", np.asarray(jn(*yj)), want, 1e-4)
    variants = tdf_variants(fns, lambda f: lambda: f(*ys))
    variants.update({
        "jax": lambda: jn(*yj).block_until_ready(),
        "numpy": lambda: ref(*ys),
    })
    timing = H.time_variants(variants, cfg["reps"], cfg["target_s"])
    # No input has the output's shape: a donated input cannot be reused
    # (JAX warns "Some donated buffers were not usable"), so "jax_donated"
    # is JAX without donation for time and memory_analysis with donation.
    timing["jax_donated"] = dict(timing["jax"], note="donation unusable: same as jax")
    tmem = backend.memory(text, "concat", lambda: tuple(ys), notes)
    jmem = {"jax_donated": jax_memory(jf, yj, tuple(range(parts))),
            "jax": jax_memory(jf, yj, ())}
    npb = numpy_bytes(lambda: ref(*ys))
    return _row({"parts": parts, "n": n}, oks, timing, tmem, jmem, npb, notes, report,
                output_bytes=parts * n * 4)


def bench_embed(cfg, backend, sizes):
    """Embedding-table row update on a donated table."""
    return [_bench_embed_one(cfg, backend, vocab, dim, k) for vocab, dim, k in sizes]


def _bench_embed_one(cfg, backend, vocab, dim, k) -> dict:
    """One size of :func:`bench_embed`."""
    jax = _jax()
    import jax.numpy as jnp
    notes = {}
    text = P.embed_update(vocab, dim, k)
    rng = np.random.default_rng(3)
    table0 = rng.standard_normal((vocab, dim), dtype=np.float32)
    idx = rng.choice(vocab, size=k, replace=False).astype(np.int64)
    upd = rng.standard_normal((k, dim), dtype=np.float32)

    def ref(t):
        t[idx] += upd
        return t

    def jf(t, i, u):
        return t.at[i].add(u)
    want = ref(table0.copy())
    fns, report = builds(backend, text, "update", notes)
    oks = {nm: check(nm, f(table0.copy(), idx, upd), want) for nm, f in fns.items()}
    jd, jn = jax.jit(jf, donate_argnums=0), jax.jit(jf)
    ij, uj = jnp.asarray(idx.astype(np.int32)), jnp.asarray(upd)
    for nm, f in (("jax_donated", jd), ("jax", jn)):
        oks[nm] = check(nm, np.asarray(f(jnp.asarray(table0), ij, uj)), want)

    def jstep(f):
        def s(t):
            r = f(t, ij, uj)
            r.block_until_ready()
            return r
        return s
    variants = tdf_variants(fns, lambda f: _stateful(lambda t: f(t, idx, upd), table0.copy()))
    variants.update({
        "jax_donated": _stateful(jstep(jd), jnp.asarray(table0)),
        "jax": _stateful(jstep(jn), jnp.asarray(table0)),
        "numpy": _stateful(ref, table0.copy()),
    })
    timing = H.time_variants(variants, cfg["reps"], cfg["target_s"])
    tmem = backend.memory(text, "update", lambda: (table0.copy(), idx, upd), notes)
    jmem = {"jax_donated": jax_memory(jf, (jnp.asarray(table0), ij, uj), (0,)),
            "jax": jax_memory(jf, (jnp.asarray(table0), ij, uj), ())}
    npb = numpy_bytes(lambda: ref(table0.copy())) - table0.nbytes
    bw = cfg["bandwidth"]["bytes_per_s"]
    return _row({"vocab": vocab, "dim": dim, "k": k}, oks, timing, tmem, jmem,
                max(0, npb), notes, report, table_bytes=int(table0.nbytes),
                bound={"row_bytes": k * dim * 4, "row_write_s": k * dim * 4 / bw,
                       "full_copy_s": table0.nbytes / bw})


def _count_ops(module) -> int:
    from mlir import ir
    n = [0]

    def visit(op):
        n[0] += 1
        return ir.WalkResult.ADVANCE
    module.operation.walk(visit)
    return n[0]


def bench_compile_scaling(cfg, backend, sizes):
    """Time of liveness, alias and tdf-insert-inplace against function size.

    Each pass runs alone on a freshly parsed module (the test passes annotate
    and the rewrite changes the IR); parse and the C++ ``canonicalize`` are
    timed the same way for reference. A pass that fails is reported with its
    error and left out of the fits."""
    from mlir import ir

    import tdf
    wanted = ("test-tdf-liveness", "test-tdf-alias", "tdf-insert-inplace")
    passes = [p for p in wanted if H.has_pass(p)]
    missing = [p for p in wanted if p not in passes]
    failed = {}
    points = []
    for n in sizes:
        text = P.scaling_chain(n)
        point = {"requested_ops": n}
        for p in passes + ["parse", "canonicalize"]:
            if p in failed:
                continue
            xs = []
            for _ in range(max(1, min(3 if n <= 20000 else 1, cfg["reps"]))):
                ctx = tdf.Context()
                with ctx, ir.Location.unknown():
                    t0 = time.perf_counter()
                    m = tdf.parse(text, ctx)
                    t_parse = time.perf_counter() - t0
                    point["ops"] = _count_ops(m)
                    if p == "parse":
                        xs.append(t_parse)
                        continue
                    t0 = time.perf_counter()
                    try:
                        tdf.run_pipeline(m, f"builtin.module({p})")
                    except Exception as err:
                        lines = [ln for ln in str(err).splitlines() if "error" in ln]
                        failed[p] = f"{type(err).__name__}: {(lines or [str(err)])[-1][:240]}"
                        break
                    xs.append(time.perf_counter() - t0)
                del m
            if p not in failed:
                point[p] = H.summarize(xs)
        points.append(point)
    ok = [p for p in passes if p not in failed]
    for pt in points:
        if ok:
            pt["analyses_total_s"] = sum(pt[p]["median"] for p in ok)
    ops = [pt["ops"] for pt in points]
    fits = {p: H.fit_exponent(ops, [pt[p]["median"] for pt in points])
            for p in ok + ["parse", "canonicalize"]}
    if ok:
        fits["analyses_total"] = H.fit_exponent(ops, [pt["analyses_total_s"] for pt in points])
    return {"passes": ok, "missing_passes": missing, "failed_passes": failed,
            "points": points, "exponent": fits}


def bench_compile_vs_jax(cfg, backend, size):
    """Whole ``tdf.compile`` (parse → LLVM → JIT, first call) against
    ``jax.jit(f).lower(x).compile()`` for the element-wise chain."""
    jax = _jax()
    import jax.numpy as jnp
    n, calls = size
    text = P.ew_chain(n, calls)
    x0 = np.ones(n, np.float32)

    def jf(x):
        for i in range(calls):
            x = x * np.float32(1.0001) if i % 2 == 0 else x + np.float32(0.5)
        return x
    reps = max(2, min(5, cfg["reps"]))
    xs_t, xs_j = [], []
    for _ in range(reps):
        t0 = time.perf_counter()
        prog = backend.compile(text, "tdf")
        backend.fn(prog, "chain")(x0)  # machine code is generated at the first call
        xs_t.append(time.perf_counter() - t0)
        xj = jnp.asarray(x0)
        t0 = time.perf_counter()
        jax.jit(jf).lower(xj).compile()
        xs_j.append(time.perf_counter() - t0)
        jax.clear_caches()
    t, j = H.summarize(xs_t), H.summarize(xs_j)
    return {"size": {"n": n, "calls": calls}, "tdf_compile": t, "jax_compile": j,
            "ratio_tdf/jax": H.ratio(t["median"], j["median"])}


def bench_call_overhead(cfg, backend):
    """Per-call cost of invoking a compiled trivial function from Python."""
    jax = _jax()
    import jax.numpy as jnp
    text = P.trivial()
    x = np.arange(4, dtype=np.float32)
    prog = backend.compile(text, "tdf")
    f = backend.fn(prog, "tiny")
    check("tdf", f(x), x + 1)
    counted = backend.compile(text, "tdf", count_allocations=True)
    fc = backend.fn(counted, "tiny")
    check("tdf_counting", fc(x), x + 1)
    # The floor: the bare ctypes call of the packed C interface with the
    # argument pointers the last f(x) stored (no checks, no result wrapping;
    # the result buffer is leaked, a few bytes per call).
    cfunc, packed = f._cfunc, f.packed_arguments(x)
    jf = jax.jit(lambda v: v + 1.0)
    xj = jnp.asarray(x)
    variants = {
        "tdf_call": lambda: f(x),
        "tdf_call_counting": lambda: fc(x),
        "raw_ctypes": lambda: cfunc(packed),
        "jax_call": lambda: jf(xj).block_until_ready(),
        "numpy_add": lambda: x + 1,
    }
    timing = H.time_variants(variants, cfg["reps"], cfg["target_s"],
                             max_inner=cfg["overhead_calls"])
    raw_t = timing["raw_ctypes"]["median"]
    return {"time": timing,
            "overhead_s": {k: v["median"] - raw_t for k, v in timing.items()},
            "backend": backend.name}


# ----------------------------------------------------------------- output


def machine_info() -> dict:
    """CPU model, cores and software versions of the measuring machine."""
    model = platform.processor()
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
            if line.startswith("Model name:"):
                model = line.split(":", 1)[1].strip()
    except OSError:
        pass
    import jax
    import matplotlib
    return {"cpu": model, "cores": os.cpu_count(), "python": platform.python_version(),
            "numpy": np.__version__, "jax": jax.__version__, "matplotlib": matplotlib.__version__,
            "platform": platform.platform()}


def _fmt_t(s):
    if s is None:
        return "–"
    if s < 1e-3:
        return f"{s * 1e6:.1f} µs"
    if s < 1:
        return f"{s * 1e3:.2f} ms"
    return f"{s:.2f} s"


def _fmt_b(b):
    if b is None:
        return "–"
    b = float(b)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(b) < 1024 or unit == "GiB":
            return f"{b:.0f} {unit}" if unit == "B" else f"{b:.1f} {unit}"
        b /= 1024


def _fmt_r(r):
    return "–" if r is None else f"{r:.3g}"


def _size_label(size: dict) -> str:
    return "×".join(f"{k}={v}" for k, v in size.items() if v is not None)


VARIANTS = ["tdf", "tdf_inplace_off", "tdf_copy_all", "jax_donated", "jax", "numpy"]


def _md_summary(results: dict) -> list[str]:
    """The header and the summary table."""
    out = [f"Measured {results['date']} on {results['machine']['cpu']} "
           f"({results['machine']['cores']} cores), mode `{results['mode']}`, "
           f"every tdf build by `{results['backend']}`"
           + (f", passes missing: {', '.join(results['missing_passes'])}" if results.get(
               'missing_passes') else "") + ". "
           + "".join(f"Not built (product bug): {f['program']} [{f['build']}]: {f['error']}. "
                     for f in results.get("backend_failures", []))
           + f"Copy bandwidth {results['bandwidth']['bytes_per_s'] / 1e9:.2f} GB/s.", ""]
    out.append("**Summary** (largest size of each workload; ratio < 1: tdf is faster / "
               "allocates less; – : undefined, the baseline allocates 0 B or did not run):")
    out.append("")
    out.append("| workload | size | t tdf/jax-donated | t tdf/jax | t tdf/in-place-off | "
               "t tdf/copy-before-write | B tdf/jax-donated | B tdf/jax | B tdf/in-place-off | "
               "B tdf/copy-before-write |")
    out.append("|---|---|---|---|---|---|---|---|---|---|")
    for wl in ("kv_step", "kv_multilayer", "kv_loop", "ew_chain", "log_concat", "embed_update"):
        rows = results["workloads"].get(wl)
        if not rows:
            continue
        r = rows[-1]["ratios"]
        cells = [_fmt_r(r[f"{k}_tdf/{o}"]) for k in ("time", "bytes") for o in
                 ("jax_donated", "jax", "tdf_inplace_off", "tdf_copy_all")]
        out.append(f"| {wl} | {_size_label(rows[-1]['size'])} | " + " | ".join(cells) + " |")
    cs = results["workloads"].get("compile_scaling")
    if cs and cs["exponent"].get("analyses_total") is not None:
        out.append("")
        out.append(f"Compile-time growth exponent (liveness + alias + tdf-insert-inplace, "
                   f"{cs['points'][0]['ops']}–{cs['points'][-1]['ops']} ops): "
                   f"**{_fmt_r(cs['exponent']['analyses_total'])}**.")
    out.append("")
    out.append("Time: median (±IQR/2) of one step (kv_loop: one decode step = call ÷ steps; ew_chain: one kernel call = program call ÷ calls; otherwise one call); bytes: allocated per call "
               "(tdf: counted at run time; JAX: output + temp − alias from memory_analysis; "
               "numpy: tracemalloc peak).")
    return out


def _md_workload(wl: str, rows: list) -> list[str]:
    """One workload's table and bandwidth bounds."""
    out: list[str] = []
    out.append(f"### {wl}")
    out.append("")
    out.append("| size | " + " | ".join(VARIANTS) + " | tdf/jax-don t | tdf/jax t | "
               "tdf/off t | tdf/cbw t | tdf/jax-don B | tdf/jax B | tdf/off B | "
               "tdf/cbw B |")
    out.append("|" + "---|" * (len(VARIANTS) + 9))
    for row in rows:
        cells = []
        for v in VARIANTS:
            tv = row["time"].get(v)
            b = row["memory"]["alloc_bytes"].get(v)
            if tv is None:
                cells.append("–")
            else:
                per = tv.get("per_step", tv["median"])
                scale = per / tv["median"] if tv["median"] else 1
                cells.append(f"{_fmt_t(per)} (±{_fmt_t(tv['iqr'] * scale / 2)})<br>"
                             f"{_fmt_b(b)}")
        r = row["ratios"]
        cells += [_fmt_r(r[f"time_tdf/{o}"]) for o in
                  ("jax_donated", "jax", "tdf_inplace_off", "tdf_copy_all")]
        cells += [_fmt_r(r[f"bytes_tdf/{o}"]) for o in
                  ("jax_donated", "jax", "tdf_inplace_off", "tdf_copy_all")]
        out.append(f"| {_size_label(row['size'])} | " + " | ".join(cells) + " |")
    bounds = [row for row in rows if "bound" in row]
    if bounds:
        out.append("")
        out.append("Bandwidth bound: " + "; ".join(
            f"{_size_label(r['size'])}: new rows {_fmt_b(r['bound']['row_bytes'])} → "
            f"{_fmt_t(r['bound']['row_write_s'])}, full copy "
            f"{_fmt_t(r['bound']['full_copy_s'])}" for r in bounds) + ".")
    out.append("")
    return out


def _md_compile_scaling(cs: dict) -> list[str]:
    """The compile_scaling table."""
    out: list[str] = []
    out.append("### compile_scaling")
    out.append("")
    cols = cs["passes"] + ["parse", "canonicalize"]
    out.append("| ops | " + " | ".join(cols) + " |")
    out.append("|" + "---|" * (len(cols) + 1))
    for pt in cs["points"]:
        out.append(f"| {pt['ops']} | " + " | ".join(_fmt_t(pt[c]['median']) for c in cols) + " |")
    out.append("| exponent | " + " | ".join(_fmt_r(cs["exponent"].get(c)) for c in cols) + " |")
    if "analyses_total" in cs["exponent"]:
        out.append("")
        out.append(f"Fitted growth exponent of liveness + alias + tdf-insert-inplace: "
                   f"**{_fmt_r(cs['exponent']['analyses_total'])}** (limit 1.15).")
    if cs["missing_passes"]:
        out.append("")
        out.append("Not measured (pass not registered in this checkout): "
                   + ", ".join(cs["missing_passes"]) + ".")
    for p, e in cs.get("failed_passes", {}).items():
        out.append("")
        out.append(f"Not measured: `{p}` failed on the generated function: {e}")
    out.append("")
    return out


def markdown(results: dict) -> str:
    """The results as Markdown tables."""
    out = _md_summary(results)
    out.append("")
    for wl in ("kv_step", "kv_multilayer", "kv_loop", "ew_chain", "log_concat", "embed_update"):
        rows = results["workloads"].get(wl)
        if rows:
            out += _md_workload(wl, rows)
    cs = results["workloads"].get("compile_scaling")
    if cs:
        out += _md_compile_scaling(cs)
    cj = results["workloads"].get("compile_vs_jax")
    if cj:
        out.append("### compile_vs_jax")
        out.append("")
        out.append(f"ew_chain {_size_label(cj['size'])}: tdf compile + first call "
                   f"{_fmt_t(cj['tdf_compile']['median'])}, jax.jit lower+compile "
                   f"{_fmt_t(cj['jax_compile']['median'])}, ratio {_fmt_r(cj['ratio_tdf/jax'])}.")
        out.append("")
    co = results["workloads"].get("call_overhead")
    if co:
        out.append("### call_overhead")
        out.append("")
        out.append("| call | median | overhead over raw ctypes |")
        out.append("|---|---|---|")
        for k, v in co["time"].items():
            out.append(f"| {k} | {_fmt_t(v['median'])} | {_fmt_t(co['overhead_s'][k])} |")
        out.append("")
    return "\n".join(out)


def plots(results: dict, out_dir: str) -> list[str]:
    """bytes_per_program.png and time_per_step.png (grouped bars, log scale)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    labels, bytes_by_v, time_by_v = [], {v: [] for v in VARIANTS}, {v: [] for v in VARIANTS}
    for wl in ("kv_step", "kv_multilayer", "kv_loop", "ew_chain", "log_concat", "embed_update"):
        for row in results["workloads"].get(wl) or []:
            labels.append(f"{wl}\n{_size_label(row['size'])}")
            for v in VARIANTS:
                bytes_by_v[v].append(row["memory"]["alloc_bytes"].get(v))
                tv = row["time"].get(v)
                time_by_v[v].append(None if tv is None else tv.get("per_step", tv["median"]))
    files = []
    for fname, data, ylabel in (("bytes_per_program.png", bytes_by_v, "bytes allocated per call"),
                                ("time_per_step.png", time_by_v, "seconds per step (median)")):
        fig, ax = plt.subplots(figsize=(max(8, 1.3 * len(labels)), 5))
        width = 0.8 / len(VARIANTS)
        xs = np.arange(len(labels))
        for i, v in enumerate(VARIANTS):
            ys = [np.nan if y is None else max(float(y), 1e-9 if "time" in fname else 1.0)
                  for y in data[v]]
            ax.bar(xs + i * width, ys, width, label=v)
        ax.set_yscale("log")
        ax.set_xticks(xs + 0.4 - width / 2)
        ax.set_xticklabels(labels, fontsize=6, rotation=30, ha="right")
        ax.set_ylabel(ylabel + (" (0 shown as 1)" if "bytes" in fname else ""))
        ax.legend(fontsize=7)
        fig.tight_layout()
        path = os.path.join(out_dir, fname)
        fig.savefig(path, dpi=110)
        plt.close(fig)
        files.append(path)
    return files


def main(argv=None) -> int:
    """Entry point: run the selected benchmarks and write the outputs."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="smaller sizes, < ~1 min")
    mode.add_argument("--tiny", action="store_true", help="toy sizes, seconds (smoke test)")
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--only", default="", help="comma-separated subset of " + ",".join(WORKLOADS))
    ap.add_argument("--no-plots", action="store_true")
    args = ap.parse_args(argv)
    mode_name = "tiny" if args.tiny else "quick" if args.quick else "full"
    cfg = dict(SIZES[mode_name])
    only = [w for w in args.only.split(",") if w] or WORKLOADS
    unknown = [w for w in only if w not in WORKLOADS]
    if unknown:
        ap.error(f"unknown workload(s): {', '.join(unknown)}")
    os.makedirs(args.out, exist_ok=True)
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    t_start = time.perf_counter()
    backend = H.TdfBackend()
    cfg["bandwidth"] = H.copy_bandwidth(cfg["bw_bytes"])
    results = {"mode": mode_name, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
               "machine": machine_info(), "backend": backend.name,
               "bandwidth": cfg["bandwidth"], "workloads": {}}
    runners = {
        "kv_step": lambda: bench_kv(cfg, backend, cfg["kv_step"], False, False),
        "kv_multilayer": lambda: bench_kv(cfg, backend, cfg["kv_multilayer"], True, False),
        "kv_loop": lambda: bench_kv(cfg, backend, cfg["kv_loop"], False, True),
        "ew_chain": lambda: bench_ew_chain(cfg, backend, cfg["ew_chain"]),
        "log_concat": lambda: bench_log_concat(cfg, backend, cfg["log_concat"]),
        "embed_update": lambda: bench_embed(cfg, backend, cfg["embed_update"]),
        "compile_scaling": lambda: bench_compile_scaling(cfg, backend, cfg["compile_scaling"]),
        "compile_vs_jax": lambda: bench_compile_vs_jax(cfg, backend, cfg["compile_vs_jax"]),
        "call_overhead": lambda: bench_call_overhead(cfg, backend),
    }
    for wl in only:
        t0 = time.perf_counter()
        results["workloads"][wl] = runners[wl]()
        print(f"[bench] {wl}: {time.perf_counter() - t0:.1f} s", flush=True)
    results["backend_failures"] = backend.failures
    results["missing_passes"] = [p for p in ("tdf-insert-inplace", "test-tdf-liveness",
                                             "test-tdf-alias") if not H.has_pass(p)]
    results["total_s"] = time.perf_counter() - t_start
    with open(os.path.join(args.out, "results.json"), "w") as fh:
        json.dump(results, fh, indent=1, default=str)
    md = markdown(results)
    with open(os.path.join(args.out, "results.md"), "w") as fh:
        fh.write(md + "\n")
    if not args.no_plots:
        plots(results, args.out)
    print(md)
    print(f"[bench] total {results['total_s']:.1f} s; results in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
