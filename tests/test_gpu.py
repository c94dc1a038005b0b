"""The GPU path: tdf.gpu.compile_nvvm and the tdf-lower-to-nvvm pipeline.

Compiles the flagship programs (element-wise chain in place, KV-cache row
update on a donated cache, concat in place) to PTX for sm_90, checks what
the report counts (in-place calls, device copies, transfers), validates the
PTX with ``ptxas`` where it is installed, checks the errors (bad options,
no GPU on call: never an abort), and runs the programs against JAX where a
GPU is present.
"""

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import tdf
from tdf import gpu

HAS_PTXAS = shutil.which("ptxas") is not None
GPU_OK, GPU_REASON = gpu.cuda_available()
needs_ptxas = pytest.mark.skipif(not HAS_PTXAS, reason="ptxas (CUDA toolkit) is not on PATH")
needs_gpu = pytest.mark.skipif(not GPU_OK, reason=f"no CUDA GPU here: {GPU_REASON}")

ADD_INPLACE = """
func.func private @add_inplace(%acc: memref<64x128xf32>, %rhs: memref<64x128xf32>) attributes {tdf.elementwise} {
  linalg.add ins(%acc, %rhs : memref<64x128xf32>, memref<64x128xf32>) outs(%acc : memref<64x128xf32>)
  return
}
"""
ADD = """
func.func private @add(%lhs: memref<64x128xf32>, %rhs: memref<64x128xf32>, %out: memref<64x128xf32>) attributes {tdf.elementwise} {
  linalg.add ins(%lhs, %rhs : memref<64x128xf32>, memref<64x128xf32>) outs(%out : memref<64x128xf32>)
  return
}
"""

# Programs already in their in-place form (run with inplace=False).
CHAIN = ADD_INPLACE + """
func.func @chain(%x: tensor<64x128xf32> {tdf.donate}, %y: tensor<64x128xf32>) -> tensor<64x128xf32> {
  %0 = tdf.call_inplace @add_inplace(%x, %y) inplace [0] : (tensor<64x128xf32>, tensor<64x128xf32>) -> tensor<64x128xf32>
  %1 = tdf.call_inplace @add_inplace(%0, %y) inplace [0] : (tensor<64x128xf32>, tensor<64x128xf32>) -> tensor<64x128xf32>
  return %1 : tensor<64x128xf32>
}
"""
KV = """
func.func @step(%cache: tensor<4x16x64xf32> {tdf.donate}, %row: tensor<4x1x64xf32>, %pos: index) -> tensor<4x16x64xf32> {
  %updated = tensor.insert_slice %row into %cache[0, %pos, 0] [4, 1, 64] [1, 1, 1] : tensor<4x1x64xf32> into tensor<4x16x64xf32>
  return %updated : tensor<4x16x64xf32>
}
"""
CONCAT = """
func.func @concat(%a: tensor<4x64xf32>, %b: tensor<4x64xf32>) -> tensor<8x64xf32> {
  %empty = tensor.empty() : tensor<8x64xf32>
  %top = tensor.extract_slice %empty[0, 0] [4, 64] [1, 1] : tensor<8x64xf32> to tensor<4x64xf32>
  %exp_a = linalg.exp ins(%a : tensor<4x64xf32>) outs(%top : tensor<4x64xf32>) -> tensor<4x64xf32>
  %half = tensor.insert_slice %exp_a into %empty[0, 0] [4, 64] [1, 1] : tensor<4x64xf32> into tensor<8x64xf32>
  %bottom = tensor.extract_slice %half[4, 0] [4, 64] [1, 1] : tensor<8x64xf32> to tensor<4x64xf32>
  %exp_b = linalg.exp ins(%b : tensor<4x64xf32>) outs(%bottom : tensor<4x64xf32>) -> tensor<4x64xf32>
  %full = tensor.insert_slice %exp_b into %half[4, 0] [4, 64] [1, 1] : tensor<4x64xf32> into tensor<8x64xf32>
  return %full : tensor<8x64xf32>
}
"""
# The same programs written functionally, for tdf-insert-inplace to rewrite.
CHAIN_FUNCTIONAL = ADD + """
func.func @chain(%x: tensor<64x128xf32> {tdf.donate}, %y: tensor<64x128xf32>) -> tensor<64x128xf32> {
  %0 = tdf.call @add(%x, %y) : (tensor<64x128xf32>, tensor<64x128xf32>) -> tensor<64x128xf32>
  %1 = tdf.call @add(%0, %y) : (tensor<64x128xf32>, tensor<64x128xf32>) -> tensor<64x128xf32>
  return %1 : tensor<64x128xf32>
}
"""
CONCAT_FUNCTIONAL = """
func.func @concat(%a: tensor<4x64xf32>, %b: tensor<4x64xf32>) -> tensor<8x64xf32> {
  %e0 = tensor.empty() : tensor<4x64xf32>
  %exp_a = linalg.exp ins(%a : tensor<4x64xf32>) outs(%e0 : tensor<4x64xf32>) -> tensor<4x64xf32>
  %e1 = tensor.empty() : tensor<4x64xf32>
  %exp_b = linalg.exp ins(%b : tensor<4x64xf32>) outs(%e1 : tensor<4x64xf32>) -> tensor<4x64xf32>
  %full = tensor.concat dim(0) %exp_a, %exp_b : (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<8x64xf32>
  return %full : tensor<8x64xf32>
}
"""

