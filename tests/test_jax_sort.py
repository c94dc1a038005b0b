"""sort / argsort / top_k (and the total-order comparisons) through
tdf.jax.jit, bit for bit against jax.jit: NaN, -NaN, -0.0/+0.0, ±inf and
ties in every float dtype, signed/unsigned integers and bool, several
operands, num_keys, any dimension, 0-size and size-1 rows, a row of a
million elements; non-donated inputs unchanged. The runtime kernel
(tdf_rt_sort) is refused by the GPU target with a clear error."""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax import lax

import tdf
import tdf.jax

RNG = np.random.default_rng(17)
SPECIALS = [np.nan, -np.nan, 0.0, -0.0, np.inf, -np.inf, 1.0, -1.0, 1.0, 0.0, -0.0, np.nan]


def floats(shape, dtype):
    """Random values with repeats and every special value mixed in."""
    x = RNG.integers(-4, 5, size=shape).astype(np.float64) / 2
    flat = x.reshape(-1)
    k = min(len(SPECIALS), flat.size)
    pos = RNG.choice(flat.size, size=k, replace=False) if flat.size else []
    flat[pos] = SPECIALS[:k]
    out = x.astype(dtype)
    if out.size and np.dtype(dtype).itemsize == 4:
        # a NaN with a payload and a negative NaN: canonicalized by sort
        bits = out.reshape(-1).view(np.uint32)
        bits[-1] = 0x7FC01234
        bits[0] = 0xFFC00001
    return out


def ints(shape, dtype):
    info = np.iinfo(dtype)
    values = np.array([info.min, info.max, 0, 1, 1, info.min, 3], dtype)
    x = RNG.integers(max(info.min, -5), min(info.max, 6), size=shape).astype(dtype)
    flat = x.reshape(-1)
    flat[:min(len(values), flat.size)] = values[:min(len(values), flat.size)]
    RNG.shuffle(flat)
    return x


def check(fn, *args, donate=()):
    before = [np.array(a, copy=True) for a in args]
    got = tdf.jax.jit(fn, donate_argnums=donate)(*args)
    for i, (a, b) in enumerate(zip(args, before)):
        if i not in donate:
            assert np.asarray(a).tobytes() == b.tobytes(), f"argument {i} was written"
    want = jax.jit(fn)(*before)
    got, want = jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, w.dtype, g.shape, w.shape)
        assert g.tobytes() == w.tobytes(), (np.argwhere(g.view(np.uint8) != w.view(np.uint8))[:5],
                                            g, w)
    return got


FLOAT_DTYPES = [np.float32, np.float16, ml_dtypes.bfloat16]
INT_DTYPES = [np.int8, np.int16, np.int32, np.uint8, np.uint16, np.uint32]


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape, axis", [((37,), 0), ((5, 12), 1), ((5, 12), 0),
                                         ((3, 4, 6), 1), ((2, 3, 5), -1)])
def test_sort_and_argsort_floats(dtype, shape, axis):
    x = floats(shape, dtype)
    check(lambda x: (jnp.sort(x, axis=axis), jnp.argsort(x, axis=axis),
                     jnp.argsort(x, axis=axis, descending=True),
                     jnp.sort(x, axis=axis, descending=True)), x)


@pytest.mark.parametrize("dtype", INT_DTYPES + [np.bool_], ids=lambda d: np.dtype(d).name)
def test_sort_and_argsort_integers(dtype):
    x = (RNG.integers(0, 2, size=(6, 40)).astype(np.bool_) if dtype is np.bool_
         else ints((6, 40), dtype))
    check(lambda x: (jnp.sort(x), jnp.argsort(x), jnp.sort(x, axis=0),
                     jnp.argsort(x, axis=0, descending=True)), x)


def test_sort_64_bit_dtypes_with_x64():
    with jax.enable_x64(True):
        for dtype in (np.float64, np.int64, np.uint64):
            x = floats((4, 33), dtype) if dtype is np.float64 else ints((4, 33), dtype)
            check(lambda x: (jnp.sort(x), jnp.argsort(x), lax.top_k(x, 5)), x)


def test_several_operands_and_num_keys():
    a = ints((3, 50), np.int32) % 3
    b = floats((3, 50), np.float32)
    c = RNG.standard_normal((3, 50)).astype(ml_dtypes.bfloat16)
    u = ints((3, 50), np.uint8)
    check(lambda a, b, c, u: (lax.sort((a, b, c, u), num_keys=1),
                              lax.sort((a, b, c, u), num_keys=2),
                              lax.sort((u, a, b), dimension=0, num_keys=3),
                              lax.sort_key_val(b, c), jnp.lexsort((b, a))), a, b, c, u)


def test_unstable_sort_gives_the_stable_order():
    # ties in key order: is_stable=False allows any order; tdf sorts stably
    k = np.repeat(np.arange(5, dtype=np.int32), 8)[::-1].copy()
    v = np.arange(40, dtype=np.int32)
    keys, vals = tdf.jax.jit(lambda k, v: lax.sort((k, v), is_stable=False))(k, v)
    want_keys, want_vals = jax.jit(lambda k, v: lax.sort((k, v), is_stable=True))(k, v)
    np.testing.assert_array_equal(keys, want_keys)
    np.testing.assert_array_equal(vals, want_vals)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES + INT_DTYPES, ids=lambda d: np.dtype(d).name)
