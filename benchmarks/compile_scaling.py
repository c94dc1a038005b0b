"""Whole-compile scaling: ``tdf.compile`` and ``tdf-opt --tdf-lower-to-cpu``
against function size.

``benchmarks/run.py``'s ``compile_scaling`` times the Python analyses alone;
this script times everything a user waits for, from text to callable:

* ``tdf.compile(text)`` (parse, tdf-insert-inplace, the One-Shot analysis
  report, bufferization, lowering, LLVM JIT and machine code), in process;
* ``tdf-opt --tdf-lower-to-cpu file`` in a subprocess (wall time; the
  interpreter start-up, measured on a trivial program in the same run, is
  also subtracted in a second column).

Workloads (one generated function of about N ops each):

``call_inplace_chain``
    N chained ``tdf.call``s of an element-wise kernel whose body is a
    ``linalg.map`` (not fused by ``tdf-inline-kernels``), which
    ``tdf-insert-inplace`` turns into N-1 ``tdf.call_inplace`` on one buffer:
    the chain that made One-Shot Bufferize cubic.
``ew_chain``
    ``programs.ew_chain``: N chained calls of the ``linalg.generic`` kernels
    ``scale``/``shift`` (fused into loops by ``tdf-inline-kernels``).
``mix``
    a function cycling through program patterns that share two running
    values: calls turned in place, cross reads between two chains,
    ``extract_slice`` views read by a kernel, ``tdf.assume_unaliased``, parts
    computed into the rows of a ``tensor.empty`` (``insert_slice``), an
    element-wise ``linalg.add`` with a ``tensor.empty`` init, an ``scf.if``
    with calls in both branches and a small ``scf.for`` with a call in its
    body.
``named_chain_donated``
    N chained calls of a ``tdf.elementwise`` kernel whose body is the named
    op ``linalg.exp``, on a donated argument.
``nested_if`` / ``nested_for`` / ``nested_while``
    ``scf.if`` / ``scf.for`` / ``scf.while`` (one trip) nested N/3 (N/5)
    deep, a kernel call at each level on the previous level's value. Sizes
    nested deeper than ``tdf.limits.MAX_NESTING_DEPTH`` (2,048) are refused
    by tdf before parsing and not run.
``many_functions``
    N/4 small public functions of three calls each.

Every build's result is checked at the smallest size against the same
program compiled with ``inplace=False``. Growth exponent: least-squares slope
of log(seconds) against log(ops) over all sizes.

Usage::

    .venv/bin/python benchmarks/compile_scaling.py            # 1k..20k ops, ~3-5 min
    .venv/bin/python benchmarks/compile_scaling.py --quick    # 1k..4k ops
    .venv/bin/python benchmarks/compile_scaling.py --tiny     # toy sizes (smoke test)

Options: ``--only call_inplace_chain,mix``, ``--out DIR`` (default
``benchmarks/results/``). Writes ``compile_scaling.json`` and
``compile_scaling.md``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
# Compile times are measured: never a compilation cache hit (tdf.cache).
os.environ["TDF_CACHE_DIR"] = ""
sys.path.insert(0, HERE)

import harness as H  # noqa: E402
import programs as P  # noqa: E402

from tdf import limits  # noqa: E402

SIZES = {"full": [1000, 2000, 5000, 10000, 20000], "quick": [1000, 2000, 4000],
         "tiny": [60, 180]}
WORKLOADS = ["call_inplace_chain", "ew_chain", "mix", "named_chain_donated", "nested_if",
             "nested_for", "nested_while", "many_functions"]
BUDGET_S = {"full": 90.0, "quick": 60.0, "tiny": 30.0}  # one build slower than this: stop growing
GOAL_EXPONENT = 1.15
GOAL_10K_S = 10.0
W = 16  # tensor width


def _t(n=W) -> str:
    return f"tensor<{n}xf32>"


def _m(n=W) -> str:
    return f"memref<{n}xf32>"


def _map_kernel(name: str, op: str, cst: str, n: int = W) -> str:
    """``out = in <op> cst`` with a ``linalg.map`` body (the inliner only
    raises ``linalg.generic`` bodies, so calls of it stay calls)."""
    m = _m(n)
    return f"""
func.func private @{name}(%in: {m}, %out: {m}) {{
  %c = arith.constant {cst} : f32
  linalg.map ins(%in : {m}) outs(%out : {m})
    (%a: f32, %o: f32) {{
      %r = arith.{op} %a, %c : f32
      linalg.yield %r : f32
    }}
  return
}}
"""


def _add_kernel(n: int = W) -> str:
    m = _m(n)
    return f"""
