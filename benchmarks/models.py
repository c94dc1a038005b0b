"""Benchmark: model workloads written in plain JAX, ``tdf.jax.jit`` against
``jax.jit`` with the same donation, side by side in one process.

Workloads (random weights, fixed seeds):

- ``gpt2_prefill``: a GPT-2-style block stack over a 128-token prompt
  (LayerNorm, causal multi-head attention, GELU MLP, tied unembedding);
- ``gpt2_decode``: one token of the same model over donated KV caches;
- ``llama_decode``: the flagship example's Llama-style decode step
  (grouped-query attention, RoPE, SwiGLU; ``examples/jax_decode.py``,
  medium size), caches donated;
- ``mlp_train``: an MLP classifier train step, ``value_and_grad`` of a
  softmax cross-entropy + SGD, parameters donated;
- ``rnn_scan``: a tanh RNN over ``lax.scan`` (128 steps);
- ``adam``: an Adam update of a parameter tree, parameters and both moments
  donated;
- ``embed_update``: a sparse embedding update ``table.at[ids].add(-lr * g)``,
  the table donated.

Each workload is checked first (tdf's results against jax.jit's: greedy
tokens equal, floats within tolerance), then timed in interleaved rounds
(``harness.time_variants``; donated state is fed back from each call's
results). Reported: median seconds per call and ``tdf / jax.jit``; with
``--library-gemms`` also tdf with every GEMM through oneDNN/OpenBLAS
(``codegen_flops=0``: no small GEMM compiled) and ``tdf / library``.

    .venv/bin/python benchmarks/models.py            # every workload
    .venv/bin/python benchmarks/models.py --only mlp_train,adam
    .venv/bin/python benchmarks/models.py --tiny     # small sizes (smoke test)
    .venv/bin/python benchmarks/models.py --library-gemms   # compiled small GEMMs or not

Writes ``benchmarks/results/models.json`` and prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

# numpy's bundled OpenBLAS (a variant here) spins its worker threads for
# ~0.1 s after every multi-threaded call, taking a core from whatever the
# interleaved timing runs next; tdf loads its own OpenBLAS with a short spin
# (tdf.blas). Give numpy's the same, before numpy loads it.
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "10")

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "examples"))

import harness as H  # noqa: E402

# tdf (and the Llama example, which imports it) load when a workload is
# built or run: the model builders alone (make_gpt2_prefill, ...) need only
# JAX, so gpu_device.py imports them where there is no MLIR.


def _rng(seed=0):
    return np.random.default_rng(seed)


def _w(rng, *shape, scale=None):
    scale = 1 / np.sqrt(shape[0]) if scale is None else scale
    return (rng.standard_normal(shape) * scale).astype(np.float32)


# ------------------------------------------------------------------- GPT-2


def _gpt2_config(tiny):
    return dict(layers=2, dim=64, heads=4, vocab=256, seq=32) if tiny else \
        dict(layers=4, dim=256, heads=8, vocab=2048, seq=128)


def _gpt2_params(c):
    rng = _rng(1)
    d = c["dim"]
    layers = [{"ln1": np.ones(d, np.float32), "ln1_b": np.zeros(d, np.float32),
               "wq": _w(rng, d, d), "wk": _w(rng, d, d), "wv": _w(rng, d, d),
               "wo": _w(rng, d, d), "ln2": np.ones(d, np.float32),
               "ln2_b": np.zeros(d, np.float32), "w1": _w(rng, d, 4 * d),
               "b1": np.zeros(4 * d, np.float32), "w2": _w(rng, 4 * d, d),
               "b2": np.zeros(d, np.float32)} for _ in range(c["layers"])]
    return {"wte": _w(rng, c["vocab"], d, scale=0.02), "wpe": _w(rng, c["seq"], d, scale=0.02),
            "layers": layers, "lnf": np.ones(d, np.float32), "lnf_b": np.zeros(d, np.float32)}


def _layer_norm(x, g, b, eps=1e-5):
    mu = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean((x - mu) ** 2, axis=-1, keepdims=True)
    return (x - mu) * lax.rsqrt(var + eps) * g + b


def _heads(x, h):
    return x.reshape(x.shape[0], h, -1).transpose(1, 0, 2)  # [h, s, hd]


def make_gpt2_prefill(c):
    h, s = c["heads"], c["seq"]

    def prefill(params, tokens):
        x = params["wte"][tokens] + params["wpe"][:s]
        mask = jnp.tril(jnp.ones((s, s), bool))
        ks, vs = [], []
        for p in params["layers"]:
            a = _layer_norm(x, p["ln1"], p["ln1_b"])
            q, k, v = (_heads(a @ p[n], h) for n in ("wq", "wk", "wv"))
            scores = jnp.einsum("hqd,hkd->hqk", q, k) / np.sqrt(q.shape[-1]).astype(np.float32)
            scores = jnp.where(mask[None], scores, -1e30)
            att = jnp.einsum("hqk,hkd->hqd", jax.nn.softmax(scores, axis=-1), v)
            x = x + att.transpose(1, 0, 2).reshape(s, -1) @ p["wo"]
            m = _layer_norm(x, p["ln2"], p["ln2_b"])
            x = x + jax.nn.gelu(m @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]
            ks.append(k)
            vs.append(v)
        x = _layer_norm(x, params["lnf"], params["lnf_b"])
        return x @ params["wte"].T, jnp.stack(ks), jnp.stack(vs)

    return prefill


def make_gpt2_decode(c):
    h, s = c["heads"], c["seq"]

    def decode(params, k_cache, v_cache, token, pos):
        x = params["wte"][token] + params["wpe"][pos]
        for i, p in enumerate(params["layers"]):
            a = _layer_norm(x, p["ln1"], p["ln1_b"])
            q, k, v = ((a @ p[n]).reshape(h, -1) for n in ("wq", "wk", "wv"))
            k_cache = k_cache.at[i, :, pos].set(k)
            v_cache = v_cache.at[i, :, pos].set(v)
            scores = jnp.einsum("hd,hkd->hk", q, k_cache[i]) / np.sqrt(q.shape[-1]).astype(
                np.float32)
            scores = jnp.where(jnp.arange(s)[None] <= pos, scores, -1e30)
            att = jnp.einsum("hk,hkd->hd", jax.nn.softmax(scores, axis=-1), v_cache[i])
            x = x + att.reshape(-1) @ p["wo"]
            m = _layer_norm(x, p["ln2"], p["ln2_b"])
            x = x + jax.nn.gelu(m @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]
        logits = _layer_norm(x, params["lnf"], params["lnf_b"]) @ params["wte"].T
        return jnp.argmax(logits).astype(jnp.int32), k_cache, v_cache

    return decode


# ------------------------------------------------------------------ others


def make_mlp_train(sizes):
    def loss_fn(params, x, y):
        h = x
        for i, (w, b) in enumerate(params):
            h = h @ w + b
            if i < len(params) - 1:
                h = jax.nn.relu(h)
        logp = jax.nn.log_softmax(h, axis=-1)
        return -jnp.mean(jnp.sum(logp * y, axis=-1))

    def step(params, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        return loss, [(w - 0.01 * gw, b - 0.01 * gb) for (w, b), (gw, gb) in zip(params, grads)]

    rng = _rng(2)
    params = [(_w(rng, a, b), np.zeros(b, np.float32)) for a, b in zip(sizes, sizes[1:])]
    return step, params


def make_rnn(hidden, steps, batch, features):
    def rnn(params, xs, h0):
        wx, wh, b = params

        def cell(h, x):
            h = jnp.tanh(x @ wx + h @ wh + b)
            return h, h

        h, ys = lax.scan(cell, h0, xs)
        return h, ys

    rng = _rng(3)
    params = (_w(rng, features, hidden), _w(rng, hidden, hidden), np.zeros(hidden, np.float32))
    xs = rng.standard_normal((steps, batch, features)).astype(np.float32)
    return rnn, params, xs, np.zeros((batch, hidden), np.float32)


def adam(params, grads, m, v, lr=1e-3, b1=0.9, b2=0.999, eps=1e-8):
    m = jax.tree_util.tree_map(lambda m, g: b1 * m + (1 - b1) * g, m, grads)
    v = jax.tree_util.tree_map(lambda v, g: b2 * v + (1 - b2) * g * g, v, grads)
    params = jax.tree_util.tree_map(lambda p, m, v: p - lr * m / (jnp.sqrt(v) + eps),
                                    params, m, v)
    return params, m, v


def embed_update(table, ids, grads):
    return table.at[ids].add(-0.1 * grads)


# ------------------------------------------------------------------ driver


def _copy(tree):
    return jax.tree_util.tree_map(lambda a: np.array(a, copy=True), tree)


def _check(name, ours, ref, rtol=1e-4, atol=1e-4):
    for a, b in zip(jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(ref)):
        a, b = np.asarray(a), np.asarray(b)
        if a.dtype.kind in "iub":
            assert np.array_equal(a, b), f"{name}: integer results differ"
        else:
            np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=name)


def bench(name, fn, args, donate, feed, reps, atol=1e-4, library_gemms=False):
    """``fn(*args)`` through tdf.jax.jit and jax.jit with ``donate``;
    ``feed(args, out)`` gives the next call's arguments (donated state fed
    back). ``library_gemms``: also tdf with every contraction through the
    libraries (``codegen_flops=0``: no small GEMM compiled), variant
    ``tdf_library``."""
    import tdf.jax

    builds = {"tdf": tdf.jax.jit(fn, donate_argnums=donate)}
    if library_gemms:
        builds["tdf_library"] = tdf.jax.jit(fn, donate_argnums=donate, codegen_flops=0)
    ref_fn = jax.jit(fn, donate_argnums=donate)
    ref = ref_fn(*jax.tree_util.tree_map(jnp.asarray, _copy(args)))
    state = {"jax": jax.tree_util.tree_map(jnp.asarray, _copy(args))}
    variants = {}
    for variant, ours_fn in builds.items():
        _check(f"{name} ({variant})", ours_fn(*_copy(args)), ref, atol=atol)
        state[variant] = _copy(args)

        def run(variant=variant, ours_fn=ours_fn):
            state[variant] = feed(state[variant], ours_fn(*state[variant]))
        variants[variant] = run

    def run_jax():
        out = ref_fn(*state["jax"])
        jax.block_until_ready(out)
        state["jax"] = feed(state["jax"], out)

    variants["jax"] = run_jax
    timing = H.time_variants(variants, reps=reps)
    row = {"workload": name, "seconds": {k: t["median"] for k, t in timing.items()},
           "iqr": {k: t["iqr"] for k, t in timing.items()},
           "tdf_over_jax": H.ratio(timing["tdf"]["median"], timing["jax"]["median"])}
    extra = ""
    if library_gemms:
        row["tdf_over_library"] = H.ratio(timing["tdf"]["median"],
                                          timing["tdf_library"]["median"])
        extra = (f", library GEMMs {row['seconds']['tdf_library'] * 1e3:.3f} ms, "
                 f"tdf/library {row['tdf_over_library']:.2f}")
    print(f"{name}: tdf {row['seconds']['tdf'] * 1e3:.3f} ms, jax.jit "
          f"{row['seconds']['jax'] * 1e3:.3f} ms, tdf/jax {row['tdf_over_jax']:.2f}{extra}",
          flush=True)
    return row


def workloads(tiny):
    import jax_decode as llama

    c = _gpt2_config(tiny)
    gp = _gpt2_params(c)
    tokens = (np.arange(c["seq"]) * 7 % c["vocab"]).astype(np.int32)
    cache = (c["layers"], c["heads"], c["seq"], c["dim"] // c["heads"])
    lcfg = llama.Config() if tiny else llama.Config(
        layers=4, dim=256, heads=8, kv_heads=2, head_dim=32, hidden=704, vocab=1024, seq=512)
    lp = llama.init_params(lcfg)
    step = llama.make_decode_step(lcfg)
    mlp, mlp_params = make_mlp_train([64, 64, 10] if tiny else [784, 512, 512, 10])
    rng = _rng(4)
    batch = 16 if tiny else 128
    x = rng.standard_normal((batch, 64 if tiny else 784)).astype(np.float32)
    y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, batch)]
    rnn, rp, xs, h0 = make_rnn(*((32, 16, 4, 16) if tiny else (256, 128, 16, 64)))
    n = 1 << (12 if tiny else 18)
    tree = {"w1": rng.standard_normal((n,)).astype(np.float32),
            "w2": rng.standard_normal((n // 4, 4)).astype(np.float32)}
    grads = jax.tree_util.tree_map(lambda a: (a * 0.01).astype(np.float32), tree)
    zeros = jax.tree_util.tree_map(np.zeros_like, tree)
    vocab, dim, k = (1000, 16, 32) if tiny else (50000, 128, 512)
    table = rng.standard_normal((vocab, dim)).astype(np.float32)
    ids = rng.integers(0, vocab, k).astype(np.int32)
    g = rng.standard_normal((k, dim)).astype(np.float32)
    return {
        "gpt2_prefill": (make_gpt2_prefill(c), (gp, tokens), (), lambda a, o: a, 2e-3),
        "gpt2_decode": (make_gpt2_decode(c),
                        (gp, np.zeros(cache, np.float32), np.zeros(cache, np.float32),
                         np.int32(3), np.int32(5)), (1, 2),
                        lambda a, o: (a[0], o[1], o[2], a[3], a[4]), 1e-4),
        "llama_decode": (step, (lp, *llama.empty_caches(lcfg), np.int32(7), np.int32(3)),
                         (1, 2), lambda a, o: (a[0], o[2], o[3], a[3], a[4]), 1e-4),
        "mlp_train": (mlp, (mlp_params, x, y), (0,), lambda a, o: (o[1], a[1], a[2]), 1e-4),
        "rnn_scan": (rnn, (rp, xs, h0), (), lambda a, o: a, 1e-4),
        "adam": (adam, (tree, grads, zeros, zeros), (0, 2, 3),
                 lambda a, o: (o[0], a[1], o[1], o[2]), 1e-4),
        "embed_update": (embed_update, (table, ids, g), (0,), lambda a, o: (o, a[1], a[2]), 1e-4),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tiny", action="store_true")
    parser.add_argument("--only", default="")
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--library-gemms", action="store_true",
                        help="also time tdf with every GEMM through the libraries "
                             "(codegen_flops=0)")
    parser.add_argument("--out", default=os.path.join(HERE, "results"))
    args = parser.parse_args(argv)
    loads = workloads(args.tiny)
    names = [n for n in args.only.split(",") if n] or list(loads)
    rows = []
    for name in names:
        fn, fargs, donate, feed, atol = loads[name]
        rows.append(bench(name, fn, fargs, donate, feed, args.reps, atol, args.library_gemms))
    geo = float(np.exp(np.mean([np.log(r["tdf_over_jax"]) for r in rows])))
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "models.json"), "w") as f:
        json.dump({"rows": rows, "geomean_tdf_over_jax": geo, "tiny": args.tiny}, f, indent=1)
    if args.library_gemms:
        print("| workload | tdf ms | library GEMMs ms | jax.jit ms | tdf / library | "
              "tdf / jax.jit |\n|---|---|---|---|---|---|")
        for r in rows:
            print(f"| {r['workload']} | {r['seconds']['tdf'] * 1e3:.3f} | "
                  f"{r['seconds']['tdf_library'] * 1e3:.3f} | {r['seconds']['jax'] * 1e3:.3f} | "
                  f"{r['tdf_over_library']:.2f} | {r['tdf_over_jax']:.2f} |")
    else:
        print("| workload | tdf ms | jax.jit ms | tdf / jax.jit |\n|---|---|---|---|")
        for r in rows:
            print(f"| {r['workload']} | {r['seconds']['tdf'] * 1e3:.3f} | "
                  f"{r['seconds']['jax'] * 1e3:.3f} | {r['tdf_over_jax']:.2f} |")
    print(f"\ngeometric mean tdf/jax.jit: {geo:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
