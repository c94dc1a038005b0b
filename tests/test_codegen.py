"""Codegen optimisations compared with themselves switched off and with JAX:

- kernel fusion (``tdf-inline-kernels`` + ``tdf-fuse-elementwise``):
  random chains/DAGs of element-wise kernel calls with random donation, run
  fused, unfused (``inplace_stage(fuse_kernels=False)``) and by ``jax.jit``;
  fused and unfused must agree bit for bit (fusion reorders no arithmetic),
  both must match JAX, and non-donated inputs must be unchanged;
- what fusion leaves alone (declarations, kernels reading their output,
  reductions, a lone call whose result is inserted into a concat) stays a
  call and still computes the right answer.

``TDF_LONG=1`` runs more examples (``TDF_CODEGEN_EXAMPLES``).
"""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tdf
from tdf.passes import pipelines

LONG = os.environ.get("TDF_LONG") == "1"
EXAMPLES = int(os.environ.get("TDF_CODEGEN_EXAMPLES", "300" if LONG else "20"))
N = 64
T = f"tensor<{N}xf32>"
M = f"memref<{N}xf32>"

# name: (payload lines using %a [%b] producing %r, arity, jax function)
KERNELS = {
    "scale": ("%c = arith.constant 1.5 : f32\n    %r = arith.mulf %a, %c : f32", 1,
              lambda a: a * np.float32(1.5)),
    "shift": ("%c = arith.constant -0.25 : f32\n    %r = arith.addf %a, %c : f32", 1,
              lambda a: a + np.float32(-0.25)),
    "square": ("%r = arith.mulf %a, %a : f32", 1, lambda a: a * a),
    "tanh": ("%r = math.tanh %a : f32", 1, jnp.tanh),
    "add": ("%r = arith.addf %a, %b : f32", 2, lambda a, b: a + b),
    "sub": ("%r = arith.subf %a, %b : f32", 2, lambda a, b: a - b),
}


def _kernel(name) -> str:
    body, arity, _ = KERNELS[name]
    # Constants inside the payload in some kernels, outside in others: both
    # forms must inline.
    consts = [line for line in body.split("\n") if "arith.constant" in line]
    payload = "\n".join(line for line in body.split("\n") if "arith.constant" not in line)
    ins = ", ".join(["%in0", "%in1"][:arity])
    in_types = ", ".join([M] * arity)
    maps = ", ".join(["affine_map<(i) -> (i)>"] * (arity + 1))
    bargs = ", ".join(["%a: f32", "%b: f32"][:arity]) + ", %o: f32"
    params = ", ".join([f"%in{i}: {M}" for i in range(arity)] + [f"%out: {M}"])
    const_text = "\n".join(f"  {c.strip()}" for c in consts)
    return f"""
func.func private @{name}({params}) attributes {{tdf.elementwise}} {{
{const_text}
  linalg.generic {{indexing_maps = [{maps}], iterator_types = ["parallel"]}}
      ins({ins} : {in_types}) outs(%out : {M}) {{
  ^bb0({bargs}):
    {payload.strip()}
    linalg.yield %r : f32
  }}
  return
}}
"""


ALL_KERNELS = "".join(_kernel(k) for k in KERNELS)


