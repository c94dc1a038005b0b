"""Named float32 convolutions through oneDNN (``tdf-convolutions-to-dnnl``,
``python/src/Convolution.cpp``): every layout the pass takes, window
strides and dilations, a strided view as the input, the output written in
place of its zero fill; each checked against ``jax.lax.conv_general_dilated``
(XLA), against the same program with the BLAS route off (loops) and against
the runtime's reference loops; inputs unchanged after the call."""

from __future__ import annotations

import numpy as np
import pytest
from jax import lax

import tdf
from tdf import _tdf
from tdf import blas as tdf_blas

pytestmark = pytest.mark.skipif(not tdf_blas.onednn_path() and not tdf_blas.available(),
                                reason="no BLAS libraries")

# name -> (spatial rank, channels first, JAX dimension numbers)
LAYOUTS = {
    "conv_1d_nwc_wcf": (1, False, ("NWC", "WIO", "NWC")),
    "conv_2d_nhwc_hwcf": (2, False, ("NHWC", "HWIO", "NHWC")),
    "conv_3d_ndhwc_dhwcf": (3, False, ("NDHWC", "DHWIO", "NDHWC")),
    "conv_1d_ncw_fcw": (1, True, ("NCW", "OIW", "NCW")),
    "conv_2d_nchw_fchw": (2, True, ("NCHW", "OIHW", "NCHW")),
    "conv_3d_ncdhw_fcdhw": (3, True, ("NCDHW", "OIDHW", "NCDHW")),
}


def _shapes(rank, first, n=2, c=3, f=5, side=7, k=3, stride=1, dilation=1):
    out = (side - dilation * (k - 1) - 1) // stride + 1
    sp, ksp, osp = [side] * rank, [k] * rank, [out] * rank
    if first:
        return [n, c, *sp], [f, c, *ksp], [n, f, *osp]
    return [n, *sp, c], [*ksp, c, f], [n, *osp, f]


def _ty(shape):
    return f"tensor<{'x'.join(map(str, shape))}xf32>"


def _program(name, xs, ws, ys, stride, dilation, rank, view=False):
    attrs = (f"{{strides = dense<{stride}> : tensor<{rank}xi64>, "
             f"dilations = dense<{dilation}> : tensor<{rank}xi64>}}")
    if view:  # the input is every other element of the last dimension of %big
        big = xs[:-1] + [2 * xs[-1]]
        head = f"%big: {_ty(big)}, %w: {_ty(ws)}"
        offsets = ", ".join(["0"] * len(xs))
        strides = ", ".join(["1"] * (len(xs) - 1) + ["2"])
        sizes = ", ".join(map(str, xs))
        take = (f"  %x = tensor.extract_slice %big[{offsets}] [{sizes}] [{strides}] : "
                f"{_ty(big)} to {_ty(xs)}\n")
    else:
        head, take = f"%x: {_ty(xs)}, %w: {_ty(ws)}", ""
    return f"""
func.func @main({head}) -> {_ty(ys)} {{
{take}  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : {_ty(ys)}
  %f = linalg.fill ins(%z : f32) outs(%e : {_ty(ys)}) -> {_ty(ys)}
  %y = linalg.{name} {attrs} ins(%x, %w : {_ty(xs)}, {_ty(ws)}) outs(%f : {_ty(ys)}) -> {_ty(ys)}
  return %y : {_ty(ys)}
}}"""


def _reference(x, w, stride, dilation, rank, dn):
    return np.asarray(lax.conv_general_dilated(x, w, (stride,) * rank, "VALID",
                                               rhs_dilation=(dilation,) * rank,
                                               dimension_numbers=dn))


