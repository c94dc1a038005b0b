"""Compile time that stays linear, checked without timing.

* One-Shot Bufferize's cost on a chain of ``tdf.call_inplace`` is driven by
  the size of its alias sets (each decision checks every read against every
  write of the sets involved): the ``tdf.call_inplace`` model cuts long
  chains, so the largest alias set must not grow with the chain, while every
  decision stays in place.
* ``tdf-inline-kernels`` leaves every 64th call of a long chain a call, so
  that ``tdf-fuse-elementwise`` never fuses more than 64 generics into
  one (its cost grows with the square of the fused length).

The timings themselves live in ``benchmarks/compile_scaling.py``.
"""

from __future__ import annotations

# benchmarks/programs.py, loaded by path: putting benchmarks/ first on
# sys.path would shadow the test corpus package tests/programs.
import importlib.util  # noqa: E402
import os
import re
import sys

import numpy as np
import pytest

import tdf

_SPEC = importlib.util.spec_from_file_location(
    "benchmark_programs",
    os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                 "benchmarks", "programs.py"))
P = importlib.util.module_from_spec(_SPEC)
sys.modules["benchmark_programs"] = P
_SPEC.loader.exec_module(P)

T = "tensor<4xf32>"


def _call_inplace_chain(n: int) -> str:
    lines = [f"  %v0 = tdf.call @k(%x) : ({T}) -> {T}"]
    for i in range(1, n):
        lines.append(f"  %v{i} = tdf.call_inplace @k_ip(%v{i - 1}) inplace [0] : ({T}) -> {T}")
    return ("func.func private @k(memref<4xf32>, memref<4xf32>)\n"
            "func.func private @k_ip(memref<4xf32>) attributes {tdf.elementwise}\n"
            f"func.func @main(%x: {T}) -> {T} {{\n" + "\n".join(lines)
            + f"\n  return %v{n - 1} : {T}\n}}\n")


def _alias_sets(text: str) -> tuple[list[int], list[str]]:
    ctx = tdf.Context()
    module = tdf.parse(text, ctx)
    tdf.run_pipeline(module, "builtin.module(one-shot-bufferize{bufferize-function-boundaries "
                             "test-analysis-only dump-alias-sets})")
    asm = str(module)
    sizes = [len(re.findall(r'"%[\w]+"', m))
             for m in re.findall(r"__opresult_alias_set_attr__ = \[\[([^\]]*)\]\]", asm)]
    flags = re.findall(r'__inplace_operands_attr__ = \["(\w+)"\]', asm)
    return sizes, flags


@pytest.mark.parametrize("n", [50, 400])
def test_alias_sets_stay_bounded_on_long_chains(n):
    sizes, flags = _alias_sets(_call_inplace_chain(n))
    assert len(sizes) == n
    # Segments of about 8 values: the set size does not depend on n.
    assert max(sizes) <= 16, max(sizes)
    # Every operand is still decided in place (the cuts change no decision).
    assert flags and all(f == "true" for f in flags), flags


def test_short_chain_not_cut():
    sizes, _ = _alias_sets(_call_inplace_chain(6))
    assert sizes == [6] * 6


def test_long_chain_compiles_and_runs():
    text = P.ew_chain(8, 300)
    x = np.linspace(-1, 1, 8).astype(np.float32)
    expect = x.astype(np.float64)
    for i in range(300):
        expect = expect * 1.0001 if i % 2 == 0 else expect + 0.5
    got = tdf.compile(text).chain(x.copy())
    np.testing.assert_allclose(got, expect, rtol=1e-4)


def test_fusion_keeps_every_64th_call_of_a_chain():
    from tdf.passes.inline_kernels import MAX_FUSED_CHAIN
    ctx = tdf.Context()
    module = tdf.parse(P.ew_chain(8, 130), ctx)
    tdf.run_pipeline(module, "builtin.module(tdf-inline-kernels)")
    calls = str(module).count("tdf.call @")
    assert MAX_FUSED_CHAIN == 64
    assert calls == 2, calls  # calls #64 and #129 (0-based) stay calls


