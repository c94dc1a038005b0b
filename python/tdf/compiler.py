"""``tdf.compile``: from a tdf program (text or module) to callable functions.

For ``target="cpu"`` the program goes through the stages of
``tdf-lower-to-cpu`` (:func:`tdf.passes.pipelines.cpu_stages`, with the
run-time checks on), one at a time, recording what each decided
(:mod:`tdf.report`):

1. ``inplace``: ``tdf-check-sizes``, the kernel fusion (the calls it fuses
   away are recorded) and ``tdf-insert-inplace`` when ``inplace=True``;
   then an analysis-only One-Shot Bufferize run on a clone, which tells
   which in-place writes happen and which operands must be copied first
   (and why): the data of :meth:`Program.report`;
2. ``strict`` (``strict=True``): ``tdf-verify-inplace{strict=true}``, whose
   errors raise :class:`StrictModeError`; it reads the One-Shot analysis
   of step 1 (:mod:`tdf.passes.analysis.manager`) instead of running its own;
3. ``bufferize``: ``tdf-bounds-checks`` (unless ``bounds_checks=False``) and
   ``tdf-bufferize`` (donation, One-Shot Bufferize, dropping results that are
   donated arguments, ownership-based deallocation); the copies and
   allocations left are recorded;
4. ``llvm``: ``tdf-alloc-checks`` and the lowering to LLVM; then tdf's code
   generator (:mod:`tdf.objects`: host objects, linked with ``shared_libs``
   for declaration-only kernels).

Public functions with a body and tensor/scalar parameters are the entry
points; each becomes an attribute of the returned :class:`Program` (see
:mod:`tdf.runtime` for the calling convention)::

    prog = tdf.compile(text)
    new_cache = prog.step(cache, row, pos)      # cache is donated: new_cache is cache
    print(prog.report())

Two builds exist for measuring what in place buys:
``copy_before_write=True`` is the functional baseline (``tdf-bufferize
{copy-before-write=true}``, no ``tdf-insert-inplace``: every write copies) and
``count_allocations=True`` counts the bytes the compiled code allocates at run
time (:meth:`Program.allocation_stats`)::

    base = tdf.compile(text, copy_before_write=True, count_allocations=True)
    base.step(cache, row, pos)
    base.allocation_stats().bytes               # >= cache.nbytes

``target="nvvm"`` dispatches to :func:`tdf.gpu.compile_nvvm`.
"""

from __future__ import annotations

import os
import threading

from mlir import ir

from . import blas as _blas
from . import cache as _cache
from . import jit_symbols
from . import objects as _objects
from . import report as _report
from . import tiers as _tiers
from . import timing as _timing
from .errors import CompileError, PipelineError, StrictModeError
from .memory import MemoryAnalysis, memory_analyses
from .parsing import parse_program
from .passes import pipelines
from .passes._runtime_sites import read_sites
from .passes.analysis.manager import AnalysisCache, preserved
from .passes.analysis.one_shot import OneShotAnalysis
from .passes.ir_utils import collect_ops, function_type, has_body, is_public, sym_name
from .pipeline import run_pipeline
from .report import Allocation, Copy, FusedCall, InplaceDecision, Report
from .runtime import (
    AllocationCounter,
    AllocationStats,
    EntryFunction,
    signature,
)
from .vocabulary import EMIT_C_INTERFACE_ATTR, RUNTIME_FUNCTIONS
from .vocabulary import RUNTIME_SITES_ATTR as SITES_ATTR

__all__ = ["compile", "Program", "CompileError", "StrictModeError", "InplaceDecision",
           "FusedCall", "Copy", "Allocation", "AllocationStats", "Report"]

TARGETS = ("cpu", "nvvm")

# A function making more calls than this keeps them as calls (``no_inline``):
# LLVM's inliner would paste every kernel body into it, and optimising the
# result grows faster than linearly in the number of calls.
MAX_INLINED_CALLS = 256


