"""The runtime's caching allocator for large buffers (python/src/Runtime.cpp,
docs/Runtime.md "Caching allocator"): the compiled code's malloc/free and
the result arrays' frees go through it; freed blocks of at least
``min_block_bytes`` are kept (bounded by ``limit_bytes``) and handed out
again. Reuse is observed through the allocator's counters, never timing.

Stress runs and anything that depends on no other compiled function being
alive run in a subprocess."""

from __future__ import annotations

import gc
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest
from test_alloc_failure import DYNAMIC  # the dynamically sized scratch program

import tdf
from tdf.allocator import (
    allocator_stats,
    release_cached_memory,
    reset_allocator_stats,
    set_allocator_cache_limit,
)

N = 1 << 20  # 4 MiB of f32: well over the smallest cached block

_GENERIC = ("linalg.generic {{indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>],"
            " iterator_types = [\"parallel\"]}}")

PROGRAM = f"""\
func.func @axpa(%x: tensor<{N}xf32>, %a: f32) -> tensor<{N}xf32> {{
  %e = tensor.empty() : tensor<{N}xf32>
  %y = {_GENERIC.format()} ins(%x : tensor<{N}xf32>) outs(%e : tensor<{N}xf32>) {{
  ^bb0(%v: f32, %o: f32):
    %m = arith.mulf %v, %a : f32
    %s = arith.addf %m, %a : f32
    linalg.yield %s : f32
  }} -> tensor<{N}xf32>
  return %y : tensor<{N}xf32>
}}
func.func @dyn(%x: tensor<?xf32>, %a: f32) -> tensor<?xf32> {{
  %c0 = arith.constant 0 : index
  %n = tensor.dim %x, %c0 : tensor<?xf32>
  %e = tensor.empty(%n) : tensor<?xf32>
  %y = {_GENERIC.format()} ins(%x : tensor<?xf32>) outs(%e : tensor<?xf32>) {{
  ^bb0(%v: f32, %o: f32):
    %s = arith.addf %v, %a : f32
    linalg.yield %s : f32
  }} -> tensor<?xf32>
  return %y : tensor<?xf32>
}}
func.func @sum_of_scaled(%x: tensor<{N}xf32>, %a: f32) -> tensor<f32> {{
  %e = tensor.empty() : tensor<{N}xf32>
  %t = {_GENERIC.format()} ins(%x : tensor<{N}xf32>) outs(%e : tensor<{N}xf32>) {{
  ^bb0(%v: f32, %o: f32):
    %m = arith.mulf %v, %a : f32
    linalg.yield %m : f32
  }} -> tensor<{N}xf32>
  %z = arith.constant 0.0 : f32
  %i = tensor.empty() : tensor<f32>
  %acc = linalg.fill ins(%z : f32) outs(%i : tensor<f32>) -> tensor<f32>
  %r = linalg.reduce ins(%t : tensor<{N}xf32>) outs(%acc : tensor<f32>) dimensions = [0]
    (%in: f32, %init: f32) {{
      %s = arith.addf %in, %init : f32
      linalg.yield %s : f32
    }}
  return %r : tensor<f32>
}}
func.func @fill(%c: f32) -> tensor<{N}xf32> {{
  %e = tensor.empty() : tensor<{N}xf32>
  %f = linalg.fill ins(%c : f32) outs(%e : tensor<{N}xf32>) -> tensor<{N}xf32>
  return %f : tensor<{N}xf32>
}}
func.func @zeros() -> tensor<{N}xf32> {{
  %c = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<{N}xf32>
  %f = linalg.fill ins(%c : f32) outs(%e : tensor<{N}xf32>) -> tensor<{N}xf32>
  return %f : tensor<{N}xf32>
}}
"""


@pytest.fixture(scope="module")
def prog():
    return tdf.compile(PROGRAM, filename="alloc.mlir")


@pytest.fixture
def cache_limit():
    """Restores the cache limit a test changes."""
    previous = set_allocator_cache_limit(1 << 30)
    set_allocator_cache_limit(previous)
    yield
    set_allocator_cache_limit(previous)


def _x(seed=0, n=N):
    return np.random.default_rng(seed).standard_normal(n).astype(np.float32)


def _run(code: str, env=None) -> subprocess.CompletedProcess:
    import os
    run = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                         text=True, timeout=300, env={**os.environ, **(env or {})})
    assert run.returncode == 0, f"exit {run.returncode}\n{run.stderr[-3000:]}"
    return run


