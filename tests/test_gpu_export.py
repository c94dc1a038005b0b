"""GPU programs exported as shared libraries (``GPUProgram.export_library``)
and loaded without MLIR (``tdf/gpu_library.py``).

Without a GPU: the library links, exports only the entry functions' C
interfaces, names the runtime libraries it needs; the manifest describes
every argument and result; the loader refuses a machine without a GPU and a
foreign manifest with an error, and imports nothing from MLIR or tdf. Runs
on a GPU: ``benchmarks/gpu_device.py`` (see benchmarks/README.md).
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from test_gpu import GPU_OK, KV
from test_gpu_cublas import DENSE

import tdf.jax
from tdf import gpu, gpu_library


def _dynamic(path):
    """(needed libraries, exported defined symbols) of shared library ``path``."""
    out = subprocess.run(["readelf", "-d", "--dyn-syms", "-W", path], capture_output=True,
                         text=True, check=True).stdout
    needed = [line.split("[")[1].rstrip("]") for line in out.splitlines() if "(NEEDED)" in line]
    exported = [line.split()[-1] for line in out.splitlines()
                if " GLOBAL " in line and " UND " not in line and "FUNC" in line]
    return needed, exported


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    folder = tmp_path_factory.mktemp("export")
    dense = gpu.compile_nvvm(DENSE, blas=True, ptxas=False)
    kv = gpu.compile_nvvm(KV, ptxas=False, pool=False)

    def two(a, b):
        return a + b, (a * b).sum(axis=0)

    args = (np.ones((4, 8), np.float32), np.ones((4, 8), np.float32))
    pair = gpu.compile_nvvm(tdf.jax.jit(two).lower(*args).as_text(), blas=True, ptxas=False)
    out = {}
    for name, program in (("dense", dense), ("kv", kv), ("pair", pair)):
        path = str(folder / f"lib{name}.so")
        out[name] = (path, program.export_library(path))
    return out


def test_manifest_describes_every_argument_and_result(exported):
    path, manifest = exported["dense"]
    assert manifest["format"] == gpu_library.MANIFEST_FORMAT
    assert manifest["uses_cublas"] and manifest["chip"] == "sm_90"
    assert manifest["functions"]["dense"] == {
        "arguments": [{"element": "f32", "shape": [64, 32]}, {"element": "f32", "shape": [32, 48]},
                      {"element": "f32", "shape": [64, 48]}],
        "results": [{"element": "f32", "shape": [64, 48]}]}
    with open(os.path.splitext(path)[0] + ".json") as f:
        assert json.load(f) == manifest
    _, kv = exported["kv"]
    assert kv["functions"]["step"]["arguments"][2] == {"scalar": "index"}
    _, pair = exported["pair"]
    assert pair["functions"]["main"]["results"] == [{"element": "f32", "shape": [4, 8]},
                                                    {"element": "f32", "shape": [8]}]


def test_library_exports_only_entry_points_and_names_its_runtimes(exported):
    for name, entry in (("dense", "dense"), ("kv", "step"), ("pair", "main")):
        path, manifest = exported[name]
        needed, symbols = _dynamic(path)
        assert symbols == [f"_mlir_ciface_{entry}"], symbols
        for library in manifest["needs"]:
            assert library in needed
    # cuBLAS calls and the device pool live in tdf's runtime; a program
    # without either (pool=False, no contraction) needs MLIR's alone.
    assert "libtdf_gpu_runtime.so" in exported["dense"][1]["needs"]
    assert "libtdf_gpu_runtime.so" in exported["pair"][1]["needs"]
    assert exported["kv"][1]["needs"] == ["libmlir_cuda_runtime.so"]


def test_runtime_library_exports_its_c_api():
    runtime = os.path.join(os.path.dirname(tdf._tdf.__file__), "libtdf_gpu_runtime.so")
    needed, symbols = _dynamic(runtime)
    assert {"tdf_gpu_contract", "tdf_gpu_take_error", "tdf_gpu_mem_alloc",
            "tdf_gpu_mem_free"} <= set(symbols)
    # Nothing from MLIR, LLVM or CUDA is linked: libcuda and cuBLAS load at run time.
    assert not [n for n in needed if "MLIR" in n or "LLVM" in n or "cu" in n.lower()], needed


def test_bad_options_raise(tmp_path):
    program = gpu.compile_nvvm(KV, ptxas=False)
    with pytest.raises(ValueError, match="cpu must be an LLVM CPU name"):
        program.export_library(str(tmp_path / "a.so"), cpu="x86 64; rm")
    with pytest.raises(ValueError, match="opt_level"):
        program.export_library(str(tmp_path / "a.so"), opt_level=7)
    with pytest.raises(RuntimeError, match="llc failed"):
        program.export_library(str(tmp_path / "a.so"), cpu="no-such-cpu")
    assert not (tmp_path / "a.so").exists()


@pytest.mark.skipif(GPU_OK, reason="a GPU is present: the no-GPU error cannot happen here")
def test_loading_without_gpu_is_an_error(exported):
    path, _ = exported["dense"]
    with pytest.raises(gpu_library.GPULibraryError, match="no CUDA GPU here"):
        gpu_library.load_library(path)


def test_foreign_or_missing_manifest_is_an_error(tmp_path, exported):
    path, manifest = exported["kv"]
    with pytest.raises(gpu_library.GPULibraryError, match="cannot read the manifest"):
        gpu_library.load_library(str(tmp_path / "libnone.so"))
    other = tmp_path / "libother.json"
    other.write_text(json.dumps(dict(manifest, format="something/2")))
    with pytest.raises(gpu_library.GPULibraryError, match="not a tdf-gpu-library/1 manifest"):
        gpu_library.load_library(str(tmp_path / "libother.so"))


def test_loader_imports_neither_mlir_nor_tdf():
    code = ("import importlib.util, sys\n"
            f"spec = importlib.util.spec_from_file_location('gl', {gpu_library.__file__!r})\n"
            "module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)\n"
            "assert not [m for m in sys.modules if m.startswith(('mlir', 'tdf', 'jax'))]\n"
            "print(module.MANIFEST_FORMAT)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == gpu_library.MANIFEST_FORMAT