func.func private @add2(%x: {m}, %y: {m}, %out: {m}) {{
  linalg.map {{ arith.addf }} ins(%x, %y : {m}, {m}) outs(%out : {m})
  return
}}
"""


def call_inplace_chain(n_ops: int) -> str:
    t = _t()
    lines, cur = [], "%x"
    for i in range(max(2, n_ops - 1)):
        k = "@scale" if i % 2 == 0 else "@shift"
        lines.append(f"  %v{i} = tdf.call {k}({cur}) : ({t}) -> {t}")
        cur = f"%v{i}"
    return (_map_kernel("scale", "mulf", "1.000100e+00") + _map_kernel("shift", "addf", "5.000000e-01")
            + f"func.func @main(%x: {t}) -> {t} {{\n" + "\n".join(lines)
            + f"\n  return {cur} : {t}\n}}\n")


def ew_chain(n_ops: int) -> str:
    text = P.ew_chain(W, max(2, n_ops - 1))
    return text.replace("func.func @chain(", "func.func @main(")


def mix(n_ops: int) -> str:
    """About ``n_ops`` ops of mixed patterns over two running values."""
    t, t2, th = _t(), "tensor<2x16xf32>", _t(W // 2)
    lines = []
    a, b = "%x", "%y"
    k = [0]

    def new() -> str:
        k[0] += 1
        return f"%m{k[0]}"

    def call(kernel, *args) -> str:
        r = new()
        types = ", ".join([t] * len(args))
        lines.append(f"  {r} = tdf.call @{kernel}({', '.join(args)}) : ({types}) -> {t}")
        return r

    seg = 0
    while len(lines) < n_ops - 8:
        kind = seg % 7
        seg += 1
        if kind == 0:  # chain turned in place
            for i in range(4):
                a = call("scale" if i % 2 == 0 else "shift", a)
        elif kind == 1:  # cross reads between the two chains
            b = call("shift", b)
            a = call("add2", a, b)
            b = call("scale", b)
        elif kind == 2:  # a view read by a kernel, then an unaliased result
            s = new()
            lines.append(f"  {s} = tensor.extract_slice {a}[0] [{W // 2}] [1] : {t} to {th}")
            h = new()
            lines.append(f"  {h} = tdf.call @widen({s}) : ({th}) -> {t}")
            u = new()
            lines.append(f"  {u} = tdf.assume_unaliased {h} : {t}")
            a = call("add2", a, u)
        elif kind == 3:  # parts computed into the rows of a fresh tensor
            e = new()
            lines.append(f"  {e} = tensor.empty() : {t2}")
            p0 = call("scale", a)
            c0 = new()
            lines.append(f"  {c0} = tensor.insert_slice {p0} into {e}[0, 0] [1, {W}] [1, 1] : {t} into {t2}")
            p1 = call("shift", b)
            c1 = new()
            lines.append(f"  {c1} = tensor.insert_slice {p1} into {c0}[1, 0] [1, {W}] [1, 1] : {t} into {t2}")
            r1 = new()
            lines.append(f"  {r1} = tensor.extract_slice {c1}[1, 0] [1, {W}] [1, 1] : {t2} to {t}")
            b = call("add2", r1, b)
        elif kind == 4:  # element-wise linalg with an empty init
            e = new()
            lines.append(f"  {e} = tensor.empty() : {t}")
            r = new()
            lines.append(f"  {r} = linalg.add ins({a}, {b} : {t}, {t}) outs({e} : {t}) -> {t}")
            a = r
        elif kind == 5:  # calls in both branches of an scf.if
            r = new()
            x1, x2 = new(), new()
            lines.append(f"  {r} = scf.if %c -> ({t}) {{\n"
                         f"    {x1} = tdf.call @scale({a}) : ({t}) -> {t}\n    scf.yield {x1} : {t}\n"
                         f"  }} else {{\n"
                         f"    {x2} = tdf.call @shift({a}) : ({t}) -> {t}\n    scf.yield {x2} : {t}\n  }}")
            lines.extend([""] * 6)  # the region holds 6 ops
            a = r
        else:  # a short loop with a call in its body
            r, it, nx = new(), new(), new()
            lines.append(f"  {r} = scf.for %i = %c0 to %c3 step %c1 iter_args({it} = {b}) -> ({t}) {{\n"
                         f"    {nx} = tdf.call @shift({it}) : ({t}) -> {t}\n    scf.yield {nx} : {t}\n  }}")
            lines.extend([""] * 2)
            b = r
    body = "\n".join(x for x in lines if x)
    mh = _m(W // 2)
    widen = f"""
