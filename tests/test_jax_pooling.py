"""Windowed reductions through tdf.jax.jit against jax.jit:
``reduce_window_sum``/``_max``/``_min`` (window dimensions, strides,
SAME/VALID/explicit padding, base and window dilation, dtypes), the generic
``reduce_window`` (a jaxpr body, a non-identity init, several operands),
``select_and_scatter_add`` (the gradient of max/min pooling: first maximum
wins, NaN, ties, overlapping windows, padding; bit-identical) and
``select_and_gather_add`` (its forward-mode derivative); average-pool
gradients; non-donated inputs unchanged; ``cumsum`` unaffected."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax import lax

import tdf.jax


def _check(fn, *args, exact=True, rtol=1e-6):
    copies = [np.array(a, copy=True) for a in args]
    got = tdf.jax.jit(fn)(*args)
    ref = jax.jit(fn)(*args)
    for a, c in zip(args, copies):
        np.testing.assert_array_equal(np.asarray(a), c)
    for g, r in zip(jax.tree.leaves(got), jax.tree.leaves(ref)):
        g, r = np.asarray(g), np.asarray(r)
        assert g.shape == r.shape and g.dtype == r.dtype, (g.shape, r.shape, g.dtype, r.dtype)
        if exact:
            # bit-identical (NaN payloads aside)
            if g.dtype.kind == "f" or g.dtype in (ml_dtypes.bfloat16,):
                g64, r64 = g.astype(np.float64), r.astype(np.float64)
                np.testing.assert_array_equal(g64, r64)
                numbers = ~np.isnan(r64)
                np.testing.assert_array_equal(np.signbit(g64[numbers]), np.signbit(r64[numbers]))
            else:
                np.testing.assert_array_equal(g, r)
        else:
            g64, r64 = g.astype(np.float64), r.astype(np.float64)
            scale = max(float(np.nanmax(np.abs(r64))) if r.size else 0.0, 1.0)
            np.testing.assert_allclose(g64, r64, rtol=0, atol=rtol * scale)
    return got


RNG = np.random.default_rng(0)
X = RNG.standard_normal((2, 9, 8, 3)).astype(np.float32)
#: many equal values: ties in every window
TIES = np.round(RNG.standard_normal((2, 9, 8, 3)) * 1.5).astype(np.float32)

_INIT = {"sum": (0.0, lax.add), "max": (-np.inf, lax.max), "min": (np.inf, lax.min)}

GEOMETRIES = {
    # name: (window, strides, padding, base dilation, window dilation)
    "pool2x2": ((1, 2, 2, 1), (1, 2, 2, 1), "VALID", None, None),
    "pool3x3_s2_same": ((1, 3, 3, 1), (1, 2, 2, 1), "SAME", None, None),
    "overlapping": ((1, 3, 2, 1), (1, 1, 1, 1), "VALID", None, None),
    "nchw_like": ((1, 1, 2, 3), (1, 1, 2, 1), "SAME", None, None),
    "explicit_pad": ((1, 2, 3, 1), (1, 2, 1, 1), ((0, 0), (1, 2), (2, 0), (0, 0)), None, None),
    "negative_pad": ((1, 2, 2, 1), (1, 1, 2, 1), ((0, 0), (-1, 1), (1, -2), (0, 0)), None, None),
    "batch_window": ((2, 2, 1, 2), (1, 1, 1, 1), "VALID", None, None),
    "window_dilation": ((1, 2, 2, 1), (1, 1, 1, 1), "SAME", None, (1, 2, 3, 1)),
    "base_dilation": ((1, 2, 2, 1), (1, 1, 2, 1), "VALID", (1, 2, 2, 1), None),
    "both_dilations_padded": ((1, 3, 2, 1), (1, 2, 1, 1), ((0, 0), (1, 1), (0, 2), (0, 0)),
                              (1, 2, 1, 1), (1, 1, 2, 1)),
    "whole_axis": ((1, 9, 1, 1), (1, 1, 1, 1), "VALID", None, None),
}


def _rw(kind, geometry):
    window, strides, padding, base, wdil = GEOMETRIES[geometry]
    init, op = _INIT[kind]

    def fn(x):
        dt = x.dtype
        if jnp.issubdtype(dt, jnp.integer) and kind != "sum":
            value = jnp.iinfo(dt).min if kind == "max" else jnp.iinfo(dt).max
        else:
            value = init
        return lax.reduce_window(x, np.array(value, dt), op, window, strides, padding,
                                 base_dilation=base, window_dilation=wdil)
    return fn


@pytest.mark.parametrize("geometry", sorted(GEOMETRIES))
@pytest.mark.parametrize("kind", ["sum", "max", "min"])
def test_reduce_window_monoids(kind, geometry):
    fn = _rw(kind, geometry)
    assert f"reduce_window_{kind}" in str(jax.make_jaxpr(fn)(X))
    window, strides, padding, base, wdil = GEOMETRIES[geometry]
    # unpadded float sums accumulate in XLA's order (row-major window);
    # padded ones are summed in another order by XLA: last bits
    exact = kind != "sum" or padding == "VALID"
    _check(fn, X, exact=exact)


DTYPES = ["float16", "bfloat16", "int32", "int8", "uint8", "uint32"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", ["sum", "max", "min"])
def test_reduce_window_dtypes(kind, dtype):
    dt = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.dtype(dtype)
    x = (X * 40).astype(dt) if np.dtype(dt).kind != "u" else (np.abs(X) * 40).astype(dt)
    _check(_rw(kind, "pool3x3_s2_same"), x, exact=np.dtype(dt).kind in "iu" or kind != "sum",
           rtol=1e-2)


def test_reduce_window_max_propagates_nan():
    x = X.copy()
    x[0, 1, 1, 0] = np.nan
    x[1, 8, 7, 2] = np.nan
    _check(_rw("max", "pool3x3_s2_same"), x)
    _check(_rw("min", "overlapping"), x)


# ------------------------------------------------------------ generic reduce_window


def test_generic_reduce_window_non_identity_init():
    fn = lambda x: lax.reduce_window(x, 1.0, lax.add, (1, 2, 2, 1), (1, 1, 1, 1), "VALID")  # noqa: E731
    assert "reduce_window[" in str(jax.make_jaxpr(fn)(X))
    _check(fn, X)
    padded = lambda x: lax.reduce_window(x, 1.0, lax.add, (1, 2, 2, 1), (1, 1, 1, 1), "SAME")  # noqa: E731
    _check(padded, X, exact=False)


def test_generic_reduce_window_order_dependent_body():
    """A non-associative body: the window is folded in row-major order into
    the accumulator (acc = f(acc, x)), padding skipped."""
    body = lambda a, b: a * 0.5 + b  # noqa: E731
    _check(lambda x: lax.reduce_window(x, 0.25, body, (1, 2, 3, 1), (1, 1, 2, 1), "VALID"), X)


def test_generic_reduce_window_integer_body():
    xi = (X * 100).astype(np.int32)
    _check(lambda x: lax.reduce_window(x, 3, lambda a, b: (a ^ b) + 1, (1, 2, 3, 1), (1, 2, 1, 1),
                                       ((0, 0), (1, 0), (1, 1), (0, 0))), xi)


@pytest.mark.parametrize("padding", ["VALID", "SAME"])
def test_variadic_reduce_window_argmax(padding):
    """Two operands (value, index) reduced together: a windowed argmax. On
    ties the first element in row-major window order wins; XLA visits a
    padded window in another order, so ties are only compared unpadded."""
    idx = np.arange(X.size, dtype=np.int32).reshape(X.shape)

    def fn(x, i):
        def body(a, b):
            take = b[0] > a[0]
            return jnp.where(take, b[0], a[0]), jnp.where(take, b[1], a[1])
        return lax.reduce_window((x, i), (-jnp.inf, np.int32(-1)), body, (1, 3, 3, 1), (1, 2, 2, 1),
                                 padding)
    _check(fn, TIES if padding == "VALID" else X, idx)


def test_reduce_window_rank0_and_unit_windows():
    _check(lambda x: lax.reduce_window(x, 1.0, lax.add, (), (), ()), np.float32(2.5))
    _check(lambda x: lax.reduce_window(x, 1.0, lax.add, (1, 1), (1, 1), "VALID"), X[0, 0])
    _check(lambda x: lax.reduce_window(x, 0.0, lax.add, (1, 1), (2, 3), "VALID"), X[0, 0])


def test_reduce_window_body_with_a_loop_is_refused():
    def body(a, b):
        return lax.fori_loop(0, 2, lambda i, c: c + b, a)
    fn = lambda x: lax.reduce_window(x, 0.0, body, (2,), (1,), "VALID")  # noqa: E731
    with pytest.raises(tdf.jax.UnsupportedPrimitiveError, match="reduce_window"):
        tdf.jax.jit(fn)(np.ones(4, np.float32))


def test_empty_output_and_batch_zero():
    _check(_rw("max", "pool2x2"), X[:0])
    _check(lambda x: lax.reduce_window(x, 0.0, lax.add, (1, 3), (1, 1), "VALID"), X[0, 0, :2])


# ------------------------------------------------------------ gradients of pools


def _pool_grad(kind, window, strides, padding, weights=True):
    init, op = _INIT[kind]

    def loss(x):
        y = lax.reduce_window(x, init, op, window, strides, padding)
        # exact weights (jax.jit divides by a constant as a multiplication
        # by its reciprocal, which would differ in the last bit)
        w = (jnp.arange(y.size) % 7).astype(jnp.float32).reshape(y.shape) * 0.25 + 0.5 \
            if weights else 1.0
        return (y * w).sum()
    return jax.grad(loss)


GRAD_GEOMETRIES = {
    "pool2x2": ((1, 2, 2, 1), (1, 2, 2, 1), "VALID"),
    "pool3x3_s2_same": ((1, 3, 3, 1), (1, 2, 2, 1), "SAME"),
    "overlapping_s1": ((1, 3, 3, 1), (1, 1, 1, 1), "SAME"),
    "explicit_pad": ((1, 2, 3, 1), (1, 2, 1, 1), ((0, 0), (1, 2), (2, 0), (0, 0))),
    "odd_tail": ((1, 2, 2, 1), (1, 2, 3, 1), "VALID"),
    "window_over_channels": ((1, 1, 2, 2), (1, 1, 1, 1), "VALID"),
}


@pytest.mark.parametrize("geometry", sorted(GRAD_GEOMETRIES))
@pytest.mark.parametrize("kind", ["max", "min"])
@pytest.mark.parametrize("data", ["random", "ties"])
def test_select_and_scatter_add_bit_identical(kind, geometry, data):
    window, strides, padding = GRAD_GEOMETRIES[geometry]
    fn = _pool_grad(kind, window, strides, padding)
    assert "select_and_scatter_add" in str(jax.make_jaxpr(fn)(X))
    _check(fn, X if data == "random" else TIES)


def test_select_and_scatter_add_nan_and_infinities():
    x = TIES.copy()
    x[0, 0, 0, 0] = np.nan
    x[0, 3, 3, 1] = np.nan
    x[1, 2, 2, 2] = -np.inf
    x[1, 5, 5, 0] = np.inf
    for geometry in ("pool3x3_s2_same", "overlapping_s1"):
        _check(_pool_grad("max", *GRAD_GEOMETRIES[geometry]), x)
        _check(_pool_grad("min", *GRAD_GEOMETRIES[geometry]), x)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_select_and_scatter_add_half(dtype):
    dt = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.float16
    fn = jax.grad(lambda x: (lax.reduce_window(x, -jnp.inf, lax.max, (1, 3, 3, 1), (1, 1, 1, 1),
                                               "SAME").astype(jnp.float32) ** 2).sum())
    _check(fn, X.astype(dt))


def test_avg_pool_gradient():
    fn = jax.grad(lambda x: (lax.reduce_window(x, 0.0, lax.add, (1, 3, 3, 1), (1, 2, 2, 1),
                                               "SAME") ** 2).sum())
    _check(fn, X, exact=False)


@pytest.mark.parametrize("padding", ["VALID", "SAME"])
@pytest.mark.parametrize("kind", ["max", "min"])
def test_select_and_gather_add_jvp(kind, padding):
    """The tangent of the selected element (first in row-major window order
    on ties; XLA visits padded windows in another order, so ties are only
    compared unpadded)."""
    init, op = _INIT[kind]
    data = TIES if padding == "VALID" else X
    pool = lambda x: lax.reduce_window(x, init, op, (1, 3, 3, 1), (1, 1, 2, 1), padding)  # noqa: E731
    fn = lambda x, t: jax.jvp(pool, (x,), (t,))  # noqa: E731
    assert "select_and_gather_add" in str(jax.make_jaxpr(fn)(X, X))
    _check(fn, data, X)
    dilated = lambda x: lax.reduce_window(x, init, op, (1, 2, 2, 1), (1, 1, 1, 1), padding,  # noqa: E731
                                          base_dilation=(1, 2, 1, 1), window_dilation=(1, 1, 2, 1))
    _check(lambda x, t: jax.jvp(dilated, (x,), (t,)), data, X)


def test_donated_input_and_cumsum_unaffected():
    x = X.copy()
    out = tdf.jax.jit(_rw("max", "pool2x2"), donate_argnums=(0,))(x)
    np.testing.assert_array_equal(out, jax.jit(_rw("max", "pool2x2"))(X))
    _check(lambda x: jnp.cumsum(x, axis=1) + jnp.cumsum(x[..., ::-1], axis=3), X, exact=False)