class Program:
    """A compiled CPU program. Each entry function is an attribute
    (``prog.step(...)``) and is in :attr:`functions`."""

    def __init__(self, functions, report, engine, llvm_ir, buffer_ir, context,
                 counter=None, memory=None):
        self.functions = dict(functions)
        self._memory = dict(memory or {})
        if hasattr(report, "memory") and not report.memory:
            report.memory = self._memory
        self._report = report
        self._counter = counter
        self._codes = engine  # the linked code (a list for a tiered compile)
        self._optimized = threading.Event()
        self._optimized.set()
        self._tier_error: str | None = None
        self._context = context
        # Each text, or the module it is the text of: printed when first
        # read (a 4-layer GPT-2's two texts take 10 ms to print).
        self._texts = {"llvm_ir": llvm_ir, "buffer_ir": buffer_ir}
        for name, fn in self.functions.items():
            if not hasattr(type(self), name) and not name.startswith("_"):
                setattr(self, name, fn)

    def _text(self, name: str) -> str:
        text = self._texts[name]
        if not isinstance(text, str):
            text = self._texts[name] = str(text)
        return text

    @property
    def llvm_ir(self) -> str:
        """The program in the LLVM dialect, as LLVM received it (text)."""
        return self._text("llvm_ir")

    @property
    def buffer_ir(self) -> str:
        """The program right after bufferization (text): the buffers, copies
        and deallocations the report counts."""
        return self._text("buffer_ir")

    def __getitem__(self, name):
        return self.functions[name]

    @property
    def optimized(self) -> bool:
        """False while a tiered compile (``tiered=True``) still runs the
        ``-O0`` code: :mod:`tdf.tiers`."""
        return self._optimized.is_set() and self._tier_error is None

    def wait_optimized(self, timeout: float | None = None) -> bool:
        """Waits (at most ``timeout`` seconds) for a tiered compile's
        optimized code; returns :attr:`optimized`. ``RuntimeError`` when the
        background compile failed (the ``-O0`` code keeps running)."""
        self._optimized.wait(timeout)
        if self._tier_error is not None:
            raise RuntimeError(f"the optimizing compile failed: {self._tier_error}")
        return self.optimized

    def report(self) -> Report:
        """In-place decisions, remaining copies (and why) and the static bytes
        allocated per call; ``print(prog.report())`` formats them."""
        return self._report

    def memory_analysis(self, name: str | None = None) -> MemoryAnalysis:
        """The memory one call of entry ``name`` uses, known at compile time
        (:class:`tdf.memory.MemoryAnalysis`, JAX's field names:
        ``temp_size_in_bytes``, ``argument_size_in_bytes``,
        ``output_size_in_bytes``, ``alias_size_in_bytes``,
        ``peak_memory_in_bytes``). ``name`` may be left out when the program
        has one entry."""
        if name is None:
            if len(self._memory) != 1:
                raise ValueError(f"the program has {len(self._memory)} entry functions "
                                 f"({', '.join(sorted(self._memory))}): name one")
            return next(iter(self._memory.values()))
        if name not in self._memory:
            raise KeyError(f"no entry function @{name}")
        return self._memory[name]

    @property
    def counts_allocations(self) -> bool:
        """True when compiled with ``count_allocations=True``."""
        return self._counter is not None

    def _require_counter(self):
        if self._counter is None:
            raise RuntimeError("allocation counting is off: compile with "
                               "tdf.compile(..., count_allocations=True)")
        return self._counter

    def allocation_stats(self) -> AllocationStats:
        """Heap allocations the compiled code made at run time since the last
        :meth:`reset_allocation_stats` (or since compilation):
        ``calls``, ``frees``, ``bytes`` allocated, ``live_bytes`` (not yet
        freed, including buffers owned by live result arrays) and
        ``peak_bytes``. Needs ``count_allocations=True`` (else
        ``RuntimeError``)."""
        return self._require_counter().stats()

    def reset_allocation_stats(self) -> None:
        """Zeroes the run-time allocation counters; the peak restarts at the
        current live bytes."""
        self._require_counter().reset()

    def __repr__(self):
        return f"<tdf.Program {', '.join('@' + n for n in self.functions)}>"


