"""Threads: one compiled function called from several
threads at once, and tdf.compile in several threads at once. Each stress run
is bounded (4 threads, a few hundred calls) and runs in a subprocess, so
that a regression (double free, corruption) fails the test instead of
killing pytest."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading

import numpy as np

import tdf

KV = """\
func.func @step(%cache: tensor<64x32xf32> {tdf.donate}, %row: tensor<1x32xf32>, %pos: index) -> tensor<64x32xf32> {
  %new = tensor.insert_slice %row into %cache[%pos, 0] [1, 32] [1, 1] : tensor<1x32xf32> into tensor<64x32xf32>
  return %new : tensor<64x32xf32>
}
func.func @scaled(%x: tensor<256xf32>, %s: f32) -> (tensor<256xf32>, tensor<256xf32>) {
  %e = tensor.empty() : tensor<256xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>],
                       iterator_types = ["parallel"]} ins(%x : tensor<256xf32>) outs(%e : tensor<256xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.mulf %a, %s : f32
    linalg.yield %m : f32
  } -> tensor<256xf32>
  return %y, %x : tensor<256xf32>, tensor<256xf32>
}
"""


def _run(code: str) -> str:
    run = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, f"exit {run.returncode}\n{run.stderr[-3000:]}"
    return run.stdout


def test_four_threads_call_one_function():
    out = _run(f"""
        import threading, numpy as np, tdf
        prog = tdf.compile({KV!r})
        errors = []
        def worker(tid):
            try:
                rng = np.random.default_rng(tid)
                cache = np.zeros((64, 32), np.float32)
                reference = cache.copy()
                x = np.full(256, tid + 1, np.float32)
                for k in range(300):
                    pos = int(rng.integers(0, 64))
                    row = np.full((1, 32), tid * 1000 + k, np.float32)
                    reference[pos] = row[0]
                    assert prog.step(cache, row, pos) is cache
                    y, same = prog.scaled(x, float(k))
                    assert (y == (tid + 1) * k).all() and (same == x).all()
                    if k % 25 == 0:
                        try:
                            prog.step(cache, row, 64 + tid)
                            raise AssertionError("no IndexError")
                        except IndexError as e:
                            assert f"offset {{64 + tid}}" in str(e)
                assert (cache == reference).all()
            except BaseException as e:
                errors.append(repr(e))
        threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
        for t in threads: t.start()
        for t in threads: t.join()
        print("errors", errors)
    """)
    assert out.strip() == "errors []"


def test_four_threads_compile():
    out = _run(f"""
        import threading, numpy as np, tdf
        results, errors = {{}}, []
        def worker(tid):
            try:
                for k in range(3):
                    name = f"thread{{tid}}_{{k}}.mlir"
                    prog = tdf.compile({KV!r}, filename=name)
                    locations = {{d.location.split(":")[0] for d in prog.report().decisions}}
                    assert locations == {{name}}, (name, locations)
                    cache = np.zeros((64, 32), np.float32)
                    prog.step(cache, np.ones((1, 32), np.float32), tid)
                    assert cache[tid].sum() == 32
                    try:
                        prog.step(cache, np.ones((1, 32), np.float32), 99)
                    except IndexError as e:
                        assert name in str(e), str(e)
                results[tid] = True
            except BaseException as e:
                errors.append(repr(e))
        threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
        for t in threads: t.start()
        for t in threads: t.join()
        print("errors", errors, sorted(results))
    """)
    assert out.strip() == "errors [] [0, 1, 2, 3]"


def test_shared_state_variant_is_equivalent():
    """The locked shared-descriptor variant (kept to measure per-call state
    against a lock) computes the same thing, also from threads."""
    from tdf.runtime import EntryFunction
    prog = tdf.compile(KV)
    fn = prog.step
    locked = EntryFunction(fn.name, fn.params, fn.results, fn.returned_args, fn.address,
                           keepalive=prog, shared_state=True)
    caches = [np.zeros((64, 32), np.float32) for _ in range(4)]

    def worker(tid):
        for k in range(100):
            locked(caches[tid], np.full((1, 32), tid + 1, np.float32), (k * 7 + tid) % 64)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for tid, cache in enumerate(caches):
        assert set(np.unique(cache)) <= {0.0, tid + 1.0}
        assert (cache != 0).any()
