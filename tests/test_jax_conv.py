"""``conv_general_dilated`` through tdf.jax.jit against jax.jit: dimension
numbers (NHWC/HWIO, NCHW/OIHW, mixed and unusual layouts, 1-d and 3-d),
window strides, SAME/VALID/explicit padding (negative included), lhs and rhs
dilation, feature and batch groups, dtypes (float32, float64 under x64,
bfloat16/float16 with and without ``preferred_element_type``, int32, int8 →
int32), batch 0 and 1, empty reductions; the convolutions of ``jax.grad``
(transposed dimension numbers, lhs/rhs dilation, batch groups); a small CNN
forward pass and train step; non-donated inputs unchanged; the im2col
contraction reaching the BLAS; a hypothesis sweep of small configurations.

Floats are compared with a tolerance scaled by the reduction length (the
BLAS and XLA sum in different orders); integers exactly."""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jax import lax

import tdf.jax
from tdf import blas as tdf_blas

NHWC = ("NHWC", "HWIO", "NHWC")
NCHW = ("NCHW", "OIHW", "NCHW")


def _layout(spec: str, shape_by_letter: dict) -> tuple:
    return tuple(shape_by_letter[c] for c in spec)


def _operands(rng, dn, n, c, spatial, o, kernel, groups=1, bgroups=1, dtype=np.float32):
    """Random lhs/rhs for dimension-number strings ``dn`` (lhs, rhs)."""
    lspec, rspec = dn[0], dn[1]
    letters = [ch for ch in lspec if ch not in "NC"]
    lhs_sizes = {"N": n, "C": c, **dict(zip(letters, spatial))}
    rletters = [ch for ch in rspec if ch not in "OI"]
    rhs_sizes = {"O": o, "I": c // groups, **dict(zip(rletters, kernel))}
    lhs = rng.standard_normal(_layout(lspec, lhs_sizes))
    rhs = rng.standard_normal(_layout(rspec, rhs_sizes))
    if np.dtype(dtype).kind in "iu":
        return (rng.integers(-20, 20, lhs.shape).astype(dtype),
                rng.integers(-20, 20, rhs.shape).astype(dtype))
    return lhs.astype(dtype), rhs.astype(dtype)


def _check(fn, *args, rtol=2e-6, exact=False, ref_fn=None):
    """tdf.jax.jit(fn) against jax.jit(ref_fn or fn) on ``args``."""
    copies = [np.array(a, copy=True) for a in jax.tree_util.tree_leaves(args)]
    got = tdf.jax.jit(fn)(*args)
    ref = jax.jit(ref_fn or fn)(*args)
    for a, c in zip(jax.tree_util.tree_leaves(args), copies):  # non-donated inputs unchanged
        np.testing.assert_array_equal(np.asarray(a), c)
    got_leaves, ref_leaves = jax.tree.leaves(got), jax.tree.leaves(ref)
    assert len(got_leaves) == len(ref_leaves)
    for g, r in zip(got_leaves, ref_leaves):
        g, r = np.asarray(g), np.asarray(r)
        assert g.shape == r.shape and g.dtype == r.dtype, (g.shape, r.shape, g.dtype, r.dtype)
        if exact or g.dtype.kind in "iub":
            np.testing.assert_array_equal(g, r)
            continue
        g64, r64 = g.astype(np.float64), r.astype(np.float64)
        scale = max(float(np.abs(r64).max()) if r.size else 0.0, 1.0)
        np.testing.assert_allclose(g64, r64, rtol=0, atol=rtol * scale)
    return got


def _conv(**kw):
    return lambda x, w: lax.conv_general_dilated(x, w, **kw)


# ------------------------------------------------------------ a sweep of forms

CASES = {
    # name: (dn, n, c, spatial, o, kernel, conv kwargs, groups, bgroups)
    "nhwc_same": (NHWC, 2, 3, (9, 10), 5, (3, 3), dict(window_strides=(1, 1), padding="SAME"), 1, 1),
    "nhwc_valid_s2": (NHWC, 2, 4, (9, 10), 6, (3, 2), dict(window_strides=(2, 2), padding="VALID"), 1, 1),
    "nchw_same": (NCHW, 2, 3, (8, 9), 4, (3, 3), dict(window_strides=(1, 1), padding="SAME"), 1, 1),
    "nchw_explicit_neg": (NCHW, 2, 3, (8, 9), 4, (3, 2),
                          dict(window_strides=(1, 2), padding=((2, -1), (-1, 3))), 1, 1),
    "rhs_dilation": (NHWC, 2, 3, (11, 9), 4, (3, 3),
                     dict(window_strides=(1, 1), padding="SAME", rhs_dilation=(2, 3)), 1, 1),
    "lhs_dilation": (NCHW, 2, 3, (5, 6), 4, (3, 3),
                     dict(window_strides=(1, 1), padding=((2, 2), (1, 2)), lhs_dilation=(2, 3)), 1, 1),
    "lhs_rhs_dilation_strided": (NHWC, 1, 2, (6, 7), 3, (2, 3),
                                 dict(window_strides=(2, 3), padding=((1, 0), (2, 2)),
                                      lhs_dilation=(2, 1), rhs_dilation=(1, 2)), 1, 1),
    "feature_groups": (NHWC, 2, 6, (7, 7), 9, (3, 3),
                       dict(window_strides=(1, 1), padding="SAME", feature_group_count=3), 3, 1),
    "depthwise_nchw": (NCHW, 2, 4, (7, 8), 8, (3, 3),
                       dict(window_strides=(2, 2), padding="SAME", feature_group_count=4), 4, 1),
    "batch_groups": (NHWC, 4, 3, (6, 7), 6, (3, 2),
                     dict(window_strides=(1, 1), padding="VALID", batch_group_count=2), 1, 2),
    "batch_groups_nchw": (NCHW, 6, 2, (5, 6), 9, (2, 2),
                          dict(window_strides=(1, 1), padding="SAME", batch_group_count=3), 1, 3),
    "pointwise": (NHWC, 2, 5, (6, 7), 4, (1, 1), dict(window_strides=(1, 1), padding="VALID"), 1, 1),
    "pointwise_strided_nchw": (NCHW, 2, 5, (6, 7), 4, (1, 1),
                               dict(window_strides=(2, 3), padding="VALID"), 1, 1),
    "pointwise_padded_groups": (NCHW, 2, 6, (5, 4), 4, (1, 1),
                                dict(window_strides=(1, 1), padding=((1, 1), (0, 2)),
                                     lhs_dilation=(2, 1), feature_group_count=2), 2, 1),
    "pointwise_batch_groups": (NHWC, 4, 5, (3, 4), 6, (1, 1),
                               dict(window_strides=(1, 1), padding="VALID", batch_group_count=2), 1, 2),
    "kernel_covers_input": (NHWC, 2, 3, (4, 5), 2, (4, 5), dict(window_strides=(1, 1), padding="VALID"),
                            1, 1),
    "all_padding": (NHWC, 2, 3, (4, 5), 2, (3, 3),
                    dict(window_strides=(1, 1), padding=((-5, 8), (0, 0))), 1, 1),
    "mixed_layouts": (("NHWC", "OIHW", "NCHW"), 2, 3, (6, 7), 4, (3, 2),
                      dict(window_strides=(1, 1), padding="SAME"), 1, 1),
    "unusual_layouts": (("HNWC", "OHWI", "WCNH"), 2, 3, (6, 7), 4, (3, 2),
                        dict(window_strides=(1, 2), padding="SAME"), 1, 1),
    "kernel_o_in_middle": (("NHWC", "HOWI", "NWCH"), 2, 3, (6, 7), 4, (3, 2),
                           dict(window_strides=(1, 1), padding=((0, 0), (2, 2))), 1, 1),
    "conv1d": (("NCH", "OIH", "NCH"), 2, 5, (17,), 7, (3,),
               dict(window_strides=(2,), padding=((3, -1),), rhs_dilation=(2,)), 1, 1),
    "conv1d_nwc": (("NWC", "WIO", "NWC"), 3, 4, (12,), 5, (4,),
                   dict(window_strides=(1,), padding=((2, 1),), lhs_dilation=(2,)), 1, 1),
    "conv3d": (("NCDHW", "OIDHW", "NCDHW"), 2, 3, (6, 7, 5), 4, (2, 3, 2),
               dict(window_strides=(1, 2, 1), padding=((1, 1), (0, 2), (2, 1)), lhs_dilation=(1, 1, 2)),
               1, 1),
    "conv3d_ndhwc": (("NDHWC", "DHWIO", "NDHWC"), 2, 3, (6, 7, 5), 4, (2, 3, 2),
                     dict(window_strides=(1, 2, 1), padding="VALID"), 1, 1),
    "conv3d_interleaved_output": (("NCDHW", "OIDHW", "DCNWH"), 2, 3, (6, 7, 5), 4, (2, 3, 2),
                                  dict(window_strides=(1, 2, 1), padding="SAME"), 1, 1),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_conv_forms_match_jax(name):
    dn, n, c, spatial, o, kernel, kw, groups, bgroups = CASES[name]
    rng = np.random.default_rng(len(name))
    x, w = _operands(rng, dn, n, c, spatial, o, kernel, groups)
    k = c // groups * int(np.prod(kernel))
    _check(_conv(dimension_numbers=dn, **kw), x, w, rtol=2e-7 * k + 1e-6)


@pytest.mark.parametrize("n", [0, 1])
def test_batch_zero_and_one(n):
    rng = np.random.default_rng(n)
    x, w = _operands(rng, NHWC, n, 3, (7, 6), 4, (3, 3))
    _check(_conv(window_strides=(1, 1), padding="SAME", dimension_numbers=NHWC), x, w, rtol=1e-5)


@pytest.mark.parametrize("shape", ["no_input_features", "no_output_features", "empty_output"])
def test_empty_dimensions(shape):
    rng = np.random.default_rng(0)
    c, o, spatial = {"no_input_features": (0, 4, (5, 5)), "no_output_features": (3, 0, (5, 5)),
                     "empty_output": (3, 4, (2, 5))}[shape]
    x, w = _operands(rng, NCHW, 2, c, spatial, o, (3, 3))
    _check(_conv(window_strides=(1, 1), padding="VALID", dimension_numbers=NCHW), x, w)


# ------------------------------------------------------------------ dtypes

DTYPES = {
    "bfloat16->float32": (ml_dtypes.bfloat16, jnp.float32, 1e-6),
    "bfloat16": (ml_dtypes.bfloat16, None, 1e-2),
    "float16": (np.float16, None, 2e-3),
    "float16->float32": (np.float16, jnp.float32, 1e-6),
    "int32": (np.int32, None, 0),
    "int8->int32": (np.int8, jnp.int32, 0),
    "int16": (np.int16, None, 0),
}


@pytest.mark.parametrize("name", sorted(DTYPES))
def test_conv_dtypes(name):
    dtype, preferred, tol = DTYPES[name]
    rng = np.random.default_rng(7)
    x, w = _operands(rng, NHWC, 2, 4, (7, 8), 5, (3, 2), dtype=np.float32)
    if np.dtype(dtype).kind in "iu":
        x, w = (rng.integers(-9, 9, x.shape).astype(dtype), rng.integers(-9, 9, w.shape).astype(dtype))
    else:
        x, w = x.astype(dtype), w.astype(dtype)
    fn = _conv(window_strides=(2, 1), padding="SAME", dimension_numbers=NHWC,
               preferred_element_type=preferred)
    _check(fn, x, w, rtol=tol, exact=tol == 0)


def test_int32_wraps_around():
    x = np.full((1, 3, 3, 2), 2 ** 20, np.int32)
    w = np.full((2, 2, 2, 1), 2 ** 12, np.int32)
    _check(_conv(window_strides=(1, 1), padding="VALID", dimension_numbers=NHWC), x, w, exact=True)


def test_float64_under_x64():
    rng = np.random.default_rng(3)
    x, w = _operands(rng, NCHW, 2, 3, (6, 7), 4, (3, 3), dtype=np.float64)
    with jax.enable_x64(True):
        got = _check(_conv(window_strides=(1, 1), padding="SAME"), x, w, rtol=1e-14)
    assert np.asarray(got).dtype == np.float64


def test_complex_is_refused():
    x = np.ones((1, 1, 4, 4), np.complex64)
    w = np.ones((1, 1, 2, 2), np.complex64)
    with pytest.raises(tdf.jax.UnsupportedPrimitiveError, match="conv_general_dilated"):
        tdf.jax.jit(_conv(window_strides=(1, 1), padding="VALID"))(x, w)


# ------------------------------------------------------------ gradients, CNN


def _grad_case(dn, kw):
    def loss(x, w):
        y = lax.conv_general_dilated(x, w, dimension_numbers=dn, **kw)
        return (jnp.tanh(y) * jnp.arange(y.size, dtype=y.dtype).reshape(y.shape) / y.size).sum()
    return jax.grad(loss, argnums=(0, 1))


GRAD_CASES = {
    "nhwc_same": (NHWC, dict(window_strides=(1, 1), padding="SAME"), 1),
    "nhwc_strided": (NHWC, dict(window_strides=(2, 2), padding="VALID"), 1),
    "nchw_dilated": (NCHW, dict(window_strides=(2, 1), padding=((1, 2), (0, 1)), rhs_dilation=(1, 2)), 1),
    "grouped": (NHWC, dict(window_strides=(1, 2), padding="SAME", feature_group_count=2), 2),
}


@pytest.mark.parametrize("name", sorted(GRAD_CASES))
def test_conv_gradients(name):
    """jax.grad's convolutions: lhs dilation (input gradient of a strided
    conv), rhs dilation and transposed dimension numbers (weight gradient),
    batch groups (weight gradient of a grouped conv)."""
    dn, kw, groups = GRAD_CASES[name]
    rng = np.random.default_rng(11)
    x, w = _operands(rng, dn, 3, 4, (9, 8), 6, (3, 3), groups)
    fn = _grad_case(dn, kw)
    text = str(jax.make_jaxpr(fn)(x, w))
    assert text.count("conv_general_dilated") == 3
    if groups > 1:
        assert "batch_group_count=2" in text
    _check(fn, x, w, rtol=2e-5)


DN_CNN = NHWC


def _cnn_params(rng):
    return {"w1": (rng.standard_normal((3, 3, 1, 8)) * 0.3).astype(np.float32),
            "b1": (rng.standard_normal(8) * 0.1).astype(np.float32),
            "w2": (rng.standard_normal((3, 3, 8, 16)) * 0.1).astype(np.float32),
            "b2": (rng.standard_normal(16) * 0.1).astype(np.float32),
            "wd": (rng.standard_normal((2 * 2 * 16, 10)) * 0.05).astype(np.float32),
            "bd": np.zeros(10, np.float32)}


def cnn_forward(p, x, pool="max"):
    """conv -> relu -> max pool -> conv (strided) -> relu -> avg pool -> dense."""
    h = lax.conv_general_dilated(x, p["w1"], (1, 1), "SAME", dimension_numbers=DN_CNN) + p["b1"]
    h = jax.nn.relu(h)
    if pool == "max":
        h = lax.reduce_window(h, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    else:
        h = lax.reduce_window(h, 0.0, lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID") / 4
    h = lax.conv_general_dilated(h, p["w2"], (1, 1), "VALID", dimension_numbers=DN_CNN) + p["b2"]
    h = jax.nn.relu(h)
    h = lax.reduce_window(h, 0.0, lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID") / 4
    return h.reshape(h.shape[0], -1) @ p["wd"] + p["bd"]


def cnn_loss(p, x, y, pool="max"):
    logits = cnn_forward(p, x, pool)
    return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], axis=1))


def cnn_step(p, x, y, pool="max"):
    loss, grads = jax.value_and_grad(cnn_loss)(p, x, y, pool)
    return jax.tree.map(lambda a, g: a - 0.1 * g, p, grads), loss


@pytest.mark.parametrize("pool", ["max", "avg"])
def test_cnn_forward_and_train_step(pool):
    rng = np.random.default_rng(5)
    p = _cnn_params(rng)
    x = rng.standard_normal((4, 14, 14, 1)).astype(np.float32)
    y = rng.integers(0, 10, 4).astype(np.int32)
    _check(lambda p, x: cnn_forward(p, x, pool), p, x, rtol=1e-5)
    new_p, loss = _check(lambda p, x, y: cnn_step(p, x, y, pool), p, x, y, rtol=1e-5)
    # training makes progress the same way: a few steps, losses against JAX's
    p_t, p_j = p, p
    step_t = tdf.jax.jit(lambda p, x, y: cnn_step(p, x, y, pool))
    step_j = jax.jit(lambda p, x, y: cnn_step(p, x, y, pool))
    for _ in range(3):
        p_t, loss_t = step_t(p_t, x, y)
        p_j, loss_j = step_j(p_j, x, y)
        np.testing.assert_allclose(loss_t, loss_j, rtol=1e-5)


def test_cnn_train_step_with_donated_params():
    rng = np.random.default_rng(6)
    p = _cnn_params(rng)
    x = rng.standard_normal((2, 14, 14, 1)).astype(np.float32)
    y = rng.integers(0, 10, 2).astype(np.int32)
    ref_p, ref_loss = jax.jit(cnn_step)(p, x, y)
    x_copy = x.copy()
    new_p, loss = tdf.jax.jit(cnn_step, donate_argnums=(0,))(dict(p), x, y)
    np.testing.assert_array_equal(x, x_copy)
    np.testing.assert_allclose(loss, ref_loss, rtol=1e-5)
    for k in p:
        np.testing.assert_allclose(new_p[k], ref_p[k], rtol=1e-5, atol=1e-6)


def test_stax_cnn_forward_and_gradient():
    """A library CNN (jax.example_libraries.stax: SAME conv, max pool,
    strided VALID conv, average pool normalized by a reduce_window_sum of
    ones, dense, log-softmax) and its parameter gradient."""
    from jax.example_libraries import stax
    init, apply = stax.serial(
        stax.Conv(8, (3, 3), padding="SAME"), stax.Relu, stax.MaxPool((2, 2), strides=(2, 2)),
        stax.Conv(16, (3, 3), strides=(2, 2)), stax.Relu, stax.AvgPool((2, 2), padding="SAME"),
        stax.Flatten, stax.Dense(10), stax.LogSoftmax)
    _, params = init(jax.random.PRNGKey(0), (3, 16, 16, 1))
    params = jax.tree_util.tree_map(np.asarray, params)
    rng = np.random.default_rng(8)
    x = rng.standard_normal((3, 16, 16, 1)).astype(np.float32)
    y = np.eye(10, dtype=np.float32)[[1, 4, 7]]
    _check(apply, params, x, rtol=1e-5)
    loss = lambda p, x, y: -jnp.mean(jnp.sum(apply(p, x) * y, axis=-1))  # noqa: E731
    _check(jax.grad(loss), params, x, y, rtol=1e-5)


# ------------------------------------------------------------ the BLAS route


def _contract_calls(fn, *args):
    """Library calls of ``fn``'s program with every GEMM through the libraries
    (these GEMMs are small: by default they are compiled)."""
    return tdf.jax.jit(fn).lower(*args).compile(codegen_flops=0).llvm_ir.count(
        "call @tdf_rt_contract")


@pytest.mark.parametrize("dn", [NHWC, NCHW], ids=["nhwc", "nchw"])
def test_im2col_contraction_reaches_the_blas(dn, monkeypatch):
    """The patches are not fused back into the contraction: one BLAS call
    per convolution, for both layouts, plain and grouped."""
    from tdf.jax import _conv as conv_module
    monkeypatch.setattr(conv_module, "LIBRARY", False)
    rng = np.random.default_rng(1)
    x, w = _operands(rng, dn, 2, 4, (8, 8), 6, (3, 3))
    fn = _conv(window_strides=(1, 1), padding="SAME", dimension_numbers=dn)
    assert _contract_calls(fn, x, w) == 1
    xg, wg = _operands(rng, dn, 2, 4, (8, 8), 6, (3, 3), groups=2)
    assert _contract_calls(_conv(window_strides=(1, 1), padding="SAME", dimension_numbers=dn,
                                 feature_group_count=2), xg, wg) == 1
    xp, wp = _operands(rng, dn, 2, 4, (8, 8), 6, (1, 1))
    assert _contract_calls(_conv(window_strides=(2, 2), padding="VALID", dimension_numbers=dn),
                           xp, wp) == 1


def test_cnn_train_step_convolutions_reach_the_blas():
    rng = np.random.default_rng(2)
    p = _cnn_params(rng)
    x = rng.standard_normal((2, 14, 14, 1)).astype(np.float32)
    y = rng.integers(0, 10, 2).astype(np.int32)
    # forward: 2 convs + dense; backward: dense (2), conv2 input and weight,
    # conv1 weight gradients. With oneDNN loaded, the two forward
    # convolutions (float32, NHWC/HWIO) are oneDNN convolutions instead.
    ir = tdf.jax.jit(cnn_step).lower(p, x, y).compile(codegen_flops=0).llvm_ir
    convs = 2 if tdf_blas.onednn_path() else 0
    assert ir.count("call @tdf_rt_conv") == convs
    assert ir.count("call @tdf_rt_contract") == 8 - convs


def test_dense_after_flatten_and_scale_reaches_the_blas():
    """A dense layer after an average pool (``* 0.25``) and a flatten: the
    flatten stays a view and the scale its own loop (not folded into the
    contraction, which would leave the BLAS): one call per contraction."""
    rng = np.random.default_rng(3)
    p = _cnn_params(rng)
    x = rng.standard_normal((3, 14, 14, 1)).astype(np.float32)

    def fn(p, x):
        h = lax.reduce_window(x, 0.0, lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID") * 0.25
        return h.reshape(h.shape[0], -1) @ p["wd1"] + p["bd"][:4]

    p = {"wd1": rng.standard_normal((49, 4)).astype(np.float32), "bd": p["bd"]}
    _check(fn, p, x, rtol=1e-5)
    assert _contract_calls(fn, p, x) == 1


# ------------------------------------------------------------ batch chunks


@pytest.fixture
def small_chunks(monkeypatch):
    """Every im2col convolution built in at most 3 batch chunks."""
    from tdf.jax import _conv as conv_module
    monkeypatch.setattr(conv_module, "LIBRARY", False)
    monkeypatch.setattr(conv_module, "CHUNK_BYTES", 1)
    monkeypatch.setattr(conv_module, "CHUNK_MIN_ROWS", 1)
    monkeypatch.setattr(conv_module, "CHUNK_MAX", 3)


@pytest.mark.parametrize("name", sorted(CASES))
def test_batch_chunks_match_jax(name, small_chunks):
    dn, n, c, spatial, o, kernel, kw, groups, bgroups = CASES[name]
    rng = np.random.default_rng(len(name))
    n = n * 3 // 2 + 1  # 4 (2 + 2), 7 (3 + 3 + 1): uneven chunks too
    x, w = _operands(rng, dn, n * bgroups, c, spatial, o, kernel, groups)
    k = c // groups * int(np.prod(kernel))
    _check(_conv(dimension_numbers=dn, **kw), x, w, rtol=2e-7 * k + 1e-6)


@pytest.mark.parametrize("dtype", ["bfloat16", "int8"])
def test_batch_chunks_other_dtypes(dtype, small_chunks):
    """Chunks whose accumulator type differs from the result's (rounded or
    kept as int32) are computed apart and inserted into the result."""
    rng = np.random.default_rng(4)
    np_dtype = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.int8
    x, w = _operands(rng, NHWC, 5, 3, (6, 7), 4, (3, 3), dtype=np_dtype)
    kw = dict(window_strides=(1, 1), padding="SAME", dimension_numbers=NHWC)
    if dtype == "int8":
        kw["preferred_element_type"] = jnp.int32
    _check(_conv(**kw), x, w, rtol=2e-2)


def test_batch_chunks_write_the_result_in_place(small_chunks):
    """One BLAS call per chunk, each computing its rows of the result where
    they are (no copy into the result)."""
    rng = np.random.default_rng(5)
    x, w = _operands(rng, NHWC, 6, 3, (8, 8), 4, (3, 3))
    fn = _conv(window_strides=(1, 1), padding="VALID", dimension_numbers=NHWC)
    program = tdf.jax.jit(fn).lower(x, w).compile()
    assert program.llvm_ir.count("call @tdf_rt_contract") == 3
    assert "memref.copy" not in program.buffer_ir
    _check(fn, x, w, rtol=1e-5)


@pytest.mark.parametrize("case", ["batch_groups", "batch_inside", "small"])
def test_negative_batch_chunks(case, monkeypatch):
    """Not chunked: batch groups (a batch chunk is no convolution of its
    own), a batch that is not the outermost dimension of the input or the
    result, patches within CHUNK_BYTES."""
    from tdf.jax import _conv as conv_module
    monkeypatch.setattr(conv_module, "LIBRARY", False)
    monkeypatch.setattr(conv_module, "CHUNK_MIN_ROWS", 1)
    if case != "small":
        monkeypatch.setattr(conv_module, "CHUNK_BYTES", 1)
    rng = np.random.default_rng(6)
    dn = ("NHWC", "HWIO", "HNWC") if case == "batch_inside" else NHWC
    x, w = _operands(rng, dn, 4, 3, (8, 8), 6, (3, 3))
    kw = dict(window_strides=(1, 1), padding="VALID", dimension_numbers=dn)
    if case == "batch_groups":
        kw["batch_group_count"] = 2
    fn = _conv(**kw)
    assert _contract_calls(fn, x, w) == 1
    _check(fn, x, w, rtol=1e-5)


# ------------------------------------------------------------ property sweep

EXAMPLES = int(os.environ.get("TDF_JAX_CONV_EXAMPLES", "400" if os.environ.get("TDF_LONG") == "1"
                              else "12"))


@st.composite
def conv_configs(draw):
    nsp = draw(st.integers(1, 3))
    layout = draw(st.sampled_from(["channels_last", "channels_first", "shuffled"]))
    groups_kind = draw(st.sampled_from(["none", "feature", "batch"]))
    groups = draw(st.integers(1, 3)) if groups_kind != "none" else 1
    n = draw(st.integers(0, 3)) * (groups if groups_kind == "batch" else 1)
    c = draw(st.integers(1, 3)) * (groups if groups_kind == "feature" else 1)
    o = draw(st.integers(1, 3)) * groups
    spatial = [draw(st.integers(1, 6)) for _ in range(nsp)]
    kernel = [draw(st.integers(1, 3)) for _ in range(nsp)]
    strides = [draw(st.integers(1, 3)) for _ in range(nsp)]
    lhs_dil = [draw(st.integers(1, 2)) for _ in range(nsp)]
    rhs_dil = [draw(st.integers(1, 2)) for _ in range(nsp)]
    padding = [(draw(st.integers(-1, 3)), draw(st.integers(-1, 3))) for _ in range(nsp)]
    letters = "DHW"[-nsp:] if nsp < 3 else "DHW"
    if layout == "channels_last":
        specs = ("N" + letters + "C", letters + "IO", "N" + letters + "C")
    elif layout == "channels_first":
        specs = ("NC" + letters, "OI" + letters, "NC" + letters)
    else:
        perm = draw(st.permutations(list("NC" + letters)))
        kperm = draw(st.permutations(list("OI" + letters)))
        operm = draw(st.permutations(list("NC" + letters)))
        specs = ("".join(perm), "".join(kperm), "".join(operm))
    # The padded, dilated input must hold one dilated window. JAX numbers the
    # spatial dimensions (padding, strides, dilations) in the kernel spec's
    # order; _operands gives spatial[j] to the lhs spec's j-th spatial
    # letter and kernel[j] to the kernel spec's.
    lhs_letters = [ch for ch in specs[0] if ch not in "NC"]
    rhs_letters = [ch for ch in specs[1] if ch not in "OI"]
    for i in range(nsp):
        side = spatial[lhs_letters.index(rhs_letters[i])]
        size = (side - 1) * lhs_dil[i] + 1 + sum(padding[i])
        need = (kernel[i] - 1) * rhs_dil[i] + 1
        if size < need:
            padding[i] = (padding[i][0], padding[i][1] + need - size)
    kw = dict(window_strides=tuple(strides), padding=tuple(padding), lhs_dilation=tuple(lhs_dil),
              rhs_dilation=tuple(rhs_dil), dimension_numbers=specs,
              feature_group_count=groups if groups_kind == "feature" else 1,
              batch_group_count=groups if groups_kind == "batch" else 1)
    seed = draw(st.integers(0, 2 ** 16))
    return specs, n, c, spatial, o, kernel, kw, groups if groups_kind == "feature" else 1, seed


@pytest.mark.parametrize("library", [True, False], ids=["library", "im2col"])
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(config=conv_configs())
def test_conv_property(library, config, monkeypatch):
    """Random convolutions against jax.jit, with the float32 ones the oneDNN
    route takes built as named ops (library) and all as im2col."""
    from tdf.jax import _conv as conv_module
    monkeypatch.setattr(conv_module, "LIBRARY", library)
    specs, n, c, spatial, o, kernel, kw, groups, seed = config
    rng = np.random.default_rng(seed)
    x, w = _operands(rng, specs, n, c, spatial, o, kernel, groups)
    k = c // groups * int(np.prod(kernel))
    _check(_conv(**kw), x, w, rtol=2e-7 * k + 1e-6, ref_fn=_padded_first(kw))


def _padded_first(kw):
    """The convolution of ``kw`` with the input's padding and dilation done
    by ``lax.pad`` first (the oracle): XLA's CPU convolution computes wrong
    values for a negative low padding with a positive high one (JAX 0.10.2:
    ``test_negative_padding_against_numpy``)."""
    specs = kw["dimension_numbers"]
    rhs_letters = [ch for ch in specs[1] if ch not in "OI"]

    def fn(x, w):
        config = [(0, 0, 0)] * x.ndim
        for i, letter in enumerate(rhs_letters):  # JAX's spatial order: the kernel's
            lo, hi = kw["padding"][i]
            config[specs[0].index(letter)] = (lo, hi, kw["lhs_dilation"][i] - 1)
        xp = lax.pad(x, jnp.zeros((), x.dtype), config)
        plain = dict(kw, padding=tuple((0, 0) for _ in rhs_letters),
                     lhs_dilation=tuple(1 for _ in rhs_letters))
        return lax.conv_general_dilated(xp, w, **plain)
    return fn


def test_negative_padding_against_numpy():
    """A negative low and a positive high padding (the input's first element
    dropped, a zero after its last): tdf against float64 numpy, and against
    jax.jit of the same convolution with the padding done by lax.pad first.
    jax.jit of the convolution itself gives another value at the second
    window (5.64 where numpy gives 3.25, with JAX 0.10.2 on the CPU)."""
    rng = np.random.default_rng(0)
    x, w = _operands(rng, ("NWC", "WIO", "NWC"), 2, 3, [4], 1, [3])
    kw = dict(window_strides=(1,), padding=((-1, 1),), lhs_dilation=(1,), rhs_dilation=(1,),
              dimension_numbers=("NWC", "WIO", "NWC"))
    got = np.asarray(tdf.jax.jit(_conv(**kw))(x, w))
    xp = np.concatenate([x[:, 1:], np.zeros((2, 1, 3))], axis=1).astype(np.float64)
    want = np.stack([np.einsum("nwc,wco->no", xp[:, i:i + 3], w.astype(np.float64))
                     for i in range(2)], axis=1)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    _check(_conv(**kw), x, w, ref_fn=_padded_first(kw))


def test_conv_benchmark_smoke(tmp_path):
    """benchmarks/conv.py --tiny: every workload (and the direct strategy)
    checked against jax.jit, then timed once; no timing asserted."""
    import json
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.run([sys.executable, os.path.join(root, "benchmarks", "conv.py"), "--tiny",
                           "--reps", "1", "--strategies", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=600, cwd=root)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = json.loads((tmp_path / "conv.json").read_text())["rows"]
    assert {r["workload"] for r in rows} >= {"cnn_forward_b2", "cnn_train_b2", "conv1d", "conv3d"}
    assert all(r["tdf_over_jax"] > 0 for r in rows)
    assert all("direct_over_jax" in r for r in rows if r["workload"].startswith("conv"))
