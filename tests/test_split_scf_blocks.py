"""tdf-split-scf-blocks (keeps convert-scf-to-cf linear in the number of
scf ops in one block): the lowered program computes the same results with
and without the pre-split, and as numpy; the pass splits once per scf op
that something other than the terminator follows."""

from __future__ import annotations

import numpy as np
import pytest
from mlir import ir, passmanager

import tdf
import tdf.passes.pipelines as pipelines


def _program(kinds, consts) -> str:
    """A function whose body is one block of top-level scf.if / scf.for ops
    (``kinds``: 'if' or 'for' per step) over a running tensor<8xf32>."""
    lines = ["func.func @f(%x: tensor<8xf32>, %n: index, %flag: i1) -> tensor<8xf32> {",
             "  %c0 = arith.constant 0 : index", "  %c1 = arith.constant 1 : index"]
    v = "%x"
    for i, (kind, c) in enumerate(zip(kinds, consts)):
        lines.append(f"  %k{i} = arith.constant {c:.1f} : f32")
        if kind == "if":
            lines += [
                f"  %v{i} = scf.if %flag -> tensor<8xf32> {{",
                "    %e = tensor.empty() : tensor<8xf32>",
                f"    %m = linalg.map ins({v} : tensor<8xf32>) outs(%e : tensor<8xf32>)",
                "      (%a: f32, %o: f32) {",
                f"        %r = arith.addf %a, %k{i} : f32",
                "        linalg.yield %r : f32",
                "      }",
                "    scf.yield %m : tensor<8xf32>",
                "  } else {",
                "    %e = tensor.empty() : tensor<8xf32>",
                f"    %m = linalg.map ins({v} : tensor<8xf32>) outs(%e : tensor<8xf32>)",
                "      (%a: f32, %o: f32) {",
                f"        %r = arith.mulf %a, %k{i} : f32",
                "        linalg.yield %r : f32",
                "      }",
                "    scf.yield %m : tensor<8xf32>",
                "  }",
            ]
        else:
            lines += [
                f"  %v{i} = scf.for %j = %c0 to %n step %c1 iter_args(%acc = {v}) -> tensor<8xf32> {{",
                "    %s = tensor.extract %acc[%j] : tensor<8xf32>",
                f"    %t = arith.subf %s, %k{i} : f32",
                "    %u = tensor.insert %t into %acc[%j] : tensor<8xf32>",
                "    scf.yield %u : tensor<8xf32>",
                "  }",
            ]
        v = f"%v{i}"
    lines += [f"  return {v} : tensor<8xf32>", "}"]
    return "\n".join(lines)


def _reference(kinds, consts, x, n, flag):
    v = x.astype(np.float32).copy()
    for kind, c in zip(kinds, consts):
        c = np.float32(c)
        if kind == "if":
            v = v + c if flag else v * c
        else:
            v = v.copy()
            v[:n] -= c
    return v


def _without_split(monkeypatch):
    monkeypatch.setattr(pipelines, "LOWER_TO_LLVM",
                        [p for p in pipelines.LOWER_TO_LLVM if p != "tdf-split-scf-blocks"])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_same_results_with_and_without_split(seed, monkeypatch):
    rng = np.random.default_rng(seed)
    steps = int(rng.integers(1, 12))
    kinds = [str(k) for k in rng.choice(["if", "for"], steps)]
    consts = [float(c) for c in rng.integers(-4, 5, steps)]
    src = _program(kinds, consts)
    x = rng.standard_normal(8).astype(np.float32)
    split = tdf.compile(src)
    _without_split(monkeypatch)
    plain = tdf.compile(src)
    for n in (0, 3, 8):
        for flag in (False, True):
            want = _reference(kinds, consts, x, n, flag)
            got = split.f(x.copy(), np.intp(n), np.bool_(flag))
            ref = plain.f(x.copy(), np.intp(n), np.bool_(flag))
            np.testing.assert_array_equal(got, ref)
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_in_cpu_lowering_before_scf_to_cf():
    passes = pipelines.lower_to_llvm()
    assert passes.index("tdf-split-scf-blocks") + 1 == passes.index("convert-scf-to-cf")


def _split(text: str) -> str:
    with tdf.Context():
        module = ir.Module.parse(text)
        passmanager.PassManager.parse("builtin.module(tdf-split-scf-blocks)").run(module.operation)
        return str(module)


def test_one_block_per_scf_op_followed_by_more():
    kinds = ["if", "for", "if", "for", "for"]
    out = _split(_program(kinds, [1.0] * len(kinds)))
    # the last scf op is followed only by return: 4 splits, 4 branches
    assert out.count("cf.br") == 4
    assert out.count("^bb") >= 4
