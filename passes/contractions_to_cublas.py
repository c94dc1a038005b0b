"""``tdf-contractions-to-cublas``: contractions on device buffers become
host calls of the tdf runtime's ``tdf_gpu_contract``, which runs each one as
a single cuBLAS GEMM (``cublasGemmEx``) or strided batch of GEMMs
(``cublasGemmStridedBatchedEx``) in destination-passing style.

Runs in the ``gpu`` stage of ``tdf-lower-to-nvvm`` (option ``blas``), after
``tdf-gpu-device-memory`` (every buffer is a device buffer) and before
linalg ops become parallel loops and kernels. The call takes the descriptor
of ``tdf-contractions-to-blas`` (``python/src/Contraction.h``); the output
buffer is the destination (``beta = 1``, or ``beta = 0`` when the zero fill
of a fresh output right before is dropped, as on the CPU).

Only what one cuBLAS call runs is rewritten, decided at compile time from
the memref types (the decision is the runtime's own planner,
``python/src/GpuRuntime.cpp``, asked through ``gpu_contract_plan``):

- element types f32, f64, or bf16/f16 inputs (both the same) of an f32
  result (compute type ``CUBLAS_COMPUTE_32F``: no TF32);
- static sizes and strides (a dynamic offset, such as a loop's slice
  ``x[t]``, is passed at run time). With a dynamic size or stride the
  layout cannot be decided here: the op is left to the kernel path;
- after dropping unit dimensions and merging dimensions contiguous in every
  operand, at most one batch, M, N and K dimension; each operand with a
  unit stride along one of its two matrix dimensions (the other is its
  leading dimension: a transposed operand is a transpose flag, never a
  gather or a copy); a result that writes no element twice; non-negative
  batch strides (0 broadcasts an input);
- a result that does not overlap an input: when the result and an input
  are views of one buffer whose byte ranges are not provably disjoint, the
  op is left to kernels. Views of distinct buffers that may still alias at
  run time (two parameters of a kernel function) are checked by the
  runtime, which refuses an overlap with an error instead of computing.

Everything else stays linalg and becomes a kernel. Option ``remarks``: a
remark for each contraction left to kernels, saying why. Statistic
``contractions``.

Before::

    %c = gpu.alloc () : memref<8x16xf32>
    linalg.fill ins(%zero : f32) outs(%c : memref<8x16xf32>)
    linalg.matmul ins(%a, %bt : memref<8x4xf32>, memref<4x16xf32, strided<[1, 4]>>)
                  outs(%c : memref<8x16xf32>)

After (sketch)::

    %c = gpu.alloc () : memref<8x16xf32>
    %base, %off, %sizes:2, %strides:2 = memref.extract_strided_metadata %a ...
    ...
    func.call @tdf_gpu_contract(%flags, %pa, %offa, %pb, %offb, %pc, %offc,
                                %rank, %m, %sam, %c0, %scm, ...) : (i64, ...) -> ()
"""

from __future__ import annotations

import glob
import importlib.util
import os
import re

from mlir import ir

from .. import _tdf
from ..vocabulary import GPU_CONTRACT, MEMREF_VIEW_OPS, element_nbytes
from ._contraction_calls import contraction_flags, emit_contract_calls, find_contractions
from .analysis.contractions import Contraction
from .ir_utils import defining_op, memref_root
from .registry import PassContext, PassOption, register_pass

__all__ = ["contractions_to_cublas", "cublas_plan", "cublas_available"]


def _wheel_libraries() -> list[str]:
    """``libcublas.so.<N>`` of NVIDIA's Python wheels (``nvidia/cublas/lib``,
    ``nvidia/cu<N>/lib``) where they are installed, newest first."""
    spec = importlib.util.find_spec("nvidia")
    found = []
    for root in (spec.submodule_search_locations or []) if spec is not None else []:
        found += [p for p in glob.glob(os.path.join(root, "*", "lib", "libcublas.so.*"))
                  if re.fullmatch(r"libcublas\.so\.[0-9]+", os.path.basename(p))]
    return sorted(found, key=lambda p: int(p.rsplit(".", 1)[1]), reverse=True)


def cublas_available() -> tuple[bool, str]:
    """(True, library) when cuBLAS and the CUDA driver load in this process
    (loading them: ``TDF_CUBLAS_LIBRARY``, else NVIDIA's wheels, else the
    system's ``libcublas.so.13``, ``.12``, ``.11``, ``libcublas.so``), else
    (False, why)."""
    try:
        return True, _tdf.gpu_blas_load(_wheel_libraries())
    except RuntimeError as err:
        return False, str(err)


