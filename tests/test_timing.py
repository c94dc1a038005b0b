"""``tdf.compile(..., timing=True)`` / ``TDF_TIMING=1``: a per-stage
compile-time report on stderr, like ``--mlir-timing``."""

from __future__ import annotations

import pytest

import tdf

TEXT = """
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %e = tensor.empty() : tensor<4xf32>
  %y = linalg.add ins(%x, %x : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}
"""

STAGES = ("parse", "inplace", "bufferize", "lower to LLVM dialect", "LLVM translation",
          "LLVM optimisation", "LLVM code generation", "link", "Total")


def test_timing_keyword_prints_each_stage(capsys, monkeypatch):
    monkeypatch.delenv("TDF_TIMING", raising=False)
    tdf.compile(TEXT, timing=True, strict=True)
    err = capsys.readouterr().err
    assert "tdf.compile timing report" in err
    for stage in STAGES + ("strict",):
        assert f"  {stage}\n" in err, (stage, err)


def test_timing_environment_variable(capsys, monkeypatch):
    monkeypatch.setenv("TDF_TIMING", "1")
    tdf.compile(TEXT)
    assert "Total Execution Time" in capsys.readouterr().err
    tdf.compile(TEXT, timing=False)  # the keyword wins
    assert capsys.readouterr().err == ""


def test_no_timing_by_default(capsys, monkeypatch):
    for value in (None, "0", ""):
        if value is None:
            monkeypatch.delenv("TDF_TIMING", raising=False)
        else:
            monkeypatch.setenv("TDF_TIMING", value)
        tdf.compile(TEXT)
        assert capsys.readouterr().err == ""


def test_timing_must_be_bool():
    with pytest.raises(TypeError, match="timing"):
        tdf.compile(TEXT, timing="yes")
