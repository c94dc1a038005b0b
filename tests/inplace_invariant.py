"""The check behind the in-place invariant (the output of
``tdf-insert-inplace`` passes ``tdf-verify-inplace{strict}``), shared by the
invariant tests and the random-program fuzzers."""

from __future__ import annotations

import tdf
from tdf.passes.analysis.one_shot import one_shot_copies
from tdf.passes.ir_utils import function_bodies
from tdf.passes.verify_inplace import verify_function


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


def corpus_package():
    """The differential corpus package ``tests/programs``, loaded by path as
    ``tdf_test_corpus`` (another ``programs`` module, e.g. the benchmarks',
    may be first on ``sys.path`` when the whole suite is collected)."""
    import importlib.util
    import pathlib
    import sys

    name = "tdf_test_corpus"
    if name not in sys.modules:
        folder = pathlib.Path(__file__).resolve().parent / "programs"
        spec = importlib.util.spec_from_file_location(
            name, folder / "__init__.py", submodule_search_locations=[str(folder)])
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]
