"""tdf's alias analysis reads ``func.call`` through the callee's body: a
result aliases the arguments the callee may return, a constant or a value of
unknown origin stays not owned, and operands are no longer merged with each
other. Each program runs with in place on and off and against numpy, twice
(a constant written in place would change the second call), with the
non-donated inputs checked unchanged."""

from __future__ import annotations

import numpy as np
import pytest

import tdf
from tdf.passes.analysis.alias import AliasAnalysis
from tdf.passes.ir_utils import collect_ops

T = "tensor<8xf32>"

KERNEL = f"""func.func private @scale(%in: memref<8xf32>, %out: memref<8xf32>) {{
  %c = arith.constant 1.5 : f32
  linalg.map ins(%in : memref<8xf32>) outs(%out : memref<8xf32>)
    (%a: f32, %o: f32) {{
      %r = arith.mulf %a, %c : f32
      linalg.yield %r : f32
    }}
  return
}}
func.func private @through(%t: {T}) -> {T} {{
  %c = tensor.cast %t : {T} to tensor<?xf32>
  %d = tensor.cast %c : tensor<?xf32> to {T}
  return %d : {T}
}}
func.func private @fresh(%t: {T}, %u: {T}) -> {T} {{
  %e = tensor.empty() : {T}
  %f = linalg.add ins(%t, %u : {T}, {T}) outs(%e : {T}) -> {T}
  return %f : {T}
}}
func.func private @constant() -> {T} {{
  %c = arith.constant dense<[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]> : {T}
  return %c : {T}
}}
"""

PROGRAMS = {
    # The callee returns its argument: %a is still read (through %v) after
    # the second call, which must not overwrite it.
    "returned_argument": (f"""
func.func @main(%x: {T}) -> ({T}, {T}) {{
  %a = tdf.call @scale(%x) : ({T}) -> {T}
  %v = func.call @through(%a) : ({T}) -> {T}
  %b = tdf.call @scale(%a) : ({T}) -> {T}
  return %b, %v : {T}, {T}
}}""", lambda x: (x * 1.5 * 1.5, x * 1.5)),
    # A fresh result is owned: the call after it may run in its storage.
    "fresh_result": (f"""
func.func @main(%x: {T}, %y: {T}) -> ({T}, {T}) {{
  %a = tdf.call @scale(%x) : ({T}) -> {T}
  %f = func.call @fresh(%a, %y) : ({T}, {T}) -> {T}
  %g = tdf.call @scale(%f) : ({T}) -> {T}
  %h = tdf.call @scale(%a) : ({T}) -> {T}
  return %g, %h : {T}, {T}
}}""", lambda x, y: ((x * 1.5 + y) * 1.5, x * 1.5 * 1.5)),
    # A returned constant stays the constant's: never written in place.
    "constant_result": (f"""
func.func @main(%x: {T}) -> ({T}, {T}) {{
  %c = func.call @constant() : () -> {T}
  %d = tdf.call @scale(%c) : ({T}) -> {T}
  %e = tdf.call @scale(%x) : ({T}) -> {T}
  return %d, %e : {T}, {T}
}}""", lambda x: (np.arange(1, 9, dtype=np.float32) * 1.5, x * 1.5)),
}


def _inputs(n):
    rng = np.random.default_rng(n)
    return [rng.standard_normal(8).astype(np.float32) for _ in range(n)]


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_calls_of_defined_functions_compute_what_numpy_does(name):
    body, reference = PROGRAMS[name]
    text = KERNEL + body
    n = body.split("@main(", 1)[1].split(")", 1)[0].count("%")
    for prog in (tdf.compile(text), tdf.compile(text, inplace=False)):
        for _ in range(2):
            args = _inputs(n)
            kept = [a.copy() for a in args]
            out = prog.main(*args)
            for got, want in zip(out, reference(*kept)):
                np.testing.assert_allclose(got, want, rtol=1e-6)
            for a, b in zip(args, kept):
                np.testing.assert_array_equal(a, b, err_msg="an input changed")


def _analysis(text):
    module = tdf.parse(KERNEL + text, tdf.Context())
    main = [f for f in module.body.operations
            if f.operation.name == "func.func" and f.attributes["sym_name"].value == "main"][0]
    return module, main, AliasAnalysis(main)


def test_summary_classes():
    text = PROGRAMS["fresh_result"][0]
    _, main, alias = _analysis(text)
    a = collect_ops(main, "tdf.call")[-1].operands[0]  # %a
    [call] = collect_ops(main, "func.call")
    x, y = main.regions[0].blocks[0].arguments
    assert not alias.same_class(call.operands[0], call.operands[1])
    assert not alias.same_class(call.results[0], a)
    assert alias.not_owned(call.results[0]) is None
    _, main, alias = _analysis(PROGRAMS["returned_argument"][0])
    [call] = collect_ops(main, "func.call")
    assert alias.same_class(call.results[0], call.operands[0])
    _, main, alias = _analysis(PROGRAMS["constant_result"][0])
    [call] = collect_ops(main, "func.call")
    assert alias.not_owned(call.results[0])[1] == "constant"


def test_declared_callee_stays_unknown():
    text = f"""
func.func private @same({T}) -> {T}
func.func @main(%x: {T}, %y: {T}) -> {T} {{
  %a = tdf.call @scale(%x) : ({T}) -> {T}
  %b = tdf.call @scale(%y) : ({T}) -> {T}
  %r = func.call @same(%a) : ({T}) -> {T}
  return %r : {T}
}}"""
    _, main, alias = _analysis(text)
    [call] = collect_ops(main, "func.call")
    assert alias.same_class(call.results[0], call.operands[0])
