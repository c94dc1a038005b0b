"""The BLAS behind compiled contractions, and the thread count.

``tdf.compile`` sends contractions (matmul, batch_matmul, matvec, vecmat,
dot and contraction generics; f32/f64, bf16/f16 inputs of f32) to OpenBLAS
through the runtime's ``tdf_rt_contract`` (``python/src/Blas.cpp``) when
:func:`available` is true. The library is OpenBLAS as packaged by
``scipy-openblas32`` (pinned in ``constraints.txt``; its symbols carry a
``scipy_`` prefix), loaded once per process on first use.

GEMMs of at least two rows and columns with f32 operands, or bf16 operands
and an f32 result, go to oneDNN (``dnnl_sgemm``, ``dnnl_gemm_bf16bf16f32``:
AVX-512, AVX512-BF16 and AMX kernels; the library XLA's CPU backend calls)
when the ``onednn-cpu-gomp`` package is installed (pinned in
``constraints.txt``; :func:`onednn_path` says whether it is loaded). On this
project's machine it runs f32 GEMMs 1.2-2x and bf16 GEMMs 3-5x as fast as
OpenBLAS (bf16 through f32) (``benchmarks/gemm.py``). Mat-vecs, f64 and
strided-batch products stay with OpenBLAS, and without oneDNN everything
does (bf16 operands converted to f32). Loading oneDNN starts a thread that
makes its f32 GEMM kernels (about 25 ms, once per process) before the first
real GEMM needs them (``docs/Codegen.md``).

Threads: one knob, :func:`set_num_threads` or the environment variable
``TDF_NUM_THREADS`` (read when the library is loaded; default: the cores),
sets the BLAS's thread count for every program; ``tdf.compile(...,
num_threads=n)`` sets it for one program's contractions. oneDNN's calls
run with the same count.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.util
import os
import sysconfig
import threading

from . import _tdf

__all__ = ["available", "library_path", "onednn_path",
           "onednn_error", "set_num_threads", "num_threads", "default_threads",
           "env_threads", "NUM_THREADS_ENV"]

NUM_THREADS_ENV = "TDF_NUM_THREADS"
#: OpenBLAS's worker threads spin for 2**28 cycles (~0.1 s) after each
#: multi-threaded call before they sleep: a core taken from everything that
#: runs next (tdf's own parallel loops, the next single-threaded op, another
#: library's threads); in an interleaved run against jax.jit a 2-thread
#: mat-vec took 30x its time alone. tdf loads the library with 2**10 cycles
#: unless the user set the variable.
_THREAD_TIMEOUT_ENV = ("OPENBLAS_THREAD_TIMEOUT", "10")
_PREFIX = "scipy_"
_LOCK = threading.Lock()
_STATE: dict = {"tried": False, "error": None, "onednn_error": None}
#: oneDNN's shared library, installed by the ``onednn-cpu-gomp`` wheel into
#: the environment's ``lib/`` (a data file of the wheel, not a package).
_DNNL_LIBRARY = "libdnnl.so.3"


def _find() -> str | None:
    # The package's lib/ folder (scipy_openblas32.get_lib_dir()), found
    # without importing the package: its import takes ~80 ms
    # (importlib.metadata), paid by every process's first tdf.compile.
    spec = importlib.util.find_spec("scipy_openblas32")
    for root in (spec.submodule_search_locations or []) if spec is not None else []:
        path = os.path.join(root, "lib", "libscipy_openblas.so")
        if os.path.isfile(path):
            return path
    return None


def _find_dnnl() -> str | None:
    roots = {sysconfig.get_path("data"), sysconfig.get_path("data", f"{os.name}_user")}
    for root in sorted(r for r in roots if r):
        path = os.path.join(root, "lib", _DNNL_LIBRARY)
        if os.path.isfile(path):
            return path
    return None


#: OpenMP (libgomp, oneDNN's runtime) spins its idle workers ~3 ms after
#: each parallel region by default; on a machine whose cores are busy with
#: anything else (another process, OpenBLAS's workers) a spinning worker
#: holds a core the region's other threads need, and a 1024^3 bf16 GEMM
#: measured 28 ms against 2.7 ms with passive waiting. Read by libgomp's
#: constructor: tdf sets it while loading oneDNN unless the user set it
#: (or another library loaded libgomp first).
_OMP_WAIT_ENV = ("OMP_WAIT_POLICY", "PASSIVE")


def _load_onednn() -> None:
    path = _find_dnnl()
    if path is None:
        _STATE["onednn_error"] = "onednn-cpu-gomp is not installed"
        return
    try:
        with _env_default(*_OMP_WAIT_ENV):
            _tdf.onednn_load(path)
    except RuntimeError as err:
        _STATE["onednn_error"] = str(err)
        return
    # The thread that makes oneDNN's GEMM kernels (started by the load) must
    # end before the interpreter finalizes: the kernel tables are static
    # objects constructed on that thread, whose destructors exit() runs
    # before any C-level handler registered earlier.
    atexit.register(_tdf.onednn_warmed_up)


@contextlib.contextmanager
def _env_default(name: str, value: str):
    """Environment variable ``name`` set to ``value`` for the block (a
    library's constructor reads it as it loads), unless the user set it."""
    user_set = name in os.environ
    if not user_set:
        os.environ[name] = value
    try:
        yield
    finally:
        if not user_set:
            del os.environ[name]


def env_threads() -> int | None:
    """``TDF_NUM_THREADS`` as a positive int, None when unset or empty;
    ``ValueError`` naming the variable when it is not a positive integer."""
    text = os.environ.get(NUM_THREADS_ENV, "").strip()
    if not text:
        return None
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"{NUM_THREADS_ENV} must be a positive integer, got {text!r}")
    return value


def _load() -> bool:
    with _LOCK:
        if _STATE["tried"]:
            return _STATE["error"] is None
        _STATE["tried"] = True
        path = _find()
        if path is None:
            _STATE["error"] = "scipy-openblas32 is not installed"
            return False
        try:
            with _env_default(*_THREAD_TIMEOUT_ENV):
                _tdf.blas_load(path, _PREFIX)
        except RuntimeError as err:
            _STATE["error"] = str(err)
            return False
        threads = env_threads()
        if threads is not None:
            _tdf.blas_set_threads(threads)
        _load_onednn()
        return True


def default_threads() -> int:
    """The thread count programs use by default: ``TDF_NUM_THREADS``, else
    the cores this process may run on."""
    threads = env_threads()
    if threads is not None:
        return threads
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def available() -> bool:
    """True when the BLAS is loaded (loading it on the first call)."""
    return _load()


def library_path() -> str:
    """The loaded library's path ('' when there is none)."""
    _load()
    return _tdf.blas_loaded()


def onednn_path() -> str:
    """The path of the oneDNN library GEMMs call ('' when there is none:
    they then run through OpenBLAS)."""
    _load()
    return _tdf.onednn_loaded()


def onednn_error() -> str | None:
    """Why oneDNN is not loaded (None when it is)."""
    _load()
    return _STATE["onednn_error"]


def set_num_threads(threads: int) -> None:
    """Sets the BLAS's thread count for every program (``TDF_NUM_THREADS``
    sets it at load)."""
    if not isinstance(threads, int) or isinstance(threads, bool) or threads < 1:
        raise ValueError(f"threads must be a positive integer, got {threads!r}")
    if _load():
        _tdf.blas_set_threads(threads)


def num_threads() -> int:
    """The BLAS's thread count (0 when no BLAS is loaded)."""
    return _tdf.blas_threads() if _load() else 0
