"""``tdf-contractions-to-blas``: contractions on memrefs become calls of the
tdf runtime's ``tdf_rt_contract``, which runs them through a tuned BLAS
(OpenBLAS) in destination-passing style.

Runs after bufferization, before ``tdf-vectorize-contractions`` and
``convert-linalg-to-loops``. Every linalg op that
:func:`tdf.passes.analysis.contractions.classify` accepts (``C (+)= A * B``
over projected permutation maps: matmul, batch_matmul, matvec, vecmat, dot,
``linalg.contract`` and contraction ``linalg.generic`` ops, f32/f64, bf16/f16
inputs of f32) is replaced by one call that passes, per operand, its aligned
pointer and offset and, per loop dimension, its kind, size and each
operand's stride (``memref.extract_strided_metadata``): any layout,
including transposed and strided views, static or dynamic shapes. The
runtime picks the GEMM's dimensions, the transpose flags and leading
dimensions, loops or batches the others, and copies only what no BLAS
layout describes (see ``python/src/Blas.cpp``).

The output buffer is the destination: the call accumulates into it
(``beta = 1``), except when the op's init was just filled with zero
(``linalg.fill`` of ``0.0`` into a fresh ``memref.alloc``, a view of
``tdf-plan-memory``'s arena, or a view of either (a batch chunk's rows of
a convolution's result) that no input reads, right before, no other access in between): the fill is dropped and the call overwrites the
buffer (``beta = 0``).

Option ``threads`` (0: the library's default, the cores) is the BLAS thread
count of these calls; ``remarks`` reports each contraction left to loops.
Statistic ``contractions``.

Before::

    linalg.fill ins(%zero : f32) outs(%c : memref<8x16xf32>)
    linalg.matmul ins(%a, %bt : memref<8x4xf32>, memref<4x16xf32, strided<[1, 4]>>)
                  outs(%c : memref<8x16xf32>)

After (sketch)::

    %base, %off, %sizes:2, %strides:2 = memref.extract_strided_metadata %a ...
    ...
    func.call @tdf_rt_contract(%flags, %pa, %offa, %pb, %offb, %pc, %offc,
                               %rank, %m, %sam, %c0, %scm, ...) : (i64, ...) -> ()
"""

from __future__ import annotations

from ..vocabulary import CONTRACT
from ._contraction_calls import contraction_flags, emit_contract_calls, find_contractions
from .registry import PassContext, PassOption, register_pass

__all__ = ["contractions_to_blas", "contraction_flags"]


@register_pass(
    "tdf-contractions-to-blas",
    "Contractions on memrefs (matmul, batch_matmul, matvec, vecmat, dot, contraction "
    "generics; f32/f64, bf16/f16 inputs of f32) to calls of the runtime's BLAS route",
    options=[PassOption("threads", int, 0, "BLAS threads of these calls (0: the default)"),
             PassOption("remarks", bool, False, "A remark for every contraction left as loops")],
    statistics=[("contractions", "contractions turned into tdf_rt_contract calls")],
)
def contractions_to_blas(op, ctx: PassContext) -> None:
    """See the module docstring. Ops on tensors are left alone."""
    threads = ctx.option("threads")
    if not 0 <= threads < 1 << 16:
        ctx.error(op, f"threads must be in 0..65535, got {threads}")
        return
    found = find_contractions(op, ctx, "BLAS")
    emit_contract_calls(op, found, CONTRACT, threads)  # op is the module
    if found:
        ctx.statistic("contractions", len(found))