def _static_layout(value, with_offset: bool = True):
    """(sizes, strides, offset) of memref ``value``'s type, or None when one
    of them is dynamic (the offset only ``with_offset``: a cuBLAS layout
    does not depend on it, the call passes it at run time)."""
    mtype = ir.MemRefType(value.type)
    strides, offset = mtype.get_strides_and_offset()
    dynamic = ir.ShapedType.get_dynamic_stride_or_offset()
    if any(ir.ShapedType.is_dynamic_size(s) for s in mtype.shape) or dynamic in strides \
            or (with_offset and offset == dynamic):
        return None
    return list(mtype.shape), strides, offset


def cublas_plan(contraction: Contraction) -> str:
    """Why one cuBLAS call cannot run ``contraction`` (static layouts), or
    ``""`` when it can. Overlaps are not looked at (:func:`_overlap`)."""
    layouts = [_static_layout(v, with_offset=False) for v in contraction.operands]
    if None in layouts:
        return "a dynamic size or stride (the cuBLAS layout is decided at compile time)"
    sizes = [0] * len(contraction.kinds)
    strides = [[0, 0, 0] for _ in contraction.kinds]
    for o, (layout, amap) in enumerate(zip(layouts, contraction.maps)):
        for j, expr in enumerate(amap.results):
            d = ir.AffineDimExpr(expr).position
            sizes[d] = layout[0][j]
            strides[d][o] = layout[1][j]
    flags = contraction_flags(contraction.types, contraction.kinds, accumulate=True)
    return _tdf.gpu_contract_plan(flags, sizes, [(s[0], s[1], s[2]) for s in strides])


def _byte_range(value):
    """(root, first byte, end byte) of the elements ``value`` covers, relative
    to the aligned pointer of the buffer its views start from, or None when
    a shift or the layout is not static."""
    layout = _static_layout(value)
    if layout is None:
        return None
    sizes, strides, offset = layout
    low = high = offset
    for size, stride in zip(sizes, strides):
        extent = (max(size, 1) - 1) * stride
        low, high = low + min(extent, 0), high + max(extent, 0)
    nbytes = element_nbytes(ir.MemRefType(value.type).element_type)
    shift = 0
    while (owner := defining_op(value)) is not None and owner.name in MEMREF_VIEW_OPS:
        if owner.name == "memref.view":
            # A new aligned pointer: the source's, shifted by byte_shift.
            const = defining_op(owner.operands[1])
            if const is None or const.name != "arith.constant":
                return None
            shift += ir.IntegerAttr(const.attributes["value"]).value
        value = owner.operands[0]
    return value, shift + low * nbytes, shift + (high + 1) * nbytes


def _overlap(contraction: Contraction) -> str:
    """Which input the result may overlap (views of one buffer with byte
    ranges not provably disjoint), or ``""``."""
    a, b, c = contraction.operands
    c_range = _byte_range(c)
    for name, value in (("A", a), ("B", b)):
        if memref_root(value) != memref_root(c):
            continue
        x_range = _byte_range(value)
        if c_range is None or x_range is None or x_range[0] != c_range[0] \
                or (x_range[1] < c_range[2] and c_range[1] < x_range[2]):
            return f"the result may overlap operand {name} (views of one buffer)"
    return ""


@register_pass(
    "tdf-contractions-to-cublas",
    "Contractions on device buffers (one cuBLAS GEMM or strided batch: f32/f64, bf16/f16 "
    "inputs of f32, static unit-stride layouts) to host calls of tdf_gpu_contract",
    options=[PassOption("remarks", bool, False, "A remark for every contraction left to kernels")],
    statistics=[("contractions", "contractions turned into tdf_gpu_contract calls")],
)
def contractions_to_cublas(op, ctx: PassContext) -> None:
    """See the module docstring. Ops on tensors are left alone."""
    found = []
    for contraction in find_contractions(op, ctx, "cuBLAS"):
        why = cublas_plan(contraction) or _overlap(contraction)
        if why:
            if ctx.option("remarks"):
                ctx.remark(contraction.op, f"not a cuBLAS contraction: {why}")
            continue
        found.append(contraction)
    emit_contract_calls(op, found, GPU_CONTRACT)  # op is the module
    if found:
        ctx.statistic("contractions", len(found))
