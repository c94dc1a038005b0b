"""Both targets read a caller's ir.Module the same way: copied with its
locations into a fresh context (errors keep file:line:col), never modified."""

import pytest

import tdf
import tdf.gpu

DYNAMIC = """
func.func @f(%x: tensor<?xf32>) -> tensor<?xf32> {
  return %x : tensor<?xf32>
}
"""


def test_gpu_errors_keep_locations_of_a_module_input():
    module = tdf.parse(DYNAMIC)
    before = str(module)
    with pytest.raises(tdf.gpu.GPUCompileError, match=r"^prog\.mlir:2:1: @f argument #0"):
        tdf.gpu.compile_nvvm(module, ptxas=False, filename="prog.mlir")
    assert str(module) == before


def test_cpu_and_gpu_reject_the_same_input_types():
    for compile_ in (tdf.compile, lambda x: tdf.gpu.compile_nvvm(x, ptxas=False)):
        with pytest.raises(TypeError, match="expects MLIR text or an mlir.ir.Module, got int"):
            compile_(3)


def test_cpu_compile_leaves_a_module_input_alone():
    module = tdf.parse(DYNAMIC)
    before = str(module)
    prog = tdf.compile(module)
    assert str(module) == before
    assert prog.f.params[0].shape == (-1,)
