"""The check behind the issue-10 invariant (the output of
``tdf-insert-inplace`` passes ``tdf-verify-inplace{strict}``), shared by the
invariant tests and the random-program fuzzers."""

from __future__ import annotations

import tdf
from tdf.passes.liveness import function_bodies
from tdf.passes.verify_inplace import one_shot_copies, verify_function


def violations(module) -> set:
    """``{(location, operand)}`` of every in-place operand needing a copy."""
    copies = one_shot_copies(module.operation)
    found = set()
    for func in function_bodies(module.operation):
        for call, index, _, _ in verify_function(func, copies):
            found.add((str(call.location), index))
    return found


def added_violations(text: str, filename: str):
    """Violations present after ``tdf-insert-inplace`` and not before, or
    None when ``text`` is not a valid input for the pass."""
    ctx = tdf.Context()
    try:
        module = tdf.parse(text, ctx, filename=filename)
    except tdf.TDFError:
        return None
    with ctx:
        try:
            before = violations(module)
            tdf.run_pipeline(module, "builtin.module(tdf-insert-inplace)")
        except tdf.TDFError:
            return None
        after = violations(module)
    added = after - before
    return added, str(module)
