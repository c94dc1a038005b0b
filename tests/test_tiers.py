"""Tiered compilation (``tdf.compile(..., tiered=True)``, ``tdf.tiers``): the
program first runs LLVM's ``-O0`` code, switches to the optimized code when
the background compile links it, and computes ``jax.jit``'s answers before,
during and after the switch; the cache stores the optimized code only."""

from __future__ import annotations

import multiprocessing
import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tdf
import tdf.jax
from tdf import tiers


def model(x, w):
    h = jnp.tanh(x @ w)
    h = h - h.mean(axis=-1, keepdims=True)
    return jax.nn.softmax(h * 2.0, axis=-1).sum(axis=0) + jnp.cumsum(x, axis=1)[0]


def args(seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((16, 32)).astype(np.float32),
            rng.standard_normal((32, 32)).astype(np.float32))


def compiled(tiered, **options):
    return tdf.jax.jit(model).lower(*args()).compile(tiered=tiered, **options)


@pytest.fixture
def held(monkeypatch):
    """Holds the background compile until ``held.set()``."""
    gate = threading.Event()
    compile_prepared = tiers._objects.compile_prepared

    def gated(*a, **k):
        if threading.current_thread().name == "tdf-optimize":
            assert gate.wait(120)
        return compile_prepared(*a, **k)

    monkeypatch.setattr(tiers._objects, "compile_prepared", gated)
    yield gate
    gate.set()


def test_tiered_program_switches_to_optimized_code_and_stays_right(held):
    x, w = args()
    expected = np.asarray(jax.jit(model)(x, w))
    prog = compiled(True)
    before = (x.copy(), w.copy())
    assert not prog.optimized and not prog.wait_optimized(0.01)
    first = np.asarray(prog.main(x, w))  # the -O0 code
    np.testing.assert_allclose(first, expected, rtol=1e-5, atol=1e-5)
    held.set()
    assert prog.wait_optimized(120) and prog.optimized
    # The same bits before and after the switch (tdf-fuse-multiply-add: no
    # rounding left to the optimisation level).
    np.testing.assert_array_equal(np.asarray(prog.main(x, w)), first)
    np.testing.assert_array_equal(x, before[0])
    np.testing.assert_array_equal(w, before[1])


def test_calls_from_threads_during_the_switch_are_right(held):
    x, w = args(1)
    expected = np.asarray(jax.jit(model)(x, w))
    prog = compiled(True)
    errors, results = [], []
    held.set()  # the switch happens while the threads call

    def caller():
        try:
            while not prog.optimized:
                results.append(np.asarray(prog.main(x, w)))
            for _ in range(3):
                results.append(np.asarray(prog.main(x, w)))
        except Exception as err:  # reported below
            errors.append(err)

    threads = [threading.Thread(target=caller) for _ in range(3)]
    for thread in threads:
        thread.start()
    assert prog.wait_optimized(120)
    for thread in threads:
        thread.join(120)
    assert not errors and len(results) >= 9
    for result in results:
        np.testing.assert_allclose(result, expected, rtol=1e-5, atol=1e-5)


def test_tiered_program_caches_the_optimized_code(tmp_path, monkeypatch):
    monkeypatch.setenv("TDF_CACHE_DIR", str(tmp_path))
    x, w = args(2)
    prog = compiled(True)
    assert prog.report().cache in ("miss: compiled, optimizing", "miss: compiled, stored")
    assert prog.wait_optimized(120)
    assert prog.report().cache == "miss: compiled, stored"
    again = compiled(True)
    assert again.report().from_cache and again.optimized  # a hit is the optimized code
    np.testing.assert_array_equal(np.asarray(again.main(x, w)), np.asarray(prog.main(x, w)))


@st.composite
def _multiply_adds(draw, depth=3):
    """A random expression of +, -, * over inputs a, b, c (as text)."""
    if depth == 0 or draw(st.booleans()):
        return draw(st.sampled_from("abc"))
    op = draw(st.sampled_from("+-*"))
    return f"({draw(_multiply_adds(depth - 1))} {op} {draw(_multiply_adds(depth - 1))})"


@settings(max_examples=25, deadline=None)
@given(_multiply_adds(), st.sampled_from([np.float32, np.float64]))
def test_every_opt_level_rounds_alike_and_like_jax(expr, dtype):
    """Multiply-adds (``fastmath<contract>``) fuse at every opt level, as
    jax.jit fuses them: -O0 and -O2 code give jax.jit's bits exactly."""
    fn = eval(f"lambda a, b, c: {expr}")  # noqa: S307 (drawn from +-* and abc)
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(4099).astype(dtype) for _ in range(3)]
    with jax.enable_x64(dtype == np.float64):
        expected = np.asarray(jax.jit(fn)(*xs))
        for level in (0, 2):
            got = np.asarray(tdf.jax.jit(fn, opt_level=level)(*xs))
            np.testing.assert_array_equal(got, expected, err_msg=f"{expr} at -O{level}")


@pytest.mark.parametrize("expr", ["a * b + a * a", "a * a + a * b",
                                  "((a + a) * (a + b)) + ((a + a) * (a + a))",
                                  "(b * c) + (a + a) * (a + a)", "(a + c) * (a + b) + (b + c) * (a + c)"])
def test_sum_of_two_products_fuses_the_one_llvm_ranks_first(expr):
    """Of two products, the one LLVM's Reassociate orders first fuses (a
    hypothesis draw found ``(a+a)*(a+b) + (a+a)*(a+a)`` 1,136 elements off
    jax.jit at both levels when the left one always fused)."""
    fn = eval(f"lambda a, b, c: {expr}")  # noqa: S307 (fixed expressions)
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(4099).astype(np.float32) for _ in range(3)]
    expected = np.asarray(jax.jit(fn)(*xs))
    for level in (0, 2):
        got = np.asarray(tdf.jax.jit(fn, opt_level=level)(*xs))
        np.testing.assert_array_equal(got, expected, err_msg=f"{expr} at -O{level}")


def test_negative_untiered_and_level_zero_programs_are_optimized_at_once(monkeypatch):
    monkeypatch.delenv(tiers.ENV, raising=False)
    assert compiled(None).optimized  # off by default
    assert compiled(False).optimized
    assert compiled(True, opt_level=0).optimized  # nothing better to wait for
    monkeypatch.setenv(tiers.ENV, "1")
    prog = compiled(None)
    assert prog.wait_optimized(120)
    with pytest.raises(TypeError, match="tiered"):
        compiled("yes")


def _call_in_child(prog, x, w, expected, queue):
    ok = np.allclose(np.asarray(prog.main(x, w)), expected, rtol=1e-5, atol=1e-5)
    try:
        prog.wait_optimized(5)
        waited = "no error"
    except RuntimeError as err:
        waited = str(err)
    queue.put((bool(ok), waited))


def test_process_forked_while_optimizing_keeps_working(held):
    x, w = args(3)
    expected = np.asarray(jax.jit(model)(x, w))
    prog = compiled(True)
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_call_in_child, args=(prog, x, w, expected, queue))
    child.start()
    child.join(60)
    if child.is_alive():
        child.kill()
        pytest.fail("the forked child hung")
    ok, waited = queue.get(timeout=5)
    assert child.exitcode == 0 and ok
    assert waited == ("the optimizing compile failed: the process forked while the "
                      "program was optimized")
    held.set()
    assert prog.wait_optimized(120)  # the parent's compile goes on
