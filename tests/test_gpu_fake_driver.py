"""GPU programs run end to end without a GPU, on a host stand-in for the
CUDA driver and cuBLAS (``tests/fake_cuda/fake_cuda.c``: device memory is
host memory, copies are memcpy, GEMMs run on the host, kernels are counted
but not run).

Programs whose work is all contractions (cuBLAS calls, no kernel) then
compute real results: the exported library (``GPUProgram.export_library``,
loaded by ``tdf/gpu_library.py``) and tdf.gpu's in-process call are checked
against numpy, with donated results returned as their argument, inputs
unchanged, every device buffer from tdf's pool (``tdf-gpu-pooled-alloc``)
and given back, and a cuBLAS failure raised as an error. Each run is a
subprocess (``LD_LIBRARY_PATH`` names the stand-ins; the test process never
loads them). A real GPU runs the same programs: ``benchmarks/gpu_device.py``.
"""

import json
import os
import shutil
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest
from test_gpu_cublas import BATCHED

import tdf.jax
from tdf import gpu, gpu_library

HERE = os.path.dirname(os.path.abspath(__file__))
CC = shutil.which("cc") or shutil.which("gcc")
pytestmark = pytest.mark.skipif(CC is None, reason="no C compiler to build the stand-ins")


def _contractions(x, w, q, k):
    """x @ w, x @ w.T (a transposed operand), q @ k^T per batch in bf16 with
    an f32 result: all cuBLAS calls, no kernel."""
    import jax.numpy as jnp

    return x @ w, x @ w.T, jnp.einsum("bqd,bkd->bqk", q, k, preferred_element_type=jnp.float32)


def _inputs():
    rng = np.random.default_rng(11)
    return (rng.standard_normal((24, 40)).astype(np.float32),
            rng.standard_normal((40, 40)).astype(np.float32),
            rng.standard_normal((3, 8, 16)).astype(ml_dtypes.bfloat16),
            rng.standard_normal((3, 12, 16)).astype(ml_dtypes.bfloat16))


def _expected(x, w, q, k):
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    return (x64 @ w64, x64 @ w64.T,
            np.einsum("bqd,bkd->bqk", q.astype(np.float64), k.astype(np.float64)))


@pytest.fixture(scope="module")
def fakes(tmp_path_factory):
    """A folder with libcuda.so.1 and libcublas.so.13 stand-ins."""
    folder = tmp_path_factory.mktemp("fake_cuda")
    source = os.path.join(HERE, "fake_cuda", "fake_cuda.c")
    for define, soname in (("FAKE_DRIVER", "libcuda.so.1"), ("FAKE_CUBLAS", "libcublas.so.13")):
        subprocess.run([CC, "-shared", "-fPIC", "-O1", f"-D{define}", f"-Wl,-soname,{soname}",
                        "-o", str(folder / soname), source], check=True)
    return folder


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    folder = tmp_path_factory.mktemp("exported")
    text = tdf.jax.jit(_contractions).lower(*_inputs()).as_text()
    out = {}
    for name, source, pool in (("contract", text, True), ("contract_nopool", text, False),
                               ("bmm", BATCHED, True)):
        program = gpu.compile_nvvm(source, blas=True, ptxas=False, pool=pool)
        assert program.report().kernels == 0 and program.uses_cublas
        path = str(folder / f"lib{name}.so")
        program.export_library(path)
        out[name] = path
    return out


# The subprocess: loads the exported library with the loader alone (no tdf,
# no MLIR imported), calls it, saves the results and the stand-in's counters.
RUNNER = """
import ctypes, importlib.util, json, sys
import numpy as np
spec = importlib.util.spec_from_file_location("gl", {loader!r})
gl = importlib.util.module_from_spec(spec); spec.loader.exec_module(gl)
data = np.load({inputs!r})
args = [data[f"arg{{i}}"] for i in range(len(data.files))]
args = [a.view(gl._dtype("bf16")) if a.dtype.kind == "V" else a for a in args]
before = [a.copy() for a in args]
lib = gl.load_library({library!r})
report = {{"functions": lib.functions}}
try:
    out = getattr(lib, {function!r})(*args)
    outs = list(out) if isinstance(out, tuple) else [out]
    report["same_object"] = [any(o is a for a in args) for o in outs]
    np.savez({outputs!r}, **{{f"out{{i}}": np.asarray(o) for i, o in enumerate(outs)}})
except gl.GPULibraryError as err:
    report["error"] = str(err)
report["unchanged"] = [bool(np.array_equal(b.view(np.uint8), a.view(np.uint8)))
                       for b, a in zip(before, args)]
counters = ctypes.CDLL("libcuda.so.1").fake_counters
counters.restype = ctypes.POINTER(ctypes.c_long)
c = counters()
report["counters"] = dict(alloc=c[0], free=c[1], pool_alloc=c[2], pool_free=c[3], launches=c[4],
                          pool_attribute=c[5])
print(json.dumps(report))
"""


def _run(tmp_path, fakes, library, function, args, env=None):
    inputs, outputs = str(tmp_path / "inputs.npz"), str(tmp_path / "outputs.npz")
    np.savez(inputs, **{f"arg{i}": a for i, a in enumerate(args)})
    code = RUNNER.format(loader=gpu_library.__file__, inputs=inputs, library=library,
                         function=function, outputs=outputs)
    environ = dict(os.environ, LD_LIBRARY_PATH=str(fakes), **(env or {}))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=environ, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    results = []
    if "error" not in report:
        data = np.load(outputs)
        results = [data[f"out{i}"] for i in range(len(data.files))]
    return report, results


