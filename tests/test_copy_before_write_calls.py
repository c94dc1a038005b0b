"""One-Shot Bufferize's copy-before-write mode (tdf's functional baseline)
crashes the process on a func.call with tensors (MLIR 22, upstream too):
tdf refuses such a program with a located error instead, whichever way it
asks for that mode, and its own pipeline makes no such call in that mode.
Each call runs in a subprocess so that a regression shows as a crash, not as
a dead test runner."""

import subprocess
import sys

import pytest

CALL = """
func.func private @g(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  return %x, %x : tensor<4xf32>, tensor<4xf32>
}
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %r:2 = func.call @g(%x) : (tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  return %r#0 : tensor<4xf32>
}
"""

# 20 nested scf.if: tdf-outline-deep-nests would make calls of the inner ones.
DEEP = "func.func @d(%x: tensor<4xf32>, %c: i1) -> tensor<4xf32> {\n" + "".join(
    f"  %v{i} = scf.if %c -> tensor<4xf32> {{\n" for i in range(20)) + \
    "  %e = tensor.empty() : tensor<4xf32>\n" \
    "  %y = linalg.exp ins(%x : tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>\n" + \
    "".join(f"  scf.yield %{'y' if i == 19 else f'v{i + 1}'} : tensor<4xf32>\n"
            f"  }} else {{\n  scf.yield %x : tensor<4xf32>\n  }}\n" for i in reversed(range(20))) + \
    "  return %v0 : tensor<4xf32>\n}\n"


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, check=False)


@pytest.mark.parametrize("how", [
    "tdf.run_pipeline(tdf.parse(CALL, filename='call.mlir'), "
    "'builtin.module(one-shot-bufferize{copy-before-write bufferize-function-boundaries})', "
    "filename='call.mlir')",
    "tdf.run_pipeline(tdf.parse(CALL, filename='call.mlir'), "
    "'builtin.module(tdf-bufferize{copy-before-write})', filename='call.mlir')",
    "tdf.compile(CALL, copy_before_write=True, filename='call.mlir')",
])
def test_call_with_tensors_is_a_located_error(how):
    done = _run(f"import tdf\nCALL = {CALL!r}\ntry:\n    {how}\n"
                f"except tdf.TDFError as err:\n    print('refused:', err)\n")
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert "refused:" in done.stdout
    assert "call.mlir:6:10" in done.stdout
    assert "func.call @g has tensor operands or results" in done.stdout


def test_deep_nest_baseline_compiles_without_outlining():
    """tdf-lower-to-cpu{copy-before-write} outlines no nest (its calls would
    stop the baseline): a 20-deep nest compiles and runs, equal to the
    in-place build."""
    code = ("import numpy as np, tdf\n"
            f"DEEP = {DEEP!r}\n"
            "x = np.arange(4, dtype=np.float32)\n"
            "a = tdf.compile(DEEP, copy_before_write=True).d(x.copy(), True)\n"
            "b = tdf.compile(DEEP).d(x.copy(), True)\n"
            "assert np.array_equal(a, b) and np.allclose(a, np.exp(x))\n"
            "print('ok')\n")
    done = _run(code)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert done.stdout.strip() == "ok"