# ------------------------------------------------------------------- options


def _check_options(target, chip, filename, flags: dict) -> None:
    for name, value in (("target", target), ("chip", chip), ("filename", filename)):
        if not isinstance(value, str):
            raise TypeError(f"tdf.compile expects {name} as str, got {type(value).__name__}")
    if target not in TARGETS:
        raise ValueError(f"unknown target {target!r} (expected one of {', '.join(TARGETS)})")
    for name, value in flags.items():
        if not isinstance(value, bool):
            raise TypeError(f"{name} must be a bool, got {value!r}")


def _check_cpu_options(opt_level, shared_libs, strict: bool, copy_before_write: bool) -> list:
    """Validates the CPU-only options; returns ``shared_libs`` as a list of paths."""
    if not isinstance(opt_level, int) or isinstance(opt_level, bool) or not 0 <= opt_level <= 3:
        raise ValueError(f"opt_level must be an integer in 0..3, got {opt_level!r}")
    if isinstance(shared_libs, (str, bytes, os.PathLike)):
        shared_libs = [shared_libs]
    shared_libs = [os.fspath(p) for p in shared_libs]
    for path in shared_libs:
        if not os.path.isfile(path):
            raise FileNotFoundError(f"shared library not found: {path!r} (shared_libs)")
    if copy_before_write and strict:
        raise ValueError("strict=True cannot be combined with copy_before_write=True "
                         "(the baseline copies before every write)")
    return shared_libs


def _check_blas_options(blas, flush_denormals, num_threads) -> bool:
    """Validates ``blas``, ``flush_denormals`` and ``num_threads``; returns
    whether contractions go to the BLAS."""
    if blas is not None and not isinstance(blas, bool):
        raise TypeError(f"blas must be a bool or None, got {blas!r}")
    if not isinstance(flush_denormals, bool):
        raise TypeError(f"flush_denormals must be a bool, got {flush_denormals!r}")
    if num_threads is not None and (not isinstance(num_threads, int) or
                                    isinstance(num_threads, bool) or
                                    not 1 <= num_threads < 1 << 16):
        raise ValueError(f"num_threads must be an integer in 1..65535, got {num_threads!r}")
    if blas is None:
        return _blas.available()
    if blas and not _blas.available():
        raise CompileError("blas=True: no BLAS library (install scipy-openblas32; "
                           "see tdf.blas)")
    return blas


# --------------------------------------------------------------------- input


class OwnedModule:
    """A program a frontend built for one :func:`compile` alone: the
    ``ir.Module`` (in a :func:`tdf.Context` that nothing else uses while the
    compile runs) is compiled as it is -- not printed and parsed again into
    a fresh context -- and consumed: the compile rewrites it, and a second
    compile of the same object is a ``ValueError``. ``tdf.jax.jit`` hands
    each compile a copy of its imported module this way."""

    def __init__(self, module: ir.Module):
        if not isinstance(module, ir.Module):
            raise TypeError(f"OwnedModule expects an mlir.ir.Module, got {type(module).__name__}")
        self._module: ir.Module | None = module

    def take(self) -> ir.Module:
        module, self._module = self._module, None
        if module is None:
            raise ValueError("an OwnedModule is compiled once (it was compiled already)")
        return module


def _input_module(text_or_module, filename: str) -> ir.Module:
    """The module to compile: an :class:`OwnedModule`'s own, else parsed
    into a fresh context (text, or an ``ir.Module`` printed first)."""
    if isinstance(text_or_module, OwnedModule):
        return text_or_module.take()
    return parse_program(text_or_module, filename, "tdf.compile")


# -------------------------------------------------------------------- stages


def _is_entry(func) -> bool:
    if not has_body(func) or not is_public(func):
        return False
    ftype = function_type(func)
    return not any(isinstance(t, ir.MemRefType) for t in list(ftype.inputs) + list(ftype.results))


