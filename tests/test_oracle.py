"""The program corpus (``tests/programs``) through tdf — in-place rewrite on
and off — against ``jax.jit``: results agree (exact for integers, each
program's tolerance for floats), non-donated inputs are byte-identical after
the call, results returned in donated arguments are the caller's arrays."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import INPLACE_MODES
from programs import NAMES, PROGRAMS

import tdf
from tdf.oracle import OracleMismatch, OracleProgram, check


@pytest.mark.parametrize("inplace", INPLACE_MODES)
@pytest.mark.parametrize("program", PROGRAMS, ids=NAMES)
def test_program_matches_jax(program, inplace):
    compiled = tdf.compile(program.source, inplace=inplace, filename=f"{program.name}.mlir")
    for seed in range(3):
        check(program, inplace=inplace, seed=seed, compiled=compiled)


def test_donated_results_come_back_in_place():
    by_name = dict(zip(NAMES, PROGRAMS))
    for name in ("kv_row_update", "kv_decode_loop", "embedding_update"):
        result = check(by_name[name], inplace=False)
        assert result.donated_in_place == [0], name


def test_oracle_detects_a_wrong_reference():
    program = dict(zip(NAMES, PROGRAMS))["add_zz"]
    wrong = OracleProgram("add_zz_wrong", program.source, program.entry,
                          lambda x, y: (x + y) * 3, program.make_inputs)
    with pytest.raises(OracleMismatch, match="differs from JAX"):
        check(wrong, inplace=False)


def test_oracle_detects_a_written_readonly_input():
    program = dict(zip(NAMES, PROGRAMS))["add_zz"]

    class Clobbering:
        """Wraps a compiled program and writes its first (non-donated) input."""

        def __init__(self, compiled):
            self.functions = {program.entry: self._wrap(compiled.functions[program.entry])}

        @staticmethod
        def _wrap(fn):
            def call(x, y):
                out = fn(x, y)
                x[0] += 1
                return out
            call.params, call.returned_args = fn.params, fn.returned_args
            return call

    compiled = Clobbering(tdf.compile(program.source, inplace=False))
    with pytest.raises(OracleMismatch, match="wrote the non-donated argument #0"):
        check(program, inplace=False, compiled=compiled)


def test_integer_results_compare_exactly():
    from tdf.oracle import compare
    with pytest.raises(OracleMismatch, match="1 element"):
        compare("ints", np.array([1, 2, 3], np.int32), np.array([1, 2, 4], np.int32), 1.0, 1.0)
