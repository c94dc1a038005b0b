"""tdf-plan-memory: one arena per call, temporaries inside fresh results,
loop-carried state in one buffer; memory_analysis() against the measured
peak; results with the planner on, off and from JAX identical."""

from __future__ import annotations

import os
import sys
import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jax import lax

import tdf
import tdf.jax
from tdf.passes.analysis.placement import Block, Host, Placement, check, lower_bound, place

BENCH = os.path.join(os.path.dirname(__file__), "..", "benchmarks")


# ------------------------------------------------------------- the placement


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5000), st.integers(0, 30), st.integers(0, 10)),
                min_size=1, max_size=40),
       st.lists(st.tuples(st.integers(1, 8000), st.integers(0, 40)), max_size=3))
def test_placement_never_overlaps_and_respects_the_bound(spans, results):
    blocks = [Block(size, start, start + length, f"b{i}")
              for i, (size, start, length) in enumerate(spans)]
    hosts = [Host(size, start, 50, f"r{i}") for i, (size, start) in enumerate(results)]
    placement = place(blocks, hosts)
    assert check(blocks, hosts, placement) == []
    # Every byte live at a time t sits in the arena or in a result's bytes.
    spans = [(b.size, b.start, b.end) for b in blocks] + [(h.size, h.start, h.end) for h in hosts]
    most = max(sum(s for s, a, e in spans if a <= t <= e) for t in range(0, 51))
    assert placement.arena + sum(h.size for h in hosts) >= most


def test_check_reports_a_shared_byte():
    """negative_: the checker is not vacuous."""
    blocks = [Block(64, 0, 5, "a"), Block(64, 3, 8, "b")]
    assert check(blocks, [], Placement([(-1, 0), (-1, 0)], 64))
    assert check(blocks, [], Placement([(-1, 0), (-1, 64)], 128)) == []
    host = [Host(64, 4, 9, "r")]
    assert check(blocks[:1], host, Placement([(0, 0)], 0))  # a is live when r is


def test_placement_reaches_the_bound_on_a_chain():
    blocks = [Block(128, i, i + 1, f"t{i}") for i in range(50)]
    placement = place(blocks)
    assert placement.arena == lower_bound(blocks) == 2 * 128


# ---------------------------------------------------- end to end (tdf.compile)

CHAIN = """
func.func @f(%x: tensor<64x64xf32>, %w: tensor<64x64xf32>) -> tensor<64x64xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<64x64xf32>
  %i = linalg.fill ins(%z : f32) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %a = linalg.matmul ins(%x, %w : tensor<64x64xf32>, tensor<64x64xf32>) outs(%i : tensor<64x64xf32>) -> tensor<64x64xf32>
  %e2 = tensor.empty() : tensor<64x64xf32>
  %i2 = linalg.fill ins(%z : f32) outs(%e2 : tensor<64x64xf32>) -> tensor<64x64xf32>
  %b = linalg.matmul ins(%a, %w : tensor<64x64xf32>, tensor<64x64xf32>) outs(%i2 : tensor<64x64xf32>) -> tensor<64x64xf32>
  %e3 = tensor.empty() : tensor<64x64xf32>
  %i3 = linalg.fill ins(%z : f32) outs(%e3 : tensor<64x64xf32>) -> tensor<64x64xf32>
  %c = linalg.matmul ins(%b, %a : tensor<64x64xf32>, tensor<64x64xf32>) outs(%i3 : tensor<64x64xf32>) -> tensor<64x64xf32>
  %e4 = tensor.empty() : tensor<64x64xf32>
  %i4 = linalg.fill ins(%z : f32) outs(%e4 : tensor<64x64xf32>) -> tensor<64x64xf32>
  %d = linalg.matmul ins(%c, %w : tensor<64x64xf32>, tensor<64x64xf32>) outs(%i4 : tensor<64x64xf32>) -> tensor<64x64xf32>
  return %d : tensor<64x64xf32>
}
"""


def _peak(prog, *args):
    prog.reset_allocation_stats()
    out = prog.f(*args)
    stats = prog.allocation_stats()
    return out, stats