@st.composite
def chains(draw):
    """(text, jax function, number of arguments, donated flags)."""
    nargs = draw(st.integers(1, 2))
    donated = [draw(st.booleans()) for _ in range(nargs)]
    values = [f"%x{i}" for i in range(nargs)]
    steps = []
    for i in range(draw(st.integers(1, 7))):
        name = draw(st.sampled_from(sorted(KERNELS)))
        arity = KERNELS[name][1]
        # Mostly the newest value (long chains), sometimes an older one.
        picks = [len(values) - 1 if draw(st.integers(0, 3)) else draw(st.integers(0, len(values) - 1))
                 for _ in range(arity)]
        steps.append((name, picks))
        values.append(f"%v{i}")
    results = sorted({len(values) - 1} | ({draw(st.integers(0, len(values) - 1))}
                                          if draw(st.booleans()) else set()))
    args = ", ".join(f"%x{i}: {T}" + (" {tdf.donate}" if donated[i] else "") for i in range(nargs))
    lines = []
    for i, (name, picks) in enumerate(steps):
        operands = ", ".join(values[p] for p in picks)
        types = ", ".join([T] * len(picks))
        lines.append(f"  %v{i} = tdf.call @{name}({operands}) : ({types}) -> {T}")
    rets = ", ".join(values[r] for r in results)
    rtypes = ", ".join([T] * len(results))
    text = ALL_KERNELS + f"""
func.func @f({args}) -> ({rtypes}) {{
{chr(10).join(lines)}
  return {rets} : {rtypes}
}}
"""

    def reference(*xs):
        vals = list(xs)
        for name, picks in steps:
            vals.append(KERNELS[name][2](*[vals[p] for p in picks]))
        return tuple(vals[r] for r in results)

    return text, reference, nargs, donated


@pytest.fixture
def unfused(monkeypatch):
    original = pipelines.inplace_stage

    def without(inplace=True, copy_before_write=False, fuse_kernels=True, *rest, **kw):
        return original(inplace, copy_before_write, False, *rest, **kw)

    def compile_unfused(text):
        with monkeypatch.context() as m:
            m.setattr(pipelines, "inplace_stage", without)
            return tdf.compile(text)

    return compile_unfused


def _run(prog, xs):
    args = [x.copy() for x in xs]
    out = prog.f(*args)
    return (out if isinstance(out, tuple) else (out,)), args


@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(case=chains(), seed=st.integers(0, 2**31 - 1))
def test_fused_matches_unfused_and_jax(unfused, case, seed):
    text, reference, nargs, donated = case
    rng = np.random.default_rng(seed)
    xs = [rng.uniform(-2, 2, N).astype(np.float32) for _ in range(nargs)]
    fused_out, fused_args = _run(tdf.compile(text), xs)
    plain_out, plain_args = _run(unfused(text), xs)
    want = jax.jit(reference)(*[jnp.asarray(x) for x in xs])
    assert len(fused_out) == len(plain_out) == len(want)
    for got, plain, ref in zip(fused_out, plain_out, want):
        np.testing.assert_array_equal(got, plain)
        np.testing.assert_allclose(got, np.asarray(ref), rtol=2e-6, atol=2e-6)
    for i in range(nargs):
        if not donated[i]:
            np.testing.assert_array_equal(fused_args[i], xs[i])
            np.testing.assert_array_equal(plain_args[i], xs[i])


def _entry_ir(prog) -> str:
    ir_text = prog.buffer_ir
    return ir_text[ir_text.index("func.func @f("):]


def test_chain_becomes_one_loop_in_place_on_donated_input():
    text = ALL_KERNELS + f"""
func.func @f(%x: {T} {{tdf.donate}}) -> {T} {{
  %a = tdf.call @scale(%x) : ({T}) -> {T}
  %b = tdf.call @shift(%a) : ({T}) -> {T}
  %c = tdf.call @tanh(%b) : ({T}) -> {T}
  return %c : {T}
}}
"""
    prog = tdf.compile(text)
    entry = _entry_ir(prog)
    assert entry.count("linalg.generic") == 1, entry
    assert "memref.alloc" not in entry and "call @" not in entry, entry
    x = np.linspace(-1, 1, N, dtype=np.float32)
    want = np.tanh(x * np.float32(1.5) - np.float32(0.25))
    got = prog.f(x)
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6)
    assert np.shares_memory(got, x)


def test_chain_on_non_donated_input_allocates_one_result():
    text = ALL_KERNELS + f"""
func.func @f(%x: {T}) -> {T} {{
  %a = tdf.call @square(%x) : ({T}) -> {T}
  %b = tdf.call @add(%a, %x) : ({T}, {T}) -> {T}
  return %b : {T}
}}
"""
    prog = tdf.compile(text)
    entry = _entry_ir(prog)
    assert entry.count("linalg.generic") == 1 and entry.count("memref.alloc") == 1, entry
    x = np.linspace(-1, 1, N, dtype=np.float32)
    before = x.copy()
    np.testing.assert_array_equal(prog.f(x), x * x + x)
    np.testing.assert_array_equal(x, before)


