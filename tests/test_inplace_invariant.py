"""The in-place invariant: the output of ``tdf-insert-inplace`` always
passes ``tdf-verify-inplace{strict}`` -- checked over the differential corpus
(``tests/programs``), every lit input under ``lit_tests/`` (each
``// -----`` chunk that parses), the random-program generator of
``test_properties.py`` and the kernel fuzzer (``test_kernel_fuzz.py`` checks
it on every program it generates).

A lit input may already hold a hand-written ``tdf.call_inplace`` that needs
a copy (the verifier's own tests): only violations the rewrite *adds* count.
"""

from __future__ import annotations

import pathlib

import pytest
from inplace_invariant import added_violations, corpus_package

PROGRAMS = corpus_package().PROGRAMS

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _lit_chunks():
    for path in sorted((ROOT / "lit_tests").rglob("*.mlir")):
        text = path.read_text()
        if "tdf." not in text:
            continue
        for k, chunk in enumerate(text.split("// -----")):
            if "expected-error" in chunk:
                continue  # verifier/pass error cases: not valid input
            yield pytest.param(chunk, f"{path.name}#{k}", id=f"{path.name}#{k}")


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.name for p in PROGRAMS])
def test_corpus_keeps_invariant(program):
    result = added_violations(program.source, program.name)
    assert result is not None, f"{program.name} does not go through tdf-insert-inplace"
    added, rewritten = result
    assert not added, f"{program.name}: tdf-insert-inplace added copies {added}\n{rewritten}"


@pytest.mark.parametrize("chunk,name", list(_lit_chunks()))
def test_lit_inputs_keep_invariant(chunk, name):
    result = added_violations(chunk, name)
    if result is None:
        return  # not an input the pass accepts (checked by its own lit test)
    added, rewritten = result
    assert not added, f"{name}: tdf-insert-inplace added copies {added}\n{rewritten}"


def test_lit_inputs_are_checked():
    """Most lit chunks are real inputs (a filter that skips everything would
    make the invariant vacuous)."""
    checked = sum(1 for p in _lit_chunks() if added_violations(*p.values) is not None)
    assert checked >= 30, checked
