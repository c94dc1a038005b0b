"""Benchmark: the non-LLVM stages of ``tdf.jax.jit``'s compile of long
programs (issue 21, "each analysis once").

``Lowered.compile`` of ``gpt2_prefill`` and ``llama_decode``
(``benchmarks/models.py``) and of a 2,000-op element-wise chain, plain and
``strict=True``, with the compilation cache off and the LLVM JIT stubbed
out (the stages before it are what this measures: the copy or text handed
to ``tdf.compile``, parse, ``inplace``, the report's One-Shot analysis,
``strict``, ``bufferize``, the LLVM-dialect lowering). Prints one JSON line
per model: per compile, the wall time and ``tdf.compile``'s stage times.

    .venv/bin/python benchmarks/compile_stages.py gpt2_prefill [REPS]

Compare two trees by running it alternately in each (one process per model
and tree, interleaved) and taking medians.
"""

from __future__ import annotations

import json
import os
import sys
import time

os.environ["TDF_CACHE_DIR"] = ""  # the cache off: every compile compiles

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "examples"))

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import tdf.compiler  # noqa: E402
import tdf.jax  # noqa: E402
import tdf.timing  # noqa: E402


def _ew_chain(x):
    for i in range(2000):
        x = jnp.sin(x) if i % 2 else x * 1.0001 + 0.5
    return x


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    model = argv[0]
    reps = int(argv[1]) if len(argv) > 1 else 3
    if model == "ew2000":
        fn, args, donate = _ew_chain, (np.ones((64,), np.float32),), ()
    else:
        import models
        fn, args, donate, _, _ = models.workloads(False)[model]
    timers = []
    init = tdf.timing.CompileTimer.__init__

    def recording_init(self, *a, **k):
        init(self, *a, **k)
        timers.append(self)

    tdf.timing.CompileTimer.__init__ = recording_init
    # The JIT stubbed out: entry addresses that are never called, no
    # objects, nothing to optimize in the background (tdf.compiler._jit's
    # (code, counter, addresses, objects, prepared)).
    tdf.compiler._jit = lambda module, entries, *a, **k: (
        None, None, {n: 1 for n in entries}, [], None)
    low = tdf.jax.jit(fn, donate_argnums=donate).lower(*args)
    runs = []
    for rep in range(reps + 1):  # the first round warms up
        for strict in (False, True):
            low._compiled.clear()
            start = time.perf_counter()
            low.compile(strict=strict, timing=True)
            wall = time.perf_counter() - start
            if rep:
                runs.append({"strict": strict, "wall": wall, "stages": dict(timers[-1].stages)})
    print(json.dumps({"model": model, "runs": runs}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