NOT_INLINED = f"""
func.func private @decl({M}, {M})
func.func private @reads_out(%in: {M}, %out: {M}) {{
  linalg.generic {{indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],
                  iterator_types = ["parallel"]}} ins(%in : {M}) outs(%out : {M}) {{
  ^bb0(%a: f32, %o: f32):
    %r = arith.addf %a, %o : f32
    linalg.yield %r : f32
  }}
  return
}}
"""


@pytest.mark.parametrize("callee, reason", [
    ("decl", "the kernel has no body"),
    ("reads_out", "the kernel reads its output"),
])
def test_calls_that_are_not_inlined_say_why(callee, reason):
    text = ALL_KERNELS + NOT_INLINED + f"""
func.func @f(%x: {T}) -> {T} {{
  %a = tdf.call @scale(%x) : ({T}) -> {T}
  %b = tdf.call @{callee}(%a) : ({T}) -> {T}
  return %b : {T}
}}
"""
    ctx = tdf.Context()
    module = tdf.parse(text, ctx)
    records = []
    tdf.run_pipeline(module, "builtin.module(tdf-inline-kernels{remarks})", diagnostics=records)
    messages = [str(r) for r in records]
    assert any(f"tdf.call @{callee} kept as a call: {reason}" in m for m in messages), messages
    assert f"tdf.call @{callee}" in str(module)


def test_lone_call_into_concat_stays_a_call():
    """A single kernel call inserted into a concat keeps tdf-insert-inplace's
    call path (computed in its slice), and the answer is right."""
    row = "tensor<1x64xf32>"
    text = ALL_KERNELS + f"""
func.func @f(%x: {T}, %y: {T}) -> tensor<2x64xf32> {{
  %e = tensor.empty() : tensor<2x64xf32>
  %a = tdf.call @tanh(%x) : ({T}) -> {T}
  %b = tdf.call @tanh(%y) : ({T}) -> {T}
  %ra = tensor.expand_shape %a [[0, 1]] output_shape [1, 64] : {T} into {row}
  %rb = tensor.expand_shape %b [[0, 1]] output_shape [1, 64] : {T} into {row}
  %0 = tensor.insert_slice %ra into %e[0, 0] [1, 64] [1, 1] : {row} into tensor<2x64xf32>
  %1 = tensor.insert_slice %rb into %0[1, 0] [1, 64] [1, 1] : {row} into tensor<2x64xf32>
  return %1 : tensor<2x64xf32>
}}
"""
    prog = tdf.compile(text)
    assert "tdf.call" not in _entry_ir(prog)  # bufferized
    x, y = np.linspace(-2, 2, N, dtype=np.float32), np.linspace(3, -3, N, dtype=np.float32)
    np.testing.assert_allclose(prog.f(x, y), np.tanh(np.stack([x, y])), rtol=4e-7, atol=1e-7)


# -- matmul tiling and vectorization (tdf-vectorize-contractions) -------------

@pytest.fixture
def unvectorized(monkeypatch):
    original = pipelines.lower_to_llvm

    def without(*args, **kwargs):
        return [p for p in original(*args, **kwargs) if p != "tdf-vectorize-contractions"]

    def compile_loops(text):
        with monkeypatch.context() as m:
            m.setattr(pipelines, "lower_to_llvm", without)
            return tdf.compile(text, blas=False)

    return compile_loops


def _matmul_text(shape_a, shape_b, shape_c, dtype, batch=False):
    ta = f"tensor<{'x'.join(map(str, shape_a))}x{dtype}>"
    tb = f"tensor<{'x'.join(map(str, shape_b))}x{dtype}>"
    tc = f"tensor<{'x'.join(map(str, shape_c))}x{dtype}>"
    op = "linalg.batch_matmul" if batch else "linalg.matmul"
    return f"""
func.func @mm(%a: {ta}, %b: {tb}, %c: {tc}) -> {tc} {{
  %r = {op} ins(%a, %b : {ta}, {tb}) outs(%c : {tc}) -> {tc}
  return %r : {tc}
}}
"""