def test_arena_cuts_peak_and_allocations_and_analysis_is_exact():
    rng = np.random.default_rng(1)
    x, w = (rng.standard_normal((64, 64)).astype(np.float32) * 0.2 for _ in range(2))
    on = tdf.compile(CHAIN, count_allocations=True)
    off = tdf.compile(CHAIN, count_allocations=True, plan_memory=False)
    got_on, s_on = _peak(on, x, w)
    got_off, s_off = _peak(off, x, w)
    np.testing.assert_array_equal(got_on, got_off)
    a = x @ w
    b = a @ w
    np.testing.assert_allclose(got_on, (b @ a) @ w, rtol=1e-4, atol=1e-5)
    # a, b, c and the result: a and b are live at once, then b and c (a is
    # read by c's matmul), then c and the result: a's slot holds c, and b
    # lives in the result's bytes until c is done. 3 buffers, 2 allocations.
    assert (s_off.calls, s_off.peak_bytes) == (4, 4 * 16384)
    assert (s_on.calls, s_on.peak_bytes) == (2, 3 * 16384)
    analysis = on.memory_analysis()
    assert analysis.peak_memory_in_bytes == s_on.peak_bytes
    assert analysis.lower_bound_in_bytes == 3 * 16384
    assert analysis.argument_size_in_bytes == 2 * 16384
    assert analysis.output_size_in_bytes == 16384 and analysis.alias_size_in_bytes == 0
    assert analysis.exact and "lifetime lower bound" in str(analysis)
    assert on.report().memory == {"f": analysis}
    assert f"@f: {analysis}" in str(on.report())
    assert on.memory_analysis("f") is analysis
    with pytest.raises(KeyError):
        on.memory_analysis("g")


def test_arena_is_per_call_across_threads():
    """Compiled functions run concurrently: each call has its own arena."""
    prog = tdf.compile(CHAIN)
    w = np.eye(64, dtype=np.float32) * 0.5
    xs = [np.full((64, 64), i / 10, np.float32) for i in range(8)]
    want = [prog.f(x, w) for x in xs]
    errors = []

    def run(i):
        for _ in range(50):
            if not np.array_equal(prog.f(xs[i], w), want[i]):
                errors.append(i)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


# ------------------------------------------------------- JAX programs


def _same(fn, *args, donate=(), rtol=1e-5):
    ref = jax.jit(fn)(*[np.array(a, copy=True) for a in args])
    on = tdf.jax.jit(fn, donate_argnums=donate)(*[np.array(a, copy=True) for a in args])
    off = tdf.jax.jit(fn, donate_argnums=donate, plan_memory=False)(
        *[np.array(a, copy=True) for a in args])
    for a, b, c in zip(jax.tree_util.tree_leaves(on), jax.tree_util.tree_leaves(off),
                       jax.tree_util.tree_leaves(ref)):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_allclose(a, np.asarray(c), rtol=rtol, atol=1e-5)


def test_negative_in_place_update_then_view_read_after_new_temporary():
    """The ExecuTorch hazard: a temporary updated in place, read again through
    a slice after another temporary is written. Lifetimes follow the storage,
    so the second temporary must not take the first one's bytes."""
    def f(x):
        a = jnp.exp(x)
        a = a.at[:64].multiply(2.0)
        head = a[:64]
        b = jnp.sin(x) * 3.0
        return head + b[64:128], b

    _same(f, np.linspace(-1, 1, 256, dtype=np.float32))