DECODE_LOOP = """
func.func @decode(%cache: tensor<4x16x64xf32> {tdf.donate}, %rows: tensor<4x16x64xf32>, %steps: index) -> tensor<4x16x64xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %final = scf.for %t = %c0 to %steps step %c1 iter_args(%acc = %cache) -> tensor<4x16x64xf32> {
    %row = tensor.extract_slice %rows[0, %t, 0] [4, 1, 64] [1, 1, 1] : tensor<4x16x64xf32> to tensor<4x1x64xf32>
    %next = tensor.insert_slice %row into %acc[0, %t, 0] [4, 1, 64] [1, 1, 1] : tensor<4x1x64xf32> into tensor<4x16x64xf32>
    scf.yield %next : tensor<4x16x64xf32>
  }
  return %final : tensor<4x16x64xf32>
}
"""

FLAGSHIPS = {"chain": CHAIN, "kv": KV, "concat": CONCAT, "loop": DECODE_LOOP}


@pytest.fixture(scope="module")
def compiled():
    """Every flagship compiled once (ptxas where available)."""
    return {name: gpu.compile_nvvm(text, inplace=False, filename=f"{name}.mlir")
            for name, text in FLAGSHIPS.items()}


@pytest.mark.parametrize("name", sorted(FLAGSHIPS))
def test_flagship_compiles_to_ptx_for_sm90(compiled, name):
    prog = compiled[name]
    assert prog.ptx_modules, "no gpu.binary in the final module"
    for ptx in prog.ptx_modules.values():
        assert ".target sm_90" in ptx
        assert ".version 8.0" in ptx
        assert ".entry " in ptx
    assert "gpu.binary" in prog.text and "llvm.func" in prog.text
    assert "gpu.launch_func" in prog.gpu_text


def test_chain_report_counts_inplace_and_no_device_copy(compiled):
    report = compiled["chain"].report()
    assert [(c, i) for c, i, _ in report.inplace] == [("add_inplace", [0]), ("add_inplace", [0])]
    assert report.inplace[0][2].startswith("chain.mlir:")
    assert report.device_copies == []
    # x and y go to the device, only the donated x comes back.
    assert report.h2d == (2, 2 * 64 * 128 * 4)
    assert report.d2h == (1, 64 * 128 * 4)
    assert report.kernels == 1
    assert "in-place calls: 2" in str(report)


