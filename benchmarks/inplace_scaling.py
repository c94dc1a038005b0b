"""``tdf-insert-inplace`` against function size on a chain of element-wise
``linalg`` ops.

The workload (:func:`chain`) is one function of about N ops: a chain of
``linalg.add`` on a donated argument, each writing a fresh ``tensor.empty``,
where every 5th add also reads a value computed four adds earlier (so about
a fifth of the candidates must be rejected: the older value is still read
later). Each size is parsed into a fresh module and the pass is timed alone
through ``tdf.run_pipeline`` (what ``tdf.compile`` and ``tdf-opt`` run); the
rewrite is checked at every size (most adds now write a dead operand, some
keep their ``tensor.empty``).

Reported per size: median seconds and microseconds per op; over all sizes:
the growth exponent (least-squares slope of log(seconds) against log(ops))
and the time ratio of each size to the smallest.

Usage::

    .venv/bin/python benchmarks/inplace_scaling.py            # 10k, 30k, 100k ops
    .venv/bin/python benchmarks/inplace_scaling.py --tiny     # toy sizes (smoke test)

Options: ``--sizes 1000,10000``, ``--reps N``, ``--out DIR`` (default
``benchmarks/results/``). Writes ``inplace_scaling.json`` and
``inplace_scaling.md``.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import platform
import sys
import time

from mlir import ir

import tdf

# harness.py, loaded by path: this module is also imported by the unit tests,
# where benchmarks/ on sys.path would shadow their own modules.
_SPEC = importlib.util.spec_from_file_location(
    "benchmark_harness", os.path.join(os.path.dirname(os.path.abspath(__file__)), "harness.py"))
H = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(H)

SIZES = {"full": [10_000, 30_000, 100_000], "tiny": [200, 2_000]}


def chain(n_ops: int) -> str:
    """A straight-line function of about ``n_ops`` ops: ``n_ops / 2``
    ``linalg.add``s, each with its own ``tensor.empty`` init, on a donated
    argument; every 5th add also reads the value of the add four before it."""
    lines = ["func.func @big(%x: tensor<4xf32> {tdf.donate}) -> tensor<4xf32> {"]
    prev, keep = "%x", "%x"
    for i in range(n_ops // 2):
        lines.append(f"  %e{i} = tensor.empty() : tensor<4xf32>")
        src = f"{prev}, {keep}" if i % 5 == 4 else f"{prev}, {prev}"
        lines.append(f"  %v{i} = linalg.add ins({src} : tensor<4xf32>, tensor<4xf32>) "
                     f"outs(%e{i} : tensor<4xf32>) -> tensor<4xf32>")
        if i % 5 == 0:
            keep = f"%v{i}"
        prev = f"%v{i}"
    lines.append(f"  return {prev} : tensor<4xf32>\n}}")
    return "\n".join(lines)


def _body(module):
    return module.body.operations[0].regions[0].blocks[0].operations


def outcome(module) -> dict:
    """How many ``linalg.add``s write a dead operand (``rewritten``) and how
    many still write their ``tensor.empty`` (``kept``)."""
    counts = {"rewritten": 0, "kept": 0}
    for op in _body(module):
        if op.operation.name != "linalg.add":
            continue
        init = op.operation.operands[2]
        fresh = not isinstance(init.owner, ir.Block) and init.owner.name == "tensor.empty"
        counts["kept" if fresh else "rewritten"] += 1
    return counts


def run_once(n_ops: int) -> tuple[float, dict]:
    """Parses :func:`chain` of ``n_ops`` ops, runs ``tdf-insert-inplace`` on
    it and returns (seconds of the pass, the function's op count before the
    pass and :func:`outcome`)."""
    ctx = tdf.Context()
    module = tdf.parse(chain(n_ops), ctx)
    with ctx:
        ops = len(_body(module))
        start = time.perf_counter()
        tdf.run_pipeline(module, "builtin.module(tdf-insert-inplace)")
        seconds = time.perf_counter() - start
        return seconds, {"ops": ops, **outcome(module)}


def check(n_ops: int, counts: dict) -> None:
    """The rewrite did its job: most adds run in place, the reads of older
    values kept some out."""
    adds = n_ops // 2
    if counts["rewritten"] + counts["kept"] != adds:
        raise AssertionError(f"{n_ops} ops: expected {adds} linalg.add, got {counts}")
    if not (counts["rewritten"] > adds // 2 and counts["kept"] > 0):
        raise AssertionError(f"{n_ops} ops: unexpected in-place decisions {counts}")


def measure(sizes, reps: int) -> dict:
    run_once(min(sizes))  # warm-up: first pass run, imports
    points = []
    for n in sizes:
        samples = []
        for _ in range(reps):
            seconds, counts = run_once(n)
            check(n, counts)
            samples.append(seconds)
        points.append({"requested_ops": n, **counts, "seconds": H.summarize(samples)})
    ops = [p["ops"] for p in points]
    medians = [p["seconds"]["median"] for p in points]
    return {
        "points": points,
        "exponent": H.fit_exponent(ops, medians),
        "ratio_to_smallest": [m / medians[0] for m in medians],
    }


def markdown(result: dict) -> str:
    out = ["# tdf-insert-inplace scaling (linalg.add chain)", "",
           "| ops | rewritten | kept | median | µs/op | × smallest |", "|---|---|---|---|---|---|"]
    for p, r in zip(result["points"], result["ratio_to_smallest"]):
        s = p["seconds"]["median"]
        out.append(f"| {p['ops']} | {p['rewritten']} | {p['kept']} | {s * 1e3:.1f} ms "
                   f"| {s / p['ops'] * 1e6:.2f} | {r:.2f} |")
    exponent = result["exponent"]
    out += ["", f"Growth exponent: {exponent:.3f}" if exponent is not None else "Growth exponent: n/a"]
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="toy sizes (smoke test)")
    parser.add_argument("--sizes", help="comma-separated op counts")
    parser.add_argument("--reps", type=int, default=None, help="repetitions per size")
    parser.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                      "results"))
    ns = parser.parse_args(argv)
    sizes = ([int(s) for s in ns.sizes.split(",")] if ns.sizes
             else SIZES["tiny" if ns.tiny else "full"])
    reps = ns.reps or (1 if ns.tiny else 3)
    result = measure(sizes, reps)
    result.update({
        "mode": "tiny" if ns.tiny else "full",
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": {"platform": platform.platform(), "python": platform.python_version(),
                    "cpus": os.cpu_count()},
        "reps": reps,
    })
    os.makedirs(ns.out, exist_ok=True)
    with open(os.path.join(ns.out, "inplace_scaling.json"), "w") as fh:
        json.dump(result, fh, indent=1)
    md = markdown(result)
    with open(os.path.join(ns.out, "inplace_scaling.md"), "w") as fh:
        fh.write(md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
