"""External symbols of a program handed to the JIT: the libraries the JIT
loads, the kernels it must find, and its own missing-symbol report, for
:class:`tdf.CompileError` messages.

The MLIR ``ExecutionEngine`` resolves external functions lazily, when the
first symbol is looked up; when one is missing the ORC JIT only prints
``JIT session error: Symbols not found: [ rsqrtf ]`` on the process's stderr
and the lookup returns NULL. :func:`unresolved_functions` finds the missing
ones before the JIT runs (every ``llvm.func`` declaration of the LLVM-dialect
module, resolved with ``dlsym`` in the process and the shared libraries the
JIT is given), and :func:`capture_jit_errors` captures what the JIT prints
for the symbols that only the LLVM backend introduces (libcalls of
intrinsics), so that both reach the error message. Before the lowering,
:func:`check_kernel_symbols` checks that every body-less kernel a call
reaches is defined by the shared libraries or the process.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import os
import re
import sys
import tempfile
import threading

from mlir import ir

from .errors import CompileError
from .passes.ir_utils import collect_ops, has_body, sym_name
from .vocabulary import EMIT_C_INTERFACE_ATTR, RUNTIME_FUNCTIONS

__all__ = ["unresolved_functions", "capture_jit_errors", "missing_from_jit_output",
           "mlir_lib", "runtime_libs", "async_runtime_symbols", "check_kernel_symbols", "COUNTED_ALLOCATION_SYMBOLS"]

_CAPTURE_LOCK = threading.Lock()

#: What ``AllocationCounter.register`` defines in the engine (count_allocations builds).
COUNTED_ALLOCATION_SYMBOLS = ("_mlir_memref_to_llvm_alloc", "_mlir_memref_to_llvm_aligned_alloc",
                              "_mlir_memref_to_llvm_free")


def mlir_lib(name: str) -> str | None:
    """The path of the MLIR wheel's library ``name`` (``lib/<name>`` in the
    ``mlir`` package), or None when it is missing."""
    spec = importlib.util.find_spec("mlir")
    for root in (spec.submodule_search_locations or []) if spec is not None else []:
        path = os.path.join(root, "lib", name)
        if os.path.exists(path):
            return path
    return None


_ASYNC_LOCK = threading.Lock()
_ASYNC_SYMBOLS: dict[str, int] = {}


def async_runtime_symbols() -> dict[str, int]:
    """Name → address of every ``mlirAsyncRuntime*`` function of MLIR's
    ``libmlir_async_runtime.so`` (loaded once per process; empty when the
    wheel lacks it). Programs register these in their engine instead of
    passing the library as a shared library of the ExecutionEngine: the
    engine would call the library's ``__mlir_execution_engine_destroy``
    when it is freed, which destroys the process-wide default runtime while
    other programs' tasks may be running on it."""
    with _ASYNC_LOCK:
        if not _ASYNC_SYMBOLS:
            path = mlir_lib("libmlir_async_runtime.so")
            if path is None:
                return {}
            lib = ctypes.CDLL(path)
            for name in _ASYNC_FUNCTIONS:
                _ASYNC_SYMBOLS[name] = ctypes.cast(getattr(lib, name), ctypes.c_void_p).value or 0
        return dict(_ASYNC_SYMBOLS)


# The async runtime's C API (mlir/ExecutionEngine/AsyncRuntime.h).
_ASYNC_FUNCTIONS = (
    "mlirAsyncRuntimeAddRef", "mlirAsyncRuntimeDropRef", "mlirAsyncRuntimeCreateToken",
    "mlirAsyncRuntimeCreateValue", "mlirAsyncRuntimeCreateGroup",
    "mlirAsyncRuntimeAddTokenToGroup", "mlirAsyncRuntimeIsTokenError",
    "mlirAsyncRuntimeIsValueError", "mlirAsyncRuntimeIsGroupError",
    "mlirAsyncRuntimeEmplaceToken", "mlirAsyncRuntimeEmplaceValue",
    "mlirAsyncRuntimeSetTokenError", "mlirAsyncRuntimeSetValueError",
    "mlirAsyncRuntimeAwaitToken", "mlirAsyncRuntimeAwaitValue",
    "mlirAsyncRuntimeAwaitAllInGroup", "mlirAsyncRuntimeGetValueStorage",
    "mlirAsyncRuntimeExecute", "mlirAsyncRuntimeAwaitTokenAndExecute",
    "mlirAsyncRuntimeAwaitValueAndExecute", "mlirAsyncRuntimeAwaitAllInGroupAndExecute",
    "mlirAsyncRuntimGetNumWorkerThreads", "mlirAsyncRuntimePrintCurrentThreadId",
)