def _entries(module, filename: str) -> dict:
    """Entry function name -> (parameter specs, result specs)."""
    entries = {sym_name(func): signature(func) for func in module.body.operations
               if func.operation.name == "func.func" and _is_entry(func)}
    if not entries:
        raise CompileError(f"{filename}: no public function with a body and tensor/scalar "
                           f"parameters to compile")
    return entries


def _run(module, passes: list[str], filename: str) -> None:
    """Runs one stage; the IR is verified at its end (after every pass with
    ``TDF_VERIFY_EACH`` set and not ``0``, for debugging a pass)."""
    run_pipeline(module, "builtin.module(" + ", ".join(passes) + ")", filename=filename,
                 verify_each=os.environ.get("TDF_VERIFY_EACH", "0") not in ("", "0"))


def _run_inplace_stage(module, passes: list[str], filename: str):
    """Runs the ``inplace`` stage; returns the number of calls it made in
    place and the :class:`FusedCall` of every call the kernel fusion removed
    (tagged before ``tdf-inline-kernels``, missed after it)."""
    before = _report.count_inplace_calls(module)
    fused = []
    if "tdf-inline-kernels" in passes:
        cut = passes.index("tdf-inline-kernels") + 1
        calls = _report.tag_calls(module, filename)
        _run(module, passes[:cut], filename)
        fused = _report.fused_calls(module, calls)
        passes = passes[cut:]
    if passes:
        _run(module, passes, filename)
    return _report.count_inplace_calls(module) - before, fused


def _run_strict_stage(module, passes: list[str], forced: list, filename: str) -> None:
    """Runs the ``strict`` stage; its errors become a :class:`StrictModeError`
    listing the forced copies."""
    try:
        _run(module, passes, filename)
    except PipelineError as err:
        errors = [d for d in err.diagnostics if d.severity == "error"]
        misses = [d for d in errors if d.message.endswith("(donation)")]
        copies = len(errors) - len(misses)
        parts = []
        if copies:
            parts.append(f"{copies} tdf.call_inplace operand(s) would need a copy")
        if misses:
            parts.append(f"{len(misses)} donated argument(s) would not hold their paired "
                         f"result")
        lines = "".join(f"\n  {d}" for d in forced) + \
            "".join(f"\n  {d.location}: {d.message}" for d in misses)
        raise StrictModeError(f"strict mode: {'; '.join(parts) or 'failed'}{lines}",
                              errors) from None


def _mark_c_interfaces(module, entries: dict) -> None:
    """Entry functions and body-less declarations (kernels from shared
    libraries) get the ``_mlir_ciface_`` C interface."""
    for func in collect_ops(module.operation, "func.func"):
        name = sym_name(func)
        if name in entries or (not has_body(func) and name not in RUNTIME_FUNCTIONS):
            func.attributes[EMIT_C_INTERFACE_ATTR] = ir.UnitAttr.get()


def _keep_calls_in_large_functions(module) -> None:
    """Calls stay calls (``no_inline``) in functions making many."""
    for func in module.body.operations:
        if func.operation.name != "llvm.func" or not len(func.regions[0].blocks):
            continue
        # The failure calls of run-time checks never return: not inlining candidates.
        calls = collect_ops(func, "llvm.call", lambda call: "callee" not in call.attributes or
                            ir.FlatSymbolRefAttr(call.attributes["callee"]).value
                            not in RUNTIME_FUNCTIONS)
        if len(calls) > MAX_INLINED_CALLS:
            for call in calls:
                call.attributes["no_inline"] = ir.UnitAttr.get()


def _runtime_sites(module, filename: str) -> list[tuple]:
    """The run-time check sites the check passes recorded, as
    ``(kind, function, op, location, dimension)`` with the file name of the
    input; the attribute itself is removed (the JIT has no use for it)."""
    sites = []
    for kind, function, op, location, dimension in read_sites(module.operation):
        name, _, rest = location.partition(":")
        if name in ("", "-", "<unknown>", "<string>"):
            location = f"{filename}:{rest}"
        sites.append((kind, function, op, location, int(dimension)))
    if SITES_ATTR in module.operation.attributes:
        del module.operation.attributes[SITES_ATTR]
    return sites


