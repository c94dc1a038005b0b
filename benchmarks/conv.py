"""Benchmark: convolutions and a small CNN, ``tdf.jax.jit`` against
``jax.jit`` side by side in one process.

Workloads (random weights, fixed seeds; ``lax.conv_general_dilated`` and
``lax.reduce_window`` written in plain JAX):

- ``conv1_<layout>_b<N>``: 28x28x1 -> 32 channels, 3x3, VALID (a CNN's first
  layer), NHWC/HWIO and NCHW/OIHW, batch 8 and 64;
- ``conv2_<layout>_b<N>``: 13x13x32 -> 64 channels, 3x3, VALID (its second);
- ``conv1d``: 512 steps x 64 -> 64 channels, width 5, SAME (NWC);
- ``conv3d``: 16^3 x 8 -> 16 channels, 3x3x3, SAME (NDHWC), batch 2;
- ``cnn_forward_b<N>`` / ``cnn_train_b<N>``: conv(1->32) -> relu -> 2x2 max
  pool -> conv(32->64) -> relu -> 2x2 avg pool -> dense(1600->10); the train
  step is ``value_and_grad`` of a softmax cross-entropy + SGD with the
  parameters donated (max-pool gradient: ``select_and_scatter_add``; the
  weight gradients are convolutions with batch/feature dimensions swapped).

Each workload is checked first (tdf's results against jax.jit's), then timed
in interleaved rounds (``harness.time_variants``). With ``--strategies``
the single-layer workloads are also timed with the direct strategy of
``tdf.jax._conv`` (one ``linalg.generic`` over output and window loops, no
BLAS) next to the default im2col + BLAS contraction. Reported: median
seconds per call and the ratios; the 1-minute load average before and after
(the machine is shared: quote ratios from a run whose load stayed below the
core count).

    .venv/bin/python benchmarks/conv.py                 # every workload
    .venv/bin/python benchmarks/conv.py --strategies    # + the direct strategy
    .venv/bin/python benchmarks/conv.py --only cnn_train_b64 --reps 15
    .venv/bin/python benchmarks/conv.py --tiny          # small sizes (smoke test)

Writes ``benchmarks/results/conv.json`` and prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "10")  # see models.py

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import harness as H  # noqa: E402

import tdf.jax  # noqa: E402
from tdf.jax import _conv  # noqa: E402

NHWC = ("NHWC", "HWIO", "NHWC")
NCHW = ("NCHW", "OIHW", "NCHW")


def _w(rng, *shape, scale=0.1):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def _layer(layout, n, hw, cin, cout, k=3, padding="VALID", seed=0):
    rng = np.random.default_rng(seed)
    dn = NHWC if layout == "nhwc" else NCHW
    if layout == "nhwc":
        x, w = _w(rng, n, hw, hw, cin, scale=1.0), _w(rng, k, k, cin, cout)
    else:
        x, w = _w(rng, n, cin, hw, hw, scale=1.0), _w(rng, cout, cin, k, k)

    def fn(x, w):
        return lax.conv_general_dilated(x, w, (1, 1), padding, dimension_numbers=dn)
    return fn, (x, w)


def cnn_params(rng, side):
    flat = ((side - 2) // 2 - 2) // 2
    return {"w1": _w(rng, 3, 3, 1, 32, scale=0.3), "b1": np.zeros(32, np.float32),
            "w2": _w(rng, 3, 3, 32, 64, scale=0.06), "b2": np.zeros(64, np.float32),
            "wd": _w(rng, flat * flat * 64, 10, scale=0.03), "bd": np.zeros(10, np.float32)}


def cnn_forward(p, x):
    h = lax.conv_general_dilated(x, p["w1"], (1, 1), "VALID", dimension_numbers=NHWC) + p["b1"]
    h = jax.nn.relu(h)
    h = lax.reduce_window(h, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    h = lax.conv_general_dilated(h, p["w2"], (1, 1), "VALID", dimension_numbers=NHWC) + p["b2"]
    h = jax.nn.relu(h)
    h = lax.reduce_window(h, 0.0, lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID") * 0.25
    return h.reshape(h.shape[0], -1) @ p["wd"] + p["bd"]


def cnn_loss(p, x, y):
    logp = jax.nn.log_softmax(cnn_forward(p, x))
    return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1))


def cnn_train(p, x, y):
    loss, grads = jax.value_and_grad(cnn_loss)(p, x, y)
    return jax.tree_util.tree_map(lambda a, g: a - 0.05 * g, p, grads), loss


def workloads(tiny):
    side = 12 if tiny else 28
    batches = (2,) if tiny else (8, 64)
    loads = {}
    for layout in ("nhwc", "nchw"):
        for n in batches:
            loads[f"conv1_{layout}_b{n}"] = ("layer",) + _layer(layout, n, side, 1, 32)
            loads[f"conv2_{layout}_b{n}"] = ("layer",) + _layer(
                layout, n, (side - 2) // 2, 32 if not tiny else 8, 64 if not tiny else 16, seed=1)
    rng = np.random.default_rng(2)
    steps, ch = (32, 8) if tiny else (512, 64)
    x1, w1 = _w(rng, 16, steps, ch, scale=1.0), _w(rng, 5, ch, ch)
    loads["conv1d"] = ("layer", lambda x, w: lax.conv_general_dilated(
        x, w, (1,), "SAME", dimension_numbers=("NWC", "WIO", "NWC")), (x1, w1))
    d, c3 = (6, 2) if tiny else (16, 8)
    x3, w3 = _w(rng, 2, d, d, d, c3, scale=1.0), _w(rng, 3, 3, 3, c3, 2 * c3)
    loads["conv3d"] = ("layer", lambda x, w: lax.conv_general_dilated(
        x, w, (1, 1, 1), "SAME", dimension_numbers=("NDHWC", "DHWIO", "NDHWC")), (x3, w3))
    for n in batches:
        p = cnn_params(np.random.default_rng(3), side)
        x = _w(rng, n, side, side, 1, scale=1.0)
        y = rng.integers(0, 10, n).astype(np.int32)
        loads[f"cnn_forward_b{n}"] = ("forward", cnn_forward, (p, x))
        loads[f"cnn_train_b{n}"] = ("train", cnn_train, (p, x, y))
    return loads


def _copy(tree):
    return jax.tree_util.tree_map(lambda a: np.array(a, copy=True), tree)


def _check(name, ours, ref, tol):
    for a, b in zip(jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(ref)):
        a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
        scale = max(float(np.abs(b).max()) if b.size else 0.0, 1.0)
        assert np.abs(a - b).max() <= tol * scale, f"{name}: results differ from jax.jit"


def bench(name, kind, fn, args, reps, strategies):
    donate = (0,) if kind == "train" else ()
    variants, fns = {}, {}
    fns["tdf"] = tdf.jax.jit(fn, donate_argnums=donate)
    if strategies and kind == "layer":
        _conv.STRATEGY = "direct"
        try:
            fns["tdf_direct"] = tdf.jax.jit(fn)
            direct_out = fns["tdf_direct"](*args)
        finally:
            _conv.STRATEGY = "im2col"
    ref_fn = jax.jit(fn, donate_argnums=donate)
    ref = ref_fn(*jax.tree_util.tree_map(jnp.asarray, _copy(args)))
    _check(name, fns["tdf"](*_copy(args)), ref, 1e-4)
    if "tdf_direct" in fns:
        _check(name + " (direct)", direct_out, ref, 1e-4)
    feed = (lambda a, o: (o[0],) + tuple(a[1:])) if kind == "train" else (lambda a, o: a)
    state = {k: _copy(args) for k in fns}
    state["jax"] = jax.tree_util.tree_map(jnp.asarray, _copy(args))
    for key, f in fns.items():
        def run(key=key, f=f):
            state[key] = feed(state[key], f(*state[key]))
        variants[key] = run

    def run_jax():
        out = ref_fn(*state["jax"])
        jax.block_until_ready(out)
        state["jax"] = feed(state["jax"], out)

    variants["jax"] = run_jax
    timing = H.time_variants(variants, reps=reps)
    seconds = {k: t["median"] for k, t in timing.items()}
    row = {"workload": name, "seconds": seconds, "iqr": {k: t["iqr"] for k, t in timing.items()},
           "tdf_over_jax": H.ratio(seconds["tdf"], seconds["jax"])}
    if "tdf_direct" in seconds:
        row["direct_over_jax"] = H.ratio(seconds["tdf_direct"], seconds["jax"])
    extra = f", direct {seconds['tdf_direct'] * 1e3:.3f} ms" if "tdf_direct" in seconds else ""
    print(f"{name}: tdf {seconds['tdf'] * 1e3:.3f} ms, jax.jit {seconds['jax'] * 1e3:.3f} ms"
          f"{extra}, tdf/jax {row['tdf_over_jax']:.2f}", flush=True)
    return row


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tiny", action="store_true")
    parser.add_argument("--only", default="")
    parser.add_argument("--reps", type=int, default=9)
    parser.add_argument("--strategies", action="store_true",
                        help="also time the direct (loops) convolution strategy")
    parser.add_argument("--out", default=os.path.join(HERE, "results"))
    args = parser.parse_args(argv)
    loads = workloads(args.tiny)
    names = [n for n in args.only.split(",") if n] or list(loads)
    load_before = os.getloadavg()[0]
    rows = []
    for name in names:
        kind, fn, fargs = loads[name]
        rows.append(bench(name, kind, fn, fargs, args.reps, args.strategies))
    load_after = os.getloadavg()[0]
    geo = float(np.exp(np.mean([np.log(r["tdf_over_jax"]) for r in rows])))
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "conv.json"), "w") as f:
        json.dump({"rows": rows, "geomean_tdf_over_jax": geo, "tiny": args.tiny,
                   "load_before": load_before, "load_after": load_after}, f, indent=1)
    direct = any("direct_over_jax" in r for r in rows)
    print("| workload | tdf ms | jax.jit ms | tdf / jax.jit |" + (" direct ms | direct / jax.jit |"
                                                               if direct else ""))
    print("|---|---|---|---|" + ("---|---|" if direct else ""))
    for r in rows:
        s = r["seconds"]
        line = f"| {r['workload']} | {s['tdf'] * 1e3:.3f} | {s['jax'] * 1e3:.3f} | " \
               f"{r['tdf_over_jax']:.2f} |"
        if direct:
            line += (f" {s['tdf_direct'] * 1e3:.3f} | {r['direct_over_jax']:.2f} |"
                     if "tdf_direct" in s else " | |")
        print(line)
    print(f"\ngeometric mean tdf/jax.jit: {geo:.2f}; load average {load_before:.2f} before, "
          f"{load_after:.2f} after")
    return 0


if __name__ == "__main__":
    sys.exit(main())