def runtime_libs() -> list[str]:
    """MLIR's ``libmlir_c_runner_utils.so`` (``memrefCopy`` and the other
    helpers the lowered code may call), as a list (empty when missing)."""
    path = mlir_lib("libmlir_c_runner_utils.so")
    return [path] if path is not None else []


def check_kernel_symbols(module, shared_libs) -> None:
    """Every declaration a ``func.call`` reaches (``_mlir_ciface_<name>``
    for one marked ``llvm.emit_c_interface``) must be defined by one of the
    shared libraries or the process: ``CompileError`` naming the kernel
    here, instead of a failure inside the JIT."""
    libs = [ctypes.CDLL(path) for path in shared_libs] + [ctypes.CDLL(None)]
    called = {ir.FlatSymbolRefAttr(op.attributes["callee"]).value
              for op in collect_ops(module.operation, "func.call")}
    for func in collect_ops(module.operation, "func.func"):
        name = sym_name(func)
        if has_body(func) or name not in called or name in RUNTIME_FUNCTIONS:
            continue
        symbol = f"_mlir_ciface_{name}" if EMIT_C_INTERFACE_ATTR in func.attributes else name
        if not any(hasattr(lib, symbol) for lib in libs):
            raise CompileError(
                f"kernel @{name} has no body and no shared library defines '{symbol}' "
                f"(pass the library with tdf.compile(..., shared_libs=[...]))")


def unresolved_functions(module, shared_libs) -> list[str]:
    """Names of the ``llvm.func`` declarations (no body) of ``module`` that
    neither the process nor ``shared_libs`` defines, sorted."""
    libs = [ctypes.CDLL(None)] + [ctypes.CDLL(path) for path in shared_libs]
    missing = set()
    for func in collect_ops(module.operation, "llvm.func"):
        if len(func.regions[0].blocks) > 0:
            continue
        name = ir.StringAttr(func.attributes["sym_name"]).value
        if name.startswith("llvm."):
            continue
        if not any(hasattr(lib, name) for lib in libs):
            missing.add(name)
    return sorted(missing)


_NOT_FOUND = re.compile(r"Symbols not found: \[([^\]]*)\]")


def missing_from_jit_output(text: str) -> list[str]:
    """The symbols of every ``Symbols not found: [ a, b ]`` line in ``text``."""
    names = []
    for match in _NOT_FOUND.finditer(text):
        for name in match.group(1).split(","):
            name = name.strip()
            if name and name not in names:
                names.append(name)
    return names


@contextlib.contextmanager
def capture_jit_errors():
    """Redirects file descriptor 2 into a temporary file for the duration of
    the block and yields a list that receives the captured text afterwards.
    Text other than the JIT's own errors is written back to stderr. One
    capture at a time in the process (a lock), since the descriptor is
    process-wide."""
    captured: list[str] = []
    with _CAPTURE_LOCK:
        try:
            sys.stderr.flush()
        except (AttributeError, ValueError, OSError):
            pass
        try:
            saved = os.dup(2)
        except OSError:
            # No usable fd 2 (embedded interpreter): nothing to capture.
            yield captured
            return
        with tempfile.TemporaryFile(mode="w+b") as sink:
            os.dup2(sink.fileno(), 2)
            try:
                yield captured
            finally:
                os.dup2(saved, 2)
                os.close(saved)
                sink.seek(0)
                text = sink.read().decode("utf-8", "replace")
                captured.append(text)
                others = "".join(line for line in text.splitlines(keepends=True)
                                 if "JIT session error" not in line)
                if others:
                    try:
                        os.write(2, others.encode())
                    except OSError:
                        pass