func.func private @widen(%in: {mh}, %out: {_m()}) {{
  %z = arith.constant 0.0 : f32
  linalg.fill ins(%z : f32) outs(%out : {_m()})
  %o = memref.subview %out[0] [{W // 2}] [1] : {_m()} to memref<{W // 2}xf32, strided<[1]>>
  memref.copy %in, %o : {mh} to memref<{W // 2}xf32, strided<[1]>>
  return
}}
"""
    return (_map_kernel("scale", "mulf", "1.000100e+00") + _map_kernel("shift", "addf", "5.000000e-01")
            + _add_kernel() + widen
            + f"func.func @main(%x: {t}, %y: {t}, %c: i1) -> {t} {{\n"
            + "  %c0 = arith.constant 0 : index\n  %c1 = arith.constant 1 : index\n"
            + "  %c3 = arith.constant 3 : index\n"
            + body + f"\n  %out = tdf.call @add2({a}, {b}) : ({t}, {t}) -> {t}\n  return %out : {t}\n}}\n")


def named_chain_donated(n_ops: int) -> str:
    """N chained calls of a ``tdf.elementwise`` kernel whose body is the
    named op ``linalg.exp``, on a donated argument (cubic before the alias
    cuts accepted a donated entry argument)."""
    t, m = _t(), _m()
    lines, cur = [], "%x"
    for i in range(max(2, n_ops - 1)):
        lines.append(f"  %v{i} = tdf.call @ex({cur}) : ({t}) -> {t}")
        cur = f"%v{i}"
    return (f"func.func private @ex(%in: {m}, %out: {m}) attributes {{tdf.elementwise}} {{\n"
            f"  linalg.exp ins(%in : {m}) outs(%out : {m})\n  return\n}}\n"
            + _map_kernel("scale", "mulf", "1.000100e+00")
            + f"func.func @main(%x: {t} {{tdf.donate}}) -> {t} {{\n"
            + "\n".join(lines).replace("@ex(", "@scale(") + f"\n  return {cur} : {t}\n}}\n")


def _nested(n_ops: int, kind: str) -> str:
    """About ``n_ops`` ops: ``scf.if``, ``scf.for`` or ``scf.while`` (one
    trip) nested about n_ops/3 deep (n_ops/5 for ``scf.while``, whose levels
    hold more ops), each level calling on the previous level's value."""
    t = _t()
    depth = max(2, n_ops // (5 if kind == "while" else 3))
    out = []
    cur = "%x"
    for i in range(depth):
        out.append(f"%a{i} = tdf.call @scale({cur}) : ({t}) -> {t}")
        if kind == "for":
            out.append(f"%r{i} = scf.for %i{i} = %c0 to %c1 step %c1 iter_args(%it{i} = %a{i}) "
                       f"-> ({t}) {{")
            cur = f"%it{i}"
        elif kind == "while":
            out.append(f"%r{i}:2 = scf.while (%n{i} = %c0, %v{i} = %a{i}) : (index, {t}) -> "
                       f"(index, {t}) {{\n%go{i} = arith.cmpi slt, %n{i}, %c1 : index\n"
                       f"scf.condition(%go{i}) %n{i}, %v{i} : index, {t}\n}} do {{\n"
                       f"^bb0(%m{i}: index, %u{i}: {t}):\n"
                       f"%k{i} = arith.addi %m{i}, %c1 : index")
            cur = f"%u{i}"
        else:
            out.append(f"%r{i} = scf.if %c -> ({t}) {{")
            cur = f"%a{i}"
    out.append(f"%z = tdf.call @shift({cur}) : ({t}) -> {t}")
    last = "%z"
    for i in reversed(range(depth)):
        if kind == "for":
            out.append(f"scf.yield {last} : {t}\n}}")
            last = f"%r{i}"
        elif kind == "while":
            out.append(f"scf.yield %k{i}, {last} : index, {t}\n}}")
            last = f"%r{i}#1"
        else:
            out.append(f"scf.yield {last} : {t}\n}} else {{\nscf.yield %a{i} : {t}\n}}")
            last = f"%r{i}"
    out.append(f"return {last} : {t}")
    return (_map_kernel("scale", "mulf", "1.000100e+00") + _map_kernel("shift", "addf", "5.000000e-01")
            + f"func.func @main(%x: {t}, %c: i1) -> {t} {{\n"
            + "%c0 = arith.constant 0 : index\n%c1 = arith.constant 1 : index\n"
            + "\n".join(out) + "\n}\n")


def nested_if(n_ops: int) -> str:
    return _nested(n_ops, "if")


def nested_for(n_ops: int) -> str:
    return _nested(n_ops, "for")


def nested_while(n_ops: int) -> str:
    return _nested(n_ops, "while")


def many_functions(n_ops: int) -> str:
    """About n_ops/4 small public functions (three calls each) and a
    ``@main`` calling none of them."""
    t = _t()
    funcs = []
    for f in range(max(1, n_ops // 4)):
        funcs.append(f"func.func @f{f}(%x: {t} {{tdf.donate}}) -> {t} {{\n"
                     f"  %a = tdf.call @scale(%x) : ({t}) -> {t}\n"
                     f"  %b = tdf.call @shift(%a) : ({t}) -> {t}\n"
                     f"  %r = tdf.call @scale(%b) : ({t}) -> {t}\n  return %r : {t}\n}}\n")
    return (_map_kernel("scale", "mulf", "1.000100e+00") + _map_kernel("shift", "addf", "5.000000e-01")
            + "".join(funcs) + f"func.func @main(%x: {t}) -> {t} {{\n"
            + f"  %r = tdf.call @scale(%x) : ({t}) -> {t}\n  return %r : {t}\n}}\n")


GENERATORS = {"call_inplace_chain": call_inplace_chain, "ew_chain": ew_chain, "mix": mix,
              "named_chain_donated": named_chain_donated, "nested_if": nested_if,
              "nested_for": nested_for, "nested_while": nested_while,
              "many_functions": many_functions}


def _args(name):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(W).astype(np.float32)
    if name == "mix":
        return (x, rng.standard_normal(W).astype(np.float32), True)
    if name in ("nested_if", "nested_for", "nested_while"):
        return (x, True)
    return (x,)


def count_ops(text: str) -> int:
    import tdf
    ctx = tdf.Context()
    module = tdf.parse(text, ctx)
    n = [0]

    def visit(op):
        n[0] += 1
        return tdf_ir.WalkResult.ADVANCE

    from mlir import ir as tdf_ir
    module.operation.walk(visit)
    return n[0]


def time_compile(text: str) -> tuple[float, object]:
    import tdf
    t0 = time.perf_counter()
    prog = tdf.compile(text)
    return time.perf_counter() - t0, prog


def time_tdf_opt(path: str) -> float:
    exe = shutil.which("tdf-opt", path=os.path.join(ROOT, ".venv", "bin")) or "tdf-opt"
    t0 = time.perf_counter()
    proc = subprocess.run([exe, "--tdf-lower-to-cpu", path], stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, timeout=900)
    dt = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"tdf-opt failed: {proc.stderr[-500:]}")
    return dt


def check(name: str, text: str) -> str:
    """Compares the in-place build with ``inplace=False`` on one input."""
    import tdf
    args = _args(name)
    on = tdf.compile(text).main(*[a.copy() if isinstance(a, np.ndarray) else a for a in args])
    off = tdf.compile(text, inplace=False).main(*[a.copy() if isinstance(a, np.ndarray) else a for a in args])
    if not np.allclose(np.asarray(on), np.asarray(off), rtol=1e-5, atol=1e-5):
        raise AssertionError(f"{name}: in-place build differs from inplace=False")
    return "ok"


def run(mode: str, only: list[str]) -> dict:
    sizes = SIZES[mode]
    tmp = tempfile.mkdtemp(prefix="tdf-compile-scaling-")
    startup_path = os.path.join(tmp, "trivial.mlir")
    with open(startup_path, "w") as fh:
        fh.write(P.trivial())
    startup = H.summarize([time_tdf_opt(startup_path) for _ in range(3)])
    results = {"mode": mode, "sizes": sizes, "tdf_opt_startup_s": startup, "workloads": {},
               "goal": {"exponent": GOAL_EXPONENT, "seconds_at_10k_ops": GOAL_10K_S}}
    for name in only:
        gen = GENERATORS[name]
        points, skipped = [], []
        status = check(name, gen(sizes[0]))
        for n in sizes:
            if points and max(points[-1]["tdf_compile"]["median"],
                              points[-1]["tdf_opt"]["median"]) > BUDGET_S[mode]:
                skipped.append(n)
                continue
            text = gen(n)
            if limits.nesting_violation(text) is not None:
                # Deeper than tdf.limits.MAX_NESTING_DEPTH (MLIR's parser
                # would overflow the stack): tdf refuses it before parsing.
                skipped.append(n)
                continue
            path = os.path.join(tmp, f"{name}_{n}.mlir")
            with open(path, "w") as fh:
                fh.write(text)
            ops = count_ops(text)
            reps = 3 if n <= 2000 and mode != "tiny" else 1
            comp, opt = [], []
            for _ in range(reps):
                dt, prog = time_compile(text)
                prog.main(*_args(name))  # callable (machine code made at compile)
                del prog
                comp.append(dt)
                opt.append(time_tdf_opt(path))
            point = {"requested_ops": n, "ops": ops, "tdf_compile": H.summarize(comp),
                     "tdf_opt": H.summarize(opt)}
            point["tdf_opt_net_s"] = max(point["tdf_opt"]["median"] - startup["median"], 1e-6)
            points.append(point)
            print(f"{name:20s} ops={ops:6d}  tdf.compile {point['tdf_compile']['median']:7.2f} s"
                  f"  tdf-opt {point['tdf_opt']['median']:7.2f} s", flush=True)
        ops = [p["ops"] for p in points]
        fits = {"tdf_compile": H.fit_exponent(ops, [p["tdf_compile"]["median"] for p in points]),
                "tdf_opt": H.fit_exponent(ops, [p["tdf_opt"]["median"] for p in points]),
                "tdf_opt_net": H.fit_exponent(ops, [p["tdf_opt_net_s"] for p in points])}
        results["workloads"][name] = {"check": status, "points": points, "exponent": fits,
                                      "skipped_sizes": skipped}
    shutil.rmtree(tmp, ignore_errors=True)
    return results


def _fmt_s(x) -> str:
    return "–" if x is None else (f"{x:.2f} s" if x >= 0.1 else f"{x * 1000:.1f} ms")


def _fmt_r(x) -> str:
    return "–" if x is None else f"{x:.3g}"


def to_markdown(res: dict) -> str:
    out = [f"Measured {res['date']} on {res['machine']['cpu']} ({res['machine']['cores']} cores), "
           f"mode `{res['mode']}`. tdf-opt start-up (trivial program): "
           f"{_fmt_s(res['tdf_opt_startup_s']['median'])}.", ""]
    for name, wl in res["workloads"].items():
        out.append(f"#### {name} (checked against inplace=False: {wl['check']})")
        out.append("")
        out.append("| ops | tdf.compile | tdf-opt --tdf-lower-to-cpu | tdf-opt minus start-up |")
        out.append("|---|---|---|---|")
        for p in wl["points"]:
            out.append(f"| {p['ops']} | {_fmt_s(p['tdf_compile']['median'])} | "
                       f"{_fmt_s(p['tdf_opt']['median'])} | {_fmt_s(p['tdf_opt_net_s'])} |")
        e = wl["exponent"]
        out.append(f"| exponent | {_fmt_r(e['tdf_compile'])} | {_fmt_r(e['tdf_opt'])} | "
                   f"{_fmt_r(e['tdf_opt_net'])} |")
        if wl.get("skipped_sizes"):
            out.append("")
            out.append(f"Not run (the previous size took over {BUDGET_S[res['mode']]:.0f} s, "
                       f"or nested deeper than tdf's limit of {limits.MAX_NESTING_DEPTH}): "
                       f"{', '.join(str(n) for n in wl['skipped_sizes'])} requested ops.")
        out.append("")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--quick", action="store_true")
    g.add_argument("--tiny", action="store_true")
    ap.add_argument("--only", default=",".join(WORKLOADS))
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    args = ap.parse_args(argv)
    mode = "tiny" if args.tiny else "quick" if args.quick else "full"
    only = [w for w in args.only.split(",") if w]
    for w in only:
        if w not in GENERATORS:
            ap.error(f"unknown workload {w!r} (expected {', '.join(WORKLOADS)})")
    res = run(mode, only)
    res["date"] = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    res["machine"] = {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
                      "python": platform.python_version()}
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    res["machine"]["cpu"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "compile_scaling.json"), "w") as fh:
        json.dump(res, fh, indent=1)
    md = to_markdown(res)
    with open(os.path.join(args.out, "compile_scaling.md"), "w") as fh:
        fh.write(md + "\n")
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
