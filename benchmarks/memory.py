"""Benchmark: memory per call, tdf with and without ``tdf-plan-memory``
against XLA's buffer assignment, on programs written in plain JAX.

Programs (random weights, fixed seeds): an MLP forward (4 layers), a
transformer block, an element-wise chain, a concatenation of computed parts,
a GPT-2-style decode step (KV caches donated), a GPT-2-style prefill (128
tokens), an MLP train step (parameters donated), an RNN over ``lax.scan``
(128 steps) and a scatter-add of 512 rows.

Per program, side by side: tdf's measured peak heap bytes of one call
(``count_allocations``; results included), its allocations and bytes
allocated per call, the compile-time ``memory_analysis()`` peak, the
lifetime lower bound of tdf's own buffers (no placement of them can do
better), the same measurements with ``plan_memory=False``, and XLA's
``temp + output − alias`` from ``jax.jit(f).lower(*a).compile()
.memory_analysis()``. Results are checked against jax.jit first.

    .venv/bin/python benchmarks/memory.py            # every program
    .venv/bin/python benchmarks/memory.py --tiny     # small sizes (smoke test)
    .venv/bin/python benchmarks/memory.py --time     # + time per call, planner on vs off

Writes ``benchmarks/results/memory.json`` and prints a markdown table.
Memory figures do not depend on machine load.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import models as M  # noqa: E402

import tdf.jax  # noqa: E402


def mlp_forward(x, ws):
    for w in ws:
        x = jnp.tanh(x @ w)
    return x


def transformer_block(x, p, heads):
    s, d = x.shape
    a = M._layer_norm(x, p["ln1"], p["ln1_b"])
    q, k, v = (M._heads(a @ p[n], heads) for n in ("wq", "wk", "wv"))
    scores = jnp.einsum("hqd,hkd->hqk", q, k) / np.float32(np.sqrt(d // heads))
    scores = jnp.where(jnp.tril(jnp.ones((s, s), bool))[None], scores, -1e30)
    att = jnp.einsum("hqk,hkd->hqd", jax.nn.softmax(scores, axis=-1), v)
    x = x + att.transpose(1, 0, 2).reshape(s, d) @ p["wo"]
    m = M._layer_norm(x, p["ln2"], p["ln2_b"])
    return x + jax.nn.gelu(m @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]


def ew_chain(x, y):
    a = jnp.exp(-x * x)
    b = a * y + 1.0
    c = jnp.tanh(b) - a
    d = jnp.sqrt(jnp.abs(c) + 1e-3)
    return d * b + c


def concat_parts(a, b):
    return jnp.concatenate([jnp.exp(a), jnp.sin(b) * a, a @ b.T], axis=1)


def scatter_add(table, ids, rows):
    return table.at[ids].add(rows)


def programs(tiny: bool) -> dict:
    """name -> (function, args, donate_argnums)."""
    rng = M._rng(7)
    n = 64 if tiny else 256
    ws = [M._w(rng, n, n) for _ in range(4)]
    c = M._gpt2_config(tiny)
    gp = M._gpt2_params(c)
    d = c["dim"]
    block = gp["layers"][0]
    x_seq = rng.standard_normal((c["seq"] // 2, d)).astype(np.float32)
    ew = 1 << (12 if tiny else 18)
    cache = (c["layers"], c["heads"], c["seq"], d // c["heads"])
    tokens = (np.arange(c["seq"]) * 7 % c["vocab"]).astype(np.int32)
    mlp, mlp_params = M.make_mlp_train([64, 64, 10] if tiny else [784, 512, 512, 10])
    batch = 16 if tiny else 128
    xb = rng.standard_normal((batch, 64 if tiny else 784)).astype(np.float32)
    yb = np.eye(10, dtype=np.float32)[rng.integers(0, 10, batch)]
    rnn, rp, xs, h0 = M.make_rnn(*((32, 16, 4, 16) if tiny else (256, 128, 16, 64)))
    rows = 64 if tiny else 1024
    heads = c["heads"]
    return {
        "mlp_forward": (mlp_forward, (rng.standard_normal((n, n)).astype(np.float32), ws), ()),
        "transformer_block": (lambda x, p: transformer_block(x, p, heads), (x_seq, block), ()),
        "ew_chain": (ew_chain, (rng.standard_normal(ew).astype(np.float32),
                                rng.standard_normal(ew).astype(np.float32)), ()),
        "concat_parts": (concat_parts, (rng.standard_normal((n, n)).astype(np.float32),
                                        rng.standard_normal((n, n)).astype(np.float32)), ()),
        "gpt2_decode": (M.make_gpt2_decode(c),
                        (gp, np.zeros(cache, np.float32), np.zeros(cache, np.float32),
                         np.int32(3), np.int32(5)), (1, 2)),
        "gpt2_prefill": (M.make_gpt2_prefill(c), (gp, tokens), ()),
        "mlp_train": (mlp, (mlp_params, xb, yb), (0,)),
        "rnn_scan": (rnn, (rp, xs, h0), ()),
        "scatter_add": (scatter_add, (rng.standard_normal((rows, 128)).astype(np.float32),
                                      rng.integers(0, rows, 512).astype(np.int32),
                                      rng.standard_normal((512, 128)).astype(np.float32)), ()),
    }


def _tdf_figures(fn, args, donate, plan: bool) -> dict:
    jitted = tdf.jax.jit(fn, donate_argnums=donate, count_allocations=True, plan_memory=plan)
    out = jitted(*M._copy(args))
    program = jitted.program(*M._copy(args))  # the same argument types as the calls
    del out  # frees the first call's results: the second call starts from zero
    program.reset_allocation_stats()
    out = jitted(*M._copy(args))
    stats = program.allocation_stats()
    analysis = program.memory_analysis()
    return {"peak": stats.peak_bytes,
            "allocations": stats.calls, "allocated": stats.bytes,
            "predicted_peak": analysis.peak_memory_in_bytes,
            "lower_bound": analysis.lower_bound_in_bytes,
            "arena": analysis.arena_size_in_bytes, "out": out}


def measure(name, fn, args, donate) -> dict:
    compiled = jax.jit(fn, donate_argnums=donate).lower(*args).compile()
    xla = compiled.memory_analysis()
    xla_bytes = xla.temp_size_in_bytes + xla.output_size_in_bytes - xla.alias_size_in_bytes
    ref = jax.jit(fn)(*M._copy(args))
    on = _tdf_figures(fn, args, donate, True)
    off = _tdf_figures(fn, args, donate, False)
    M._check(name, on.pop("out"), ref, atol=2e-3)
    M._check(name, off.pop("out"), ref, atol=2e-3)
    row = {"program": name, "tdf": on, "tdf_unplanned": off, "xla": xla_bytes,
           "xla_temp": xla.temp_size_in_bytes}
    print(f"{name}: peak {on['peak']} B ({on['allocations']} allocations), predicted "
          f"{on['predicted_peak']}, bound {on['lower_bound']}; unplanned peak {off['peak']} "
          f"({off['allocations']}); XLA {xla_bytes}", flush=True)
    return row


def time_on_off(name, fn, args, donate, reps: int) -> dict:
    """Seconds per call with the planner on and off, interleaved rounds."""
    import harness as H

    fns = {"on": tdf.jax.jit(fn, donate_argnums=donate),
           "off": tdf.jax.jit(fn, donate_argnums=donate, plan_memory=False)}
    state = {k: M._copy(args) for k in fns}

    def runner(k):
        # Donated arrays are updated in place and passed again (tdf never
        # frees a caller's array): the same state every call.
        return lambda: fns[k](*state[k])

    timing = H.time_variants({k: runner(k) for k in fns}, reps=reps)
    on, off = timing["on"]["median"], timing["off"]["median"]
    print(f"{name}: planner on {on * 1e3:.3f} ms, off {off * 1e3:.3f} ms, on/off {on / off:.2f}",
          flush=True)
    return {"on": on, "off": off, "on_over_off": on / off}


def _kib(n: int) -> str:
    return f"{n / 1024:.1f} KiB" if n < 1 << 20 else f"{n / (1 << 20):.2f} MiB"


def markdown(rows) -> str:
    lines = ["| program | tdf peak | allocations / call | memory_analysis() peak | "
             "lifetime bound (tdf's buffers) | tdf peak, planner off (allocations) | "
             "XLA temp + output − alias | tdf / XLA |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        on, off = r["tdf"], r["tdf_unplanned"]
        ratio = on["peak"] / r["xla"] if r["xla"] else float("nan")
        lines.append(f"| {r['program']} | {_kib(on['peak'])} | {on['allocations']} | "
                     f"{_kib(on['predicted_peak'])} | {_kib(on['lower_bound'])} | "
                     f"{_kib(off['peak'])} ({off['allocations']}) | {_kib(r['xla'])} | "
                     f"{ratio:.2f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tiny", action="store_true")
    parser.add_argument("--only", default="")
    parser.add_argument("--out", default=os.path.join(HERE, "results"))
    parser.add_argument("--time", action="store_true",
                        help="also time each program with the planner on and off")
    parser.add_argument("--reps", type=int, default=7)
    args = parser.parse_args(argv)
    progs = programs(args.tiny)
    names = [n for n in args.only.split(",") if n] or list(progs)
    rows = [measure(name, *progs[name]) for name in names]
    if args.time:
        for row in rows:
            row["time"] = time_on_off(row["program"], *progs[row["program"]], args.reps)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "memory.json"), "w") as f:
        json.dump({"rows": rows, "tiny": args.tiny}, f, indent=1)
    print(markdown(rows))
    if args.time:
        print("\n| program | planner on ms | planner off ms | on / off |\n|---|---|---|---|")
        for r in rows:
            t = r["time"]
            print(f"| {r['program']} | {t['on'] * 1e3:.3f} | {t['off'] * 1e3:.3f} | "
                  f"{t['on_over_off']:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
