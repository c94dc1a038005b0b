"""Fused chains of kernel calls whose result is inserted into a destination.

``tdf-inline-kernels`` used to leave such chains as calls because
``tdf-insert-inplace`` aborted the process on several fused linalg parts
inserted into one destination (it reached the Python handle of an erased
``tensor.empty``). Now they fuse, and each fused part is computed straight
into its row. Random programs (parts of 1-3 chained kernels, inserted through
``expand_shape`` or rank-reduced, into a fresh or donated destination, some
parts reading the destination or used twice) run fused, unfused and by
``jax.jit``: fused and unfused agree bit for bit, both match JAX, non-donated
inputs are unchanged, and the in-place output passes
``tdf-verify-inplace{strict}``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tdf
from tdf.passes import pipelines

N = 32
T = f"tensor<{N}xf32>"
R = f"tensor<1x{N}xf32>"

KERNELS = {
    "scale": ("%c = arith.constant 1.5 : f32\n    %r = arith.mulf %a, %c : f32",
              lambda a: a * np.float32(1.5)),
    "shift": ("%c = arith.constant -0.25 : f32\n    %r = arith.addf %a, %c : f32",
              lambda a: a + np.float32(-0.25)),
    "tanh": ("%r = math.tanh %a : f32", jnp.tanh),
    "sq": ("%r = arith.mulf %a, %a : f32", lambda a: a * a),
}


def _kernels() -> str:
    out = []
    for name, (payload, _) in KERNELS.items():
        out.append(f"""
func.func private @{name}(%in: memref<{N}xf32>, %out: memref<{N}xf32>) attributes {{tdf.elementwise}} {{
  linalg.generic {{indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]}}
      ins(%in : memref<{N}xf32>) outs(%out : memref<{N}xf32>) {{
  ^bb0(%a: f32, %o: f32):
    {payload}
    linalg.yield %r : f32
  }}
  return
}}""")
    return "\n".join(out)


def _program(rng):
    rows = int(rng.integers(2, 5))
    donate = bool(rng.integers(0, 2))
    O = f"tensor<{rows}x{N}xf32>"
    args = [f"%y{i}: {T}" for i in range(rows)] + [f"%d: {O}" + (" {tdf.donate}" if donate else "")]
    lines, steps = [], []
    dest = "%d"
    extra = []
    for i in range(rows):
        value = f"%y{i}"
        source = ("arg", i)
        if rng.integers(0, 4) == 0 and i > 0:
            # the part reads a row already written into the destination
            lines.append(f"  %s{i} = tensor.extract_slice {dest}[{i - 1}, 0] [1, {N}] [1, 1] "
                         f": {O} to {T}")
            value, source = f"%s{i}", ("row", i - 1)
        chain = [str(k) for k in rng.choice(list(KERNELS), size=int(rng.integers(1, 4)))]
        for k, name in enumerate(chain):
            lines.append(f"  %p{i}_{k} = tdf.call @{name}({value}) : ({T}) -> {T}")
            value = f"%p{i}_{k}"
        if rng.integers(0, 5) == 0:
            extra.append(value)  # the part is also returned
        if rng.integers(0, 2):
            lines.append(f"  %r{i} = tensor.expand_shape {value} [[0, 1]] output_shape [1, {N}] "
                         f": {T} into {R}")
            lines.append(f"  %c{i} = tensor.insert_slice %r{i} into {dest}[{i}, 0] [1, {N}] [1, 1] "
                         f": {R} into {O}")
        else:
            lines.append(f"  %c{i} = tensor.insert_slice {value} into {dest}[{i}, 0] [1, {N}] [1, 1] "
                         f": {T} into {O}")
        dest = f"%c{i}"
        steps.append((source, chain))
    rets = [dest] + extra
    rtypes = [O] + [T] * len(extra)
    text = _kernels() + f"""
