"""Parsing tdf programs into MLIR modules with located errors."""

from __future__ import annotations

from mlir import ir

from .context import Context
from .errors import DiagnosticRecord, ParseError
from .limits import InputError, check_parser_limits, check_utf8

__all__ = ["parse", "parse_program"]


def parse(text: str, ctx: ir.Context | None = None, filename: str = "<input>") -> ir.Module:
    """Parses ``text`` into an ``mlir.ir.Module`` and verifies it.

    Raises :class:`tdf.ParseError` whose message lists every diagnostic as
    ``filename:line:col: error: ...``; also for text that is not valid UTF-8
    (a lone surrogate) and for input nested deeper than
    :data:`tdf.limits.MAX_NESTING_DEPTH` levels (refused before MLIR's
    parser, which would overflow the stack). ``TypeError`` for arguments of
    the wrong type.
    """
    if not isinstance(text, str):
        raise TypeError(f"tdf.parse expects the IR as str, got {type(text).__name__}")
    if ctx is not None and not isinstance(ctx, ir.Context):
        raise TypeError(f"tdf.parse expects ctx to be an mlir.ir.Context (tdf.Context()) or None, "
                        f"got {type(ctx).__name__}")
    if not isinstance(filename, str):
        raise TypeError(f"tdf.parse expects filename as str, got {type(filename).__name__}")
    try:
        check_utf8(text, filename)
        check_parser_limits(text, filename)
    except InputError as err:
        record = DiagnosticRecord("error", f"{err.filename}:{err.line}:{err.column}", err.detail)
        raise ParseError(f"cannot parse {filename}", [record]) from None
    if ctx is None:
        ctx = Context()
    try:
        return ir.Module.parse(text, context=ctx)
    except ir.MLIRError as err:
        records = [DiagnosticRecord.from_mlir(d, filename) for d in err.error_diagnostics]
        raise ParseError(f"cannot parse {filename}", records) from None


def parse_program(text_or_module, filename: str, caller: str) -> ir.Module:
    """The program ``tdf.compile`` / ``compile_nvvm`` (``caller``, for the
    ``TypeError`` message) compile, as a module of its own in a fresh
    :func:`tdf.Context`: parsed from text, or printed with its locations
    from the caller's ``ir.Module``, which is never modified."""
    if isinstance(text_or_module, ir.Module):
        text_or_module = text_or_module.operation.get_asm(enable_debug_info=True)
    elif not isinstance(text_or_module, str):
        raise TypeError(f"{caller} expects MLIR text or an mlir.ir.Module, "
                        f"got {type(text_or_module).__name__}")
    return parse(text_or_module, Context(), filename=filename)
