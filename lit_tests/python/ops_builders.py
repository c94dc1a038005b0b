# RUN: %python %s | FileCheck %s
"""Builds tdf ops with the generated Python op classes and runs a Python pass
from a textual pipeline."""

from mlir import ir
from mlir.dialects import func

import tdf
from tdf.dialects import tdf as tdf_ops


def run(f):
    print("\nTEST:", f.__name__)
    f()
    return f


# CHECK-LABEL: TEST: build_call_and_call_inplace
@run
def build_call_and_call_inplace():
    ctx = tdf.Context()
    with ctx, ir.Location.unknown():
        module = ir.Module.create()
        f32 = ir.F32Type.get()
        tensor = ir.RankedTensorType.get([4], f32)
        memref = ir.MemRefType.get([4], f32)
        with ir.InsertionPoint(module.body):
            func.FuncOp("add", ([memref, memref, memref], []), visibility="private")
            func.FuncOp("add_inplace", ([memref, memref], []), visibility="private")
            step = func.FuncOp("step", ([tensor, tensor], [tensor]))
            with ir.InsertionPoint(step.add_entry_block()):
                x, y = step.arguments
                fresh = tdf_ops.CallOp([tensor], "add", [x, y])
                updated = tdf_ops.CallInplaceOp([tensor], "add_inplace", [fresh.result, y], [0])
                func.ReturnOp([updated.result])
        assert module.operation.verify()
        # CHECK: %[[T:.*]] = tdf.call @add(%arg0, %arg1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
        # CHECK: tdf.call_inplace @add_inplace(%[[T]], %arg1) inplace [0]
        print(module)
        # CHECK: bufferization.writable = false
        tdf.run_pipeline(module, "builtin.module(tdf-donate)")
        print(module)