@pytest.mark.parametrize("cached", [True, False])
def test_repeated_calls_match_numpy_and_jax(prog, cache_limit, cached):
    if not cached:
        set_allocator_cache_limit(0)
    jax = pytest.importorskip("jax")
    jf = jax.jit(lambda x, a: x * a + a)
    for k in range(6):
        x = _x(k)
        a = np.float32(0.5 + k)
        want = x * a + a
        got = prog.axpa(x, float(a))
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(got, np.asarray(jf(x, a)), rtol=1e-6, atol=1e-6)
        del got  # the next call may reuse its block (when cached)
    if not cached:
        assert allocator_stats()["cached_bytes"] == 0


def test_a_freed_result_is_reused(prog, cache_limit):
    x = _x(1)
    prog.axpa(x, 1.0)  # warm: one block in the cache after the result dies
    gc.collect()
    reset_allocator_stats()
    for k in range(5):
        r = prog.axpa(x, float(k))
        np.testing.assert_allclose(r, x * k + k, rtol=1e-6, atol=1e-6)
        del r
    stats = allocator_stats()
    assert stats["hits"] >= 5, stats
    assert stats["misses"] == 0, stats


def test_cache_off_reuses_nothing(prog, cache_limit):
    set_allocator_cache_limit(0)
    assert allocator_stats()["cached_bytes"] == 0
    reset_allocator_stats()
    x = _x(2)
    for k in range(3):
        r = prog.axpa(x, float(k))
        np.testing.assert_allclose(r, x * k + k, rtol=1e-6, atol=1e-6)
        del r
    stats = allocator_stats()
    assert stats["hits"] == 0 and stats["stores"] == 0, stats
    assert stats["cached_bytes"] == 0


def test_internal_temporaries_are_reused(prog, cache_limit):
    """A large temporary freed inside the call (not a result) is cached and
    reused by the next call."""
    x = _x(3)
    prog.sum_of_scaled(x, 1.0)
    reset_allocator_stats()
    for k in range(4):
        got = prog.sum_of_scaled(x, float(k + 1))
        np.testing.assert_allclose(got, (x * (k + 1)).sum(dtype=np.float64), rtol=1e-3)
    stats = allocator_stats()
    assert stats["hits"] >= 4 and stats["stores"] >= 4, stats


def test_live_results_are_never_aliased(prog, cache_limit):
    """Blocks come back only when their result is freed: results held at
    once are distinct buffers and keep their values while later calls
    reuse freed blocks."""
    x = _x(4)
    held = {}
    for k in range(8):
        held[k] = prog.axpa(x, float(k))
        transient = prog.axpa(x, 100.0 + k)  # freed at once: its block is reused
        np.testing.assert_allclose(transient, x * (100 + k) + (100 + k), rtol=1e-6, atol=1e-6)
        del transient
        if k % 3 == 2:  # free some of the held ones: their blocks come back
            del held[k - 1]
    pointers = [r.ctypes.data for r in held.values()]
    assert len(set(pointers)) == len(pointers)
    for k, r in held.items():
        np.testing.assert_allclose(r, x * k + k, rtol=1e-6, atol=1e-6)
        assert r.flags.owndata is False and r.base is not None


def test_reused_block_is_zeroed_or_written(prog, cache_limit):
    """A block that held 7s, reused for a zero fill (LLVM may turn the fill
    into calloc) comes back all zero."""
    for _ in range(3):
        sevens = prog.fill(7.0)
        assert (sevens == 7).all()
        del sevens
        z = prog.zeros()
        assert not z.any()
        del z