def test_kv_update_copies_only_the_row(compiled):
    report = compiled["kv"].report()
    # One device copy: the 4x1x64 row into the cache's slot, never the cache.
    assert [b for b, _ in report.device_copies] == [4 * 1 * 64 * 4]
    assert report.d2h == (1, 4 * 16 * 64 * 4)
    assert report.device_alloc_bytes == 4 * 16 * 64 * 4 + 4 * 64 * 4


def test_decode_loop_stays_in_the_cache_buffer(compiled):
    report = compiled["loop"].report()
    assert [b for b, _ in report.device_copies] == [4 * 1 * 64 * 4]  # one row per step
    assert report.device_alloc_bytes == 2 * 4 * 16 * 64 * 4  # cache + rows, nothing else
    assert report.d2h == (1, 4 * 16 * 64 * 4)


def test_concat_parts_written_in_place(compiled):
    report = compiled["concat"].report()
    assert report.device_copies == []
    assert report.kernels == 2  # one per part, straight into its slice


def test_negative_not_donated_gets_device_copy():
    text = CHAIN.replace("{tdf.donate}", "")
    report = gpu.compile_nvvm(text, inplace=False, ptxas=False).report()
    # The first in-place call copies the non-donated x on the device; nothing
    # is copied back into x.
    assert [b for b, _ in report.device_copies] == [64 * 128 * 4]
    assert report.d2h == (1, 64 * 128 * 4)
    assert report.kernels == 2


@needs_ptxas
@pytest.mark.parametrize("name", sorted(FLAGSHIPS))
def test_flagship_ptx_passes_ptxas(compiled, name):
    prog = compiled[name]
    assert set(prog.cubins) == set(prog.ptx_modules)
    for cubin in prog.cubins.values():
        assert cubin[:4] == b"\x7fELF"
    assert "accepted by ptxas -arch=sm_90" in prog.report().ptxas
    if len(prog.cubins) == 1:
        assert prog.cubin == next(iter(prog.cubins.values()))
    # ptxas is also run explicitly on the text, as a user would.
    for ptx in prog.ptx_modules.values():
        done = subprocess.run(["ptxas", "-arch=sm_90", "-", "-o", os.devnull],
                              input=ptx, capture_output=True, text=True)
        if done.returncode != 0:  # some ptxas builds do not read stdin
            path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"tdf-test-{os.getpid()}.ptx")
            with open(path, "w") as handle:
                handle.write(ptx)
            done = subprocess.run(["ptxas", "-arch=sm_90", path, "-o", os.devnull],
                                  capture_output=True, text=True)
            os.unlink(path)
        assert done.returncode == 0, done.stderr


@needs_ptxas
def test_other_chip_sm80():
    prog = gpu.compile_nvvm(KV, chip="sm_80", inplace=False)
    ptx = next(iter(prog.ptx_modules.values()))
    assert ".target sm_80" in ptx and ".version 7.0" in ptx
    assert "ptxas -arch=sm_80" in prog.report().ptxas


def test_ptxas_rejection_is_an_error(tmp_path):
    fake = tmp_path / "ptxas"
    fake.write_text("#!/bin/sh\necho 'ptxas fatal: bad PTX' >&2\nexit 255\n")
    fake.chmod(0o755)
    with pytest.raises(gpu.GPUCompileError, match="ptxas -arch=sm_90 rejected the PTX"):
        gpu.compile_nvvm(KV, inplace=False, ptxas=str(fake))


@pytest.mark.skipif(GPU_OK, reason="a GPU is present: the no-GPU error cannot happen here")
@pytest.mark.parametrize("name,fn", [("chain", "chain"), ("kv", "step"), ("concat", "concat"),
                                     ("loop", "decode")])
