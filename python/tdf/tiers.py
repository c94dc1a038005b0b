"""Tiered compilation: ``tdf.compile(..., tiered=True)`` (or ``TDF_TIERED=1``).

The program first runs code that LLVM compiled at ``-O0`` (code generation
only: a few tens of milliseconds where the optimizing pipeline takes
seconds on a large program), while a background thread compiles the same
prepared module (:func:`tdf.objects.prepare`, no MLIR context involved) at
the requested ``opt_level``. Once that code is linked, every entry function
switches to it (``NativeEntry.set_address``): calls already running finish
on the old code, which stays loaded as long as the program. Both codes give
the same bits on float32/float64 programs (``tdf-fuse-multiply-add`` fixes
the rounding LLVM's optimisation level would change; see docs/Runtime.md
for the float16/bfloat16 case left to LLVM). The compilation
cache stores the optimized objects only, so a later process loads those.

``Program.optimized`` says whether the switch happened and
``Program.wait_optimized(timeout)`` waits for it (time a program only after
it). The background compile runs without the GIL on the program's threads
(``num_threads``); the interpreter waits for running ones at exit. In a
process forked while one runs, the child keeps the ``-O0`` code.
"""

from __future__ import annotations

import atexit
import os
import threading
import weakref

from . import objects as _objects

__all__ = ["ENV", "enabled", "start"]

#: Environment variable giving the default of ``tiered``.
ENV = "TDF_TIERED"

_lock = threading.Lock()
_running: set[threading.Thread] = set()
_programs: weakref.WeakSet = weakref.WeakSet()


def enabled(tiered: bool | None) -> bool:
    """The value of the ``tiered`` option (``None``: ``TDF_TIERED`` set and
    not ``0``)."""
    if tiered is None:
        return os.environ.get(ENV, "") not in ("", "0")
    if not isinstance(tiered, bool):
        raise TypeError(f"tiered must be a bool or None, got {tiered!r}")
    return tiered


def start(program, prepared, opt_level: int, entries: list, jit_libs: list, counter, cached,
          sites: list) -> None:
    """Compiles ``prepared`` at ``opt_level`` on a background thread, then
    points ``program``'s entry functions (``entries``, in order) at the new
    code and stores it in the cache entry ``cached`` (when not ``None``)."""
    program._optimized.clear()
    _programs.add(program)

    def work():
        try:
            data, _ = _objects.compile_prepared(prepared, opt_level)
            code, addresses = _objects.link(data, entries, jit_libs, counter)
            program._codes.append(code)
            for name, address in zip(entries, addresses):
                program.functions[name].set_address(address)
            if cached is not None:
                cached.store(program, data, sites)
                program.report().cache = cached.status
        except Exception as err:  # the -O0 code stays: it is correct, only slower
            program._tier_error = f"{type(err).__name__}: {err}"
        finally:
            program._optimized.set()
            with _lock:
                _running.discard(threading.current_thread())

    thread = threading.Thread(target=work, name="tdf-optimize", daemon=True)
    with _lock:
        _running.add(thread)
    thread.start()


def _join_running() -> None:
    with _lock:
        running = list(_running)
    for thread in running:
        thread.join()


def _after_fork_in_child() -> None:
    """The background threads did not survive the fork: their programs keep
    their ``-O0`` code."""
    global _lock
    _lock = threading.Lock()  # another thread may have held it at the fork
    _running.clear()
    for program in list(_programs):
        if not program._optimized.is_set():
            program._tier_error = "the process forked while the program was optimized"
            program._optimized.set()


atexit.register(_join_running)
os.register_at_fork(after_in_child=_after_fork_in_child)
