"""A compiled GPU program as a shared library and a manifest
(:meth:`tdf.gpu.GPUProgram.export_library`): ahead-of-time code for a
machine with a GPU but without MLIR's Python wheels or tdf.

The program's final module (host code in the LLVM dialect, the kernels in
``gpu.binary`` ops) is translated to LLVM IR by the MLIR wheel's
``mlir-translate``, compiled by the LLVM wheel's ``llc`` for a chosen x86-64
CPU (``cpu``, default ``x86-64-v2``: the host code is glue, and the object
must run on the GPU machine's CPU, not only on this one) and linked by the
system's C compiler driver (``cc``) into a shared library that exports the C
interface of each entry function (``_mlir_ciface_<name>``) and nothing
else. Its constructors load the kernels (MLIR's ``mgpuModuleLoad``) when it
is loaded.

It needs, where it runs, ``libcuda.so.1`` and MLIR's CUDA runtime
(``libmlir_cuda_runtime.so``), plus tdf's GPU runtime
(``libtdf_gpu_runtime.so``) when it calls cuBLAS or takes its buffers from
tdf's pool (the default); its run path names the
folders they were found in here, and the manifest lists them by name so
that a loader elsewhere can load them from other folders first
(:mod:`tdf.gpu_library`).

The manifest, ``<stem>.json`` beside the library, gives each entry
function's arguments (element type and shape, or scalar type) and results,
the chip, and whether the library calls cuBLAS.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile

from mlir import ir

from . import _tdf
from .gpu_library import MANIFEST_FORMAT
from .jit_symbols import mlir_lib

__all__ = ["export_library", "DEFAULT_CPU"]

#: The CPU the host code is compiled for unless ``cpu`` says otherwise.
DEFAULT_CPU = "x86-64-v2"

_CUDA_RUNTIME = "libmlir_cuda_runtime.so"
_TDF_GPU_RUNTIME = "libtdf_gpu_runtime.so"


def _tool(package: str, name: str) -> str:
    """The path of wheel ``package``'s tool ``bin/<name>``."""
    import importlib.util

    spec = importlib.util.find_spec(package)
    for root in (spec.submodule_search_locations or []) if spec is not None else []:
        path = os.path.join(root, "bin", name)
        if os.access(path, os.X_OK):
            return path
    raise RuntimeError(f"exporting a GPU library needs {name} from the {package} wheel, "
                       f"which is not installed")


def _run(command: list[str], what: str) -> None:
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{what} failed ({os.path.basename(command[0])} exit status "
                           f"{done.returncode}): {done.stderr.strip()[:2000]}")


def argument_spec(type_) -> dict:
    """A manifest's entry for an argument or result of type ``type_``: the
    element type and shape of a tensor, or a scalar's type."""
    if isinstance(type_, ir.RankedTensorType):
        return {"element": str(type_.element_type), "shape": list(type_.shape)}
    return {"scalar": str(type_)}


def manifest(program, library_name: str) -> dict:
    """The manifest of ``program`` exported as ``library_name``."""
    needs = [_CUDA_RUNTIME] + ([_TDF_GPU_RUNTIME] if program.uses_runtime else [])
    return {
        "format": MANIFEST_FORMAT,
        "library": library_name,
        "chip": program.chip,
        "uses_cublas": bool(program.uses_cublas),
        "needs": needs,
        "functions": {
            name: {"arguments": [argument_spec(t) for t in ftype.inputs],
                   "results": [argument_spec(t) for t in ftype.results]}
            for name, ftype in program._entries.items()
        },
    }


def export_library(program, path: str, cpu: str = DEFAULT_CPU, opt_level: int = 2) -> dict:
    """Writes ``program`` (a :class:`tdf.gpu.GPUProgram`) to the shared
    library ``path`` and its manifest to ``<stem>.json``; returns the
    manifest. ``cpu``: the x86-64 CPU ``llc`` compiles the host code for;
    ``opt_level``: ``llc``'s, 0 to 3. ``ValueError`` for a bad option,
    ``RuntimeError`` when a tool is missing or fails (its message)."""
    if not isinstance(cpu, str) or not cpu or not all(c.isalnum() or c in "-_." for c in cpu):
        raise ValueError(f"cpu must be an LLVM CPU name such as 'x86-64-v2', got {cpu!r}")
    if opt_level not in (0, 1, 2, 3):
        raise ValueError(f"opt_level must be 0, 1, 2 or 3, got {opt_level!r}")
    linker = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if linker is None:
        raise RuntimeError("exporting a GPU library needs a C compiler driver (cc, gcc or "
                           "clang) to link it")
    translate = _tool("mlir", "mlir-translate")
    llc = _tool("llvm", "llc")
    folders = []
    cuda_runtime = mlir_lib(_CUDA_RUNTIME)
    if cuda_runtime is None:
        raise RuntimeError(f"{_CUDA_RUNTIME} is missing from the MLIR package")
    folders.append(os.path.dirname(cuda_runtime))
    if program.uses_runtime:
        folders.append(os.path.dirname(os.path.abspath(_tdf.__file__)))
    path = os.path.abspath(path)
    with tempfile.TemporaryDirectory(prefix="tdf-export-") as work:
        source = os.path.join(work, "program.mlir")
        with open(source, "w") as f:
            f.write(str(program.module))
        llvm_ir = os.path.join(work, "program.ll")
        _run([translate, "--mlir-to-llvmir", source, "-o", llvm_ir], "mlir-translate")
        obj = os.path.join(work, "program.o")
        _run([llc, f"-O{opt_level}", "-filetype=obj", "-relocation-model=pic", f"-mcpu={cpu}",
              llvm_ir, "-o", obj], "llc")
        exports = os.path.join(work, "exports.map")
        with open(exports, "w") as f:
            f.write("{ global: _mlir_ciface_*; local: *; };\n")
        libraries = [f"-l:{_CUDA_RUNTIME}"] + ([f"-l:{_TDF_GPU_RUNTIME}"]
                                                if program.uses_runtime else [])
        _run([linker, "-shared", "-o", path, obj, *[f"-L{d}" for d in folders], *libraries,
              f"-Wl,-rpath,{':'.join(folders)}", f"-Wl,--version-script={exports}",
              "-Wl,--no-undefined", "-Wl,--allow-shlib-undefined"], "linking")
    result = manifest(program, os.path.basename(path))
    with open(os.path.splitext(path)[0] + ".json", "w") as f:
        json.dump(result, f, indent=1)
    return result
