"""The flagship JAX decode example and its benchmark run end to end (tokens
equal jax.jit's, caches in place, 0 bytes of cache copied)."""

from __future__ import annotations

import json
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))

import jax_decode as example  # noqa: E402


def test_example_main_succeeds(capsys):
    assert example.main(example.Config(), steps=6, rounds=1) == 0
    out = capsys.readouterr().out
    assert "tokens and logits match jax.jit: True" in out
    assert "bytes of cache copied per step: 0" in out
    assert out.rstrip().endswith("OK")


def test_decode_step_matches_eager_jax_and_updates_caches_in_place():
    import jax

    import tdf.jax

    cfg = example.Config(layers=1, seq=16)
    params = example.init_params(cfg, seed=3)
    step = example.make_decode_step(cfg)
    f = tdf.jax.jit(step, donate_argnums=(1, 2))
    k, v = example.empty_caches(cfg)
    token, logits, k2, v2 = f(params, k, v, np.int32(5), np.int32(4))
    assert k2 is k and v2 is v and np.any(k[:, :, 4]) and not np.any(k[:, :, 5:])
    with jax.disable_jit():
        ref = step(jax.tree_util.tree_map(jax.numpy.asarray, params),
                   *map(jax.numpy.asarray, example.empty_caches(cfg)), np.int32(5), np.int32(4))
    assert int(token) == int(ref[0])
    np.testing.assert_allclose(logits, ref[1], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(k2, ref[2], rtol=1e-5, atol=1e-6)


def test_benchmark_tiny_run(tmp_path):
    import importlib.util
    path = os.path.join(ROOT, "benchmarks", "jax_decode.py")
    spec = importlib.util.spec_from_file_location("bench_jax_decode", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["--tiny", "--out", str(tmp_path)]) == 0
    rows = json.load(open(tmp_path / "jax_decode.json"))
    assert rows[0]["tokens_match"] and rows[0]["tdf_cache_bytes_copied_per_step"] == 0