@pytest.mark.parametrize("name", sorted(LAYOUTS))
@pytest.mark.parametrize("stride,dilation", [(1, 1), (2, 1), (1, 2)])
def test_named_convolution_runs_through_onednn(name, stride, dilation):
    rank, first, dn = LAYOUTS[name]
    xs, ws, ys = _shapes(rank, first, stride=stride, dilation=dilation)
    rng = np.random.default_rng(rank * 10 + stride + 3 * dilation)
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    x0, w0 = x.copy(), w.copy()
    text = _program(name, xs, ws, ys, stride, dilation, rank)
    prog = tdf.compile(text)
    assert "tdf_rt_conv" in prog.llvm_ir
    before = _tdf.conv_calls()
    y = np.asarray(prog.main(x, w))
    np.testing.assert_array_equal(x, x0)
    np.testing.assert_array_equal(w, w0)
    ref = _reference(x, w, stride, dilation, rank, dn)
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)
    loops = np.asarray(tdf.compile(text, blas=False).main(x, w))
    np.testing.assert_allclose(y, loops, rtol=1e-5, atol=1e-5)
    after = _tdf.conv_calls()
    if tdf_blas.onednn_path():
        assert after[0] == before[0] + 1  # oneDNN, not the reference loops
    _tdf.conv_force_reference(True)
    try:
        np.testing.assert_allclose(np.asarray(prog.main(x, w)), ref, rtol=1e-5, atol=1e-5)
        assert _tdf.conv_calls()[1] == after[1] + 1
    finally:
        _tdf.conv_force_reference(False)


def test_strided_view_input_and_inplace_off():
    """A strided view (every other element) is described to oneDNN by its own
    strides, with in-place on and off."""
    rank, first, dn = LAYOUTS["conv_2d_nhwc_hwcf"]
    xs, ws, ys = _shapes(rank, first)
    rng = np.random.default_rng(7)
    big = rng.standard_normal(xs[:-1] + [2 * xs[-1]]).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    text = _program("conv_2d_nhwc_hwcf", xs, ws, ys, 1, 1, rank, view=True)
    ref = _reference(big[..., ::2], w, 1, 1, rank, dn)
    for inplace in (True, False):
        prog = tdf.compile(text, inplace=inplace)
        assert "tdf_rt_conv" in prog.llvm_ir
        np.testing.assert_allclose(np.asarray(prog.main(big, w)), ref, rtol=1e-5, atol=1e-5)


def test_negative_accumulating_convolution_stays_loops():
    """A convolution into an init that is not zero adds to it: no call."""
    rank, first, dn = LAYOUTS["conv_2d_nhwc_hwcf"]
    xs, ws, ys = _shapes(rank, first)
    text = f"""
func.func @main(%x: {_ty(xs)}, %w: {_ty(ws)}, %b: {_ty(ys)}) -> {_ty(ys)} {{
  %y = linalg.conv_2d_nhwc_hwcf ins(%x, %w : {_ty(xs)}, {_ty(ws)}) outs(%b : {_ty(ys)}) -> {_ty(ys)}
  return %y : {_ty(ys)}
}}"""
    rng = np.random.default_rng(3)
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    b = rng.standard_normal(ys).astype(np.float32)
    prog = tdf.compile(text)
    assert "tdf_rt_conv" not in prog.llvm_ir
    np.testing.assert_allclose(np.asarray(prog.main(x, w, b)),
                               b + _reference(x, w, 1, 1, rank, dn), rtol=1e-5, atol=1e-5)


def test_calls_from_several_threads():
    """Convolutions of larger geometries (whose primitives use scratchpad
    memory) from several threads at once: each call has a scratchpad of its
    own (oneDNN's is one buffer for the process), so every thread gets what
    one call alone computes."""
    import threading
    rank, first, dn = LAYOUTS["conv_2d_nhwc_hwcf"]
    xs, ws, ys = _shapes(rank, first, n=4, c=32, f=64, side=18)
    text = _program("conv_2d_nhwc_hwcf", xs, ws, ys, 1, 1, rank)
    prog = tdf.compile(text)
    rng = np.random.default_rng(11)
    w = rng.standard_normal(ws).astype(np.float32)
    inputs = [rng.standard_normal(xs).astype(np.float32) for _ in range(6)]
    expected = [_reference(x, w, 1, 1, rank, dn) for x in inputs]
    results: list = [None] * len(inputs)

    def work(i):
        for _ in range(20):
            results[i] = np.asarray(prog.main(inputs[i], w))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(inputs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for got, want in zip(results, expected):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