def _chain_on_argument(n: int) -> str:
    lines = [f"  %v0 = tdf.call_inplace @k_ip(%x) inplace [0] : ({T}) -> {T}"]
    for i in range(1, n):
        lines.append(f"  %v{i} = tdf.call_inplace @k_ip(%v{i - 1}) inplace [0] : ({T}) -> {T}")
    return ("func.func private @k_ip(memref<4xf32>) attributes {tdf.elementwise}\n"
            f"func.func @main(%x: {T} {{tdf.donate}}) -> {T} {{\n" + "\n".join(lines)
            + f"\n  return %v{n - 1} : {T}\n}}\n")


def test_chain_on_entry_argument_is_cut():
    # A chain on a donated argument of an entry point (the shape of every
    # JAX step with donate_argnums) is cut too; each decision stays in place.
    sizes, flags = _alias_sets(_chain_on_argument(400))
    assert max(sizes) <= 16, max(sizes)
    assert len(flags) >= 400 and all(f == "true" for f in flags)


def test_donated_named_op_chain_runs_in_place():
    kernel = ("func.func private @ex(%i: memref<4xf32>, %o: memref<4xf32>) "
              "attributes {tdf.elementwise} {\n"
              "  linalg.exp ins(%i : memref<4xf32>) outs(%o : memref<4xf32>)\n  return\n}\n")
    lines, cur = [], "%x"
    for i in range(200):
        lines.append(f"  %v{i} = tdf.call @ex({cur}) : ({T}) -> {T}")
        cur = f"%v{i}"
    text = (kernel + f"func.func @main(%x: {T} {{tdf.donate}}) -> {T} {{\n" + "\n".join(lines)
            + f"\n  return {cur} : {T}\n}}\n")
    prog = tdf.compile(text)
    x = np.full(4, -50.0, np.float32)
    expect = tdf.compile(text, inplace=False).main(x.copy())
    out = prog.main(x)
    assert out is x and np.array_equal(out, expect)
    report = prog.report()
    assert not report.copies and all(d.inplace for d in report.decisions)


def _nested_ifs(n: int) -> str:
    """``n`` nested ``scf.if``: each level calls on the previous level's
    value and yields it from its else branch."""
    def level(i, cur):
        if i == n:
            return f"%z = tdf.call @k({cur}) : ({T}) -> {T}\nscf.yield %z : {T}\n"
        end = f"scf.yield %r{i} : {T}\n" if i else f"return %r{i} : {T}\n"
        return (f"%a{i} = tdf.call @k({cur}) : ({T}) -> {T}\n"
                f"%r{i} = scf.if %c -> ({T}) {{\n" + level(i + 1, f"%a{i}")
                + f"}} else {{\nscf.yield %a{i} : {T}\n}}\n" + end)
    return ("func.func private @k(memref<4xf32>, memref<4xf32>)\n"
            f"func.func @main(%x: {T}, %c: i1) -> {T} {{\n" + level(0, "%x") + "}\n")


def test_liveness_linear_in_nesting_depth(monkeypatch):
    # Work counted, not timed: op lookups of test-tdf-liveness grow linearly
    # with the nesting depth (quadratic before: each region op walked its
    # whole subtree, each use climbed every enclosing op).
    from tdf.passes.analysis import liveness

    calls = [0]
    real = liveness.op_key

    def counting(op):
        calls[0] += 1
        return real(op)

    monkeypatch.setattr(liveness, "op_key", counting)
    work = []
    for n in (40, 160):
        ctx = tdf.Context()
        module = tdf.parse(_nested_ifs(n), ctx)
        calls[0] = 0
        tdf.run_pipeline(module, "builtin.module(test-tdf-liveness)")
        work.append(calls[0])
    assert work[1] <= 4.6 * work[0], work