def test_dynamic_sizes_reuse_blocks_that_fit(prog, cache_limit):
    """A block serves requests up to a quarter smaller; every result has its
    own size and values."""
    big = _x(5, N)
    prog.dyn(big, 0.0)
    reset_allocator_stats()
    for n in (N, N - 1000, N - N // 8, N + 4096, 3 * N // 4 + 1):
        x = _x(n, n)
        r = prog.dyn(x, 2.0)
        assert r.shape == (n,)
        np.testing.assert_array_equal(r, x + np.float32(2.0))
        del r
    assert allocator_stats()["hits"] >= 3


def test_alignment(prog, cache_limit):
    x = _x(6)
    for k in range(4):
        r = prog.axpa(x, float(k))
        assert r.ctypes.data % 16 == 0
        del r


def test_limit_is_respected_and_evicts(prog, cache_limit):
    set_allocator_cache_limit(0)
    set_allocator_cache_limit(int(2.5 * 4 * N))  # room for two 4 MiB blocks
    x = _x(7)
    reset_allocator_stats()
    results = [prog.axpa(x, float(k)) for k in range(5)]
    for k, r in enumerate(results):
        np.testing.assert_allclose(r, x * k + k, rtol=1e-6, atol=1e-6)
    del results, r
    stats = allocator_stats()
    assert stats["cached_bytes"] <= stats["limit_bytes"] == int(2.5 * 4 * N)
    assert stats["cached_blocks"] == 2
    assert stats["peak_cached_bytes"] <= stats["limit_bytes"]
    assert stats["evictions"] + stats["uncached_frees"] >= 3
    # Lowering the limit evicts at once.
    set_allocator_cache_limit(4 * N + (64 << 10))
    assert allocator_stats()["cached_blocks"] == 1
    assert release_cached_memory() > 0
    assert allocator_stats()["cached_bytes"] == 0


def test_small_buffers_are_not_cached(cache_limit):
    small = tdf.compile("""\
func.func @f(%x: tensor<1024xf32>) -> tensor<1024xf32> {
  %e = tensor.empty() : tensor<1024xf32>
  %y = linalg.map { arith.addf } ins(%x, %x : tensor<1024xf32>, tensor<1024xf32>) outs(%e : tensor<1024xf32>)
  return %y : tensor<1024xf32>
}
""")
    x = _x(8, 1024)
    reset_allocator_stats()
    for _ in range(4):
        np.testing.assert_array_equal(small.f(x), x + x)
    stats = allocator_stats()
    assert stats["hits"] == stats["misses"] == stats["stores"] == 0, stats


def test_threads_share_the_cache(prog, cache_limit):
    errors = []
    reset_allocator_stats()

    def worker(tid):
        try:
            x = _x(10 + tid)
            held = []
            for k in range(30):
                r = prog.axpa(x, float(tid * 100 + k))
                held.append((k, r))
                if len(held) > 3:
                    kk, old = held.pop(0)
                    np.testing.assert_allclose(old, x * (tid * 100 + kk) + (tid * 100 + kk),
                                               rtol=1e-6, atol=1e-6)
            for kk, old in held:
                np.testing.assert_allclose(old, x * (tid * 100 + kk) + (tid * 100 + kk),
                                           rtol=1e-6, atol=1e-6)
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert allocator_stats()["hits"] > 0


def test_threads_stress_in_a_subprocess():
    """Many threads allocating and freeing large results and temporaries
    with a limit that forces evictions (a corruption fails here, not pytest)."""
    out = _run(f"""
        import threading, numpy as np, tdf
        from tdf.allocator import allocator_stats, set_allocator_cache_limit
        prog = tdf.compile({PROGRAM!r})
        set_allocator_cache_limit(3 * 4 * {N})
        errors = []
        def worker(tid):
            try:
                rng = np.random.default_rng(tid)
                x = rng.standard_normal({N}).astype(np.float32)
                held = []
                for k in range(60):
                    a = float(tid + k)
                    held.append((a, prog.axpa(x, a)))
                    s = prog.sum_of_scaled(x, 1.0)
                    n = int(rng.integers({N} // 2, {N}))
                    d = prog.dyn(x[:n], a)
                    assert d.shape == (n,) and (d == x[:n] + np.float32(a)).all()
                    if len(held) > int(rng.integers(1, 5)):
                        a0, r0 = held.pop(0)
                        assert np.allclose(r0, x * a0 + a0, rtol=1e-6, atol=1e-6)
                for a0, r0 in held:
                    assert np.allclose(r0, x * a0 + a0, rtol=1e-6, atol=1e-6)
            except Exception as e:
                errors.append(repr(e))
        ts = [threading.Thread(target=worker, args=(t,)) for t in range(6)]
        for t in ts: t.start()
        for t in ts: t.join()
        assert not errors, errors
        s = allocator_stats()
        assert s["cached_bytes"] <= s["limit_bytes"], s
        assert s["hits"] > 0 and s["evictions"] + s["uncached_frees"] > 0, s
        print("ok")
    """)
    assert out.stdout.strip() == "ok"


def test_allocation_failure_is_still_memory_error(prog, cache_limit):
    huge = tdf.compile(DYNAMIC, filename="huge.mlir")
    x = _x(9)
    r = prog.axpa(x, 1.0)
    del r  # something in the cache
    for n in (2 * 10**12, 2**59, 2**60 + 5):  # bytes up to 2**62 + 20
        with pytest.raises(MemoryError, match=r"@scratch: memref.alloc at huge.mlir:2:\d+: "
                                              r"cannot allocate \d+ bytes"):
            huge.scratch(n)
    assert huge.scratch(N).tolist() == [2.5]  # a large scratch block, from the cache or not
    np.testing.assert_allclose(prog.axpa(x, 3.0), x * 3 + 3, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("count_allocations", [False, True])
def test_results_outlive_the_program(count_allocations):
    """A result array stays valid (and is freed safely) after the program
    and every other reference to the compiled code is gone; the cache is
    emptied when the last compiled function goes."""
    out = _run(f"""
        import gc, numpy as np, tdf
        from tdf.allocator import allocator_stats
        p = tdf.compile({PROGRAM!r}, count_allocations={count_allocations})
        x = np.arange({N}, dtype=np.float32)
        keep = [p.axpa(x, float(k)) for k in range(3)]
        for k in range(3):
            p.axpa(x, 9.0)  # freed at once: cached (when not counting)
        assert allocator_stats()["users"] > 0
        del p; gc.collect()
        s = allocator_stats()
        # A counting build's results keep its entry function (their free
        # function) alive; otherwise no compiled function is left.
        assert s["users"] == ({count_allocations} and 1 or 0), s
        assert s["cached_bytes"] == 0, s
        junk = [np.full(1 << 18, 1.5, np.float32) for _ in range(40)]
        for k, r in enumerate(keep):
            assert (r == x * k + k).all()
        del keep, r; gc.collect()
        s = allocator_stats()
        assert s["users"] == 0 and s["cached_bytes"] == 0, s
        print("ok")
    """)
    assert out.stdout.strip() == "ok"


def test_env_var_sets_the_limit_and_zero_turns_caching_off():
    code = f"""
        import numpy as np, tdf
        from tdf.allocator import allocator_stats
        p = tdf.compile({PROGRAM!r})
        x = np.ones({N}, np.float32)
        for k in range(4):
            assert (p.axpa(x, float(k)) == k + k).all()
        s = allocator_stats()
        print(s["limit_bytes"], s["hits"], s["cached_bytes"])
    """
    limit, hits, cached = map(int, _run(code, {"TDF_ALLOC_CACHE_BYTES": "0"}).stdout.split())
    assert (limit, hits, cached) == (0, 0, 0)
    limit, hits, cached = map(int, _run(code, {"TDF_ALLOC_CACHE_BYTES": "64M"}).stdout.split())
    assert limit == 64 << 20 and hits >= 3 and 0 < cached <= limit
    bad = _run(code, {"TDF_ALLOC_CACHE_BYTES": "lots"})
    assert "ignoring TDF_ALLOC_CACHE_BYTES=lots" in bad.stderr
    assert int(bad.stdout.split()[0]) > 0


def test_limit_argument_checks():
    with pytest.raises(ValueError, match="must be >= 0"):
        set_allocator_cache_limit(-1)
    with pytest.raises(TypeError, match="must be an int"):
        set_allocator_cache_limit(1.5)


def test_fork_child_can_allocate():
    """The cache's lock is held across fork() (pthread_atfork): a child forked
    while other threads allocate can still allocate and reuse."""
    out = _run(f"""
        import os, threading, numpy as np, tdf
        from tdf.allocator import allocator_stats
        p = tdf.compile({PROGRAM!r})
        x = np.ones({N}, np.float32)
        stop = []
        def churn():
            while not stop:
                p.axpa(x, 1.0)
        ts = [threading.Thread(target=churn) for _ in range(2)]
        for t in ts: t.start()
        for _ in range(5):
            pid = os.fork()
            if pid == 0:
                for k in range(3):
                    assert (p.axpa(x, float(k)) == 2 * k).all()
                os._exit(0 if allocator_stats()["hits"] >= 1 else 3)
            _, status = os.waitpid(pid, 0)
            assert status == 0, status
        stop.append(1)
        for t in ts: t.join()
        print("ok")
    """)
    assert out.stdout.strip() == "ok"


def test_ew_chain_benchmark_smoke(tmp_path):
    """benchmarks/ew_chain.py at a toy size, one round with the cache: every
    variant checked against numpy, the table written."""
    import os
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    run = subprocess.run([sys.executable, os.path.join(root, "benchmarks", "ew_chain.py"),
                          "--sizes", "300000", "--rounds", "1", "--reps", "1",
                          "--target-s", "0.001", "--modes", "cache", "--out", str(tmp_path)],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    table = (tmp_path / "ew_chain.md").read_text()
    assert "| 300,000 | cache |" in table
    import json
    data = json.loads((tmp_path / "ew_chain.json").read_text())
    cache = data["rounds"]["cache"][0]["300000"]["allocator"]
    assert cache["hits"] >= 5 and cache["misses"] == 0  # 1.2 MB results: reused
