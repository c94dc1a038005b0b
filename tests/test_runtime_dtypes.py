"""tdf.compile's runtime: bf16/f16 tensors (ml_dtypes) and numpy/Python
scalars for rank-0 tensor parameters."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import tdf

SOURCE = """
func.func @scale(%x: tensor<4xbf16> {tdf.donate}, %h: tensor<4xf16>, %s: tensor<f32>, %n: tensor<i32>)
    -> (tensor<4xbf16>, tensor<4xf16>, tensor<f32>, tensor<i32>) {
  %e = tensor.empty() : tensor<4xbf16>
  %y = linalg.add ins(%x, %x : tensor<4xbf16>, tensor<4xbf16>) outs(%x : tensor<4xbf16>) -> tensor<4xbf16>
  %eh = tensor.empty() : tensor<4xf16>
  %z = linalg.mul ins(%h, %h : tensor<4xf16>, tensor<4xf16>) outs(%eh : tensor<4xf16>) -> tensor<4xf16>
  %es = tensor.empty() : tensor<f32>
  %t = linalg.add ins(%s, %s : tensor<f32>, tensor<f32>) outs(%es : tensor<f32>) -> tensor<f32>
  %en = tensor.empty() : tensor<i32>
  %m = linalg.add ins(%n, %n : tensor<i32>, tensor<i32>) outs(%en : tensor<i32>) -> tensor<i32>
  return %y, %z, %t, %m : tensor<4xbf16>, tensor<4xf16>, tensor<f32>, tensor<i32>
}
"""


@pytest.fixture(scope="module")
def prog():
    return tdf.compile(SOURCE)


def test_bf16_and_f16_tensors(prog):
    x = np.array([1, 2, 3, 0.5], ml_dtypes.bfloat16)
    h = np.array([1, 2, 3, 0.5], np.float16)
    y, z, t, m = prog.scale(x, h, np.float32(1.5), np.int32(4))
    assert y.dtype == ml_dtypes.bfloat16 and np.shares_memory(y, x)
    np.testing.assert_array_equal(y.astype(np.float32), [2, 4, 6, 1])
    assert z.dtype == np.float16
    np.testing.assert_array_equal(z, [1, 4, 9, 0.25])
    assert t.shape == () and float(t) == 3.0 and int(m) == 8


@pytest.mark.parametrize("s, n", [(1.5, 4), (np.float32(1.5), np.int64(4)), (2, True and 4),
                                  (np.float64(1.5), np.int8(4))])
def test_rank0_parameters_accept_numpy_and_python_scalars(prog, s, n):
    x = np.zeros(4, ml_dtypes.bfloat16)
    _, _, t, m = prog.scale(x, np.zeros(4, np.float16), s, n)
    assert float(t) == 2 * float(s) and int(m) == 2 * int(n)


def test_rank0_scalar_errors(prog):
    x, h = np.zeros(4, ml_dtypes.bfloat16), np.zeros(4, np.float16)
    with pytest.raises(TypeError, match="argument #3"):
        prog.scale(x, h, 1.0, 2.5)
    with pytest.raises(ValueError, match="does not fit"):
        prog.scale(x, h, 1.0, 2 ** 40)
    with pytest.raises(TypeError, match="argument #2"):
        prog.scale(x, h, "1.0", 2)
    with pytest.raises(TypeError, match="dtype"):
        prog.scale(np.zeros(4, np.float32), h, 1.0, 2)
