"""tdf: in-place tensor dataflow for MLIR.

The public Python API (docs/Runtime.md describes compile and calls):

    import tdf
    ctx = tdf.Context()                  # mlir.ir.Context with tdf + upstream dialects
    m = tdf.parse(text, ctx)             # mlir.ir.Module; errors raise with file:line:col
    tdf.run_pipeline(m, "builtin.module(tdf-insert-inplace{remarks})")
    prog = tdf.compile(text_or_module, target="cpu", inplace=True, strict=False)

Importing the package registers the tdf dialect and every tdf pass and
pipeline with MLIR, so they can be named in textual pipelines.
"""

# Registers the Python passes and pipelines with MLIR's pass registry.
from . import passes as _passes  # noqa: F401
from .compiler import compile
from .context import Context
from .errors import DiagnosticRecord, ParseError, PipelineError, TDFError
from .parsing import parse
from .pipeline import run_pipeline

__all__ = [
    "Context",
    "parse",
    "run_pipeline",
    "compile",
    "TDFError",
    "ParseError",
    "PipelineError",
    "DiagnosticRecord",
]