def test_scan_carry_in_one_buffer():
    def rnn(wx, wh, xs, h0):
        def cell(h, x):
            h = jnp.tanh(x @ wx + h @ wh)
            return h, h
        return lax.scan(cell, h0, xs)

    rng = np.random.default_rng(0)
    args = (rng.standard_normal((8, 16)).astype(np.float32) * 0.3,
            rng.standard_normal((16, 16)).astype(np.float32) * 0.3,
            rng.standard_normal((32, 4, 8)).astype(np.float32),
            np.zeros((4, 16), np.float32))
    _same(rnn, *args, rtol=1e-4)
    jitted = tdf.jax.jit(rnn, count_allocations=True)
    jitted(*args)
    prog = jitted.program(*args)
    prog.reset_allocation_stats()
    jitted(*args)
    stats = prog.allocation_stats()
    # the arena and the two results; nothing per step (32 steps)
    assert stats.calls <= 3, stats
    assert abs(prog.memory_analysis().peak_memory_in_bytes - stats.peak_bytes) \
        <= 0.05 * stats.peak_bytes


def test_fori_and_while_loops_match():
    def f(x):
        y = lax.fori_loop(0, 5, lambda i, v: jnp.sin(v) + v * 0.5, x)
        z = lax.while_loop(lambda c: c[0] < 4, lambda c: (c[0] + 1, jnp.cos(c[1]) * 2), (0, y))
        return z[1] + y

    _same(f, np.linspace(-2, 2, 300, dtype=np.float32))


@pytest.fixture(scope="module")
def bench_programs():
    sys.path.insert(0, BENCH)
    import memory as bench  # noqa: E402  (benchmarks/memory.py)
    return bench


@pytest.mark.parametrize("name", ["mlp_forward", "transformer_block", "ew_chain",
                                  "concat_parts", "gpt2_decode", "gpt2_prefill", "mlp_train",
                                  "rnn_scan", "scatter_add"])
def test_benchmark_programs_peak_analysis_and_results(bench_programs, name):
    """On the memory benchmark's programs (small sizes): results equal with
    the planner on and off and to JAX, memory_analysis() within 5% of the
    measured peak, allocations per call at most one arena + the fresh
    results, and never more peak bytes than without the planner."""
    fn, args, donate = bench_programs.programs(True)[name]
    row = bench_programs.measure(name, fn, args, donate)
    on, off = row["tdf"], row["tdf_unplanned"]
    assert abs(on["predicted_peak"] - on["peak"]) <= 0.05 * max(on["peak"], 1), row
    assert on["peak"] <= off["peak"], row
    assert on["peak"] <= 1.05 * on["lower_bound"] + 64, row
    fresh = len([a for a in jax.tree_util.tree_leaves(jax.eval_shape(fn, *args))])
    assert on["allocations"] <= 1 + fresh, row


GPU_CHAIN = """
func.func @f(%x: tensor<1024xf32>, %y: tensor<1024xf32>) -> tensor<1024xf32> {
  %e = tensor.empty() : tensor<1024xf32>
  %a = linalg.exp ins(%x : tensor<1024xf32>) outs(%e : tensor<1024xf32>) -> tensor<1024xf32>
  %e2 = tensor.empty() : tensor<1024xf32>
  %b = linalg.add ins(%a, %y : tensor<1024xf32>, tensor<1024xf32>) outs(%e2 : tensor<1024xf32>) -> tensor<1024xf32>
  %e3 = tensor.empty() : tensor<1024xf32>
  %c = linalg.mul ins(%b, %a : tensor<1024xf32>, tensor<1024xf32>) outs(%e3 : tensor<1024xf32>) -> tensor<1024xf32>
  %e4 = tensor.empty() : tensor<1024xf32>
  %d = linalg.sub ins(%c, %b : tensor<1024xf32>, tensor<1024xf32>) outs(%e4 : tensor<1024xf32>) -> tensor<1024xf32>
  return %d : tensor<1024xf32>
}
"""


def test_gpu_path_plans_one_device_arena():
    """tdf-lower-to-nvvm plans device memory the same way: the temporaries
    are views of one gpu.alloc'd arena (and of the result's bytes), freed once;
    compile-tested (the GPU execution tests run these programs on a GPU)."""
    import re

    module = tdf.parse(GPU_CHAIN)
    tdf.run_pipeline(module, "builtin.module(tdf-lower-to-nvvm{stop-at=gpu inplace=false})")
    text = str(module)
    byte_allocs = re.findall(r"gpu.alloc async \[[^\]]*\] \(\) (?:\{[^}]*\} )?: memref<(\d+)xi8>",
                             text)
    assert sorted(int(n) for n in byte_allocs) == [4096, 8192], byte_allocs
    assert text.count("memref.view") == 3  # a and the result share the host view (cse)
    assert len(re.findall(r"gpu.dealloc async \[[^\]]*\] %\w+ : memref<\d+xi8>", text)) == 2
    # the only host allocation: the result the d2h copy fills
    assert text.count("memref.alloc()") == 1