def test_exported_contractions_match_numpy_from_the_pool(tmp_path, fakes, exported):
    args = _inputs()
    report, results = _run(tmp_path, fakes, exported["contract"], "main", args)
    for got, want in zip(results, _expected(*args)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert len(results) == 3 and report["same_object"] == [False] * 3
    assert all(report["unchanged"])
    counters = report["counters"]
    # Every device buffer came from the stream-ordered pool and went back.
    assert counters["pool_alloc"] >= 7 and counters["pool_alloc"] == counters["pool_free"]
    assert counters["alloc"] == counters["free"] == 0
    assert counters["pool_attribute"] == 1 and counters["launches"] == 0


def test_without_the_pool_each_buffer_is_a_driver_allocation(tmp_path, fakes, exported):
    args = _inputs()
    report, results = _run(tmp_path, fakes, exported["contract_nopool"], "main", args)
    for got, want in zip(results, _expected(*args)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    counters = report["counters"]
    assert counters["alloc"] >= 7 and counters["alloc"] == counters["free"]
    assert counters["pool_alloc"] == 0


def test_donated_accumulator_is_updated_in_place(tmp_path, fakes, exported):
    rng = np.random.default_rng(2)
    a, b, c = (rng.standard_normal(s) for s in ((3, 8, 5), (3, 5, 7), (3, 8, 7)))
    report, (out,) = _run(tmp_path, fakes, exported["bmm"], "bmm", (a, b, c))
    np.testing.assert_allclose(out, c + a @ b, rtol=1e-12, atol=1e-12)
    assert report["same_object"] == [True]  # the result is the donated argument
    assert report["unchanged"] == [True, True, False]


def test_cublas_failure_is_an_error_and_frees_everything(tmp_path, fakes, exported):
    report, results = _run(tmp_path, fakes, exported["contract"], "main", _inputs(),
                           env={"FAKE_CUBLAS_STATUS": "13"})
    assert not results
    assert "tdf_gpu_contract: cublasGemmEx failed with cuBLAS status 13" in report["error"]
    assert all(report["unchanged"])
    counters = report["counters"]
    assert counters["pool_alloc"] == counters["pool_free"] > 0


def test_in_process_call_matches_the_exported_library(tmp_path, fakes):
    """tdf.gpu's own call (ExecutionEngine, the same marshalling) on the
    stand-ins: several results, cuBLAS from TDF_CUBLAS_LIBRARY, the pool's
    functions registered in the engine."""
    args = _inputs()
    inputs = str(tmp_path / "inputs.npz")
    np.savez(inputs, **{f"arg{i}": a for i, a in enumerate(args)})
    code = (
        "import numpy as np, ml_dtypes, tdf.jax, sys\n"
        f"sys.path.insert(0, {HERE!r})\n"
        "from test_gpu_fake_driver import _contractions, _inputs, _expected\n"
        "from tdf import gpu\n"
        "assert gpu.cuda_available()[0] and gpu.cublas_available()[0]\n"
        "args = _inputs()\n"
        "p = gpu.compile_nvvm(tdf.jax.jit(_contractions).lower(*args).as_text(), ptxas=False)\n"
        "assert p.uses_cublas and p.uses_runtime\n"
        "out = p.main(*args)\n"
        "assert isinstance(out, tuple) and len(out) == 3\n"
        "for got, want in zip(out, _expected(*args)):\n"
        "    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)\n"
        "print('ok')\n")
    environ = dict(os.environ, LD_LIBRARY_PATH=str(fakes),
                   TDF_CUBLAS_LIBRARY=str(fakes / "libcublas.so.13"))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=environ, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().endswith("ok")


def test_gpu_device_benchmark_runs_on_the_stand_in(tmp_path, fakes):
    """benchmarks/gpu_device.py end to end (export here, run "there") on the
    stand-ins: the programs whose work is all cuBLAS come out correct; the
    others run without an error (their kernels do not run, so their values
    are whatever the buffers held). Keeps the benchmark working between
    device runs."""
    script = os.path.join(os.path.dirname(HERE), "benchmarks", "gpu_device.py")
    folder = str(tmp_path / "export")
    done = subprocess.run([sys.executable, script, "export", folder, "--tiny"],
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    environ = dict(os.environ, LD_LIBRARY_PATH=str(fakes))
    out = str(tmp_path / "rows.json")
    done = subprocess.run([sys.executable, script, "run", folder, "--reps", "1", "--out", out],
                          capture_output=True, text=True, timeout=600, env=environ, check=False)
    assert done.returncode == 1, done.stderr[-3000:]  # the kernel programs' values
    with open(out) as f:
        rows = {row["name"]: row for row in json.load(f)["rows"]}
    cublas_only = {name for name, row in rows.items()
                   if row["kernels"] == 0 and row["cublas_calls"] > 0}
    assert {"bf16_q_kT", "f64_bmm_acc", "gemm_f32_256", "bf16_scores"} <= cublas_only
    for name, row in rows.items():
        assert "error" not in row, (name, row.get("error"))
        if name in cublas_only:
            assert row["ok"], name
    assert rows["f64_bmm_acc"]["in_place_results"] == 1
    assert rows["gemm_f32_256"]["seconds"]["tdf"] > 0
