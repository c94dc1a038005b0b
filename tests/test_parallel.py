"""Large loop nests on several threads (tdf-parallelize, tdf-outline-parallel,
tdf-launch-parallel: tdf's thread pool)
against the same program on one thread, jax.jit and numpy: element-wise
chains, row reductions, a donated buffer updated in place in chunks, a loop
nest inside an scf.for, and flush-to-zero on the worker threads (a subnormal
result is 0 in every chunk, as in jax.jit; kept everywhere with
flush_denormals=False). Calls from several Python threads at once, more
chunks than cores, programs freed right after their calls, a forked child."""

from __future__ import annotations

import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import tdf
import tdf.jax

N = 1 << 18  # 262144: tdf-parallelize's threshold (256K iterations)

PROGRAMS = {
    "log_chain": (lambda x: jnp.log(jnp.abs(x) + 1.0) * 2.0 - x, (4, N // 4)),
    "row_softmax": (lambda x: jax.nn.softmax(x, axis=-1), (256, 1024)),
    "row_norm": (lambda x: x * lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6),
                 (512, 512)),
    "sum_all": (lambda x: jnp.sum(jnp.tanh(x)), (N,)),
    "scan": (lambda x: lax.fori_loop(0, 3, lambda i, c: jnp.sin(c) + 0.5 * c, x), (N,)),
    # the body reads its position along the cut loop (linalg.index 0)
    "iota": (lambda x: x + lax.broadcasted_iota(jnp.float32, x.shape, 0) * 1024.0
             + lax.broadcasted_iota(jnp.float32, x.shape, 1), (512, 1024)),
}


def _parallel(prog) -> bool:
    """Whether the program runs tasks on tdf's thread pool."""
    return "llvm.call @tdf_rt_parallel_for" in prog.llvm_ir


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_threads_match_one_thread_and_jax(name):
    fn, shape = PROGRAMS[name]
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    x0 = x.copy()
    lowered = tdf.jax.jit(fn).lower(x)
    two, one = lowered.compile(num_threads=2), lowered.compile(num_threads=1)
    assert _parallel(two) and not _parallel(one)
    got, base = np.asarray(two.main(x)), np.asarray(one.main(x))
    np.testing.assert_array_equal(got, base)  # chunks compute what one loop computes
    np.testing.assert_allclose(got, np.asarray(jax.jit(fn)(x)), rtol=2e-5, atol=2e-5)
    assert np.array_equal(x, x0)


def test_donated_update_in_chunks():
    """A donated buffer updated in place, each chunk writing its rows."""
    fn = lambda c, d: c * 0.5 + d  # noqa: E731
    c = np.random.default_rng(4).standard_normal((512, 512)).astype(np.float32)
    d = np.random.default_rng(5).standard_normal((512, 512)).astype(np.float32)
    want = np.asarray(jax.jit(fn)(c, d))
    step = tdf.jax.jit(fn, donate_argnums=(0,))
    prog = step.lower(c, d).compile()
    assert _parallel(prog)
    out = prog.main(c, d)
    assert out is c
    np.testing.assert_allclose(out, want, rtol=1e-6)


def test_workers_flush_subnormals_like_the_caller():
    x = np.full(N, 1e-20, np.float32)
    fn = lambda a: a * a  # noqa: E731
    lowered = tdf.jax.jit(fn).lower(x)
    flushed = lowered.compile(num_threads=2)
    assert _parallel(flushed)
    assert np.all(np.asarray(flushed.main(x)) == 0)
    assert np.array_equal(np.asarray(flushed.main(x)), np.asarray(jax.jit(fn)(x)))
    kept = lowered.compile(num_threads=2, flush_denormals=False)
    assert np.all(np.asarray(kept.main(x)) == np.float32(1e-20) * np.float32(1e-20))


def test_calls_from_several_threads():
    fn, shape = PROGRAMS["row_softmax"]
    xs = [np.random.default_rng(i).standard_normal(shape).astype(np.float32) for i in range(6)]
    prog = tdf.jax.jit(fn).lower(xs[0]).compile(num_threads=2)
    want = [np.asarray(jax.jit(fn)(x)) for x in xs]
    got = [None] * len(xs)

    def work(i):
        for _ in range(4):
            got[i] = prog.main(xs[i])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(xs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-6)


def test_small_programs_stay_on_one_thread():
    x = np.ones((64, 64), np.float32)
    prog = tdf.jax.jit(lambda a: a + 1).lower(x).compile(num_threads=2)
    assert not _parallel(prog)


@pytest.mark.parametrize("n, cut", [(N, False), (4 * N, True)])
def test_parallel_work_decides_per_function(n, cut):
    """A whole-array sum of squares, its one loop worth too little for two
    chunks at 256K floats (tdf-parallelize's min-chunk-work), stays on one
    thread; at 1M it is cut. Either way it computes what jax.jit does."""
    fn = lambda a: jnp.sum(a * a)  # noqa: E731
    x = np.random.default_rng(11).standard_normal(n).astype(np.float32)
    prog = tdf.jax.jit(fn).lower(x).compile(num_threads=2)
    assert _parallel(prog) == cut
    np.testing.assert_allclose(np.asarray(prog.main(x)), np.asarray(jax.jit(fn)(x)), rtol=1e-5)


def test_forked_child_runs_parallel_programs():
    """A child forked after the parent's tasks ran (the pool's workers do not
    exist there) runs the chunks inline instead of waiting forever."""
    import subprocess
    import sys
    script = """
import os, numpy as np, tdf.jax, jax.numpy as jnp
x = np.ones((512, 512), np.float32)
prog = tdf.jax.jit(lambda a: jnp.exp(a) + 1).lower(x).compile(num_threads=2)
want = prog.main(x)
pid = os.fork()
if pid == 0:
    os._exit(0 if np.array_equal(prog.main(x), want) else 3)
_, status = os.waitpid(pid, 0)
print("ok" if status == 0 else f"child status {status}")
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120)
    assert out.stdout.strip() == "ok", out.stderr[-2000:]


def test_programs_freed_right_after_their_calls():
    """A program dropped as soon as its call returns: no worker is still in
    its code (the pool counts a task done after it returned). Compiling,
    calling and dropping parallel programs in a loop, with another thread
    calling a parallel program all along."""
    x = np.random.default_rng(7).standard_normal((512, 512)).astype(np.float32)
    want = np.exp(x) + 1
    lowered = tdf.jax.jit(lambda a: jnp.exp(a) + 1).lower(x)
    busy = lowered.compile(num_threads=2)
    stop = threading.Event()
    failures = []

    def keep_calling():
        while not stop.is_set():
            if not np.allclose(busy.main(x), want, rtol=1e-5):
                failures.append("busy")

    other = threading.Thread(target=keep_calling)
    other.start()
    try:
        for _ in range(12):
            prog = lowered.compile(num_threads=2)
            assert _parallel(prog)
            np.testing.assert_allclose(prog.main(x), want, rtol=1e-5)
            del prog
    finally:
        stop.set()
        other.join()
    assert not failures


def test_back_to_back_calls_return_with_their_tasks_done():
    """Short parallel calls back to back from three threads: a caller that
    spins for the workers' last tasks returns (its job leaving its stack)
    while a worker may still hold the pool's lock; every result is the
    whole one, and the job of one call never takes another's tasks."""
    fn = lambda a: jnp.sum(a * a)  # noqa: E731
    xs = [np.random.default_rng(20 + i).standard_normal(4 * N).astype(np.float32)
          for i in range(3)]
    prog = tdf.jax.jit(fn).lower(xs[0]).compile(num_threads=2)
    assert _parallel(prog)
    want = [np.float32(np.asarray(jax.jit(fn)(x))) for x in xs]
    failures = []

    def work(i):
        for _ in range(300):
            got = np.float32(np.asarray(prog.main(xs[i])))
            if not np.isclose(got, want[i], rtol=1e-5):
                failures.append((i, got, want[i]))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(xs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures[:3]


@pytest.mark.parametrize("threads", [3, 8])
def test_more_chunks_than_cores(threads):
    """Chunks beyond the cores queue on the pool; every one runs once."""
    fn, shape = PROGRAMS["iota"]
    x = np.random.default_rng(threads).standard_normal(shape).astype(np.float32)
    lowered = tdf.jax.jit(fn).lower(x)
    many, one = lowered.compile(num_threads=threads), lowered.compile(num_threads=1)
    assert _parallel(many)
    np.testing.assert_array_equal(np.asarray(many.main(x)), np.asarray(one.main(x)))
