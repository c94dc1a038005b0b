"""Running textual pass pipelines (upstream and tdf passes mixed)."""

from __future__ import annotations

import re

from mlir import ir, passmanager

from .errors import DiagnosticRecord, PipelineError
from .limits import InputError, check_nesting, check_utf8

__all__ = ["run_pipeline", "capture_diagnostics"]


class capture_diagnostics:
    """Context manager collecting every diagnostic emitted in ``ctx`` while
    active (warnings and remarks included) as :class:`DiagnosticRecord`s."""

    def __init__(self, ctx: ir.Context, filename: str | None = None):
        self.ctx = ctx
        self.filename = filename
        self.records: list[DiagnosticRecord] = []
        self._handler = None

    def _handle(self, diag) -> bool:
        self.records.append(DiagnosticRecord.from_mlir(diag, self.filename))
        return True

    def __enter__(self) -> capture_diagnostics:
        self._handler = self.ctx.attach_diagnostic_handler(self._handle)
        return self

    def __exit__(self, *exc) -> None:
        if self._handler is not None:
            self._handler.detach()
        # The handler holds a bound method of self: drop it, or the cycle
        # (through a nanobind object the GC cannot traverse) keeps the
        # context, and every module in it, alive.
        self._handler = None


#: One-Shot Bufferize's options as the pass manager prints them.
_ONE_SHOT_OPTIONS = re.compile(r"one-shot-bufferize\{([^}]*)\}")


def _check_copy_before_write(pipeline: str, pm, op, captured, filename: str | None) -> None:
    """MLIR 22's One-Shot Bufferize crashes the process (SIGSEGV in
    ``getCalledFunction``) when ``copy-before-write`` meets a ``func.call``
    with tensors across function boundaries: a pipeline with that pass
    refuses such a module first (``PipelineError``, the calls located; the
    ``tdf-check-copy-before-write`` pass, which ``tdf-bufferize`` runs in
    that mode). Pipelines that do not name copy-before-write cost a
    substring test."""
    if "copy-before-write" not in pipeline:
        return
    if not any("copy-before-write=true" in m.group(1)
               and "bufferize-function-boundaries=true" in m.group(1)
               for m in _ONE_SHOT_OPTIONS.finditer(str(pm))):
        return
    check = passmanager.PassManager.parse("builtin.module(tdf-check-copy-before-write)",
                                          context=op.context)
    try:
        check.run(op)
    except ir.MLIRError as err:
        records = captured.records or [
            DiagnosticRecord.from_mlir(d, filename) for d in err.error_diagnostics]
        raise PipelineError("pass pipeline refused: one-shot-bufferize{copy-before-write "
                            "bufferize-function-boundaries} would crash on the module's "
                            "calls", records) from None


def run_pipeline(module, pipeline: str, filename: str | None = None,
                 diagnostics: list | None = None, verify_each: bool = True) -> None:
    """Runs the textual ``pipeline`` (e.g.
    ``"builtin.module(tdf-donate, one-shot-bufferize{bufferize-function-boundaries})"``)
    on ``module`` (an ``ir.Module`` or ``ir.Operation``), in place.

    ``verify_each`` (default true, as ``mlir-opt --verify-each``) verifies
    the IR after every pass; false verifies it once, after the last pass
    (what ``tdf.compile`` does: the verifier run after each of a stage's
    dozens of passes is a fifth of its time on a large module).

    Raises :class:`tdf.PipelineError` when the pipeline does not parse (unknown
    pass, bad option, not valid UTF-8, nested too deep) or a pass fails or
    leaves invalid IR; the
    error lists the diagnostics as ``file:line:col: error: ...``. Raises
    ``TypeError`` for an argument of the wrong type. Warnings and remarks emitted by passes that
    succeed are appended to ``diagnostics`` when a list is given.
    """
    if isinstance(module, ir.Module):
        op = module.operation
    elif isinstance(module, (ir.Operation, ir.OpView)):
        op = module.operation
    else:
        hint = " (parse the text with tdf.parse first)" if isinstance(module, str) else ""
        raise TypeError(f"tdf.run_pipeline expects an mlir.ir.Module or Operation, "
                        f"got {type(module).__name__}{hint}")
    if not isinstance(pipeline, str):
        raise TypeError(f"tdf.run_pipeline expects the pipeline as str, "
                        f"got {type(pipeline).__name__}")
    if filename is not None and not isinstance(filename, str):
        raise TypeError(f"tdf.run_pipeline expects filename as str or None, "
                        f"got {type(filename).__name__}")
    if diagnostics is not None and not isinstance(diagnostics, list):
        raise TypeError(f"tdf.run_pipeline expects diagnostics to be a list (diagnostics are "
                        f"appended to it) or None, got {type(diagnostics).__name__}")
    if not pipeline.strip():
        raise PipelineError(f"tdf.run_pipeline: expected a textual pass pipeline, got {pipeline!r}")
    try:
        check_utf8(pipeline, "<pipeline>")
        check_nesting(pipeline, "<pipeline>")
    except InputError as err:
        raise PipelineError(f"invalid pass pipeline: {err}") from None
    ctx = op.context
    with capture_diagnostics(ctx, filename) as captured:
        try:
            pm = passmanager.PassManager.parse(pipeline, context=ctx)
        except ValueError as err:
            raise PipelineError(f"invalid pass pipeline {pipeline!r}: {err}",
                                captured.records) from None
        pm.enable_verifier(verify_each)
        _check_copy_before_write(pipeline, pm, op, captured, filename)
        try:
            pm.run(op)
            if not verify_each:
                op.verify()
        except ir.MLIRError as err:
            records = captured.records or [
                DiagnosticRecord.from_mlir(d, filename) for d in err.error_diagnostics]
            raise PipelineError(f"pass pipeline {pipeline!r} failed", records) from None
    if diagnostics is not None:
        diagnostics.extend(captured.records)
