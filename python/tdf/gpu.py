"""The GPU path: compile a tdf program for NVIDIA GPUs (NVVM, PTX, cubin) and
run it where a GPU exists.

    prog = tdf.gpu.compile_nvvm(text, chip="sm_90")
    prog.ptx              # PTX text of every kernel module
    prog.cubin            # cubin bytes (ptxas found, one kernel module) or None
    prog.report()         # in-place decisions, device copies, host<->device transfers
    out = prog.step(cache, row, 3)   # numpy in/out; raises GPUUnavailableError without a GPU
    prog.export_library("libstep.so")  # + libstep.json: runs where only numpy and a GPU are

The compilation runs the stages of the ``tdf-lower-to-nvvm`` pipeline
(:func:`tdf.passes.pipelines.stage_pipelines`) one by one and records what each decided:
after donation/in-place rewriting the ``tdf.call_inplace`` decisions, after
bufferization the copies and allocations left on the device, after GPU
mapping the explicit ``gpu.memcpy`` transfers (tagged ``tdf.transfer``) and
kernel launches, and after NVVM the PTX of each ``gpu.binary``. When
``ptxas`` is on ``PATH`` each PTX module is assembled for the chip (the
result is ``cubins``; a failure raises :class:`GPUCompileError`).

Calls go through ``mlir.execution_engine.ExecutionEngine`` with
``libmlir_cuda_runtime.so`` (the MLIR tools wheel); they need
``libcuda.so.1`` and a device, checked (with ``cuInit``) before anything
loads the CUDA runtime library, so a machine without a GPU gets a
:class:`GPUUnavailableError`, never a crash.

Contractions (matmul, batch_matmul, transposed operands, bf16/f16 inputs of
f32, ...) run through cuBLAS with ``blas=True`` (the default where cuBLAS
loads): ``tdf-contractions-to-cublas`` makes each one a host call of the
runtime's ``tdf_gpu_contract`` (``python/src/GpuRuntime.cpp``), which waits for
the kernels before it, runs one cuBLAS GEMM and waits for it. Such a program
needs cuBLAS where it runs: without it a call raises
:class:`GPUUnavailableError` before anything runs; a failure of cuBLAS in a
call raises :class:`GPUError`.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import shutil
import subprocess
import tempfile
import time

from mlir import ir

from . import _tdf, gpu_library
from .errors import TDFError, format_location
from .gpu_export import argument_spec as _argument_spec
from .jit_symbols import mlir_lib
from .parsing import parse_program
from .passes.ir_utils import collect_ops, function_type, has_body, is_public, sym_name
from .pipeline import run_pipeline
from .report import GPUReport, record_gpu_stage
from .runtime import ScalarSpec
from .vocabulary import (
    CPU_ONLY_FUNCTIONS,
    DTYPES,
    EMIT_C_INTERFACE_ATTR,
    GPU_CONTRACT,
    GPU_MEM_ALLOC,
    GPU_MEM_FREE,
    SCALAR_TYPES,
)

__all__ = [
    "compile_nvvm",
    "GPUProgram",
    "GPUReport",
    "GPUError",
    "GPUCompileError",
    "GPUUnavailableError",
    "cuda_available",
    "cublas_available",
]


class GPUError(TDFError):
    """Base class of the GPU path's errors."""


class GPUCompileError(GPUError, ValueError):
    """Bad GPU compile options (chip, format, ...) or PTX that ptxas rejects."""


class GPUUnavailableError(GPUError):
    """A compiled GPU program was called on a machine without a usable
    CUDA driver (``libcuda.so.1``) or device."""


def _passes():
    from . import passes  # the installed tdf.passes package

    return passes


