"""External symbols of a program handed to the JIT: the libraries its code
is linked with and the kernels it must find, for :class:`tdf.CompileError`
messages.

:func:`unresolved_functions` finds missing external functions before LLVM
runs (every ``llvm.func`` declaration of the LLVM-dialect module, resolved
with ``dlsym`` in the process and the shared libraries the program is
linked with); a symbol that only the LLVM backend introduces (a libcall of
an intrinsic) and nothing defines makes the loader's link fail with a
message naming it (``tdf.objects.link``). Before the lowering,
:func:`check_kernel_symbols` checks that every body-less kernel a call
reaches is defined by the shared libraries or the process.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os

from mlir import ir

from .errors import CompileError
from .passes.ir_utils import collect_ops, has_body, sym_name
from .vocabulary import EMIT_C_INTERFACE_ATTR, RUNTIME_FUNCTIONS

__all__ = ["unresolved_functions", "mlir_lib", "runtime_libs", "check_kernel_symbols", "COUNTED_ALLOCATION_SYMBOLS"]


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


def unresolved_functions(module, shared_libs, known=()) -> list[str]:
    """Names of the ``llvm.func`` declarations (no body) of ``module`` that
    neither ``known`` (symbols the JIT is given itself), the process nor
    ``shared_libs`` defines, sorted. A library is opened only for names the
    process lacks: opening ``libmlir_c_runner_utils.so`` costs ~40 ms, paid
    only by programs that call it."""
    known = set(known)
    wanted = set()
    for func in collect_ops(module.operation, "llvm.func"):
        if len(func.regions[0].blocks) > 0:
            continue
        name = ir.StringAttr(func.attributes["sym_name"]).value
        if not name.startswith("llvm.") and name not in known:
            wanted.add(name)
    process = ctypes.CDLL(None)
    missing = sorted(name for name in wanted if not hasattr(process, name))
    for path in shared_libs:
        if not missing:
            break
        lib = ctypes.CDLL(path)
        missing = [name for name in missing if not hasattr(lib, name)]
    return missing