def _check_matmul(got, a, b, c, dtype):
    want = np.matmul(a.astype(np.float64), b.astype(np.float64)) + c
    scale = np.matmul(np.abs(a).astype(np.float64), np.abs(b).astype(np.float64)) + np.abs(c)
    eps = np.finfo(dtype).eps
    k = a.shape[-1]
    assert np.all(np.abs(got - want) <= 2 * k * eps * scale + 1e-30), np.max(np.abs(got - want))


@settings(max_examples=max(6, EXAMPLES // 2), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(m=st.integers(1, 40), k=st.integers(1, 40), n=st.integers(1, 70),
       batch=st.sampled_from([None, 1, 3]), dtype=st.sampled_from(["f32", "f64"]),
       seed=st.integers(0, 2**31 - 1))
def test_vectorized_matmul_matches_loops_and_jax(unvectorized, m, k, n, batch, dtype, seed):
    np_dtype = {"f32": np.float32, "f64": np.float64}[dtype]
    lead = [batch] if batch else []
    text = _matmul_text(lead + [m, k], lead + [k, n], lead + [m, n], dtype, batch=bool(batch))
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(lead + [m, k]).astype(np_dtype)
    b = rng.standard_normal(lead + [k, n]).astype(np_dtype)
    c = rng.standard_normal(lead + [m, n]).astype(np_dtype)
    fast = tdf.compile(text)  # the BLAS route; its small GEMMs compiled
    library = tdf.compile(text, codegen_flops=0)  # every GEMM through the libraries
    vectorized = tdf.compile(text, blas=False)
    loops = unvectorized(text)
    got, ref_loops = fast.mm(a, b, c.copy()), loops.mm(a, b, c.copy())
    _check_matmul(got, a, b, c, np_dtype)
    _check_matmul(library.mm(a, b, c.copy()), a, b, c, np_dtype)
    _check_matmul(vectorized.mm(a, b, c.copy()), a, b, c, np_dtype)
    _check_matmul(ref_loops, a, b, c, np_dtype)
    if dtype == "f32":
        want = jax.jit(lambda x, y, z: jnp.matmul(x, y, precision="highest") + z)(a, b, c)
        np.testing.assert_allclose(got, np.asarray(want), rtol=1e-4, atol=1e-4 * np.sqrt(k))


def test_every_static_matmul_is_vectorized():
    """64x64x64 becomes blocks of 8 x 32 columns accumulated with FMAs on
    vectors; 5x7x8 (no full block) one block of 5 rows x 8 columns, and is
    right. (The codegen route: with the BLAS on, only small GEMMs are.)"""
    prog = tdf.compile(_matmul_text([64, 64], [64, 64], [64, 64], "f32"), blas=False)
    assert "llvm.intr.fmuladd" in prog.llvm_ir and "vector<32xf32>" in prog.llvm_ir
    prog = tdf.compile(_matmul_text([5, 7], [7, 8], [5, 8], "f32"), blas=False)
    assert "vector<8xf32>" in prog.llvm_ir
    rng = np.random.default_rng(0)
    a, b, c = (rng.standard_normal(s).astype(np.float32) for s in ((5, 7), (7, 8), (5, 8)))
    _check_matmul(prog.mm(a, b, c.copy()), a, b, c, np.float32)


def test_negative_dynamic_matmul_stays_loops():
    """A matmul of dynamic sizes is not vectorized (its blocks would need
    masks) and is right as loops."""
    prog = tdf.compile(_matmul_text(["?", 7], [7, 8], ["?", 8], "f32"), blas=False)
    assert "vector<" not in prog.llvm_ir
    rng = np.random.default_rng(1)
    a, b, c = (rng.standard_normal(s).astype(np.float32) for s in ((5, 7), (7, 8), (5, 8)))
    _check_matmul(prog.mm(a, b, c.copy()), a, b, c, np.float32)