def cuda_available() -> tuple[bool, str]:
    """(True, "") when ``libcuda.so.1`` loads, ``cuInit`` succeeds and at
    least one device exists; otherwise (False, reason)."""
    name = ctypes.util.find_library("cuda") or "libcuda.so.1"
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:
        try:
            lib = ctypes.CDLL(name)
        except OSError as err:
            return False, f"the CUDA driver library libcuda.so.1 cannot be loaded ({err})"
    status = lib.cuInit(0)
    if status != 0:
        return False, f"cuInit failed with CUDA error {status} (no usable GPU)"
    count = ctypes.c_int(0)
    status = lib.cuDeviceGetCount(ctypes.byref(count))
    if status != 0 or count.value == 0:
        return False, "the CUDA driver reports no GPU device"
    return True, ""


def cublas_available() -> tuple[bool, str]:
    """(True, library) when cuBLAS and the CUDA driver load in this process
    (``TDF_CUBLAS_LIBRARY``, NVIDIA's wheels, the system's
    ``libcublas.so.13``/``.12``/``.11``/``libcublas.so``); otherwise (False,
    reason). What ``blas=None`` decides with."""
    return _passes().contractions_to_cublas.cublas_available()


# ---------------------------------------------------------------------------
# Compilation
# ---------------------------------------------------------------------------

def _loc(op, filename=None) -> str:
    return format_location(op.location, filename)


