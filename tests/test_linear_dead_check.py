"""tdf-insert-inplace's dead check stays linear over long chains (no timing).

``Liveness.dead_after`` scans the members of an alias class; a chain turned
in place grows one class, so scanning it for every candidate was quadratic
(compile_scaling's ``mix``: 41 s at 10k ops). The class bounds of
``AliasAnalysis.live_members`` hand it only the members that can still be
read. Counted here: the members scanned in total, which must grow linearly
with the program, and the decisions, which must not change.
"""

from __future__ import annotations

import os
import sys

import tdf
from tdf.passes.analysis import liveness as L
from tdf.passes.analysis.alias import AliasAnalysis
from tdf.passes.ir_utils import function_bodies, is_tensor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_pass_determinism import _mix  # noqa: E402


def _scanned(text: str) -> tuple[int, str]:
    count = [0]
    original = L.Liveness.dead_after

    def counting(self, value, op, aliases=(), ignore=()):
        count[0] += 1 + len(aliases)
        return original(self, value, op, aliases, ignore)

    L.Liveness.dead_after = counting
    try:
        module = tdf.parse(text)
        tdf.run_pipeline(module, "builtin.module(tdf-insert-inplace)")
    finally:
        L.Liveness.dead_after = original
    return count[0], str(module)


def test_members_scanned_grow_linearly():
    small, _ = _scanned(_mix(1000))
    large, _ = _scanned(_mix(4000))
    assert large <= 5 * small, (small, large)  # quadratic would be ~16x


def test_class_bounds_agree_with_a_scan():
    """live_max / live_members against the members' uses, at every op of a
    function, in program order (the order the pass queries them)."""
    module = tdf.parse(_mix(300))
    func = function_bodies(module.operation)[-1]
    order = L.Liveness(func)
    alias = AliasAnalysis(func, order=order)
    for op in order.ops:
        pre = order.pre(op)
        for operand in op.operands:
            if not is_tensor(operand):
                continue
            expect = set()
            for member in alias.members(operand):
                if order.def_pos(member) >= 2 * pre:
                    continue
                if any(order.pre(use.owner) > pre for use in member.uses):
                    expect.add(member)
            got = alias.live_members(operand, pre)
            assert got is not None
            assert expect <= set(got), op
            bound = alias.live_max(operand, pre)
            assert (bound > pre) == bool(got)
