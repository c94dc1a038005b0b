"""Benchmark: a transformer decode step written in plain JAX, compiled by
``tdf.jax.jit`` against ``jax.jit`` with and without ``donate_argnums``.

For each model size the script checks that tdf generates the same tokens
as ``jax.jit`` (and the same final logits), that both KV caches stay in the
caller's numpy buffers (0 bytes of cache copied per step, from
``prog.report()``), then times greedy generation in interleaved rounds
(round robin over the variants, median seconds per token) and writes
``benchmarks/results/jax_decode.json``:

    .venv/bin/python benchmarks/jax_decode.py            # small + medium model
    .venv/bin/python benchmarks/jax_decode.py --tiny     # the example's size only

Memory: the bytes of cache copied per step (tdf report) and JAX's
``memory_analysis()`` (alias bytes = donated buffers reused).
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
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
sys.path.insert(0, os.path.join(HERE, "..", "python"))

import jax_decode as model  # noqa: E402
import tdf.jax  # noqa: E402

SIZES = {
    "small": model.Config(),
    "medium": model.Config(layers=4, dim=256, heads=8, kv_heads=2, head_dim=32, hidden=704,
                           vocab=1024, seq=512),
}


def run(name, cfg, rounds, tokens):
    params = model.init_params(cfg)
    step = model.make_decode_step(cfg)
    tdf_step = tdf.jax.jit(step, donate_argnums=(1, 2))
    caches = model.empty_caches(cfg)
    ids = [c.__array_interface__["data"][0] for c in caches]
    ours, ours_logits, out_caches, _ = model.generate(tdf_step, params, caches, 7, tokens)
    in_place = all(c.__array_interface__["data"][0] == i for c, i in zip(out_caches, ids))
    report = tdf_step.lower(params, *model.empty_caches(cfg), np.int32(7), np.int32(0)).compile().report()
    cache_copies = sum(c.nbytes or 0 for c in report.copies if (c.nbytes or 0) >= caches[0].nbytes)

    jax_params = jax.tree_util.tree_map(jnp.asarray, params)
    donated = jax.jit(step, donate_argnums=(1, 2))
    plain = jax.jit(step)

    def jax_caches():
        return tuple(map(jnp.asarray, model.empty_caches(cfg)))

    ref, ref_logits, _, _ = model.generate(donated, jax_params, jax_caches(), 7, tokens, False)
    memory = plain.lower(jax_params, *jax_caches(), np.int32(7), np.int32(0)).compile().memory_analysis()
    memory_donated = donated.lower(jax_params, *jax_caches(), np.int32(7),
                                   np.int32(0)).compile().memory_analysis()
    times = model.time_per_token({
        "tdf": (tdf_step, params, lambda: model.empty_caches(cfg), True),
        "jax_donated": (donated, jax_params, jax_caches, False),
        "jax": (plain, jax_params, jax_caches, False),
    }, rounds=rounds, tokens=tokens)
    row = {
        "size": name, "config": cfg.__dict__, "tokens": tokens, "rounds": rounds,
        "tokens_match": ours == ref,
        "max_logit_diff": float(np.max(np.abs(ours_logits - np.asarray(ref_logits)))),
        "caches_in_place": in_place, "cache_bytes": int(sum(c.nbytes for c in caches)),
        "tdf_cache_bytes_copied_per_step": int(cache_copies),
        "jax_alias_bytes_donated": int(memory_donated.alias_size_in_bytes),
        "jax_temp_bytes_not_donated": int(memory.temp_size_in_bytes),
        "seconds_per_token": times,
        "ratio_vs_jax_donated": times["tdf"] / times["jax_donated"],
        "ratio_vs_jax": times["tdf"] / times["jax"],
    }
    print(f"{name}: cache {row['cache_bytes']} B, tokens match {row['tokens_match']}, "
          f"in place {in_place}, cache bytes copied/step {cache_copies}; per token: "
          f"tdf {times['tdf'] * 1e6:.0f} us, jax.jit donated {times['jax_donated'] * 1e6:.0f} us "
          f"({row['ratio_vs_jax_donated']:.2f}x), jax.jit {times['jax'] * 1e6:.0f} us "
          f"({row['ratio_vs_jax']:.2f}x)")
    return row


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="the example's size only, 3 rounds")
    parser.add_argument("--out", default=os.path.join(HERE, "results"))
    args = parser.parse_args(argv)
    sizes = {"small": SIZES["small"]} if args.tiny else SIZES
    rows = [run(name, cfg, 3 if args.tiny else 7, 16 if args.tiny else 32)
            for name, cfg in sizes.items()]
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "jax_decode.json"), "w") as f:
        json.dump(rows, f, indent=1)
    ok = all(r["tokens_match"] and r["caches_in_place"] and r["tdf_cache_bytes_copied_per_step"] == 0
             for r in rows)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