BAD_PLAN = """
func.func @f(%x: memref<16xf32>, %out: memref<16xf32>) {
  %c0 = arith.constant 0 : index
  %c64 = arith.constant OFFSET : index
  %arena = memref.alloc() {tdf.arena} : memref<128xi8>
  %a = memref.view %arena[%c0][] : memref<128xi8> to memref<16xf32>
  linalg.exp ins(%x : memref<16xf32>) outs(%a : memref<16xf32>)
  %b = memref.view %arena[%c64][] : memref<128xi8> to memref<16xf32>
  linalg.exp ins(%x : memref<16xf32>) outs(%b : memref<16xf32>)
  linalg.add ins(%a, %b : memref<16xf32>, memref<16xf32>) outs(%out : memref<16xf32>)
  memref.dealloc %arena : memref<128xi8>
  return
}
"""


@pytest.mark.parametrize("offset, bad", [(64, False), (0, True), (32, True)])
def test_rewritten_ir_checker_finds_shared_bytes(offset, bad):
    """The check tdf-plan-memory runs on its own output reads offsets and
    lifetimes back from the IR; negative_: views live at once sharing bytes."""
    from tdf.passes.analysis.buffers import shared_storage_conflicts
    from tdf.passes.ir_utils import function_bodies

    module = tdf.parse(BAD_PLAN.replace("OFFSET", str(offset)))
    with module.context:
        (func,) = function_bodies(module.operation)
        assert bool(shared_storage_conflicts(func)) == bad


def test_temporaries_of_called_functions_count_in_the_peak():
    """A nest tdf-outline-deep-nests moved into a function of its own
    allocates there, while the caller waits: memory_analysis()'s peak counts
    the callee's temporaries (it left them out before), and matches the
    counting allocator's peak of the call."""
    t = "tensor<4096xf32>"
    levels = 18
    lines, cur = [], "%x"
    for i in range(levels):
        lines.append(f"%r{i} = scf.if %c -> ({t}) {{")
    body = [f"%e0 = tensor.empty() : {t}",
            f"%a = linalg.exp ins({cur} : {t}) outs(%e0 : {t}) -> {t}",
            f"%e1 = tensor.empty() : {t}",
            f"%b = linalg.add ins(%a, {cur} : {t}, {t}) outs(%e1 : {t}) -> {t}",
            f"%e2 = tensor.empty() : {t}",
            f"%z = linalg.mul ins(%b, %a : {t}, {t}) outs(%e2 : {t}) -> {t}",
            f"scf.yield %z : {t}"]
    close = []
    for i in reversed(range(levels)):
        close.append(f"}} else {{\nscf.yield %x : {t}\n}}")
        close.append(f"scf.yield %r{i} : {t}" if i else f"return %r{i} : {t}")
    text = (f"func.func @f(%x: {t}, %c: i1) -> {t} {{\n" + "\n".join(lines + body + close)
            + "\n}\n")
    prog = tdf.compile(text, count_allocations=True)
    assert "tdf_nest_" in prog.buffer_ir
    x = np.linspace(-1, 1, 4096, dtype=np.float32)
    prog.reset_allocation_stats()
    out = prog.f(x, True)
    stats = prog.allocation_stats()
    a = np.exp(x)
    np.testing.assert_allclose(out, (a + x) * a, rtol=1e-5, atol=1e-6)
    analysis = prog.memory_analysis()
    assert analysis.temp_size_in_bytes > 0
    assert analysis.peak_memory_in_bytes == stats.peak_bytes, (analysis, stats)