def test_call_without_gpu_raises_clear_error(compiled, name, fn):
    prog = compiled[name]
    args = {
        "chain": (np.ones((64, 128), np.float32), np.ones((64, 128), np.float32)),
        "kv": (np.zeros((4, 16, 64), np.float32), np.ones((4, 1, 64), np.float32), 3),
        "concat": (np.ones((4, 64), np.float32), np.ones((4, 64), np.float32)),
        "loop": (np.zeros((4, 16, 64), np.float32), np.ones((4, 16, 64), np.float32), 4),
    }[name]
    before = [a.copy() for a in args if isinstance(a, np.ndarray)]
    with pytest.raises(gpu.GPUUnavailableError, match="cannot run the GPU program") as info:
        getattr(prog, fn)(*args)
    # The error the call raised is one of tdf's (callers catch tdf.TDFError).
    assert isinstance(info.value, tdf.TDFError)
    for old, new in zip(before, [a for a in args if isinstance(a, np.ndarray)]):
        assert np.array_equal(old, new)


def test_call_checks_arguments_before_running(compiled):
    with pytest.raises(TypeError, match="takes 3 arguments, got 1"):
        compiled["kv"].step(np.zeros((4, 16, 64), np.float32))
    with pytest.raises(TypeError, match=r"argument #0 of @step must be tensor<4x16x64xf32>"):
        compiled["kv"].step(np.zeros((4, 16, 64), np.float64), np.zeros((4, 1, 64), np.float32), 0)


@pytest.mark.parametrize("chip", ["sm_91", "sm_9", "compute_90", "sm_90 cubin-format=bin", "SM_90", ""])
def test_bad_chip_raises(chip):
    with pytest.raises(gpu.GPUCompileError, match="unsupported chip"):
        gpu.compile_nvvm(KV, chip=chip, inplace=False)


@pytest.mark.parametrize("opts,message", [
    ({"format": "elf"}, "unknown format 'elf'"),
    ({"opt_level": 7}, "opt-level 7"),
    ({"tile_sizes": "0,4"}, "bad tile-sizes"),
    ({"tile_sizes": "64,64"}, "4096 threads per block"),
    ({"bogus": 1}, "unknown options: bogus"),
])
def test_bad_options_raise(opts, message):
    with pytest.raises(gpu.GPUCompileError, match=message):
        gpu.compile_nvvm(KV, inplace=False, **opts)