def _jit(module, entries: dict, opt_level: int, shared_libs: list, count_allocations: bool,
         filename: str, threads: int, tiered: bool, timer):
    """Machine code of the LLVM-dialect ``module`` linked into the process
    (the runtime symbols and, when counting, the counting allocator
    defined); returns ``(code, counter, addresses, objects, prepared)``
    with the address of each entry's packed C interface and the objects
    (:mod:`tdf.objects`); LLVM runs on up to ``threads`` threads. With
    ``tiered`` (and ``opt_level`` above 0) the code is LLVM's ``-O0`` and
    ``prepared`` the module to optimize in the background
    (:mod:`tdf.tiers`); else ``prepared`` is ``None``."""
    jit_libs = jit_symbols.runtime_libs() + shared_libs
    registered = (jit_symbols.COUNTED_ALLOCATION_SYMBOLS if count_allocations else ()) \
        + tuple(RUNTIME_FUNCTIONS)
    missing = jit_symbols.unresolved_functions(module, jit_libs, registered)
    if missing:
        raise CompileError(f"{filename}: the JIT cannot resolve external function(s) "
                           f"{', '.join(missing)} (not defined by the process or "
                           f"shared_libs)")
    counter = AllocationCounter() if count_allocations else None
    tiered = tiered and opt_level > 0
    try:
        prepared = _objects.prepare(module, threads, timer, list(entries))
        data, _ = _objects.compile_prepared(prepared, 0 if tiered else opt_level, timer)
        with timer.stage("link"):
            code, addresses = _objects.link(data, entries, jit_libs, counter)
    except RuntimeError as err:
        raise CompileError(f"{filename}: {err}") from None
    return code, counter, dict(zip(entries, addresses)), data, prepared if tiered else None


# ------------------------------------------------------------------- compile


