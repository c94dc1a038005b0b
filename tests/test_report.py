"""``prog.report()``: in-place decisions list only writes (never reads such as
``tensor.dim``/``tensor.extract``/``vector.transfer_read`` or linalg inputs),
and kernel calls that ``tdf-inline-kernels`` fused away are still named."""

import numpy as np
import pytest

import tdf
from tdf.compiler import FusedCall

N = 16
T = f"tensor<{N}xf32>"
M = f"memref<{N}xf32>"


def _kernel(name, op):
    return f"""
func.func private @{name}(%in: {M}, %out: {M}) {{
  %c = arith.constant 2.0 : f32
  linalg.generic {{indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],
                  iterator_types = ["parallel"]}} ins(%in : {M}) outs(%out : {M}) {{
  ^bb0(%a: f32, %o: f32):
    %r = arith.{op} %a, %c : f32
    linalg.yield %r : f32
  }}
  return
}}
"""


KERNELS = _kernel("scale", "mulf") + _kernel("shift", "addf")

READS = """
func.func @f(%x: tensor<?xf32> {tdf.donate}, %y: tensor<?xf32>, %i: index) -> (tensor<?xf32>, index, f32) {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %x, %c0 : tensor<?xf32>
  %m = tensor.dim %y, %c0 : tensor<?xf32>
  %e = tensor.extract %y[%i] : tensor<?xf32>
  %pad = arith.constant 0.0 : f32
  %v = vector.transfer_read %y[%c0], %pad : tensor<?xf32>, vector<4xf32>
  %s = vector.reduction <add>, %v : vector<4xf32> into f32
  %w = arith.addf %s, %e : f32
  %x2 = tensor.insert %w into %x[%i] : tensor<?xf32>
  %sum = arith.addi %n, %m : index
  return %x2, %sum, %w : tensor<?xf32>, index, f32
}
"""


def test_reads_are_not_in_place_decisions():
    prog = tdf.compile(READS)
    report = prog.report()
    ops = [(d.op, d.operand) for d in report.decisions]
    assert ops == [("tensor.insert", 1)], report
    assert report.decisions[0].inplace
    text = str(report)
    for read in ("tensor.dim", "tensor.extract ", "vector.transfer_read"):
        assert read not in text, text
    x = np.arange(8, dtype=np.float32)
    y = np.arange(8, dtype=np.float32) + 10
    out, total, w = prog.f(x, y, 3)
    assert out is x and total == 16 and w == np.float32(10 + 11 + 12 + 13 + 13)
    assert x[3] == w


def test_linalg_inputs_are_not_decisions_but_outputs_are():
    src = f"""
    func.func @f(%x: {T}, %y: {T} {{tdf.donate}}) -> {T} {{
      %r = linalg.add ins(%x, %x : {T}, {T}) outs(%y : {T}) -> {T}
      return %r : {T}
    }}
    func.func @g(%x: {T}, %y: {T}) -> {T} {{
      %r = linalg.add ins(%x, %x : {T}, {T}) outs(%y : {T}) -> {T}
      return %r : {T}
    }}
    """
    report = tdf.compile(src).report()
    got = sorted((d.function, d.op, d.operand, d.inplace) for d in report.decisions)
    assert got == [("f", "linalg.add", 2, True), ("g", "linalg.add", 2, False)], report
    copy = [d for d in report.decisions if not d.inplace][0]
    assert "non-donated argument #1" in copy.reason


CHAIN = KERNELS + f"""
func.func @f(%x: {T} {{tdf.donate}}) -> {T} {{
  %a = tdf.call @scale(%x) : ({T}) -> {T}
  %b = tdf.call @shift(%a) : ({T}) -> {T}
  return %b : {T}
}}
func.func @lone(%x: {T}) -> {T} {{
  %a = tdf.call @scale(%x) : ({T}) -> {T}
  return %a : {T}
}}
"""


def test_fused_calls_are_named_with_kernel_and_location():
    prog = tdf.compile(CHAIN, filename="chain.mlir")
    report = prog.report()
    assert report.fused_calls == [
        FusedCall("f", "scale", "chain.mlir:25:8"),
        FusedCall("f", "shift", "chain.mlir:26:8"),
    ], report.fused_calls
    text = str(report)
    assert "@f: tdf.call @scale at chain.mlir:25:8: fused into one loop" in text
    assert "@f: tdf.call @shift at chain.mlir:26:8: fused into one loop" in text
    # The lone call stays a call: not reported as fused.
    assert "@lone" not in "\n".join(map(str, report.fused_calls))
    assert "tdf.report_call_id" not in prog.buffer_ir
    x = np.linspace(-1, 1, N, dtype=np.float32)
    want = x * np.float32(2) + np.float32(2)
    np.testing.assert_array_equal(prog.f(x), want)
    np.testing.assert_array_equal(prog.lone(np.ones(N, np.float32)), np.full(N, 2, np.float32))


@pytest.mark.parametrize("options", [dict(inplace=False), dict(copy_before_write=True)])
def test_fused_calls_reported_in_every_mode(options):
    prog = tdf.compile(CHAIN, **options)
    assert [(f.function, f.kernel) for f in prog.report().fused_calls] == \
        [("f", "scale"), ("f", "shift")]
    x = np.linspace(-1, 1, N, dtype=np.float32)
    np.testing.assert_array_equal(prog.f(x.copy()), x * np.float32(2) + np.float32(2))


def test_no_fused_section_without_fusion():
    prog = tdf.compile(KERNELS + f"""
    func.func @f(%x: {T}) -> {T} {{
      %a = tdf.call @scale(%x) : ({T}) -> {T}
      return %a : {T}
    }}
    """)
    assert prog.report().fused_calls == []
    assert "fused" not in str(prog.report())
