"""A corpus of JAX programs for tdf.jax.jit, each compared with jax.jit.

``PROGRAMS`` maps a name to ``(fun, make_args, donate_argnums, static_argnums)``;
``make_args(rng)`` returns fresh numpy arguments.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax


def _f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def rms_norm(x, w):
    return x * lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6) * w


def layer_norm(x, g, b):
    mu = jnp.mean(x, -1, keepdims=True)
    var = jnp.var(x, -1, keepdims=True)
    return (x - mu) / jnp.sqrt(var + 1e-5) * g + b


def mha(q, k, v):
    s = jnp.einsum("hqd,hkd->hqk", q, k) / np.sqrt(q.shape[-1])
    return jnp.einsum("hqk,hkd->hqd", jax.nn.softmax(s, -1), v)


def causal_attention(q, k, v):
    n = q.shape[1]
    s = jnp.einsum("hqd,hkd->hqk", q, k)
    mask = jnp.tril(jnp.ones((n, n), bool))
    s = jnp.where(mask, s, -jnp.inf)
    return jnp.einsum("hqk,hkd->hqd", jax.nn.softmax(s, -1), v)


def gqa_decode(q, k_cache, v_cache, k, v, pos):
    k_cache = k_cache.at[:, pos].set(k)
    v_cache = v_cache.at[:, pos].set(v)
    qg = q.reshape(2, 2, 8)
    s = jnp.einsum("kgd,ksd->kgs", qg, k_cache)
    s = jnp.where(jnp.arange(16) <= pos, s, -1e30)
    out = jnp.einsum("kgs,ksd->kgd", jax.nn.softmax(s, -1), v_cache)
    return out.reshape(4, 8), k_cache, v_cache


def swiglu(x, wg, wu, wd):
    return (jax.nn.silu(x @ wg) * (x @ wu)) @ wd


def gelu_mlp(x, w1, w2):
    return jax.nn.gelu(x @ w1, approximate=False) @ w2


def scan_layers(x, ws):
    def layer(h, w):
        h = jnp.tanh(h @ w) + h
        return h, jnp.sum(h)
    return lax.scan(layer, x, ws)


def while_generate(table, start):
    def cond(state):
        i, tok, out = state
        return i < 6

    def body(state):
        i, tok, out = state
        nxt = jnp.argmax(table[tok]).astype(jnp.int32)
        return i + 1, nxt, out.at[i].set(nxt)
    return lax.while_loop(cond, body, (0, start, jnp.zeros(6, jnp.int32)))


def embedding_update(table, ids, grads):
    return table.at[ids].add(grads)


def embedding_lookup(table, ids):
    return table[ids] * 2.0


def integer_program(a, b):
    return (a // b, a % b, lax.div(a, b), lax.rem(a, b), a * b - a, jnp.maximum(a, b),
            a >> 2, a << 1, jnp.abs(a), jnp.sign(a), a ^ b, ~a)


def fori_accumulate(x):
    return lax.fori_loop(0, 5, lambda i, acc: acc * 0.5 + x[i], jnp.zeros(x.shape[1:], x.dtype))


def cond_branches(x, flag):
    return lax.cond(flag > 0, lambda y: jnp.sin(y) * 2, lambda y: jnp.cos(y) - 1, x)


def switch_branches(x, idx):
    return lax.switch(idx, [lambda y: y + 1, lambda y: y * 3, lambda y: -y], x)


def clamped_slices(x, i):
    return lax.dynamic_slice(x, (i, 0), (3, 4)), lax.dynamic_update_slice(x, jnp.ones((2, 4)), (i, 1))


def dropped_scatter(x, idx, rows):
    return x.at[idx].set(rows, mode="drop"), x.at[idx].add(rows), x.at[idx].get(mode="fill", fill_value=-1.0)


def argmax_ties_nan(x):
    return jnp.argmax(x, -1), jnp.argmin(x, -1), jnp.max(x, -1), jnp.min(x, 0)


def shapes(x):
    return (jnp.transpose(x, (2, 0, 1)), x[::-1, 1:, ::2], jnp.pad(x, ((1, 2), (0, 1), (2, 0))),
            lax.pad(x, 0.5, ((1, -1, 1), (0, 0, 0), (-1, 2, 2))), jnp.flip(x, 1),
            jnp.concatenate([x, x * 2], 1), x.reshape(6, 4), jnp.expand_dims(x, 1),
            jnp.cumsum(x, 1), lax.cumsum(x, 0, reverse=True), lax.cummax(x, 2),
            jnp.broadcast_to(x[:, :1], (2, 3, 4)), jnp.sum(x, (0, 2)), jnp.prod(x, 1))


def math_ops(x):
    y = jnp.abs(x) + 0.5
    return (jnp.exp(x), jnp.exp2(x), jnp.log(y), jnp.log1p(y), jnp.sqrt(y), lax.rsqrt(y),
            jnp.tanh(x), jax.nn.sigmoid(x), lax.erf(x), lax.erfc(x), jnp.sin(x), jnp.cos(x),
            jnp.power(y, x), x ** 3, y ** -2, jnp.square(x), jnp.floor(x * 3), jnp.ceil(x * 3),
            jnp.round(x * 3), lax.round(x * 3), jnp.clip(x, -0.5, 0.5), x.astype(jnp.int32),
            (x * 1e10).astype(jnp.int32), x > 0, jnp.isfinite(x / (x > 0)))


def mixed_dtypes(x, n):
    return (x.astype(jnp.float16) * 2).astype(jnp.float32) + n, (n > 2).astype(jnp.float32), \
        jnp.where(n > 1, x, 0.0), jnp.sum(x.astype(jnp.int32))


def kv_scan_cache(cache, rows, start):
    def body(c, r_i):
        r, i = r_i
        return lax.dynamic_update_slice(c, r[None], (start + i, 0)), None
    cache, _ = lax.scan(body, cache, (rows, jnp.arange(rows.shape[0])))
    return cache


def batched_dot(a, b):
    return lax.dot_general(a, b, (((2,), (1,)), ((0,), (0,)))), \
        lax.dot_general(a.astype(jnp.int32), b.astype(jnp.int32), (((2,), (1,)), ((0,), (0,))),
                        preferred_element_type=jnp.int32), jnp.dot(a[0], b[0])


def _int(rng, low, high, *shape):
    return rng.integers(low, high, shape).astype(np.int32)


PROGRAMS = {
    "rms_norm": (rms_norm, lambda r: (_f32(r, 4, 32), _f32(r, 32)), (), ()),
    "layer_norm": (layer_norm, lambda r: (_f32(r, 4, 32), _f32(r, 32), _f32(r, 32)), (), ()),
    "mha": (mha, lambda r: (_f32(r, 2, 5, 8), _f32(r, 2, 7, 8), _f32(r, 2, 7, 8)), (), ()),
    "causal_attention": (causal_attention, lambda r: tuple(_f32(r, 2, 6, 8) for _ in range(3)), (), ()),
    "gqa_decode": (gqa_decode, lambda r: (_f32(r, 32), _f32(r, 2, 16, 8), _f32(r, 2, 16, 8),
                                          _f32(r, 2, 8), _f32(r, 2, 8), np.int32(5)), (1, 2), ()),
    "swiglu": (swiglu, lambda r: (_f32(r, 3, 16), _f32(r, 16, 24), _f32(r, 16, 24), _f32(r, 24, 16)), (), ()),
    "gelu_mlp": (gelu_mlp, lambda r: (_f32(r, 3, 16), _f32(r, 16, 24), _f32(r, 24, 8)), (), ()),
    "scan_layers": (scan_layers, lambda r: (_f32(r, 2, 8), _f32(r, 3, 8, 8) * 0.3), (), ()),
    "while_generate": (while_generate, lambda r: (_f32(r, 10, 10), np.int32(3)), (), ()),
    "embedding_update": (embedding_update, lambda r: (_f32(r, 10, 4), np.array([1, 3, 1, 9, 12, -2], np.int32),
                                                      _f32(r, 6, 4)), (0,), ()),
    "embedding_lookup": (embedding_lookup, lambda r: (_f32(r, 10, 4), np.array([[1, 3], [0, 9], [-1, 4]], np.int32)), (), ()),
    "integer_program": (integer_program, lambda r: (_int(r, -50, 50, 40),
                                                    np.where(_int(r, -5, 5, 40) == 0, 0, _int(r, -5, 5, 40)).astype(np.int32)), (), ()),
    "integer_extremes": (integer_program, lambda r: (np.array([-2**31, -2**31, 7, -7, 0, 5], np.int32),
                                                     np.array([-1, 0, 0, 2, 0, -3], np.int32)), (), ()),
    "fori_accumulate": (fori_accumulate, lambda r: (_f32(r, 5, 3),), (), ()),
    "cond_true": (cond_branches, lambda r: (_f32(r, 4), np.int32(1)), (), ()),
    "cond_false": (cond_branches, lambda r: (_f32(r, 4), np.int32(-1)), (), ()),
    "switch_clamped": (switch_branches, lambda r: (_f32(r, 4), np.int32(7)), (), ()),
    "switch_negative": (switch_branches, lambda r: (_f32(r, 4), np.int32(-3)), (), ()),
    "switch_middle": (switch_branches, lambda r: (_f32(r, 4), np.int32(1)), (), ()),
    "clamped_slices_high": (clamped_slices, lambda r: (_f32(r, 6, 5), np.int32(100)), (), ()),
    "clamped_slices_low": (clamped_slices, lambda r: (_f32(r, 6, 5), np.int32(-100)), (), ()),
    "dropped_scatter": (dropped_scatter, lambda r: (_f32(r, 5, 3), np.array([0, 7, 2, 2, -9], np.int32),
                                                    _f32(r, 5, 3)), (), ()),
    "argmax_ties_nan": (argmax_ties_nan, lambda r: (np.array([[1, 3, 3, 0], [np.nan, 2, np.nan, 5],
                                                              [-np.inf, -np.inf, -np.inf, -np.inf],
                                                              [2, 2, 2, 2]], np.float32),), (), ()),
    "shapes": (shapes, lambda r: (_f32(r, 2, 3, 4),), (), ()),
    "math_ops": (math_ops, lambda r: (_f32(r, 3, 5),), (), ()),
    "mixed_dtypes": (mixed_dtypes, lambda r: (_f32(r, 3, 4), np.int32(3)), (), ()),
    "kv_scan_cache": (kv_scan_cache, lambda r: (np.zeros((12, 4), np.float32), _f32(r, 3, 4), np.int32(2)), (0,), ()),
    "batched_dot": (batched_dot, lambda r: (_f32(r, 2, 3, 4), _f32(r, 2, 4, 5)), (), ()),
}


def _x(r):
    return _f32(r, 4, 6)


_IDS = np.array([0, 5, -1, 9], np.int32)

EXTRA = {
    "vmap_gather": lambda x, i: jax.vmap(lambda r, j: r[j])(x, i),
    "vmap_scatter_add": lambda x, i: jax.vmap(lambda r, j: r.at[j].add(1.0))(x, i),
    "take_along_axis": lambda x, i: jnp.take_along_axis(x, jnp.abs(i)[:, None] % 6, axis=1),
    "one_hot_matmul": lambda x, i: jax.nn.one_hot(i, 6) @ x.T,
    "take_clip": lambda x, i: jnp.take(x, i, axis=1, mode="clip"),
    "take_fill": lambda x, i: jnp.take(x, i, axis=0, mode="fill"),
    "logsumexp": lambda x, i: jax.nn.logsumexp(x, axis=1),
    "int_reductions": lambda x, i: (jnp.max(i), jnp.min(i), jnp.sum(i), jnp.prod(i[:2]),
                                    jnp.cumsum(i), jnp.argmax(i)),
    "bool_ops": lambda x, i: (jnp.any(x > 1), jnp.all(x > -3), jnp.sum(x > 0),
                              (x > 0) & (x < 1), jnp.logical_not(x > 0)),
    "scan_reverse": lambda x, i: lax.scan(lambda c, r: (c + r, c * r), jnp.zeros(6), x, reverse=True),
    "nested_fori": lambda x, i: lax.fori_loop(
        0, 3, lambda k, a: lax.fori_loop(0, 2, lambda m, b: b * 0.9 + x[k], a), jnp.zeros(6)),
    "while_doubling": lambda x, i: lax.while_loop(lambda s: s[1] < 100.0,
                                                  lambda s: (s[0] + 1, s[1] * 2 + 1), (0, 1.0)),
    "remat": lambda x, i: jax.checkpoint(lambda y: jnp.sin(y) * 2)(x),
    "grad_tanh": lambda x, i: jax.grad(lambda y: jnp.sum(jnp.tanh(y) ** 2))(x),
    "custom_jvp_activations": lambda x, i: jax.nn.relu(x) + jax.nn.softplus(x) + jax.nn.gelu(x),
    "stack_unstack": lambda x, i: (jnp.stack([x, x * 2], 1), lax.unstack(x, 1)[2]),
    "remainders": lambda x, i: (i % 3, i // -3, jnp.remainder(x, -1.5), jnp.floor_divide(x, 0.7)),
    "select_n3": lambda x, i: lax.select_n(jnp.clip(i, 0, 2)[:, None] * jnp.ones((4, 6), jnp.int32),
                                           x, -x, x * 10),
    "reshape_dimensions": lambda x, i: (lax.reshape(x, (24,), dimensions=(1, 0)),
                                        lax.reshape(x[:2, :3], (3, 2), dimensions=(1, 0))),
    "dot_int8": lambda x, i: lax.dot_general((x * 10).astype(jnp.int8), (x * 10).astype(jnp.int8).T,
                                             (((1,), (0,)), ((), ())), preferred_element_type=jnp.int32),
}

for _name, _fun in EXTRA.items():
    PROGRAMS[_name] = (_fun, lambda r: (_x(r), _IDS.copy()), (), ())


@jax.custom_vjp
def _sin2(x):
    return jnp.sin(x) * 2


_sin2.defvjp(lambda x: (_sin2(x), x), lambda r, g: (g * jnp.cos(r),))

_NAN_X = np.array([[np.nan, 1, -2, 3], [0.5, -0.5, 9, -9]], np.float32)
_SCATTER_IDS = np.array([0, 1, 0, 5], np.int32)

NAN_PROGRAMS = {
    "clamp_nan": lambda x: (lax.clamp(-1.0, x, 1.0), jnp.clip(x, -1, 1),
                            lax.clamp(jnp.float32(np.nan), x, 1.0)),
    "custom_vjp": _sin2,
    "scatter_min_max_mul_clip": lambda x: (x[0].at[_SCATTER_IDS].min(x[1]),
                                           x[0].at[_SCATTER_IDS].max(x[1]),
                                           x[0].at[_SCATTER_IDS].mul(x[1]),
                                           x[0].at[_SCATTER_IDS].add(x[1], mode="clip")),
    "pow_cases": lambda x: (jnp.power(x, 2.0), jnp.power(-2.0, x), lax.pow(x, 3), x ** 0.5,
                            lax.integer_pow(x.astype(jnp.int32), 3)),
    "nan_reductions": lambda x: (jnp.max(x), jnp.maximum(x, 0.0), jnp.argmin(x), jnp.min(x, 1)),
}

for _name, _fun in NAN_PROGRAMS.items():
    PROGRAMS[_name] = (_fun, lambda r: (_NAN_X.copy(),), (), ())

_LINE = np.linspace(-3, 3, 12).astype(np.float32)
_I8 = np.array([127, -128, 5, -7, 100, 3], np.int8)

PROGRAMS.update({
    "trig_and_roots": (lambda x: (jnp.tan(x * 0.4), jnp.arctan(x), jnp.arctan2(x, x[::-1] + 0.1),
                                  jnp.cbrt(x), jnp.expm1(x), jnp.exp2(x)),
                       lambda r: (_LINE.copy(),), (), ()),
    "int8_int16_wraparound": (lambda i: (i + i, i * 3, i // 3, -i, jnp.abs(i), i >> 1,
                                         i.astype(jnp.float32), jnp.sum(i),
                                         i.astype(jnp.int16) * 300, i.astype(jnp.int16) // 7),
                              lambda r: (_I8.copy(),), (), ()),
    "float16_ops": (lambda x: (x.astype(jnp.float16) % 1.5, jnp.floor(x.astype(jnp.float16))),
                    lambda r: (_LINE.copy(),), (), ()),
    "float_to_int_saturates": (lambda x: ((x * 1e10).astype(jnp.int32), (x * 1e3).astype(jnp.int8),
                                          (x * 1e20).astype(jnp.int16), jnp.isfinite(x / (x - x[0]))),
                               lambda r: (_LINE.copy(),), (), ()),
})
