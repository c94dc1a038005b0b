"""What a compiled program's ``report()`` says, and how it is read off the IR.

The records (:class:`InplaceDecision`, :class:`Copy`, :class:`Allocation`,
:class:`FusedCall`) and the two reports built from them: :class:`Report`
for the CPU (``tdf.compile(...).report()``) and :class:`GPUReport` for the
GPU (``tdf.gpu.compile_nvvm(...).report()``). The functions below read them
from the IR between pipeline stages; byte sizes come from
:func:`tdf.vocabulary.static_nbytes` on both targets.

- :func:`tag_calls` / :func:`fused_calls`: the ``tdf.call`` ops that
  ``tdf-inline-kernels`` fused away (tagged before it runs, missed after);
- :func:`inplace_decisions`: One-Shot Bufferize's analysis (on a clone of
  the module, :class:`tdf.passes.analysis.one_shot.OneShotAnalysis`, shared
  with ``tdf-verify-inplace`` in ``tdf.compile``) of every write: in place,
  or on a copy and why;
- :func:`buffers`: the allocations and copies left in bufferized IR;
- :func:`record_gpu_stage`: what one stage of ``tdf-lower-to-nvvm`` decided.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mlir import ir

from .errors import format_location
from .passes.ir_utils import arg_dicts, collect_ops, has_body, sym_name
from .vocabulary import (
    ACCESS_ATTR,
    ASSUME_UNALIASED,
    DEST_OPERAND,
    DONATE_ATTR,
    GPU_CONTRACT,
    INPLACE_OPERANDS_ATTR,
    RETURNED_ARGS_ATTR,
    TENSOR_VIEW_OPS,
    TRANSFER_ATTR,
    static_nbytes,
)

__all__ = ["InplaceDecision", "DonationPairing", "Copy", "Allocation", "FusedCall", "Report", "GPUReport",
           "tag_calls", "fused_calls", "count_inplace_calls", "inplace_decisions", "buffers",
           "returned_args", "record_gpu_stage", "donation_pairings", "COPY_BEFORE_WRITE_REASON"]

COPY_BEFORE_WRITE_REASON = "copy_before_write=True: every write copies"


# -------------------------------------------------------------------- records


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
class DonationPairing:
    """A donated argument and the result it is paired with (JAX's rule,
    :mod:`tdf.passes.analysis.donation`): ``inplace`` when One-Shot
    Bufferize computes the result in the argument's buffer (the caller's
    donated array comes back as that result), else ``reason`` says why not."""

    function: str
    argument: int
    result: int
    type: str
    location: str
    inplace: bool
    reason: str = ""

    def __str__(self):
        verdict = "in place" if self.inplace else f"NOT in place ({self.reason})"
        return (f"@{self.function}: donated argument #{self.argument} -> result #{self.result} "
                f"({self.type}) at {self.location}: {verdict}")


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


# -------------------------------------------------------------------- reports


@dataclass
class Report:
    """What :meth:`tdf.compiler.Program.report` returns; ``str()`` formats it."""

    inplace: bool
    calls_made_inplace: int
    decisions: list = field(default_factory=list)
    copies: list = field(default_factory=list)
    allocations: list = field(default_factory=list)
    returned_args: dict = field(default_factory=dict)
    copy_before_write: bool = False
    fused_calls: list = field(default_factory=list)
    pairings: list = field(default_factory=list)
    #: Entry function name -> :class:`tdf.memory.MemoryAnalysis` (the
    #: memory plan's figures; set by :class:`tdf.compiler.Program`).
    memory: dict = field(default_factory=dict)
    #: What the compilation cache (:mod:`tdf.cache`) did: ``"hit: ..."``
    #: when the program was loaded from it, ``"miss: ..."`` when compiled,
    #: ``"off"``; empty for a report not made by ``tdf.compile``.
    cache: str = ""

    @property
    def from_cache(self) -> bool:
        """True when the program was loaded from the compilation cache."""
        return self.cache.startswith("hit")

    def __post_init__(self):
        # :func:`inplace_decisions` returns the :class:`DonationPairing`
        # records among the decisions: they are listed on their own.
        pairs = [d for d in self.decisions if isinstance(d, DonationPairing)]
        if pairs:
            self.decisions = [d for d in self.decisions if not isinstance(d, DonationPairing)]
            self.pairings = pairs + list(self.pairings)

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
        if self.pairings:
            lines.append("donation pairings (a result with the shape and dtype of a donated "
                         "argument is computed in its buffer):")
            lines += [f"  {p}" for p in self.pairings]
        lines.append("copies that remain:")
        lines += [f"  {c}" for c in self.copies] or ["  none"]
        functions = sorted({a.function for a in self.allocations} | set(self.returned_args))
        lines.append("bytes allocated per call (static count of the final IR):")
        for name in functions:
            lines += self._allocation_lines(name)
        if self.memory:
            lines.append("memory per call (tdf-plan-memory; Program.memory_analysis()):")
            lines += [f"  @{name}: {analysis}" for name, analysis in sorted(self.memory.items())]
        if self.cache:
            lines.append(f"compilation cache: {self.cache}")
        return "\n".join(lines)

    def _allocation_lines(self, name: str) -> list[str]:
        allocs = [a for a in self.allocations if a.function == name]
        dyn = sum(1 for a in allocs if a.nbytes is None)
        loop = sum(1 for a in allocs if a.in_loop)
        extra = []
        if dyn:
            extra.append(f"{dyn} of dynamic size")
        if loop:
            extra.append(f"{loop} inside loops (counted once)")
        lines = [f"  @{name}: {self.bytes_allocated(name)} B in {len(allocs)} allocation(s)"
                 + (f" ({', '.join(extra)})" if extra else "")]
        donated = [i for i in self.returned_args.get(name, []) if i >= 0]
        if donated:
            lines.append(f"    results returned in the donated argument(s) {donated}: 0 B")
        return lines


@dataclass
class GPUReport:
    """What the GPU compilation decided, counted statically in the IR.

    ``inplace``: one entry per ``tdf.call_inplace`` (callee, indices, location);
    ``out_of_place_calls``: ``tdf.call``s left with fresh outputs;
    ``device_copies``: ``(bytes, location)`` of every copy left on the device
    after bufferization (a write into a slice, or a copy the in-place rules
    forced; bytes -1 for a dynamic size); ``device_alloc_bytes``: bytes of
    device buffers per call (arguments' device copies included);
    ``h2d``/``d2h``: ``(count, bytes)`` of the explicit host<->device
    transfers per call; ``kernels``: launches in the program text;
    ``cublas_calls``: contractions run by cuBLAS (``tdf_gpu_contract`` calls
    in the program text); ``compile_seconds``: per stage."""

    inplace: list = field(default_factory=list)
    out_of_place_calls: int = 0
    device_copies: list = field(default_factory=list)
    device_alloc_bytes: int = 0
    h2d: tuple = (0, 0)
    d2h: tuple = (0, 0)
    kernels: int = 0
    cublas_calls: int = 0
    ptxas: str = "not run"
    compile_seconds: dict = field(default_factory=dict)

    def __str__(self) -> str:
        lines = [f"in-place calls: {len(self.inplace)}"]
        lines += [f"  @{c} inplace {i} at {loc}" for c, i, loc in self.inplace]
        lines.append(f"out-of-place calls: {self.out_of_place_calls}")
        lines.append(f"device copies: {len(self.device_copies)} "
                     f"({sum(b for b, _ in self.device_copies if b > 0)} bytes)")
        lines += [f"  {b} bytes at {loc}" for b, loc in self.device_copies]
        lines.append(f"device buffers: {self.device_alloc_bytes} bytes per call")
        lines.append(f"host->device transfers: {self.h2d[0]} ({self.h2d[1]} bytes)")
        lines.append(f"device->host transfers: {self.d2h[0]} ({self.d2h[1]} bytes)")
        lines.append(f"kernel launches: {self.kernels}")
        lines.append(f"cuBLAS calls: {self.cublas_calls}")
        lines.append(f"ptxas: {self.ptxas}")
        lines.append("compile: " + ", ".join(f"{k} {v * 1e3:.1f} ms"
                                             for k, v in self.compile_seconds.items()))
        return "\n".join(lines)


# ------------------------------------------------------------ reading the IR


def _functions(module) -> list:
    """The top-level ``func.func`` ops of ``module`` (an ``ir.Module`` or a
    module op)."""
    body = module.body if isinstance(module, ir.Module) else module.regions[0].blocks[0]
    return [op for op in body.operations if op.operation.name == "func.func"]


def _location(op, filename: str | None) -> str:
    return format_location(op.location, filename)


# A discardable attribute numbering the tdf.call ops before tdf-inline-kernels.
_CALL_ID = "tdf.report_call_id"


def tag_calls(module, filename: str) -> list:
    """Numbers every ``tdf.call`` (a discardable attribute) and returns their
    :class:`FusedCall` descriptions, by number."""
    calls: list[FusedCall] = []
    for func in _functions(module):
        if not has_body(func):
            continue
        for call in collect_ops(func, "tdf.call"):
            call.attributes[_CALL_ID] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), len(calls))
            calls.append(FusedCall(sym_name(func),
                                   ir.FlatSymbolRefAttr(call.attributes["callee"]).value,
                                   _location(call, filename)))
    return calls


def fused_calls(module, calls: list) -> list:
    """The calls tagged by :func:`tag_calls` that are gone
    (``tdf-inline-kernels`` replaced them by the kernel's linalg.generic);
    removes the tags from the others."""
    kept = set()
    for op in collect_ops(module.operation, None, lambda o: _CALL_ID in o.attributes):
        kept.add(ir.IntegerAttr(op.attributes[_CALL_ID]).value)
        del op.attributes[_CALL_ID]
    return [call for i, call in enumerate(calls) if i not in kept]


def count_inplace_calls(module) -> int:
    """The number of ``tdf.call_inplace`` ops in ``module``."""
    return len(collect_ops(module.operation, "tdf.call_inplace"))


# Views followed back to the tensor whose buffer a write would update.
_TENSOR_VIEWS = TENSOR_VIEW_OPS | {ASSUME_UNALIASED}
# Ops that write their operand #1, the destination (One-Shot Bufferize's
# bufferizesToMemoryWrite).
_WRITES_DEST = frozenset(DEST_OPERAND) | {"vector.transfer_write",
                                          "bufferization.materialize_in_destination"}


def _tensor_root(value):
    while not isinstance(value.owner, ir.Block) and value.owner.operation.name in _TENSOR_VIEWS:
        value = value.owner.operands[0]
    return value


def _copy_reason(op, operand_number, func) -> str:
    root = _tensor_root(op.operands[operand_number])
    if isinstance(root.owner, ir.Block):
        block = root.owner
        if block.owner is not None and block.owner.operation.name == "func.func":
            index = ir.BlockArgument(root).arg_number
            if DONATE_ATTR not in arg_dicts(func)[index]:
                return f"it is the non-donated argument #{index} (read-only)"
        return "it is a block argument whose buffer is still read"
    if root.owner.operation.name == "arith.constant":
        return "it is a constant"
    if root.owner.operation.name == "tdf.call_opaque":
        return "it may alias the result of an opaque call"
    return "its value (or an alias) is still read after this op"


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


def _decisions_at(op, func, filename: str, access: dict) -> list:
    if INPLACE_OPERANDS_ATTR not in op.attributes:
        return []
    flags = [ir.StringAttr(a).value for a in ir.ArrayAttr(op.attributes[INPLACE_OPERANDS_ATTR])]
    found = []
    for i in sorted(_written_operands(op, len(flags), access)):
        if i >= len(flags) or flags[i] == "none":
            continue
        inplace = flags[i] == "true"
        reason = "" if inplace else _copy_reason(op, i, func)
        found.append(InplaceDecision(sym_name(func), op.name, _location(op, filename), i,
                                     inplace, reason))
    return found


def inplace_decisions(module, filename: str, one_shot=None) -> tuple[list, list]:
    """Reads One-Shot Bufferize's analysis (``tdf-donate``, then One-Shot
    in analysis-only mode with the options of every tdf pipeline, on a
    clone of ``module``: ``one_shot``, a
    :class:`tdf.passes.analysis.one_shot.OneShotAnalysis` of ``module``,
    when given, else run here); returns the :class:`InplaceDecision` of
    every write, then the :class:`DonationPairing` of every donated argument
    paired with a result (:class:`Report` lists them apart), and, among the
    decisions, the copies forced on ``tdf.call_inplace`` operands. Raises
    the analysis's :class:`tdf.PipelineError` when it fails."""
    from .passes.analysis.one_shot import OneShotAnalysis

    if one_shot is None:
        with OneShotAnalysis(module.operation) as own:
            return _decisions(own.analysed, filename)
    return _decisions(one_shot.analysed, filename)


def _decisions(copy, filename: str) -> tuple[list, list]:
    from .passes.analysis.donation import pairs_are_promised

    # Per function, the access One-Shot inferred for each argument
    # ("read", "write", "read-write", "none"): what a func.call writes.
    access = {sym_name(func): [ir.StringAttr(d[ACCESS_ATTR]).value if ACCESS_ATTR in d
                               else "read-write" for d in arg_dicts(func)]
              for func in _functions(copy)}
    decisions = []
    for func in _functions(copy):
        if has_body(func):
            for op in collect_ops(func):
                decisions += _decisions_at(op, func, filename, access)
    forced = [d for d in decisions if d.op == "tdf.call_inplace" and not d.inplace]
    for func in _functions(copy):
        if has_body(func) and pairs_are_promised(func):
            decisions += donation_pairings(func, copy, filename)
    return decisions, forced


def donation_pairings(func, module_op, filename: str | None) -> list:
    """The :class:`DonationPairing` of each paired result of ``func``, a
    function of a module One-Shot Bufferize analysed (``module_op``)."""
    from .passes._pair_donations import explain_pair
    from .passes.analysis.donation import donation_pairs, equivalences_of, returns_of

    pairs = donation_pairs(func)
    if not any(a >= 0 for a in pairs):
        return []
    equivalent = equivalences_of(func) or [-1] * len(pairs)
    rets = returns_of(func)
    found = []
    for r, a in enumerate(pairs):
        if a < 0:
            continue
        value = rets[0].operands[r] if len(rets) == 1 else None
        where = rets[0] if value is None or isinstance(value.owner, ir.Block) \
            else value.owner.operation
        inplace = equivalent[r] == a
        reason = "" if inplace else _pairing_reason(func, r, a, equivalent[r], module_op,
                                                    explain_pair)
        found.append(DonationPairing(sym_name(func), a, r, str(func.regions[0].blocks[0]
                                                             .arguments[a].type),
                                     _location(where, filename), inplace, reason))
    return found


def _pairing_reason(func, result, argument, landed, module_op, explain) -> str:
    if landed >= 0:
        return f"it is computed in the buffer of argument #{landed}"
    return explain(func, result, argument, module_op)


_LOOP_OPS = frozenset({"scf.for", "scf.while", "scf.parallel", "scf.forall", "affine.for"})


def _in_loop(op, func) -> bool:
    parent = op.parent
    while parent is not None and parent != func and parent.name != "func.func":
        if parent.name in _LOOP_OPS:
            return True
        parent = parent.parent
    return False


def buffers(module, filename: str | None) -> tuple[list, list]:
    """The :class:`Allocation` of every ``memref.alloc``/``alloca`` and the
    :class:`Copy` of every ``memref.copy`` in the functions of bufferized
    ``module``."""
    allocations, copies = [], []
    for func in _functions(module):
        if not has_body(func):
            continue
        fname = sym_name(func)
        for op in collect_ops(func, ("memref.alloc", "memref.alloca", "memref.copy")):
            if op.name == "memref.copy":
                target = op.operands[1]
                into_view = (not isinstance(target.owner, ir.Block)
                             and target.owner.operation.name == "memref.subview")
                copies.append(Copy(fname, _location(op, filename), static_nbytes(target.type),
                                   _in_loop(op, func), into_view))
            else:
                allocations.append(Allocation(fname, _location(op, filename),
                                              static_nbytes(op.results[0].type), _in_loop(op, func)))
    return allocations, copies


def returned_args(module, results: dict) -> dict:
    """Per entry function (``results``: name -> number of results), the
    donated argument each original result is (``tdf.returned_args``, -1 for
    none)."""
    returned = {}
    for func in _functions(module):
        name = sym_name(func)
        if name in results:
            if RETURNED_ARGS_ATTR in func.attributes:
                returned[name] = list(ir.DenseI64ArrayAttr(func.attributes[RETURNED_ARGS_ATTR]))
            else:
                returned[name] = [-1] * results[name]
    return returned


def _size(value_type) -> int:
    """:func:`static_nbytes`, -1 for a dynamic size (the GPU report's
    convention)."""
    size = static_nbytes(value_type)
    return -1 if size is None else size


def record_gpu_stage(report: GPUReport, stage: str, module, filename: str | None) -> None:
    """Records in ``report`` what the ``tdf-lower-to-nvvm`` stage ``stage``
    (just run on ``module``) decided: after ``donate`` the in-place calls,
    after ``bufferize`` the device copies, after ``gpu`` the transfers,
    device buffers and kernel launches."""
    if stage == "donate":
        for op in collect_ops(module, "tdf.call_inplace"):
            callee = ir.FlatSymbolRefAttr(op.attributes["callee"]).value
            indices = list(ir.DenseI64ArrayAttr(op.attributes["inplace_indices"]))
            report.inplace.append((callee, indices, _location(op, filename)))
        report.out_of_place_calls = len(collect_ops(module, "tdf.call"))
    elif stage == "bufferize":
        for op in collect_ops(module, "memref.copy"):
            report.device_copies.append((_size(op.operands[1].type), _location(op, filename)))
    elif stage == "gpu":
        h2d, d2h = [0, 0], [0, 0]
        for op in collect_ops(module, "gpu.memcpy"):
            if TRANSFER_ATTR not in op.attributes:
                continue
            target = h2d if ir.StringAttr(op.attributes[TRANSFER_ATTR]).value == "h2d" else d2h
            target[0] += 1
            target[1] += max(_size(op.operands[-1].type), 0)
        report.h2d, report.d2h = tuple(h2d), tuple(d2h)
        report.device_alloc_bytes = sum(max(_size(op.results[0].type), 0)
                                        for op in collect_ops(module, "gpu.alloc"))
        report.kernels = len(collect_ops(module, "gpu.launch_func"))
        report.cublas_calls = sum(
            ir.FlatSymbolRefAttr(op.attributes["callee"]).value == GPU_CONTRACT
            for op in collect_ops(module, "func.call"))
