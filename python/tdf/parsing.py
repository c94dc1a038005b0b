"""Parsing tdf programs into MLIR modules with located errors."""

from __future__ import annotations

from mlir import ir

from .context import Context
from .errors import DiagnosticRecord, ParseError

__all__ = ["parse"]


def parse(text: str, ctx: ir.Context | None = None, filename: str = "<input>") -> ir.Module:
    """Parses ``text`` into an ``mlir.ir.Module`` and verifies it.

    Raises :class:`tdf.ParseError` whose message lists every diagnostic as
    ``filename:line:col: error: ...``.
    """
    if not isinstance(text, str):
        raise TypeError(f"tdf.parse expects the IR as str, got {type(text).__name__}")
    if ctx is None:
        ctx = Context()
    try:
        return ir.Module.parse(text, context=ctx)
    except ir.MLIRError as err:
        records = [DiagnosticRecord.from_mlir(d, filename) for d in err.error_diagnostics]
        raise ParseError(f"cannot parse {filename}", records) from None
