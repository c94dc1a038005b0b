"""Bad input never aborts the process: every case exits 1 (tdf-opt) or raises
a Python exception, with a located message. Each case runs in a subprocess
and the exit code is checked not to be an abort (134 / -6)."""

import os
import subprocess
import sys

import pytest

TDF_OPT = os.path.join(os.path.dirname(sys.executable), "tdf-opt")

GOOD_KERNEL = "func.func private @add(memref<4xf32>, memref<4xf32>, memref<4xf32>)\n"

CLI_CASES = {
    "malformed_ir": (["-"], "func.func @f(\n", "<stdin>:1:14: error: expected non-function type"),
    "missing_callee": (["-"], "func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
                       "  %r = tdf.call @nope(%x) : (tensor<4xf32>) -> tensor<4xf32>\n"
                       "  return %r : tensor<4xf32>\n}\n",
                       "<stdin>:2:8: error: 'tdf.call' op references an undefined function @nope"),
    "unknown_pass": (["-", "--pass-pipeline=builtin.module(tdf-nope)"], GOOD_KERNEL,
                     "'tdf-nope' does not refer to a registered pass"),
    "unknown_flag": (["-", "--tdf-nope"], GOOD_KERNEL, "Unknown command line argument"),
    "bad_pass_option": (["-", "--pass-pipeline=builtin.module(tdf-donate{strictly})"], GOOD_KERNEL,
                        "no such option strictly"),
    "bad_option_value": (["-", "--tdf-donate=strict=maybe"], GOOD_KERNEL, "invalid value"),
    "unbalanced_pipeline": (["-", "--pass-pipeline=builtin.module(tdf-donate"], GOOD_KERNEL,
                            "error"),
    "anchor_mismatch": (["-", "--pass-pipeline=func.func(cse)"], GOOD_KERNEL, "error"),
    "missing_input": (["/nonexistent/input.mlir"], "", "/nonexistent/input.mlir"),
    "wrong_inplace_index": (["-"], "func.func private @k(memref<4xf32>, memref<4xf32>)\n"
                            "func.func @f(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {\n"
                            "  %r = tdf.call_inplace @k(%x, %y) inplace [7] : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>\n"
                            "  return %r : tensor<4xf32>\n}\n",
                            "<stdin>:3:8: error: 'tdf.call_inplace' op in-place index 7 of result #0 is out of range [-1, 2)"),
    "strict_donation": (["-", "--tdf-donate=strict"],
                        "func.func @f(%x: tensor<4xf32> {tdf.donate}) -> tensor<8xf32> {\n"
                        "  %e = tensor.empty() : tensor<8xf32>\n  return %e : tensor<8xf32>\n}\n",
                        "<stdin>:1:1: error: donated argument #0 of @f"),
    "unregistered_dialect_op": (["-"], "func.func @f() {\n  \"foo.bar\"() : () -> ()\n  return\n}\n",
                                "<stdin>:2:12: error: operation being parsed with an unregistered dialect"),
}


@pytest.mark.parametrize("name", sorted(CLI_CASES))
def test_tdf_opt_bad_input_exits_1_with_message(name):
    args, stdin, expected = CLI_CASES[name]
    proc = subprocess.run([TDF_OPT, *args], input=stdin, capture_output=True, text=True, timeout=120)
    assert proc.returncode not in (134, -6), proc.stderr
    assert proc.returncode == 1, (proc.returncode, proc.stderr)
    assert expected in proc.stderr, proc.stderr


PY_CASES = {
    "parse_malformed": ("tdf.parse('func.func @f(', filename='m.mlir')", "tdf.errors.ParseError", "m.mlir:1:13: error: expected non-function type"),
    "pipeline_unknown": ("tdf.run_pipeline(tdf.parse('module {}'), 'builtin.module(nope)')",
                         "tdf.errors.PipelineError", "'nope' does not refer to a registered pass"),
    "pipeline_anchor": ("tdf.run_pipeline(tdf.parse('module {}'), 'func.func(cse)')",
                        "tdf.errors.PipelineError", "func.func"),
    "pipeline_bad_option": ("tdf.run_pipeline(tdf.parse('module {}'), 'builtin.module(canonicalize{max-iterations=x})')",
                            "tdf.errors.PipelineError", "max-iterations"),
}


@pytest.mark.parametrize("name", sorted(PY_CASES))
def test_python_api_bad_input_raises(name):
    code, exc_name, expected = PY_CASES[name]
    proc = subprocess.run([sys.executable, "-c", f"import tdf\n{code}"], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode not in (134, -6), proc.stderr
    assert proc.returncode == 1, (proc.returncode, proc.stderr)
    assert exc_name in proc.stderr and expected in proc.stderr, proc.stderr


def test_help_lists_tdf_passes():
    proc = subprocess.run([TDF_OPT, "--help"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0
    assert "--tdf-donate" in proc.stdout
    assert "Make an unusable donated argument an error" in proc.stdout
