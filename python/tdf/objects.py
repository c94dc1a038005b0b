"""Object code for the CPU: an LLVM-dialect module compiled into host
objects (``tdf._tdf.prepare_module`` and ``compile_prepared``,
``python/src/ObjectCompiler.cpp``) and the objects linked into the process
with the runtime's symbols
(``tdf._tdf.load_object``, ``python/src/ObjectLoader.cpp``).

A fresh compile and a compilation-cache hit link their objects the same way;
the cache stores the bytes :func:`compile_prepared` returned. A library with
MLIR's execution-engine init hook (``__mlir_execution_engine_init``) gives
its symbols through the hook, as it would to an ``ExecutionEngine``.

``compile_module`` cuts functions of many loops into parts of about
:data:`PART_LOOPS` loops (``noinline`` private functions, LLVM's
CodeExtractor) before LLVM's pipeline: several of its loop passes cost time
in proportion to the loops times the size of the function they are in
(IndVarSimplify's guard search climbs every earlier loop; the loop
vectorizer of an assertions build, like the pinned wheel's, verifies the
whole function after each loop it vectorizes).
"""

from __future__ import annotations

import contextlib
import ctypes

from . import _tdf
from .runtime import register_runtime_symbols
from .timing import CompileTimer

__all__ = ["PART_LOOPS", "prepare", "compile_prepared", "compile_module", "link"]

_nothing = contextlib.nullcontext

#: Loops per part when a function is cut for LLVM (0: never cut).
PART_LOOPS = 16


class _Symbols:
    """Stands in for an ExecutionEngine to collect what the compiler's
    registration functions define in one (``raw_register_runtime``)."""

    def __init__(self):
        self.symbols: dict[str, int] = {}

    def raw_register_runtime(self, name: str, address) -> None:
        self.symbols[name] = ctypes.cast(address, ctypes.c_void_p).value or 0


def prepare(module, threads: int = 1, timer: CompileTimer | None = None,
            entries: list[str] | None = None):
    """Step 1: the LLVM-dialect ``module`` translated for the host, parts
    cut, its functions spread over up to ``threads`` partitions of about
    equal expected cost (loop instructions weigh 16 times more; a module
    under 2,000 of that measure stays one); a ``tdf._tdf.PreparedModule``
    that no MLIR context backs, so :func:`compile_prepared` may run on any
    thread. With ``entries``, only their C interfaces (``_mlir_ciface_<f>``,
    what :func:`link` looks up) stay visible: every other function becomes
    internal to the program. ``RuntimeError`` when it cannot be translated."""
    exported = None if entries is None else [f"_mlir_ciface_{name}" for name in entries]
    with timer.stage("LLVM translation") if timer is not None else _nothing():
        return _tdf.prepare_module(module.operation, PART_LOOPS, max(1, threads), exported)


def compile_prepared(prepared, opt_level: int,
                     timer: CompileTimer | None = None) -> tuple[list[bytes], dict]:
    """Step 2: ``(objects, stats)``, one host object per partition of
    ``prepared`` at ``opt_level`` (each on a thread of its own, without the
    GIL), and ``stats`` (seconds of ``translate``, ``optimize`` and
    ``codegen``; the ``parts`` cut out of large functions; the
    ``partitions``). ``timer`` receives the optimisation and
    code-generation times as stages. ``RuntimeError`` when LLVM cannot
    compile it."""
    objects, stats = _tdf.compile_prepared(prepared, opt_level)
    if timer is not None and timer.on:
        timer.stages += [("LLVM optimisation", stats["optimize"]),
                         ("LLVM code generation", stats["codegen"])]
    return objects, stats


def compile_module(module, opt_level: int, threads: int = 1,
                   timer: CompileTimer | None = None,
                   entries: list[str] | None = None) -> tuple[list[bytes], dict]:
    """:func:`prepare` then :func:`compile_prepared`."""
    return compile_prepared(prepare(module, threads, timer, entries), opt_level, timer)


def link(objects: list[bytes], entries, jit_libs: list, counter=None):
    """Links the ``objects`` of one program into the process: the tdf runtime
    (its thread pool included), ``counter``'s allocation functions, then
    ``jit_libs`` and the process resolve its symbols. Returns
    ``(loaded, [address of each entry's packed C interface])``;
    ``RuntimeError`` when it cannot be linked."""
    sink = _Symbols()
    register_runtime_symbols(sink)
    if counter is not None:
        counter.register(sink)
    return _tdf.load_object(list(objects), sorted(sink.symbols.items()), list(jit_libs),
                            [f"_mlir__mlir_ciface_{name}" for name in entries])
