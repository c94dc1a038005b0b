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


def _nested_loops(depth: int) -> str:
    """A call chain through ``scf.for`` nested ``depth`` deep, each level
    calling on the previous level's iteration argument: one alias class
    through every level (compile_scaling's ``nested_for``)."""
    from test_inplace_analysis import KERNELS
    t = "tensor<4xf32>"
    lines, cur = [], "%x"
    for i in range(depth):
        lines.append(f"%a{i} = tdf.call @addone({cur}) : ({t}) -> {t}")
        lines.append(f"%r{i} = scf.for %i{i} = %c0 to %n step %c1 iter_args(%it{i} = %a{i}) "
                     f"-> ({t}) {{")
        cur = f"%it{i}"
    lines.append(f"%z = tdf.call @addone({cur}) : ({t}) -> {t}")
    lines.append(f"scf.yield %z : {t}")
    for i in reversed(range(depth)):
        lines.append("}")
        lines.append(f"scf.yield %r{i} : {t}" if i else f"return %r{i} : {t}")
    return (KERNELS + f"func.func @f(%x: {t} {{tdf.donate}}, %n: index) -> {t} {{\n"
            "%c0 = arith.constant 0 : index\n%c1 = arith.constant 1 : index\n"
            + "\n".join(lines) + "\n}\n")


def test_members_scanned_grow_linearly_through_nested_loops():
    """A read inside a loop that does not contain a member's definition
    counts as a read at the loop's end (AliasAnalysis.last_read): the class
    bounds then serve candidates inside loops too, where the whole class was
    scanned for each (quadratic over a chain through nested loops)."""
    small, small_text = _scanned(_nested_loops(100))
    large, large_text = _scanned(_nested_loops(400))
    assert large <= 5 * small, (small, large)  # quadratic would be ~16x
    assert large_text.count("tdf.call_inplace") >= 400  # every level in place


def _random_loop_program(rng, depth: int) -> str:
    """Calls on a running value through random nests of ``scf.for`` (with
    an iteration argument), ``scf.if`` (with a result) and plain blocks,
    with reads of older values of the enclosing scopes inside and after
    each nest; the head is a donated argument."""
    from test_inplace_analysis import KERNELS
    t = "tensor<4xf32>"
    lines, closers = [], []
    scopes = [["%x", "%y"]]
    cur = "%x"
    names = iter(range(10**6))

    def call(*args):
        name = f"%v{next(names)}"
        callee = "@addone" if len(args) == 1 else "@add"
        lines.append(f"{name} = tdf.call {callee}({', '.join(args)}) : "
                     f"({', '.join([t] * len(args))}) -> {t}")
        scopes[-1].append(name)
        return name

    def older():
        return rng.choice([v for scope in scopes for v in scope])

    for i in range(depth):
        cur = call(cur) if rng.random() < 0.5 else call(cur, older())
        kind = rng.choice(["for", "for", "if", "none"])
        if kind == "for":
            lines.append(f"%r{i} = scf.for %i{i} = %c0 to %n step %c1 iter_args(%it{i} = {cur}) "
                         f"-> ({t}) {{")
            closers.append(("for", i, cur))
            scopes.append([f"%it{i}"])
            cur = f"%it{i}"
        elif kind == "if":
            lines.append(f"%r{i} = scf.if %c -> ({t}) {{")
            closers.append(("if", i, cur))
            scopes.append([])
    for kind, i, entry in reversed(closers):
        if rng.random() < 0.5:
            call(older())  # a read of an older value, inside the nest
        cur = call(cur)
        lines.append(f"scf.yield {cur} : {t}")
        if kind == "if":
            lines.append(f"}} else {{\nscf.yield {entry} : {t}\n}}")
        else:
            lines.append("}")
        scopes.pop()
        cur = f"%r{i}"
        scopes[-1].append(cur)
        if rng.random() < 0.3:
            call(older())  # after the nest
    lines.append(f"return {cur} : {t}")
    return (KERNELS + f"func.func @f(%x: {t} {{tdf.donate}}, %y: {t}, %c: i1, %n: index) -> {t} {{\n"
            "%c0 = arith.constant 0 : index\n%c1 = arith.constant 1 : index\n"
            + "\n".join(lines) + "\n}\n")


def test_class_bounds_inside_loops_decide_as_the_scan(monkeypatch):
    """On random nests of loops and branches, tdf-insert-inplace decides the
    same with the class bounds as with a scan of every member for every
    candidate (the bounds switched off)."""
    import random

    def decide(text):
        module = tdf.parse(text)
        tdf.run_pipeline(module, "builtin.module(tdf-insert-inplace)")
        return str(module)

    in_place = 0
    for seed in range(12):
        text = _random_loop_program(random.Random(seed), 10)
        bounded = decide(text)
        with monkeypatch.context() as patch:
            patch.setattr(AliasAnalysis, "max_use", lambda self, value: 1 << 60)
            patch.setattr(AliasAnalysis, "live_members", lambda self, value, pre: None)
            scanned = decide(text)
        assert bounded == scanned, text
        in_place += bounded.count("tdf.call_inplace")
    assert in_place >= 40