def test_top_k(dtype):
    x = floats((4, 30), dtype) if np.dtype(dtype).kind == "f" or dtype is ml_dtypes.bfloat16 \
        else ints((4, 30), dtype)
    check(lambda x: (lax.top_k(x, 1), lax.top_k(x, 7), lax.top_k(x, 30), lax.top_k(x, 0),
                     lax.top_k(x, 3, axis=0)), x)


def test_top_k_order_of_specials_and_ties():
    # XLA's TopK: descending in the raw total order (NaN first, +0.0 before
    # -0.0, -NaN last), ties lower index first
    x = np.array([1.0, np.nan, -0.0, 0.0, -np.nan, np.inf, -np.inf, 2.0, 0.0, -0.0, np.nan],
                 np.float32)
    values, indices = check(lambda x: lax.top_k(x, 11), x)
    np.testing.assert_array_equal(indices, [1, 10, 5, 7, 0, 3, 8, 2, 9, 6, 4])


def test_empty_and_single_element_rows():
    check(lambda x: (jnp.sort(x), jnp.argsort(x, axis=0), lax.top_k(x, 0)),
          np.zeros((0, 5), np.float32))
    check(lambda x: (jnp.sort(x, axis=1), jnp.argsort(x, axis=1), lax.top_k(x, 1)),
          floats((6, 1), np.float32))
    check(lambda x: (jnp.sort(x), jnp.argsort(x)), np.array([np.nan], np.float32))


def test_sort_of_a_million_elements():
    x = RNG.standard_normal(1_000_000).astype(np.float32)
    x[::1000] = np.nan
    x[1::997] = -0.0
    fn = tdf.jax.jit(lambda x: (jnp.sort(x), jnp.argsort(x), lax.top_k(x, 10)))
    fn(x)
    start = time.perf_counter()
    got = fn(x)
    seconds = time.perf_counter() - start
    want = jax.jit(fn.fun)(x)
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want), strict=True):
        assert np.asarray(g).tobytes() == np.asarray(w).tobytes()
    assert seconds < 5.0, seconds  # linear time: ~0.1 s on the shared 2-core machine


def test_total_order_comparisons_and_searchsorted():
    from jax._src.lax import lax as lax_internal
    x = np.array(SPECIALS, np.float32)
    grid_a, grid_b = np.meshgrid(x, x)
    for prim in (lax_internal.lt_to_p, lax_internal.le_to_p, lax_internal.eq_to_p):
        check(lambda a, b, p=prim: p.bind(a, b), grid_a, grid_b)
        check(lambda a, b, p=prim: p.bind(a, b), ints((9,), np.uint32), ints((9,), np.uint32))
    sorted_ = np.sort(np.array([-3.0, -0.0, 0.0, 1.0, 2.0, np.inf], np.float32))
    check(lambda s, v: (jnp.searchsorted(s, v), jnp.searchsorted(s, v, side="right")), sorted_, x)


def test_library_functions_built_on_sort():
    x = RNG.standard_normal((4, 50)).astype(np.float32)
    check(lambda x: (jnp.median(x, axis=1), jnp.unique(jnp.round(x), size=12, fill_value=0.0)), x)
    check(lambda a, b: jnp.isin(a, b), np.arange(10, dtype=np.int32), np.array([3, 5, 7], np.int32))


def test_donated_operand():
    x = floats((3, 20), np.float32)
    got = check(lambda x: jnp.sort(x, axis=1), x.copy(), donate=(0,))
    assert got[0].shape == (3, 20)


def test_errors_name_the_primitive_dtype_and_line():
    sort = tdf.jax.jit(jnp.sort)
    line = test_errors_name_the_primitive_dtype_and_line.__code__.co_firstlineno
    with pytest.raises(tdf.jax.UnsupportedPrimitiveError,
                       match=r"'sort' \(dtype complex64\) inside jit\(sort\)") as info:
        sort(np.ones(3, np.complex64))
    assert f"{__file__}:{line + 5}:" in str(info.value)
    assert "<unknown location>" not in str(info.value)


def test_gpu_target_refuses_the_runtime_sort():
    def fn(x):
        return jnp.sort(x)
    low = tdf.jax.jit(fn).lower(np.ones(8, np.float32))
    assert "tdf.call @tdf_rt_sort" in low.as_text()
    line = fn.__code__.co_firstlineno + 1
    for compile_gpu in (lambda: low.compile(target="nvvm"),
                        lambda: tdf.compile(low.as_text(debug_info=True), target="nvvm")):
        with pytest.raises(tdf.TDFError, match=r"@tdf_rt_sort is a kernel of tdf's CPU runtime "
                                               r"\(sort/top_k") as info:
            compile_gpu()
        assert f"{__file__}:{line}:" in str(info.value)