_SCALE_KERNEL = """func.func private @k(%in: memref<4xf32>, %out: memref<4xf32>) {
  %c = arith.constant 1.5 : f32
  linalg.map ins(%in : memref<4xf32>) outs(%out : memref<4xf32>)
    (%a: f32, %o: f32) {
      %r = arith.mulf %a, %c : f32
      linalg.yield %r : f32
    }
  return
}
"""


def test_calls_nested_deeper_than_16_branches_stay_out_of_place(monkeypatch):
    """In-place calls through nested scf.if are one alias set for One-Shot,
    whose analysis grew with the fourth power of the depth (100 levels:
    26 s). tdf-outline-deep-nests moves every 16 levels into a function of
    its own, so all 60 calls run in place; with it off (nest-depth=0) the
    depth rule leaves the calls past MAX_BRANCH_DEPTH levels out of place.
    Both compute what the inplace=False build computes on both branches."""
    from tdf.passes import pipelines
    from tdf.passes.analysis.inplace import MAX_BRANCH_DEPTH
    n = 60
    text = _nested_ifs(n).replace("func.func private @k(memref<4xf32>, memref<4xf32>)\n",
                                  _SCALE_KERNEL)
    outlined = tdf.compile(text)
    assert outlined.report().calls_made_inplace == n
    real = pipelines.inplace_stage
    monkeypatch.setattr(pipelines, "inplace_stage", lambda *a: real(*a[:6], nest_depth=0))
    whole = tdf.compile(text)
    assert whole.report().calls_made_inplace == MAX_BRANCH_DEPTH
    baseline = tdf.compile(text, inplace=False)
    x = np.arange(4, dtype=np.float32) + 1
    for prog in (outlined, whole):
        for c in (True, False):
            x0 = x.copy()
            np.testing.assert_array_equal(prog.main(x, c), baseline.main(x.copy(), c))
            assert np.array_equal(x, x0)
        np.testing.assert_allclose(prog.main(x, True), x * np.float32(1.5) ** (n + 1), rtol=1e-5)


def _generic_chain(n: int) -> str:
    body = ["math.tanh %a", "arith.mulf %a, %a", "math.exp %a", "arith.addf %a, %a"]
    lines = ["#map = affine_map<(d0) -> (d0)>",
             "func.func @main(%x: tensor<64xf32>) -> tensor<64xf32> {",
             "  %e = tensor.empty() : tensor<64xf32>"]
    prev = "%x"
    for i in range(n):
        lines.append(
            f'  %t{i} = linalg.generic {{indexing_maps = [#map, #map], iterator_types = '
            f'["parallel"]}} ins({prev} : tensor<64xf32>) outs(%e : tensor<64xf32>) {{\n'
            f"  ^bb0(%a: f32, %o: f32):\n    %v = {body[i % 4]} : f32\n"
            f"    linalg.yield %v : f32\n  }} -> tensor<64xf32>")
        prev = f"%t{i}"
    return "\n".join(lines) + f"\n  return {prev} : tensor<64xf32>\n}}\n"


def test_elementwise_fusion_keeps_bodies_bounded():
    """A chain of 600 element-wise linalg ops (what a long JAX program is)
    becomes loops of at most max-body-ops ops: each fusion copies the fused
    body, so the bound is what keeps the pass linear in the chain."""
    module = tdf.parse(_generic_chain(600), tdf.Context())
    tdf.run_pipeline(module, "builtin.module(tdf-fuse-elementwise{max-body-ops=128})")
    generics = [op for op in module.body.operations[0].regions[0].blocks[0].operations
                if op.operation.name == "linalg.generic"]
    sizes = [len(op.regions[0].blocks[0].operations) for op in generics]
    assert max(sizes) <= 128, sizes
    assert 600 // 128 < len(generics) <= 600 // 32, sizes
    assert sum(size - 1 for size in sizes) == 600  # every op kept, none duplicated
