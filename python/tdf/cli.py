"""The ``tdf-opt`` command: mlir-opt with the tdf dialect and tdf's passes.

Every upstream dialect and pass is available, next to the tdf dialect and the
passes and pipelines written in Python (``tdf-donate``, ...). The driver itself
is MLIR's (options, diagnostics, ``--split-input-file``,
``--verify-diagnostics``), running in this process.
"""

import sys

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Runs tdf-opt with ``argv`` (default ``sys.argv``) and returns the exit
    code (0 success, 1 failure)."""
    import tdf
    from tdf import _tdf

    args = list(sys.argv if argv is None else argv)
    args[0] = "tdf-opt"
    sys.stdout.flush()
    code = _tdf.opt_main(tdf.Context(), args)
    sys.stdout.flush()
    return code


if __name__ == "__main__":
    sys.exit(main())
