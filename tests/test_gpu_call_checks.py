"""A GPU program's calls check scalar arguments as the CPU runtime does (one
ScalarSpec conversion): the same kinds are refused with the same reason,
before any device is needed; each scalar is passed as its own C type."""

import ctypes

import numpy as np
import pytest

import tdf
import tdf.gpu

SRC = """
func.func @f(%x: tensor<4xf32>, %n: index, %b: i1, %s: f32, %k: i32) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
"""
X = np.zeros(4, np.float32)


@pytest.fixture(scope="module")
def programs():
    return tdf.gpu.compile_nvvm(SRC, ptxas=False), tdf.compile(SRC)


@pytest.mark.parametrize("args, error, reason", [
    ((X, 1.5, True, 1.0, 1), TypeError, "expected an integer, got float"),
    ((X, 1, 1, 1.0, 1), TypeError, "expected a bool, got int"),
    ((X, 1, True, "a", 1), TypeError, "expected a number, got str"),
    ((X, 2**64, True, 1.0, 1), ValueError, "does not fit in index"),
    ((X, 1, True, 1.0, 2**31), ValueError, "does not fit in i32"),
])
def test_gpu_and_cpu_refuse_the_same_scalars(programs, args, error, reason):
    gpu, cpu = programs
    for prog in (gpu, cpu):
        with pytest.raises(error, match=reason):
            prog.f(*args)


def test_each_scalar_is_passed_as_its_own_c_type(programs):
    fn = programs[0].f
    values = [fn._scalar(i, t, v) for i, (t, v) in
              enumerate(zip(list(fn.ftype.inputs)[1:], (7, True, 0.5, -3)), start=1)]
    assert [type(v) for v in values] == [ctypes.c_int64, ctypes.c_bool, ctypes.c_float,
                                         ctypes.c_int32]
    assert [v.value for v in values] == [7, True, 0.5, -3]