def test_bad_chip_never_aborts_tdf_opt(tmp_path):
    source = tmp_path / "kv.mlir"
    source.write_text(KV)
    tdf_opt = os.path.join(os.path.dirname(sys.executable), "tdf-opt")
    for chip in ("sm_91", "sm_90a+", "sm_1000"):
        done = subprocess.run([tdf_opt, str(source), f"--tdf-lower-to-nvvm=chip={chip}"],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 1, (done.returncode, done.stderr)
        assert "unsupported chip" in done.stderr


def test_bad_chip_never_aborts_python():
    code = ("import tdf.gpu as g\n"
            "try:\n"
            f"    g.compile_nvvm({KV!r}, chip='sm_91', inplace=False)\n"
            "except g.GPUCompileError as e:\n"
            "    print('raised:', str(e).splitlines()[0])\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, (done.returncode, done.stderr)
    assert done.returncode not in (134, -6)
    assert "raised: unsupported chip 'sm_91'" in done.stdout


def test_host_read_of_device_memory_is_located_error():
    """A host read of a computed tensor too large to copy back whole
    (tdf-gpu-host-scalars' 256 bytes) is a located error; a read of an
    argument (the caller's host buffer) compiles."""
    text = """
func.func @first(%x: tensor<128xf32>) -> f32 {
  %c0 = arith.constant 0 : index
  %e = tensor.empty() : tensor<128xf32>
  %y = linalg.exp ins(%x : tensor<128xf32>) outs(%e : tensor<128xf32>) -> tensor<128xf32>
  %v = tensor.extract %y[%c0] : tensor<128xf32>
  return %v : f32
}
"""
    with pytest.raises(tdf.PipelineError, match=r"first\.mlir:6:8: error: memref\.load accesses device memory"):
        gpu.compile_nvvm(text, inplace=False, filename="first.mlir")
    argument = text.replace("tensor.extract %y[%c0]", "tensor.extract %x[%c0]")
    assert "memref.load %arg0" in gpu.compile_nvvm(argument, inplace=False, ptxas=False).gpu_text


def test_module_input_is_not_modified():
    ctx = tdf.Context()
    module = tdf.parse(KV, ctx)
    before = str(module)
    prog = gpu.compile_nvvm(module, inplace=False, ptxas=False)
    assert str(module) == before
    assert prog.ptx_modules


def test_bad_ir_is_parse_error():
    with pytest.raises(tdf.ParseError, match="bad.mlir:2"):
        gpu.compile_nvvm("func.func @f() {\n  %x = bogus.op\n}", inplace=False, filename="bad.mlir")


def test_pipeline_stops_at_gpu_in_python():
    ctx = tdf.Context()
    module = tdf.parse(KV, ctx)
    tdf.run_pipeline(module, "builtin.module(tdf-lower-to-nvvm{inplace=false stop-at=gpu})")
    text = str(module)
    assert "gpu.module @step_kernel" in text and "gpu.binary" not in text


@pytest.mark.parametrize("text,fn", [(CHAIN_FUNCTIONAL, "chain"), (CONCAT_FUNCTIONAL, "concat")])
def test_inplace_pipeline_on_functional_programs(text, fn):
    on = gpu.compile_nvvm(text, inplace=True, ptxas=False).report()
    off = gpu.compile_nvvm(text, inplace=False, ptxas=False).report()
    # In place never costs more on the device, and saves on these programs.
    assert on.device_alloc_bytes <= off.device_alloc_bytes
    assert len(on.device_copies) <= len(off.device_copies)
    assert (on.device_alloc_bytes, len(on.device_copies)) < (off.device_alloc_bytes, len(off.device_copies))
    if fn == "chain":
        assert on.inplace, "tdf-insert-inplace made no call in place"


# ---------------------------------------------------------------------------
# Execution on a GPU (only where one is present), against JAX.
# ---------------------------------------------------------------------------

@needs_gpu
def test_gpu_chain_matches_jax(compiled):
    import jax.numpy as jnp

    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 128), dtype=np.float32)
    y = rng.standard_normal((64, 128), dtype=np.float32)
    expected = np.asarray(jnp.asarray(x) + 2 * jnp.asarray(y))
    y_before = y.copy()
    out = compiled["chain"].chain(x, y)
    np.testing.assert_allclose(out, expected, rtol=1e-6, atol=1e-6)
    assert out is x  # the donated argument, updated in place
    assert np.array_equal(y, y_before)


@needs_gpu
def test_gpu_kv_update_matches_jax(compiled):
    import jax

    rng = np.random.default_rng(1)
    cache = rng.standard_normal((4, 16, 64), dtype=np.float32)
    row = rng.standard_normal((4, 1, 64), dtype=np.float32)
    expected = np.asarray(jax.lax.dynamic_update_slice(cache, row, (0, 5, 0)))
    out = compiled["kv"].step(cache, row, 5)
    assert np.array_equal(out, expected)


@needs_gpu
def test_gpu_concat_matches_jax(compiled):
    import jax.numpy as jnp

    rng = np.random.default_rng(2)
    a = rng.standard_normal((4, 64), dtype=np.float32)
    b = rng.standard_normal((4, 64), dtype=np.float32)
    expected = np.asarray(jnp.concatenate([jnp.exp(a), jnp.exp(b)]))
    out = compiled["concat"].concat(a, b)
    np.testing.assert_allclose(out, expected, rtol=1e-5)


@needs_gpu
def test_gpu_decode_loop_matches_jax(compiled):
    import jax

    rng = np.random.default_rng(3)
    cache = rng.standard_normal((4, 16, 64), dtype=np.float32)
    rows = rng.standard_normal((4, 16, 64), dtype=np.float32)
    expected = cache.copy()
    for t in range(6):
        expected = np.asarray(jax.lax.dynamic_update_slice(expected, rows[:, t:t + 1], (0, t, 0)))
    out = compiled["loop"].decode(cache, rows, 6)
    assert out is cache
    assert np.array_equal(out, expected)