def _run_ptxas(ptx: str, chip: str, ptxas: str) -> bytes:
    with tempfile.TemporaryDirectory(prefix="tdf-ptxas-") as tmp:
        src = os.path.join(tmp, "kernel.ptx")
        out = os.path.join(tmp, "kernel.cubin")
        with open(src, "w") as handle:
            handle.write(ptx)
        done = subprocess.run([ptxas, f"-arch={chip}", "-O3", src, "-o", out],
                              capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise GPUCompileError(f"ptxas -arch={chip} rejected the PTX:\n{done.stderr.strip()}")
        with open(out, "rb") as handle:
            return handle.read()


def _entries(module, filename: str) -> dict:
    """The public functions with a body (name -> function type), marked
    ``llvm.emit_c_interface``. The GPU call path sizes transfers and results
    from the static types: a dynamic shape is a :class:`GPUCompileError`."""
    entries = {}
    with module.context:
        for func in collect_ops(module, "func.func"):
            if not has_body(func) or not is_public(func):
                continue
            func.attributes[EMIT_C_INTERFACE_ATTR] = ir.UnitAttr.get()
            fname, ftype = sym_name(func), function_type(func)
            for what, types in (("argument", ftype.inputs), ("result", ftype.results)):
                for index, type_ in enumerate(types):
                    if isinstance(type_, ir.ShapedType) and not ir.ShapedType(type_).has_static_shape:
                        raise GPUCompileError(
                            f"{_loc(func, filename)}: @{fname} {what} #{index} has the dynamic "
                            f"shape {type_}: the GPU path supports static shapes only "
                            f"(compile it with target='cpu', or give it a static shape)")
            entries[fname] = ftype
    return entries


def _check_cpu_only_calls(module, filename: str) -> None:
    """A call of a CPU runtime kernel (``tdf_rt_sort``: ``sort``/``top_k`` of
    ``tdf.jax``) is a :class:`GPUCompileError` naming the call's location."""
    with module.context:
        for op in collect_ops(module, ("tdf.call", "tdf.call_inplace", "tdf.call_opaque",
                                       "func.call")):
            callee = ir.FlatSymbolRefAttr(op.attributes["callee"]).value
            if callee in CPU_ONLY_FUNCTIONS:
                raise GPUCompileError(
                    f"{_loc(op, filename)}: {op.name} @{callee} is a kernel of tdf's CPU "
                    f"runtime ({CPU_ONLY_FUNCTIONS[callee]}), which the GPU path cannot call: "
                    f"compile this program with target='cpu'")


def _blas_choice(blas) -> str:
    """The ``blas`` option of ``tdf-lower-to-nvvm`` for ``compile_nvvm``'s
    ``blas`` (None: ``auto``)."""
    if blas is None:
        return "auto"
    if not isinstance(blas, bool):
        raise GPUCompileError(f"blas must be True, False or None, got {blas!r}")
    return "true" if blas else "false"


def compile_nvvm(module_or_text, chip: str = "sm_90", inplace: bool = True, strict: bool = False,
                 **opts) -> GPUProgram:
    """Compiles a tdf program (text or ``ir.Module``; a module is copied,
    with its locations, into a fresh context, never changed) with
    ``tdf-lower-to-nvvm`` for ``chip``.

    Keyword options: ``format`` (``isa``, ``bin``, ``fatbin``; default
    ``isa``), ``opt_level`` (0-3, default 3), ``tile_sizes`` (default
    ``"32,8"``), ``ptxas`` (a path; None/True: ``ptxas`` on PATH; ``False``
    skips it), ``filename`` (for error locations), ``blas`` (True:
    contractions cuBLAS can run become calls of it, ``tdf_gpu_contract``;
    False: every contraction is a kernel; None, the default: True when
    cuBLAS and the CUDA driver load on this machine), ``pool`` (default
    True: device buffers from tdf's stream-ordered pool,
    ``tdf-gpu-pooled-alloc``).

    Raises :class:`GPUCompileError` for a bad option (before MLIR sees it),
    :class:`tdf.ParseError` for bad IR, :class:`tdf.PipelineError` when a
    stage fails (e.g. host code that would touch device memory).
    """
    passes = _passes()
    lower = passes.pipelines
    filename = opts.pop("filename", "<input>")
    ptxas = opts.pop("ptxas", None)
    options = {
        "chip": chip,
        "inplace": bool(inplace),
        "strict": bool(strict),
        "format": opts.pop("format", "isa"),
        "opt-level": opts.pop("opt_level", 3),
        "tile-sizes": opts.pop("tile_sizes", "32,8"),
        "stop-at": "nvvm",
        "blas": _blas_choice(opts.pop("blas", None)),
        "pool": opts.pop("pool", True),
    }
    if opts:
        raise GPUCompileError(f"compile_nvvm got unknown options: {', '.join(sorted(opts))}")
    if not isinstance(chip, str):
        raise GPUCompileError(f"chip must be a string such as 'sm_90', got {chip!r}")
    if not isinstance(options["opt-level"], int) or not isinstance(options["tile-sizes"], str) \
            or not isinstance(options["format"], str) or not isinstance(options["pool"], bool):
        raise GPUCompileError("opt_level must be an int, tile_sizes and format strings, "
                              "pool a bool")
    try:
        stages = lower.stage_pipelines(options)
    except ValueError as err:
        raise GPUCompileError(str(err)) from None

    module = parse_program(module_or_text, filename, "compile_nvvm")

    _check_cpu_only_calls(module, filename)
    entries = _entries(module, filename)
    report = GPUReport()
    texts = {}
    for stage, pipeline in stages:
        start = time.perf_counter()
        run_pipeline(module, f"builtin.module({pipeline})", filename=filename)
        report.compile_seconds[stage] = time.perf_counter() - start
        texts[stage] = str(module)
        record_gpu_stage(report, stage, module, filename)

    ptx_modules = {}
    for op in collect_ops(module, "gpu.binary"):
        name = ir.StringAttr(op.attributes["sym_name"]).value
        from mlir.dialects import gpu as gpu_dialect

        for attr in ir.ArrayAttr(op.attributes["objects"]):
            obj = gpu_dialect.ObjectAttr(attr)
            if options["format"] == "isa":
                ptx_modules[name] = obj.object.decode()

    cubins = {}
    if ptxas is None or ptxas is True:
        ptxas = shutil.which("ptxas")
    if ptxas and options["format"] == "isa":
        start = time.perf_counter()
        for name, ptx in ptx_modules.items():
            cubins[name] = _run_ptxas(ptx, chip, ptxas)
        report.compile_seconds["ptxas"] = time.perf_counter() - start
        report.ptxas = f"{len(cubins)} module(s) accepted by ptxas -arch={chip}"
    elif ptxas is False:
        report.ptxas = "not run (ptxas=False)"
    elif options["format"] == "isa":
        report.ptxas = "ptxas not found: PTX not assembled"
    return GPUProgram(module, texts, ptx_modules, cubins, report, entries, chip)


# ---------------------------------------------------------------------------
# The program object and its calls
# ---------------------------------------------------------------------------

class GPUProgram:
    """A compiled GPU program. Attributes: ``ptx`` (str: every kernel
    module's PTX, each introduced by a ``// gpu.module @name`` line),
    ``ptx_modules`` ({name: PTX}), ``cubins`` ({name: bytes}, empty without
    ptxas), ``cubin`` (bytes of the only kernel module, else None),
    ``module`` (the final ``ir.Module``), ``text`` (its text), ``gpu_text``
    (the program after GPU mapping, before NVVM), ``chip``. Each public
    function of the program is a callable attribute (numpy in/out)."""

    def __init__(self, module, texts, ptx_modules, cubins, report, entries, chip):
        self.module = module
        self.text = texts.get("nvvm", str(module))
        self.gpu_text = texts.get("gpu")
        self.stage_texts = texts
        self.ptx_modules = ptx_modules
        self.ptx = "\n".join(f"// gpu.module @{n}\n{p}" for n, p in ptx_modules.items())
        self.cubins = cubins
        self.cubin = next(iter(cubins.values())) if len(cubins) == 1 else None
        self.chip = chip
        self._report = report
        self._entries = entries
        self._engine = None
        callees = {ir.FlatSymbolRefAttr(op.attributes["callee"]).value
                   for op in collect_ops(module, ("func.call", "llvm.call"))
                   if "callee" in op.attributes}
        #: Whether the host code calls cuBLAS (``tdf_gpu_contract``).
        self.uses_cublas = GPU_CONTRACT in callees
        #: Whether the host code calls tdf's GPU runtime
        #: (``libtdf_gpu_runtime.so``: cuBLAS calls, the device pool).
        self.uses_runtime = bool(callees & {GPU_CONTRACT, GPU_MEM_ALLOC, GPU_MEM_FREE})
        for name in entries:
            if not hasattr(self, name):
                setattr(self, name, _GPUFunction(self, name, entries[name]))

    def report(self) -> GPUReport:
        """In-place decisions, device copies, device bytes, transfers
        (counted statically per call), kernel launches, compile times."""
        return self._report

    def functions(self) -> list[str]:
        return list(self._entries)

    def export_library(self, path: str, cpu: str | None = None, opt_level: int = 2) -> dict:
        """Writes the program as a shared library ``path`` for a machine
        with a GPU but without MLIR or tdf, and its manifest
        ``<stem>.json``; returns the manifest. ``cpu``: the x86-64 CPU the
        host code is compiled for (default ``x86-64-v2``). Load it with
        :func:`tdf.gpu_library.load_library` (a file that needs only numpy).
        See :mod:`tdf.gpu_export`."""
        from .gpu_export import DEFAULT_CPU, export_library

        return export_library(self, path, DEFAULT_CPU if cpu is None else cpu, opt_level)

    def _get_engine(self):
        ok, reason = cuda_available()
        if not ok:
            raise GPUUnavailableError(f"cannot run the GPU program: {reason}")
        if self._engine is None:
            from mlir.execution_engine import ExecutionEngine

            libs = []
            for name in ("libmlir_cuda_runtime.so", "libmlir_c_runner_utils.so"):
                path = mlir_lib(name)
                if path is None:
                    raise GPUUnavailableError(f"cannot run the GPU program: {name} is missing "
                                              f"from the MLIR package")
                libs.append(path)
            if self.uses_cublas:
                ok, reason = cublas_available()
                if not ok:
                    raise GPUUnavailableError(
                        f"cannot run the GPU program: its contractions call cuBLAS "
                        f"(compiled with blas), and {reason} (compile it with blas=False)")
            engine = ExecutionEngine(self.module, opt_level=2, shared_libs=libs)
            if self.uses_runtime:
                for name, address in _tdf.gpu_runtime_symbols().items():
                    engine.raw_register_runtime(name, ctypes.c_void_p(address))
            self._engine = engine
        return self._engine


class _GPUFunction:
    """A public function of a :class:`GPUProgram`: numpy arrays for memref
    arguments, Python numbers for scalars; returns numpy arrays (a result
    that is a donated argument's buffer is that argument, updated)."""

    def __init__(self, program, name, ftype):
        self.program = program
        self.name = name
        self.ftype = ftype
        # The results as the shared marshalling (gpu_library) describes them.
        self._results = [_argument_spec(t) for t in ftype.results]

    def _check(self, args):
        import numpy as np

        inputs = list(self.ftype.inputs)
        if len(args) != len(inputs):
            raise TypeError(f"@{self.name} takes {len(inputs)} arguments, got {len(args)}")
        for index, (arg, type_) in enumerate(zip(args, inputs)):
            if isinstance(type_, ir.RankedTensorType):
                if not isinstance(arg, np.ndarray):
                    raise TypeError(f"argument #{index} of @{self.name} must be a numpy array")
                want = DTYPES.get(str(type_.element_type), np.dtype("void"))
                if arg.dtype != want or tuple(arg.shape) != tuple(type_.shape):
                    raise TypeError(f"argument #{index} of @{self.name} must be {type_} "
                                    f"({want}{list(type_.shape)}), got {arg.dtype}{list(arg.shape)}")
                if not arg.flags["C_CONTIGUOUS"]:
                    raise TypeError(f"argument #{index} of @{self.name} must be C-contiguous")
            else:
                self._scalar(index, type_, arg)

    def _scalar(self, index, type_, arg):
        """The C value of scalar argument ``index`` (the CPU runtime's
        :class:`~tdf.runtime.ScalarSpec` conversion and checks)."""
        where = f"argument #{index} of @{self.name}"
        if str(type_) not in SCALAR_TYPES:
            raise TypeError(f"{where} has the unsupported scalar type {type_} "
                            f"(expected one of {', '.join(SCALAR_TYPES)})")
        spec = ScalarSpec(str(type_))
        try:
            return spec.ctype(spec.convert(arg))
        except (TypeError, ValueError) as err:
            raise type(err)(f"{where} ({type_}): {err}") from None

    def __call__(self, *args):
        self._check(args)
        engine = self.program._get_engine()
        results = self._results
        if any("scalar" in spec for spec in results):
            raise GPUError(f"@{self.name}: only tensor results can be returned")
        packed, keep = [], []
        for index, (arg, type_) in enumerate(zip(args, self.ftype.inputs)):
            if isinstance(type_, ir.RankedTensorType):
                keep.append(gpu_library.array_descriptor(arg))
                packed.append(ctypes.pointer(ctypes.pointer(keep[-1])))
            else:
                keep.append(self._scalar(index, type_, arg))
                packed.append(ctypes.pointer(keep[-1]))
        struct = gpu_library.results_struct(results) if results else None
        if struct is not None:
            packed.insert(0, ctypes.pointer(ctypes.pointer(struct)))
        _tdf.gpu_take_error()  # none is pending: a failed call raised
        engine.invoke(self.name, *packed)
        failure = _tdf.gpu_take_error()
        free = _libc_free()
        if failure:
            if struct is not None:
                gpu_library.free_results(struct, len(results), args, free)
            raise GPUError(f"@{self.name}: {failure}")
        return None if struct is None else gpu_library.take_results(struct, results, args, free)


@functools.cache
def _libc_free():
    free = ctypes.CDLL(None).free
    free.argtypes = [ctypes.c_void_p]
    return free
