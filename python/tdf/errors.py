"""Exceptions raised by tdf and the formatting of MLIR diagnostics."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = [
    "DiagnosticRecord",
    "TDFError",
    "ParseError",
    "PipelineError",
    "CompileError",
    "StrictModeError",
    "format_location",
]

_FILE_LINE_COL = re.compile(r'^loc\("(?P<file>[^"]*)":(?P<line>\d+):(?P<col>\d+)')
_ANY_FILE_LINE_COL = re.compile(r'"(?P<file>[^"]*)":(?P<line>\d+):(?P<col>\d+)')


def format_location(location, filename: str | None = None) -> str:
    """Formats an MLIR location as ``file:line:col``; ``filename`` replaces
    the buffer name of locations that point into the parsed text."""
    text = str(location)
    match = _FILE_LINE_COL.match(text) or _ANY_FILE_LINE_COL.search(text)
    if not match:
        return text
    name = match.group("file")
    if filename is not None and name in ("", "-", "<unknown>", "<string>"):
        name = filename
    return f"{name}:{match.group('line')}:{match.group('col')}"


@dataclass
class DiagnosticRecord:
    """One diagnostic: severity ('error', 'warning', 'remark', 'note'),
    ``file:line:col`` location and message, with attached notes."""

    severity: str
    location: str
    message: str
    notes: list[DiagnosticRecord] = field(default_factory=list)

    def __str__(self) -> str:
        lines = [f"{self.location}: {self.severity}: {self.message}"]
        lines += [str(note) for note in self.notes]
        return "\n".join(lines)

    @staticmethod
    def from_mlir(diag, filename: str | None = None) -> DiagnosticRecord:
        """Converts an ``ir.Diagnostic`` or ``ir.DiagnosticInfo``."""
        severity = str(diag.severity).rsplit(".", 1)[-1].lower()
        return DiagnosticRecord(
            severity=severity,
            location=format_location(diag.location, filename),
            message=diag.message,
            notes=[DiagnosticRecord.from_mlir(n, filename) for n in diag.notes],
        )


class TDFError(Exception):
    """Base class of tdf errors. ``diagnostics`` holds the MLIR diagnostics
    that explain the error, each formatted as ``file:line:col: error: ...``."""

    def __init__(self, message: str, diagnostics: list[DiagnosticRecord] | None = None):
        self.diagnostics = list(diagnostics or [])
        text = message
        if self.diagnostics:
            text += "\n" + "\n".join(str(d) for d in self.diagnostics)
        super().__init__(text)


class ParseError(TDFError):
    """Malformed or invalid IR (a parse or verifier error)."""


class PipelineError(TDFError):
    """A pass pipeline that does not parse, has bad options, or fails."""


class CompileError(TDFError):
    """A program tdf.compile cannot compile (unsupported signature, missing
    kernel symbol, bad option)."""


class StrictModeError(CompileError):
    """``strict=True`` and a ``tdf.call_inplace`` operand would be copied."""