@pytest.mark.parametrize("pool", [True, False])
def test_final_module_translates_and_needs_only_the_cuda_runtime(pool):
    """Without a GPU: the final module translates to LLVM IR and JIT-links;
    the only missing symbols are the mgpu* entry points of
    libmlir_cuda_runtime.so (the GPU runtime ABI), PTX loaded by the driver,
    and, with the pool, tdf's tdf_gpu_mem_alloc/free in place of
    mgpuMemAlloc/mgpuMemFree (tdf.gpu registers them in its engine)."""
    code = ("import tdf.gpu as g\n"
            "from tdf.jit_symbols import runtime_libs\n"
            "from mlir.execution_engine import ExecutionEngine\n"
            f"p = g.compile_nvvm({KV!r}, inplace=False, ptxas=False, pool={pool})\n"
            "e = ExecutionEngine(p.module, opt_level=2, shared_libs=runtime_libs())\n"
            "try:\n"
            "    e.lookup('step')\n"
            "except RuntimeError as err:\n"
            "    print('lookup failed:', err)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, (done.returncode, done.stderr)
    assert "lookup failed" in done.stdout
    allocation = ["tdf_gpu_mem_alloc", "tdf_gpu_mem_free"] if pool else ["mgpuMemAlloc",
                                                                         "mgpuMemFree"]
    for symbol in ("mgpuLaunchKernel", "mgpuMemcpy", "mgpuModuleLoadJIT", *allocation):
        assert symbol in done.stderr
    for symbol in ["mgpuMemAlloc", "mgpuMemFree"] if pool else ["tdf_gpu_mem_alloc"]:
        assert symbol not in done.stderr


def _decode_like(cache, x, g, pos):
    """A decode step's host scalars: a LayerNorm (its mean and variance are
    reductions to a scalar that a fused loop reads), the position (an
    argument) indexing a donated cache."""
    import jax.numpy as jnp
    from jax import lax

    mu = jnp.mean(x)
    y = (x - mu) * lax.rsqrt(jnp.mean((x - mu) ** 2) + 1e-5) * g
    return lax.dynamic_update_slice(cache, y[None], (pos, 0))


@needs_ptxas
def test_host_scalars_of_a_jax_decode_step_compile():
    """A JAX decode step reads scalars on the host: the position argument
    (read from the caller's buffer) and LayerNorm's reductions (one-thread
    kernels, copied back 4 bytes each: tdf-gpu-host-scalars). Before, the
    GPU path refused it (host read of device memory)."""
    import tdf.jax

    args = (np.zeros((16, 64), np.float32), np.ones(64, np.float32), np.ones(64, np.float32),
            np.int32(3))
    text = tdf.jax.jit(_decode_like, donate_argnums=(0,)).lower(*args).as_text()
    prog = gpu.compile_nvvm(text, blas=False)
    assert prog.cubins  # ptxas accepted every kernel, the one-thread ones too
    gpu_text = prog.gpu_text
    assert gpu_text.count('tdf.transfer = "d2h"') >= 3  # two reductions read back + the cache
    assert "memref.alloca() : memref<f32>" in gpu_text
    # The pass is what makes it compile.
    with pytest.raises(tdf.PipelineError, match="accesses device memory on the host"):
        _without_host_scalars(text)


def _without_host_scalars(text):
    """tdf-lower-to-nvvm's stages with tdf-gpu-host-scalars left out."""
    from tdf.passes import pipelines

    options = {o.name: o.default for o in pipelines.NVVM_OPTIONS}
    options.update(blas="false", inplace=True)
    module = tdf.parse(text, tdf.Context())
    for _, passes in pipelines.stage_pipelines(options):
        tdf.run_pipeline(module, "builtin.module(" + passes.replace(
            "tdf-gpu-host-scalars, ", "").replace(", tdf-gpu-host-scalars", "") + ")")