def compile(text_or_module, target: str = "cpu", inplace: bool = True, strict: bool = False,
            opt_level: int = 2, shared_libs=(), chip: str = "sm_90", filename: str = "<input>",
            copy_before_write: bool = False, count_allocations: bool = False,
            bounds_checks: bool = True, blas: bool | None = None,
            flush_denormals: bool = True, num_threads: int | None = None,
            timing: bool | None = None, plan_memory: bool = True,
            tiered: bool | None = None, codegen_flops: int | None = None):
    """Compiles a tdf program.

    ``text_or_module``: MLIR text or an ``ir.Module`` (it is copied, never
    modified), or an :class:`OwnedModule` (compiled without a copy,
    consumed). ``target``: ``"cpu"`` (a :class:`Program` of JIT-compiled
    functions) or ``"nvvm"`` (dispatched to :func:`tdf.gpu.compile_nvvm` with
    ``chip``). ``inplace``: run ``tdf-insert-inplace``. ``strict``: a copy
    forced on a ``tdf.call_inplace`` operand raises :class:`StrictModeError`.
    ``opt_level``: LLVM optimisation level 0–3. ``shared_libs``: libraries
    defining declaration-only kernels, whose C interface is
    ``void _mlir_ciface_<name>(MemRefDescriptor *...)`` (tdf marks every
    declaration ``llvm.emit_c_interface``).

    ``copy_before_write`` (CPU only): the functional baseline for
    measurements -- no ``tdf-insert-inplace`` (``inplace`` is ignored) and
    One-Shot Bufferize ``copy-before-write``: every write copies its operand
    first, donated arguments are never updated (results are fresh arrays).
    Cannot be combined with ``strict`` (``ValueError``).
    ``count_allocations`` (CPU only): lower heap allocations to counting
    callbacks, read with :meth:`Program.allocation_stats`; each allocation
    calls into Python, so time programs compiled without it.
    ``bounds_checks`` (CPU only, default on): every dynamic index, offset,
    size and stride of element and slice accesses is checked at run time
    (``tdf-bounds-checks``); a violation raises ``IndexError`` naming the
    function, the op's location and the value, before the function writes
    anything that the checked value reaches (see ``docs/Runtime.md``).
    Allocations are always checked: a failed one raises ``MemoryError``.
    ``blas`` (CPU only; default: when :func:`tdf.blas.available`):
    contractions (matmul, batch_matmul, matvec, vecmat, dot, contraction
    generics; f32/f64, bf16/f16 inputs of f32) run through the BLAS
    (``tdf-specialize-contractions``, ``tdf-contractions-to-blas``);
    ``True`` without the library is a ``CompileError``. Small GEMMs are
    compiled instead (``tdf-vectorize-contractions``: faster than a library
    call below about 2^23 flops, see ``docs/Codegen.md``): ``codegen_flops``
    (default 2^23; 0: every contraction through the libraries) is the most
    flops of a GEMM kept compiled.
    ``num_threads``: the threads of this program's contractions and of its
    large loop nests (default: ``TDF_NUM_THREADS``, else the cores; see
    :mod:`tdf.blas`); with more than one, loop nests of at least 256K
    iterations are cut into that many chunks run on tdf's thread pool
    (``tdf-parallelize``, ``tdf-outline-parallel``, ``tdf-launch-parallel``).
    ``flush_denormals`` (CPU only, default on): calls run with
    flush-to-zero / denormals-are-zero, as jax.jit does (a subnormal result
    is 0); ``False`` keeps IEEE subnormals.
    ``plan_memory`` (CPU only, default on): the temporaries of each
    function share one arena per call, placed by live interval, and may
    live inside a fresh result before it is written (``tdf-plan-memory``);
    ``False`` gives every buffer its own allocation. The figures:
    :meth:`Program.memory_analysis`.
    ``timing`` (default: ``TDF_TIMING`` set and not ``0``): print the wall
    time of each stage to stderr when done, like ``--mlir-timing``
    (:mod:`tdf.timing`).
    ``tiered`` (CPU only; default: ``TDF_TIERED`` set and not ``0``): return
    once LLVM's ``-O0`` code is linked and compile at ``opt_level`` in the
    background; the functions switch to that code when it is ready
    (:attr:`Program.optimized`, :meth:`Program.wait_optimized`,
    :mod:`tdf.tiers`).
    Compiled functions may be called from several threads at once, and
    ``tdf.compile`` may run in several threads at once.

    Raises :class:`tdf.ParseError`, :class:`tdf.PipelineError`,
    :class:`CompileError` or ``ValueError``/``TypeError`` for bad options.
    """
    _check_options(target, chip, filename, {
        "inplace": inplace, "strict": strict, "copy_before_write": copy_before_write,
        "count_allocations": count_allocations, "bounds_checks": bounds_checks,
        "plan_memory": plan_memory})
    if target == "nvvm":
        if copy_before_write or count_allocations:
            raise ValueError("copy_before_write and count_allocations are CPU-only options")
        from . import gpu
        return gpu.compile_nvvm(text_or_module, chip=chip, inplace=inplace, strict=strict)
    shared_libs = _check_cpu_options(opt_level, shared_libs, strict, copy_before_write)
    if copy_before_write:
        inplace = False
    blas = _check_blas_options(blas, flush_denormals, num_threads)
    if codegen_flops is not None and (not isinstance(codegen_flops, int)
                                      or isinstance(codegen_flops, bool) or codegen_flops < 0):
        raise ValueError(f"codegen_flops must be an integer >= 0, got {codegen_flops!r}")
    threads = num_threads or _blas.default_threads()
    parallel = threads > 1

    stages = dict(pipelines.cpu_stages({
        "inplace": inplace, "strict": strict, "copy-before-write": copy_before_write,
        "count-allocations": count_allocations, "bounds-checks": bounds_checks,
        "alloc-checks": True, "blas": blas, "threads": threads if parallel else num_threads or 0,
        "parallel": parallel, "plan-memory": plan_memory,
        **({} if codegen_flops is None else {"codegen-flops": codegen_flops})}))
    timer = _timing.CompileTimer(_timing.enabled(timing))
    # The persistent cache (tdf.cache): what the Program holds must also be
    # in its entry (Request.store), so that a hit gives the same Program.
    cached, program, text_or_module = _cache.lookup(text_or_module, filename, {
        "stages": repr(stages), "opt_level": opt_level, "shared_libs": shared_libs,
        "count_allocations": count_allocations, "flush_denormals": flush_denormals,
        "parallel": parallel, "runtime_libs": jit_symbols.runtime_libs()}, shared_libs, timer)
    if program is not None:
        timer.print()
        return program
    with timer.stage("parse"):
        module = _input_module(text_or_module, filename)
    context = module.context
    with context, ir.Location.unknown(context):
        entries = _entries(module, filename)
        with timer.stage("inplace"):
            calls_inplace, fused = _run_inplace_stage(module, stages["inplace"], filename)
        # One-Shot's analysis of the in-place stage's output, run once for
        # the report and tdf-verify-inplace (which changes no IR).
        analyses = AnalysisCache()
        try:
            with timer.stage("report: in-place decisions (One-Shot analysis)"):
                decisions, forced = _report.inplace_decisions(
                    module, filename, analyses.get(OneShotAnalysis, module.operation))
            if copy_before_write:
                # One-Shot skips its analysis in this mode: every write copies.
                for decision in decisions:
                    decision.inplace = False
                    decision.reason = _report.COPY_BEFORE_WRITE_REASON
            if "strict" in stages:
                with timer.stage("strict"), preserved(module.operation, analyses):
                    _run_strict_stage(module, stages["strict"], forced, filename)
        finally:
            analyses.close()
        with timer.stage("bufferize"):
            _run(module, stages["bufferize"], filename)
        # The texts a cache entry holds are printed now; without the cache,
        # when first read (a copy of the module here, the module itself
        # after the LLVM lowering: the JIT does not change it).
        keep_text = cached is not None
        buffer_ir = str(module) if keep_text else module.operation.clone()
        with timer.stage("report: buffers"):
            allocations, copies = _report.buffers(module, filename)
        returned = _report.returned_args(module, {n: len(r) for n, (_, r) in entries.items()})
        memory = memory_analyses(module, entries, returned)
        _mark_c_interfaces(module, entries)
        jit_symbols.check_kernel_symbols(module, shared_libs)
        with timer.stage("lower to LLVM dialect"):
            _run(module, stages["llvm"], filename)
        sites = _runtime_sites(module, filename)
        _keep_calls_in_large_functions(module)
        llvm_ir = str(module) if keep_text else module
        code, counter, addresses, data, prepared = _jit(
            module, entries, opt_level, shared_libs, count_allocations, filename,
            threads, _tiers.enabled(tiered), timer)
    timer.print()

    report = Report(inplace, calls_inplace, decisions, copies, allocations, returned,
                    copy_before_write=copy_before_write, fused_calls=fused)
    codes = [code]  # the -O0 code and the optimized code of a tiered compile
    functions = {
        name: EntryFunction(name, params, results, returned[name], addresses[name],
                            keepalive=(codes, counter),
                            free=counter.free if counter is not None else None, sites=sites)
        for name, (params, results) in entries.items()}
    for fn in functions.values():
        fn.flush_denormals = flush_denormals
    program = Program(functions, report, codes, llvm_ir, buffer_ir, context, counter, memory)
    if prepared is not None:
        report.cache = "off" if cached is None else "miss: compiled, optimizing"
        _tiers.start(program, prepared, opt_level, list(entries),
                     jit_symbols.runtime_libs() + shared_libs, counter, cached, sites)
        return program
    if cached is not None:
        cached.store(program, data, sites)
    report.cache = cached.status if cached is not None else "off"
    return program
