"""A transformer decode step in plain JAX, run by ``tdf.jax.jit``: the flagship
example (``make example``).

The model is an L-layer decoder: RMSNorm, grouped-query attention over a KV
cache, rotary position embeddings, a SwiGLU MLP and greedy argmax. One call
of :func:`decode_step` takes the token at ``pos``, writes its key/value rows
into the caches (``.at[:, :, pos].set(...)``) and returns the next token.
The caches are **donated**: tdf updates them in place (0 bytes of cache
copied, the returned caches are the caller's arrays), exactly as
``jax.jit(..., donate_argnums=...)`` does, while computing the same tokens.

The script generates tokens in a loop with tdf and with ``jax.jit`` (with
and without donation), checks that the tokens and the logits match, prints
the in-place report and the time per token of each.
"""

from __future__ import annotations

import linecache
import os
import sys
import time
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
import tdf.jax  # noqa: E402

STEPS = 24  # tokens generated



@dataclass(frozen=True)
class Config:
    """Model sizes (the default is small, so that the example runs in seconds)."""

    layers: int = 2
    dim: int = 64
    heads: int = 4
    kv_heads: int = 2
    head_dim: int = 16
    hidden: int = 128
    vocab: int = 256
    seq: int = 64


def rms_norm(x, w, eps=1e-6):
    return x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rotary(x, pos):
    """Rotary embeddings on [heads, head_dim] at position ``pos``."""
    half = x.shape[-1] // 2
    freqs = 1.0 / (10000.0 ** (jnp.arange(half, dtype=jnp.float32) / half))
    angle = pos.astype(jnp.float32) * freqs
    cos, sin = jnp.cos(angle), jnp.sin(angle)
    x1, x2 = x[..., :half], x[..., half:]
    return jnp.concatenate([x1 * cos - x2 * sin, x1 * sin + x2 * cos], axis=-1)


def attention(cfg, q, k_cache, v_cache, pos):
    """Grouped-query attention of one token over positions 0..pos."""
    group = cfg.heads // cfg.kv_heads
    q = q.reshape(cfg.kv_heads, group, cfg.head_dim)
    scores = jnp.einsum("kgd,ksd->kgs", q, k_cache) / jnp.sqrt(float(cfg.head_dim))
    mask = jnp.arange(cfg.seq) <= pos
    scores = jnp.where(mask[None, None, :], scores, -1e30)
    weights = jax.nn.softmax(scores, axis=-1)
    out = jnp.einsum("kgs,ksd->kgd", weights, v_cache)
    return out.reshape(cfg.heads * cfg.head_dim)


def make_decode_step(cfg: Config):
    """The decode step of model ``cfg``: ``step(params, k_cache, v_cache,
    token, pos) -> (next token, logits, k_cache, v_cache)``; caches are
    [layers, kv_heads, seq, head_dim]."""

    def decode_step(params, k_cache, v_cache, token, pos):
        x = params["embed"][token]
        for layer in range(cfg.layers):
            p = params["layers"][layer]
            h = rms_norm(x, p["attn_norm"])
            q = rotary((h @ p["wq"]).reshape(cfg.heads, cfg.head_dim), pos)
            k = rotary((h @ p["wk"]).reshape(cfg.kv_heads, cfg.head_dim), pos)
            v = (h @ p["wv"]).reshape(cfg.kv_heads, cfg.head_dim)
            k_cache = k_cache.at[layer, :, pos].set(k)
            v_cache = v_cache.at[layer, :, pos].set(v)
            x = x + attention(cfg, q, k_cache[layer], v_cache[layer], pos) @ p["wo"]
            h = rms_norm(x, p["mlp_norm"])
            x = x + (jax.nn.silu(h @ p["w_gate"]) * (h @ p["w_up"])) @ p["w_down"]
        logits = rms_norm(x, params["final_norm"]) @ params["unembed"]
        return jnp.argmax(logits).astype(jnp.int32), logits, k_cache, v_cache

    return decode_step


def init_params(cfg: Config, seed=0):
    rng = np.random.default_rng(seed)

    def w(*shape):
        return (rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32)

    d, hd = cfg.dim, cfg.head_dim
    layers = [{"attn_norm": np.ones(d, np.float32) + 0.1 * w(d),
               "wq": w(d, cfg.heads * hd), "wk": w(d, cfg.kv_heads * hd),
               "wv": w(d, cfg.kv_heads * hd), "wo": w(cfg.heads * hd, d),
               "mlp_norm": np.ones(d, np.float32), "w_gate": w(d, cfg.hidden),
               "w_up": w(d, cfg.hidden), "w_down": w(cfg.hidden, d)} for _ in range(cfg.layers)]
    return {"embed": w(cfg.vocab, d), "layers": layers, "final_norm": np.ones(d, np.float32),
            "unembed": w(d, cfg.vocab)}


