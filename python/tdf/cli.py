"""The ``tdf-opt`` command: mlir-opt with the tdf dialect and tdf's passes.

Every upstream dialect and pass is available, next to the tdf dialect and the
passes and pipelines written in Python (``tdf-donate``, ...). The driver itself
is MLIR's (options, diagnostics, ``--split-input-file``,
``--verify-diagnostics``), running in this process.

Before the driver parses anything, the inputs and ``--pass-pipeline`` are
checked against :data:`tdf.limits.MAX_NESTING_DEPTH` (deeper input would
overflow the parser's stack): a refused input exits 1 with
``file:line:col: error: ...``.
"""

import os
import sys
import tempfile

__all__ = ["main"]

# Options whose value may be the next argument (not an input file).
_VALUE_OPTIONS = {"-o", "--o"}


def _input_paths(args: list[str]) -> list[str]:
    """The positional arguments (input files; ``-`` is stdin), after
    ``argv[0]``."""
    paths, skip = [], False
    for arg in args[1:]:
        if skip:
            skip = False
        elif arg in _VALUE_OPTIONS:
            skip = True
        elif arg == "-" or not arg.startswith("-"):
            paths.append(arg)
    return paths or ["-"]


def _guard_input(args: list[str]) -> str | None:
    """Checks every input (and ``--pass-pipeline``) against
    :mod:`tdf.limits` before the MLIR driver parses it; returns the located
    error text, or None. Standard input is read here and handed to the
    driver again on file descriptor 0 (so it is still ``<stdin>``)."""
    from .limits import InputError, check_nesting, check_parser_limits

    for arg in args[1:]:
        for prefix in ("--pass-pipeline=", "-pass-pipeline="):
            if arg.startswith(prefix):
                try:
                    check_nesting(arg[len(prefix):], "<pass-pipeline>")
                except InputError as err:
                    return str(err)
    for path in _input_paths(args):
        if path == "-":
            try:
                data = sys.stdin.buffer.read()
            except (OSError, ValueError, AttributeError):
                continue
            name = "<stdin>"
            spool = tempfile.TemporaryFile()
            spool.write(data)
            spool.seek(0)
            os.dup2(spool.fileno(), 0)
            spool.close()
        else:
            try:
                with open(path, "rb") as handle:
                    data = handle.read()
            except OSError:
                continue  # the driver reports a missing or unreadable file
            name = path
        try:
            check_parser_limits(data.decode("utf-8", errors="replace"), name)
        except InputError as err:
            return str(err)
    return None


def main(argv: list[str] | None = None) -> int:
    """Runs tdf-opt with ``argv`` (default ``sys.argv``) and returns the exit
    code (0 success, 1 failure)."""
    import tdf
    from tdf import _tdf

    args = list(sys.argv if argv is None else argv)
    args[0] = "tdf-opt"
    refused = _guard_input(args)
    if refused is not None:
        print(refused, file=sys.stderr)
        return 1
    sys.stdout.flush()
    code = _tdf.opt_main(tdf.Context(), args, tdf.Context)
    sys.stdout.flush()
    return code


if __name__ == "__main__":
    sys.exit(main())
