"""``tdf-schedule-for-memory``'s question of each operand, asked of MLIR in
C++ (``_tdf.last_user_in_block``), against the answer of a Python walk over
the value's uses (what the pass computed before), on random functions of
chained, nested and region-holding users; and the pass's output on random
programs equals the output of the pass with the Python walk."""

from __future__ import annotations

import numpy as np
import pytest
from mlir import ir

import tdf
from tdf import _tdf
from tdf.context import Context
from tdf.passes import schedule_for_memory as S
from tdf.passes.ir_utils import ancestor_in, op_key


def _python_last_user(value, block, skip):
    found = None
    for use in value.uses:
        owner = use.owner.operation if hasattr(use.owner, "operation") else use.owner
        top = ancestor_in(owner, block)
        if top is None or op_key(top) == op_key(skip):
            continue
        if found is None or _position(block, top) > _position(block, found):
            found = top
    return found


def _position(block, op):
    for i, other in enumerate(block.operations):
        if op_key(other) == op_key(op):
            return i
    raise AssertionError("not in the block")


def _program(seed: int) -> str:
    """A function of element-wise linalg ops over a few values, some inside
    an scf.if (users in a region count at the if), some reading a value
    several times."""
    rng = np.random.default_rng(seed)
    t = "tensor<64xf32>"
    lines, values = [], ["%a", "%b"]
    for i in range(int(rng.integers(4, 14))):
        x, y = (values[int(rng.integers(0, len(values)))] for _ in range(2))
        if rng.random() < 0.25:
            lines.append(f"%v{i} = scf.if %c -> ({t}) {{\n"
                         f"  %e{i} = tensor.empty() : {t}\n"
                         f"  %s{i} = linalg.add ins({x}, {y} : {t}, {t}) outs(%e{i} : {t}) -> {t}\n"
                         f"  scf.yield %s{i} : {t}\n}} else {{\n  scf.yield {x} : {t}\n}}")
        else:
            lines.append(f"%e{i} = tensor.empty() : {t}\n"
                         f"%v{i} = linalg.mul ins({x}, {y} : {t}, {t}) outs(%e{i} : {t}) -> {t}")
        values.append(f"%v{i}")
    body = "\n".join(lines)
    return (f"func.func @main(%a: {t}, %b: {t}, %c: i1) -> {t} {{\n{body}\n"
            f"return {values[-1]} : {t}\n}}\n")


@pytest.mark.parametrize("seed", range(20))
def test_last_user_matches_a_walk_over_the_uses(seed):
    with Context():
        module = ir.Module.parse(_program(seed))
        func = module.body.operations[0]
        block = func.regions[0].blocks[0]
        ops = [op.operation for op in block.operations]
        for skip in ops:
            for op in ops:
                for value in list(op.results) + list(block.arguments):
                    want = _python_last_user(value, block, skip)
                    got = _tdf.last_user_in_block(value, block, skip)
                    assert (got is None) == (want is None)
                    if got is not None:
                        assert op_key(got) == op_key(want)


@pytest.mark.parametrize("seed", range(20))
def test_pass_output_unchanged_by_the_native_question(seed, monkeypatch):
    text = _program(seed)

    def run() -> str:
        with Context():
            module = ir.Module.parse(text)
            tdf.run_pipeline(module, "builtin.module(tdf-schedule-for-memory)")
            return str(module)

    native = run()

    def walked(value, blk, skip):
        last = _python_last_user(value, blk.block, skip)
        return None if last is None else blk.index(last)

    monkeypatch.setattr(S, "_last_user_position", walked)
    assert run() == native
