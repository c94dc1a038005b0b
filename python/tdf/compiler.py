"""``tdf.compile``: from a tdf program (text or module) to callable functions.

For ``target="cpu"`` the program goes through

1. the first stage of ``tdf-lower-to-cpu`` (``tdf-check-sizes``,
   ``tdf-insert-inplace`` when ``inplace=True``:
   :func:`tdf.passes.pipelines.inplace_stage`);
2. an analysis-only One-Shot Bufferize run on a copy, which tells which
   in-place writes happen and which operands must be copied first (and why):
   the data of :meth:`Program.report`; with ``strict=True``,
   ``tdf-verify-inplace{strict=true}``, exactly as
   ``tdf-lower-to-cpu{strict=true}`` runs it;
3. ``tdf-bufferize`` (donation, One-Shot Bufferize, dropping results that are
   donated arguments, ownership-based deallocation);
4. the lowering to LLVM of ``tdf-lower-to-cpu`` and the MLIR
   ``ExecutionEngine`` (with ``shared_libs`` for declaration-only kernels).

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

import ctypes
import importlib.util
import os
from dataclasses import dataclass, field

import numpy as np
from mlir import ir

from . import jit_symbols
from .context import Context
from .errors import PipelineError, TDFError
from .parsing import parse
from .pipeline import run_pipeline
from .passes._ir import arg_dicts, collect_ops, function_type, has_body, is_public, sym_name
from .passes.pipelines import one_shot
from .passes._runtime_sites import RUNTIME_FUNCTIONS, SITES_ATTR, read_sites
from .runtime import (DTYPES, AllocationCounter, AllocationStats, EntryFunction, ScalarSpec,
                      TensorSpec, register_runtime_symbols)

__all__ = ["compile", "Program", "CompileError", "StrictModeError", "InplaceDecision",
           "FusedCall", "Copy", "Allocation", "AllocationStats"]

TARGETS = ("cpu", "nvvm")
# One-Shot Bufferize's own analysis (same options as the pipelines), which
# annotates __inplace_operands_attr__: the source of truth for copies.
ANALYSIS = "tdf-donate, " + one_shot("test-analysis-only")
COPY_BEFORE_WRITE_REASON = "copy_before_write=True: every write copies"
_TENSOR_VIEWS = {"tensor.extract_slice", "tensor.expand_shape", "tensor.collapse_shape",
                 "tensor.cast", "tensor.reshape", "tensor.bitcast", "tdf.assume_unaliased"}


class CompileError(TDFError):
    """A program tdf.compile cannot compile (unsupported signature, missing
    kernel symbol, bad option)."""


class StrictModeError(CompileError):
    """``strict=True`` and a ``tdf.call_inplace`` operand would be copied."""


@dataclass
class InplaceDecision:
    """One write that One-Shot Bufferize performs in place (``inplace``) or
    on a copy of its operand."""

    function: str
    op: str
    location: str
    operand: int
    inplace: bool
    reason: str = ""

    def __str__(self):
        verdict = "in place" if self.inplace else f"COPY ({self.reason})"
        return f"@{self.function}: {self.op} operand #{self.operand} at {self.location}: {verdict}"


@dataclass
class Copy:
    """A ``memref.copy`` left in the final buffer IR."""

    function: str
    location: str
    nbytes: int | None
    in_loop: bool
    into_view: bool = False

    def __str__(self):
        size = "dynamic size" if self.nbytes is None else f"{self.nbytes} B"
        what = " into a slice of its destination (the update itself)" if self.into_view else ""
        return (f"@{self.function}: memref.copy of {size}{what} at {self.location}"
                f"{' (in a loop)' if self.in_loop else ''}")


@dataclass
class Allocation:
    """A ``memref.alloc``/``alloca`` left in the final buffer IR."""

    function: str
    location: str
    nbytes: int | None
    in_loop: bool


@dataclass
class FusedCall:
    """A ``tdf.call`` that ``tdf-inline-kernels`` replaced by its kernel's
    ``linalg.generic`` (a call chain fused into one loop): no call, no
    intermediate buffer."""

    function: str
    kernel: str
    location: str

    def __str__(self):
        return (f"@{self.function}: tdf.call @{self.kernel} at {self.location}: "
                f"fused into one loop (inlined by tdf-inline-kernels)")


@dataclass
class Report:
    """What :meth:`Program.report` returns; ``str()`` formats it."""

    inplace: bool
    calls_made_inplace: int
    decisions: list = field(default_factory=list)
    copies: list = field(default_factory=list)
    allocations: list = field(default_factory=list)
    returned_args: dict = field(default_factory=dict)
    copy_before_write: bool = False
    fused_calls: list = field(default_factory=list)

    def bytes_allocated(self, function: str | None = None) -> int:
        """Static bytes allocated per call (allocations in loops count once)."""
        return sum(a.nbytes or 0 for a in self.allocations
                   if function is None or a.function == function)

    def bytes_copied(self, function: str | None = None) -> int:
        return sum(c.nbytes or 0 for c in self.copies
                   if function is None or c.function == function)

    def __str__(self):
        mode = "copy-before-write baseline" if self.copy_before_write else \
            f"in-place rewrite {'on' if self.inplace else 'off'}"
        lines = [f"tdf report ({mode}; "
                 f"{self.calls_made_inplace} call(s) rewritten to tdf.call_inplace)"]
        lines.append("in-place decisions:")
        lines += [f"  {d}" for d in self.decisions] or ["  (no writes)"]
        if self.fused_calls:
            lines.append("kernel calls fused:")
            lines += [f"  {f}" for f in self.fused_calls]
        lines.append("copies that remain:")
        lines += [f"  {c}" for c in self.copies] or ["  none"]
        functions = sorted({a.function for a in self.allocations} | set(self.returned_args))
        lines.append("bytes allocated per call (static count of the final IR):")
        for name in functions:
            allocs = [a for a in self.allocations if a.function == name]
            dyn = sum(1 for a in allocs if a.nbytes is None)
            loop = sum(1 for a in allocs if a.in_loop)
            extra = []
            if dyn:
                extra.append(f"{dyn} of dynamic size")
            if loop:
                extra.append(f"{loop} inside loops (counted once)")
            lines.append(f"  @{name}: {self.bytes_allocated(name)} B in {len(allocs)} allocation(s)"
                         + (f" ({', '.join(extra)})" if extra else ""))
            donated = [i for i in self.returned_args.get(name, []) if i >= 0]
            if donated:
                lines.append(f"    results returned in the donated argument(s) {donated}: 0 B")
        return "\n".join(lines)


class Program:
    """A compiled CPU program. Each entry function is an attribute
    (``prog.step(...)``) and is in :attr:`functions`."""

    def __init__(self, functions, report, engine, llvm_ir: str, buffer_ir: str, context,
                 counter=None):
        self.functions = dict(functions)
        self._report = report
        self._counter = counter
        self._engine = engine
        self._context = context
        self.llvm_ir = llvm_ir
        self.buffer_ir = buffer_ir
        for name, fn in self.functions.items():
            if not hasattr(type(self), name) and not name.startswith("_"):
                setattr(self, name, fn)

    def __getitem__(self, name):
        return self.functions[name]

    def report(self) -> Report:
        """In-place decisions, remaining copies (and why) and the static bytes
        allocated per call; ``print(prog.report())`` formats them."""
        return self._report

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


# ----------------------------------------------------------------- helpers


def _functions(module):
    return [op for op in module.body.operations if op.operation.name == "func.func"]


def _location(op, filename: str) -> str:
    from .errors import format_location
    return format_location(op.location, filename)


def _is_entry(func) -> bool:
    if not has_body(func) or not is_public(func):
        return False
    ftype = function_type(func)
    return not any(isinstance(t, ir.MemRefType) for t in list(ftype.inputs) + list(ftype.results))


# Scalar types an entry function takes or returns by value.
SCALAR_TYPES = ("index", "i64", "i32", "i16", "i8", "i1", "f32", "f64")


def _unsupported(where, type_) -> CompileError:
    """The error for a parameter/result type the CPU call path cannot pass:
    names the function, the argument/result and the type."""
    return CompileError(f"{where}: unsupported type {type_} (an entry function's arguments and "
                        f"results must be ranked tensors of {', '.join(DTYPES)}, or scalars "
                        f"of type {', '.join(SCALAR_TYPES)})")


def _tensor_spec(type_, where, donated=False) -> TensorSpec:
    if not isinstance(type_, ir.RankedTensorType):
        raise _unsupported(where, type_)
    t = ir.RankedTensorType(type_)
    element = str(t.element_type)
    if element not in DTYPES:
        raise CompileError(f"{where}: unsupported element type {element} in {type_} "
                           f"(supported: {', '.join(DTYPES)})")
    return TensorSpec(t.shape, DTYPES[element], str(type_), donated)


def _value_spec(type_, where, donated=False):
    """A :class:`TensorSpec` for a ranked tensor, a :class:`ScalarSpec` for a
    scalar of :data:`SCALAR_TYPES`; ``CompileError`` naming ``where`` and
    the type otherwise."""
    if isinstance(type_, ir.RankedTensorType):
        return _tensor_spec(type_, where, donated)
    if str(type_) in SCALAR_TYPES:
        return ScalarSpec(str(type_))
    raise _unsupported(where, type_)


def _signature(func):
    name = sym_name(func)
    ftype = function_type(func)
    dicts = arg_dicts(func)
    params = [_value_spec(t, f"@{name} argument #{i}", "tdf.donate" in dicts[i])
              for i, t in enumerate(ftype.inputs)]
    results = [_value_spec(t, f"@{name} result #{i}") for i, t in enumerate(ftype.results)]
    return params, results


def _tensor_root(value):
    while not isinstance(value.owner, ir.Block) and value.owner.operation.name in _TENSOR_VIEWS:
        value = value.owner.operands[0]
    return value


def _copy_reason(op, operand_number, func) -> str:
    value = op.operands[operand_number]
    root = _tensor_root(value)
    if isinstance(root.owner, ir.Block):
        block = root.owner
        if block.owner is not None and block.owner.operation.name == "func.func":
            index = ir.BlockArgument(root).arg_number
            dicts = arg_dicts(func)
            if "tdf.donate" not in dicts[index]:
                return f"it is the non-donated argument #{index} (read-only)"
        return "it is a block argument whose buffer is still read"
    if not isinstance(root.owner, ir.Block) and root.owner.operation.name == "arith.constant":
        return "it is a constant"
    if not isinstance(root.owner, ir.Block) and root.owner.operation.name == "tdf.call_opaque":
        return "it may alias the result of an opaque call"
    return "its value (or an alias) is still read after this op"


# A function making more calls than this keeps them as calls (``no_inline``):
# LLVM's inliner would paste every kernel body into it, and optimising the
# result grows faster than linearly (issue 11: 1000 in-place calls, 50 s at
# opt_level 2; 3.9 s with the calls kept).
MAX_INLINED_CALLS = 256


def _keep_calls_in_large_functions(module) -> None:
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


# Ops that write their operand #1 (the destination), as One-Shot Bufferize's
# bufferizesToMemoryWrite says.
_WRITES_DEST = {"tensor.insert", "tensor.insert_slice", "tensor.parallel_insert_slice",
                "vector.transfer_write", "bufferization.materialize_in_destination"}


def _written_operands(op, count: int, access: dict) -> set:
    """The operands ``op`` writes (One-Shot's ``bufferizesToMemoryWrite``):
    only these are in-place decisions. Reads (``tensor.dim``,
    ``tensor.extract``, ``vector.transfer_read``, linalg inputs, views,
    ``tdf.call``, returns, loops) are not listed."""
    name = op.name
    if name == "tdf.call_inplace":
        return {i for i in ir.DenseI64ArrayAttr(op.attributes["inplace_indices"]) if i >= 0}
    if name == "tdf.call_opaque" or name == "scf.forall":
        # An opaque callee may write any operand; a forall writes its shared outputs.
        return set(range(count))
    if name in _WRITES_DEST:
        return {1}
    if name.startswith("linalg."):
        # Destination-style: the inits (one per tensor result) are written.
        return set(range(len(op.operands) - len(op.results), len(op.operands)))
    if name == "func.call" and "callee" in op.attributes:
        modes = access.get(ir.FlatSymbolRefAttr(op.attributes["callee"]).value)
        if modes is not None:
            return {i for i, mode in enumerate(modes) if "write" in mode}
    return set()


def _analyse(module, context, filename: str) -> tuple[list, list]:
    """Runs One-Shot Bufferize in analysis-only mode on a copy; returns the
    in-place decisions of every write and the copies forced on
    ``tdf.call_inplace`` operands."""
    copy = ir.Module.parse(module.operation.get_asm(enable_debug_info=True), context=context)
    run_pipeline(copy, f"builtin.module({ANALYSIS})")
    decisions, forced = [], []
    # Per function, the access One-Shot inferred for each argument
    # ("read", "write", "read-write", "none"): what a func.call writes.
    access = {}
    for func in _functions(copy):
        access[sym_name(func)] = [ir.StringAttr(d["bufferization.access"]).value
                                  if "bufferization.access" in d else "read-write"
                                  for d in arg_dicts(func)]
    for func in _functions(copy):
        if not has_body(func):
            continue
        fname = sym_name(func)

        def visit(op, func=func, fname=fname, access=access):
            if "__inplace_operands_attr__" not in op.attributes:
                return
            flags = [ir.StringAttr(a).value for a in ir.ArrayAttr(op.attributes["__inplace_operands_attr__"])]
            written = _written_operands(op, len(flags), access)
            for i in sorted(written):
                if i >= len(flags) or flags[i] == "none":
                    continue
                inplace = flags[i] == "true"
                reason = "" if inplace else _copy_reason(op, i, func)
                decision = InplaceDecision(fname, op.name, _location(op, filename), i, inplace, reason)
                decisions.append(decision)
                if op.name == "tdf.call_inplace" and not inplace:
                    forced.append(decision)

        for inner in collect_ops(func):

            visit(inner)
    return decisions, forced


def _static_nbytes(mtype) -> int | None:
    t = ir.MemRefType(mtype)
    if not t.has_static_shape:
        return None
    element = str(t.element_type)
    width = {"i1": 1, "index": 8}.get(element)
    if width is None:
        etype = t.element_type
        bits = etype.width if hasattr(etype, "width") else 64
        width = max(1, bits // 8)
    return int(np.prod(t.shape, dtype=np.int64)) * width


def _in_loop(op, func) -> bool:
    parent = op.parent
    while parent is not None and parent != func and parent.name != "func.func":
        if parent.name in ("scf.for", "scf.while", "scf.parallel", "scf.forall", "affine.for"):
            return True
        parent = parent.parent
    return False


def _buffers(module, filename: str):
    allocations, copies = [], []
    for func in _functions(module):
        if not has_body(func):
            continue
        fname = sym_name(func)

        def visit(op, func=func, fname=fname):
            if op.name in ("memref.alloc", "memref.alloca"):
                allocations.append(Allocation(fname, _location(op, filename), _static_nbytes(op.results[0].type),
                                              _in_loop(op, func)))
            elif op.name == "memref.copy":
                target = op.operands[1]
                into_view = (not isinstance(target.owner, ir.Block)
                             and target.owner.operation.name == "memref.subview")
                copies.append(Copy(fname, _location(op, filename), _static_nbytes(target.type),
                                   _in_loop(op, func), into_view))

        for inner in collect_ops(func):

            visit(inner)
    return allocations, copies


def _runtime_libs() -> list[str]:
    spec = importlib.util.find_spec("mlir")
    for root in spec.submodule_search_locations:
        path = os.path.join(root, "lib", "libmlir_c_runner_utils.so")
        if os.path.exists(path):
            return [path]
    return []


def _check_symbols(module, shared_libs) -> None:
    """Every declaration a kernel call reaches must be defined by one of the
    shared libraries (or the process): fail here, with a clear message,
    instead of inside the JIT."""
    libs = [ctypes.CDLL(path) for path in shared_libs]
    process = ctypes.CDLL(None)
    called = set()

    def visit(op):
        if op.name == "func.call":
            called.add(ir.FlatSymbolRefAttr(op.attributes["callee"]).value)

    for inner in collect_ops(module.operation):

        visit(inner)
    for func in _functions(module):
        if has_body(func) or sym_name(func) not in called or sym_name(func) in RUNTIME_FUNCTIONS:
            continue
        name = sym_name(func)
        symbol = (f"_mlir_ciface_{name}" if "llvm.emit_c_interface" in func.attributes else name)
        if not any(hasattr(lib, symbol) for lib in libs + [process]):
            raise CompileError(
                f"kernel @{name} has no body and no shared library defines '{symbol}' "
                f"(pass the library with tdf.compile(..., shared_libs=[...]))")


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


_CALL_ID = "tdf.report_call_id"


def _tag_calls(module, filename: str) -> list:
    """Numbers every ``tdf.call`` (a discardable attribute) and returns their
    :class:`FusedCall` descriptions, by number."""
    calls = []
    for func in _functions(module):
        if not has_body(func):
            continue
        for call in collect_ops(func, "tdf.call"):
            call.attributes[_CALL_ID] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), len(calls))
            calls.append(FusedCall(sym_name(func),
                                   ir.FlatSymbolRefAttr(call.attributes["callee"]).value,
                                   _location(call, filename)))
    return calls


def _fused_calls(module, calls: list) -> list:
    """The tagged calls that are gone (``tdf-inline-kernels`` replaced them
    by the kernel's linalg.generic); removes the tags from the others."""
    kept = set()
    for op in collect_ops(module.operation, None, lambda o: _CALL_ID in o.attributes):
        kept.add(ir.IntegerAttr(op.attributes[_CALL_ID]).value)
        del op.attributes[_CALL_ID]
    return [call for i, call in enumerate(calls) if i not in kept]


def _inplace_calls(module) -> int:
    count = [0]

    def visit(op):
        if op.name == "tdf.call_inplace":
            count[0] += 1

    for inner in collect_ops(module.operation):

        visit(inner)
    return count[0]


# ------------------------------------------------------------------ compile


def compile(text_or_module, target: str = "cpu", inplace: bool = True, strict: bool = False,
            opt_level: int = 2, shared_libs=(), chip: str = "sm_90", filename: str = "<input>",
            copy_before_write: bool = False, count_allocations: bool = False,
            bounds_checks: bool = True):
    """Compiles a tdf program.

    ``text_or_module``: MLIR text or an ``ir.Module`` (it is copied, never
    modified). ``target``: ``"cpu"`` (a :class:`Program` of JIT-compiled
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
    Compiled functions may be called from several threads at once, and
    ``tdf.compile`` may run in several threads at once.

    Raises :class:`tdf.ParseError`, :class:`tdf.PipelineError`,
    :class:`CompileError` or ``ValueError``/``TypeError`` for bad options.
    """
    for name, value in (("target", target), ("chip", chip), ("filename", filename)):
        if not isinstance(value, str):
            raise TypeError(f"tdf.compile expects {name} as str, got {type(value).__name__}")
    if target not in TARGETS:
        raise ValueError(f"unknown target {target!r} (expected one of {', '.join(TARGETS)})")
    for name, value in (("inplace", inplace), ("strict", strict),
                        ("copy_before_write", copy_before_write),
                        ("count_allocations", count_allocations),
                        ("bounds_checks", bounds_checks)):
        if not isinstance(value, bool):
            raise TypeError(f"{name} must be a bool, got {value!r}")
    if target == "nvvm":
        if copy_before_write or count_allocations:
            raise ValueError("copy_before_write and count_allocations are CPU-only options")
        from . import gpu
        return gpu.compile_nvvm(text_or_module, chip=chip, inplace=inplace, strict=strict)
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
    if copy_before_write:
        inplace = False

    context = Context()
    if isinstance(text_or_module, str):
        module = parse(text_or_module, context, filename=filename)
    elif isinstance(text_or_module, ir.Module):
        text = text_or_module.operation.get_asm(enable_debug_info=True)
        module = parse(text, context, filename=filename)
    else:
        raise TypeError(f"tdf.compile expects MLIR text or an mlir.ir.Module, "
                        f"got {type(text_or_module).__name__}")

    with context, ir.Location.unknown(context):
        entries = {}
        for func in _functions(module):
            if _is_entry(func):
                entries[sym_name(func)] = _signature(func)
        if not entries:
            raise CompileError(f"{filename}: no public function with a body and tensor/scalar "
                               f"parameters to compile")

        # The first stage of tdf-lower-to-cpu (tdf-check-sizes: static sizes
        # that overflow int64 abort bufferization; tdf-insert-inplace).
        from .passes.pipelines import STRICT_CHECK, inplace_stage
        before = _inplace_calls(module)
        stage = inplace_stage(inplace, copy_before_write)
        fused = []
        if "tdf-inline-kernels" in stage:
            # Run up to the kernel inlining, then name each tdf.call it
            # replaced (the report lists them as fused).
            cut = stage.index("tdf-inline-kernels") + 1
            calls = _tag_calls(module, filename)
            run_pipeline(module, "builtin.module(" + ", ".join(stage[:cut]) + ")", filename=filename)
            fused = _fused_calls(module, calls)
            stage = stage[cut:]
        if stage:
            run_pipeline(module, "builtin.module(" + ", ".join(stage) + ")", filename=filename)
        calls_inplace = _inplace_calls(module) - before
        decisions, forced = _analyse(module, context, filename)
        if copy_before_write:
            # One-Shot skips its analysis in this mode: every write copies.
            for decision in decisions:
                decision.inplace = False
                decision.reason = COPY_BEFORE_WRITE_REASON
        if strict:
            # The same check as tdf-lower-to-cpu{strict=true}.
            try:
                run_pipeline(module, f"builtin.module({STRICT_CHECK})", filename=filename)
            except PipelineError as err:
                lines = "".join(f"\n  {d}" for d in forced)
                errors = [d for d in err.diagnostics if d.severity == "error"]
                raise StrictModeError(f"strict mode: {len(errors)} tdf.call_inplace operand(s) "
                                      f"would need a copy{lines}", errors) from None

        if bounds_checks:
            run_pipeline(module, "builtin.module(tdf-bounds-checks)", filename=filename)
        bufferize = "tdf-bufferize{copy-before-write=true}" if copy_before_write else "tdf-bufferize"
        run_pipeline(module, f"builtin.module({bufferize})", filename=filename)
        buffer_ir = str(module)
        allocations, copies = _buffers(module, filename)
        returned = {}
        for func in _functions(module):
            name = sym_name(func)
            if name in entries:
                if "tdf.returned_args" in func.attributes:
                    returned[name] = list(ir.DenseI64ArrayAttr(func.attributes["tdf.returned_args"]))
                else:
                    returned[name] = [-1] * len(entries[name][1])
                func.attributes["llvm.emit_c_interface"] = ir.UnitAttr.get()
            elif not has_body(func) and name not in RUNTIME_FUNCTIONS:
                func.attributes["llvm.emit_c_interface"] = ir.UnitAttr.get()
        _check_symbols(module, shared_libs)

        from .passes.pipelines import lower_to_llvm
        run_pipeline(module, "builtin.module(" + ", ".join(
            ["tdf-alloc-checks"] + lower_to_llvm(count_allocations)) + ")", filename=filename)
        sites = _runtime_sites(module, filename)
        _keep_calls_in_large_functions(module)
        llvm_ir = str(module)
        jit_libs = _runtime_libs() + shared_libs
        registered = (jit_symbols.COUNTED_ALLOCATION_SYMBOLS if count_allocations else ()) \
            + tuple(RUNTIME_FUNCTIONS)
        missing = [name for name in jit_symbols.unresolved_functions(module, jit_libs)
                   if name not in registered]
        if missing:
            raise CompileError(f"{filename}: the JIT cannot resolve external function(s) "
                               f"{', '.join(missing)} (not defined by the process or "
                               f"shared_libs)")

        from mlir.execution_engine import ExecutionEngine
        engine = ExecutionEngine(module, opt_level=opt_level, shared_libs=jit_libs)
        register_runtime_symbols(engine)
        counter = None
        if count_allocations:
            counter = AllocationCounter()
            counter.register(engine)
        with jit_symbols.capture_jit_errors() as jit_output:
            engine.initialize()
            addresses = {name: engine.raw_lookup(f"_mlir_ciface_{name}") for name in entries}

    report = Report(inplace, calls_inplace, decisions, copies, allocations, returned,
                    copy_before_write=copy_before_write, fused_calls=fused)
    functions = {}
    for name, (params, results) in entries.items():
        address = addresses[name]
        if not address:
            unresolved = jit_symbols.missing_from_jit_output("".join(jit_output))
            cause = (f": symbols not found: {', '.join(unresolved)}" if unresolved else "")
            raise CompileError(f"@{name}: the JIT could not materialize _mlir_ciface_{name}"
                               f"{cause}")
        functions[name] = EntryFunction(name, params, results, returned[name], address,
                                        keepalive=(engine, counter),
                                        free=counter.free if counter is not None else None,
                                        sites=sites)
    return Program(functions, report, engine, llvm_ir, buffer_ir, context, counter)