def empty_caches(cfg: Config):
    shape = (cfg.layers, cfg.kv_heads, cfg.seq, cfg.head_dim)
    return np.zeros(shape, np.float32), np.zeros(shape, np.float32)


def generate(step, params, caches, first_token, steps, to_numpy=True):
    """Greedy generation: returns (tokens, last logits, caches, seconds per token
    after the first, compiling, step)."""
    k_cache, v_cache = caches
    token = np.int32(first_token)
    tokens, times = [], []
    logits = None
    for pos in range(steps):
        start = time.perf_counter()
        token, logits, k_cache, v_cache = step(params, k_cache, v_cache, token, np.int32(pos))
        if to_numpy:
            token = np.asarray(token)
        else:
            token.block_until_ready()
        times.append(time.perf_counter() - start)
        tokens.append(int(token))
    return tokens, np.asarray(logits), (k_cache, v_cache), float(np.median(times[1:]))


def time_per_token(variants, rounds=5, tokens=16):
    """Median seconds per token of each variant, timed in interleaved rounds
    (round robin), each round decoding ``tokens`` tokens from fresh caches.
    ``variants`` maps a name to ``(step, params, make_caches, to_numpy)``."""
    samples = {name: [] for name in variants}
    for _ in range(rounds):
        for name, (step, params, make_caches, to_numpy) in variants.items():
            *_, seconds = generate(step, params, make_caches(), 7, tokens, to_numpy)
            samples[name].append(seconds)
    return {name: float(np.median(v)) for name, v in samples.items()}


def main(cfg: Config = Config(), steps: int = STEPS, rounds: int = 5) -> int:
    params = init_params(cfg)
    first = 7
    decode_step = make_decode_step(cfg)

    # tdf: caches donated (arguments 1 and 2).
    tdf_step = tdf.jax.jit(decode_step, donate_argnums=(1, 2))
    caches = empty_caches(cfg)
    cache_ids = [c.__array_interface__["data"][0] for c in caches]
    tdf_tokens, tdf_logits, tdf_caches, _ = generate(tdf_step, params, caches, first, steps)
    in_place = all(c.__array_interface__["data"][0] == i for c, i in zip(tdf_caches, cache_ids))

    prog = tdf_step.lower(params, *empty_caches(cfg), np.int32(first), np.int32(0)).compile()
    report = prog.report()
    cache_bytes = sum(c.nbytes for c in caches)

    # jax.jit with and without donation (device arrays between steps).
    jax_params = jax.tree_util.tree_map(jnp.asarray, params)
    donated = jax.jit(decode_step, donate_argnums=(1, 2))
    plain = jax.jit(decode_step)

    def jax_caches():
        return tuple(map(jnp.asarray, empty_caches(cfg)))

    jax_tokens, jax_logits, _, _ = generate(donated, jax_params, jax_caches(), first, steps,
                                            to_numpy=False)
    plain_tokens, _, _, _ = generate(plain, jax_params, jax_caches(), first, steps, to_numpy=False)
    times = time_per_token({
        "tdf": (tdf_step, params, lambda: empty_caches(cfg), True),
        "jax_donated": (donated, jax_params, jax_caches, False),
        "jax": (plain, jax_params, jax_caches, False),
    }, rounds=rounds)

    match = tdf_tokens == jax_tokens == plain_tokens and np.allclose(
        tdf_logits, jax_logits, rtol=1e-4, atol=1e-4)
    copies = [c for c in report.copies if (c.nbytes or 0) >= caches[0].nbytes]
    print(f"tdf.jax.jit decode: {cfg.layers} layers, dim {cfg.dim}, {cfg.heads} query / "
          f"{cfg.kv_heads} kv heads, cache {caches[0].shape} x2 ({cache_bytes} B), {steps} tokens")
    print(f"tokens (tdf):     {tdf_tokens}")
    print(f"tokens (jax.jit): {jax_tokens}")
    print(f"tokens and logits match jax.jit: {match}")
    print(f"caches updated in place (same numpy buffers after {steps} steps): {in_place}")
    print(f"bytes of cache copied per step: {sum(c.nbytes or 0 for c in copies)}")
    updates = [d for d in report.decisions if d.op == "tensor.insert_slice"
               and ".at[" in linecache.getline(d.location.split(":")[0],
                                               int(d.location.split(":")[1]))]
    for d in updates:
        print(f"  {d.location}: cache update {'in place' if d.inplace else 'COPIED: ' + d.reason}")
    print(f"time per token (median of interleaved rounds): tdf {times['tdf'] * 1e6:.0f} us, "
          f"jax.jit donated {times['jax_donated'] * 1e6:.0f} us "
          f"({times['tdf'] / times['jax_donated']:.2f}x), jax.jit not donated "
          f"{times['jax'] * 1e6:.0f} us ({times['tdf'] / times['jax']:.2f}x)")
    ok = match and in_place and not copies and bool(updates) and all(d.inplace for d in updates)
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