func.func @f({", ".join(args)}) -> ({", ".join(rtypes)}) {{
{chr(10).join(lines)}
  return {", ".join(rets)} : {", ".join(rtypes)}
}}
"""

    def reference(*xs):
        ys, d = list(xs[:rows]), xs[rows]
        parts = []
        for i, (source, chain) in enumerate(steps):
            v = ys[source[1]] if source[0] == "arg" else d[source[1]]
            for name in chain:
                v = KERNELS[name][1](v)
            d = d.at[i].set(v)
            parts.append(v)
        return (d,) + tuple(parts[int(e.split("_")[0][2:])] for e in extra)

    return text, reference, rows, donate


def _compile_unfused(monkeypatch, text):
    original = pipelines.inplace_stage

    def without(inplace=True, copy_before_write=False, fuse_kernels=True, *rest, **kw):
        return original(inplace, copy_before_write, False, *rest, **kw)

    with monkeypatch.context() as m:
        m.setattr(pipelines, "inplace_stage", without)
        return tdf.compile(text)


def _run(prog, xs):
    args = [x.copy() for x in xs]
    out = prog.f(*args)
    return (out if isinstance(out, tuple) else (out,)), args


@pytest.mark.parametrize("seed", range(12))
def test_fused_parts_match_unfused_and_jax(monkeypatch, seed):
    rng = np.random.default_rng(seed)
    text, reference, rows, donate = _program(rng)
    xs = [rng.uniform(-2, 2, N).astype(np.float32) for _ in range(rows)]
    xs.append(rng.uniform(-2, 2, (rows, N)).astype(np.float32))
    fused = tdf.compile(text, strict=True)
    fused_out, fused_args = _run(fused, xs)
    plain_out, plain_args = _run(_compile_unfused(monkeypatch, text), xs)
    want = jax.jit(reference)(*[jnp.asarray(x) for x in xs])
    assert len(fused_out) == len(plain_out) == len(want)
    for got, plain, ref in zip(fused_out, plain_out, want):
        np.testing.assert_array_equal(got, plain)
        np.testing.assert_allclose(got, np.asarray(ref), rtol=2e-6, atol=2e-6)
    for i, x in enumerate(xs):
        if i < rows or not donate:
            np.testing.assert_array_equal(fused_args[i], x)
            np.testing.assert_array_equal(plain_args[i], x)


def test_fused_chains_are_computed_in_their_rows():
    """Three parts, each a chain of three kernels, into a fresh destination:
    one allocation (the destination), no copy, no call left."""
    text = _kernels() + f"""
func.func @f(%y0: {T}, %y1: {T}, %y2: {T}) -> tensor<3x{N}xf32> {{
  %e = tensor.empty() : tensor<3x{N}xf32>
""" + "".join(f"""  %a{i} = tdf.call @tanh(%y{i}) : ({T}) -> {T}
  %b{i} = tdf.call @scale(%a{i}) : ({T}) -> {T}
  %z{i} = tdf.call @shift(%b{i}) : ({T}) -> {T}
  %r{i} = tensor.expand_shape %z{i} [[0, 1]] output_shape [1, {N}] : {T} into {R}
  %c{i} = tensor.insert_slice %r{i} into {'%e' if i == 0 else f'%c{i - 1}'}[{i}, 0] [1, {N}] [1, 1] : {R} into tensor<3x{N}xf32>
""" for i in range(3)) + f"""  return %c2 : tensor<3x{N}xf32>
}}
"""
    prog = tdf.compile(text, strict=True)
    body = prog.buffer_ir[prog.buffer_ir.index("func.func @f("):]
    assert body.count("memref.alloc") == 1, body
    assert "memref.copy" not in body and "call @" not in body, body
    ys = [np.linspace(-2, 2, N, dtype=np.float32) * (i + 1) for i in range(3)]
    want = np.tanh(np.stack(ys)) * np.float32(1.5) + np.float32(-0.25)
    np.testing.assert_allclose(prog.f(*ys), want, rtol=2e-6, atol=2e-6)
