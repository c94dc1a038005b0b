"""Creation of MLIR contexts that know the tdf dialect and every upstream one."""

from mlir import ir

from . import _tdf

__all__ = ["Context"]


def Context() -> ir.Context:
    """Returns a new ``mlir.ir.Context`` with the tdf dialect, its interface
    models and all upstream dialects and extensions loaded.

    Multithreading is disabled: tdf's passes run Python code, and a
    single-threaded context keeps them on the thread that holds the GIL.
    """
    ctx = ir.Context()
    registry = ir.DialectRegistry()
    _tdf.register_dialect(registry)
    ctx.append_dialect_registry(registry)
    ctx.load_all_available_dialects()
    ctx.enable_multithreading(False)
    return ctx
