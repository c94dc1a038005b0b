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

Small GEMMs stay for ``tdf-vectorize-contractions`` (option
``codegen-flops``, default 2^23; 0 sends every contraction to the library):
a GEMM that pass vectorizes (``C[m, n] += A[m, k] * B[k, n]`` on static
f32/f64 memrefs) of at most that many flops, whose A and B take at most
:data:`CODEGEN_MAX_BYTES` and whose rows are at most
:data:`CODEGEN_MAX_COLUMNS` wide, runs as compiled vector code (cut into row
chunks on the threads by ``tdf-parallelize``). Measured side by side on this
project's 2-core AVX-512 machine (``docs/Codegen.md``): the compiled code
takes 0.3-0.8x oneDNN's time up to 2^23 flops (64x256x256 0.29-0.38) and
0.7-0.95x up to 2^27, but loses on wide rows or large B (128x256x2048
1.2-1.5, 4x1024x1024 1.4-2.3). The default stops at 2^23 for compile time: a
compiled GEMM costs LLVM time, a call almost none (GPT-2 prefill with 2^27:
2-4% faster calls, 86 ms more compile). Compiled, a GEMM also needs no
kernels that the library makes when a process first calls it (oneDNN's f32
GEMM: about 25 ms per process).

Option ``threads`` (0: the library's default, the cores) is the BLAS thread
count of these calls; ``remarks`` reports each contraction left to loops.
Statistics ``contractions`` and ``left-to-codegen``.

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
from .vectorize_contractions import gemm_sizes

__all__ = ["contractions_to_blas", "contraction_flags", "CODEGEN_FLOPS", "CODEGEN_MAX_BYTES"]

#: Default of option ``codegen-flops``: GEMMs up to 2^23 flops stay compiled.
CODEGEN_FLOPS = 1 << 23
#: A GEMM whose A and B take more bytes than this, or whose rows are wider
#: than CODEGEN_MAX_COLUMNS, goes to the library whatever its flops: the
#: compiled code streams all of B once per block of rows, the library packs
#: it into cache-sized panels.
CODEGEN_MAX_BYTES = 3 << 20
CODEGEN_MAX_COLUMNS = 1024


def _left_to_codegen(contraction, max_flops: int) -> bool:
    sizes = gemm_sizes(contraction.op, contraction)
    if sizes is None:
        return False
    m, n, k = sizes
    element = 8 if contraction.types[2] == "f64" else 4
    return (2 * m * n * k <= max_flops and element * k * (m + n) <= CODEGEN_MAX_BYTES
            and n <= CODEGEN_MAX_COLUMNS)


@register_pass(
    "tdf-contractions-to-blas",
    "Contractions on memrefs (matmul, batch_matmul, matvec, vecmat, dot, contraction "
    "generics; f32/f64, bf16/f16 inputs of f32) to calls of the runtime's BLAS route",
    options=[PassOption("threads", int, 0, "BLAS threads of these calls (0: the default)"),
             PassOption("codegen-flops", int, CODEGEN_FLOPS,
                        "GEMMs tdf-vectorize-contractions takes, up to this many flops, "
                        "stay compiled (0: none)"),
             PassOption("remarks", bool, False, "A remark for every contraction left as loops")],
    statistics=[("contractions", "contractions turned into tdf_rt_contract calls"),
                ("left-to-codegen", "small GEMMs left to tdf-vectorize-contractions")],
)
def contractions_to_blas(op, ctx: PassContext) -> None:
    """See the module docstring. Ops on tensors are left alone."""
    threads = ctx.option("threads")
    if not 0 <= threads < 1 << 16:
        ctx.error(op, f"threads must be in 0..65535, got {threads}")
        return
    max_flops = ctx.option("codegen-flops")
    if max_flops < 0:
        ctx.error(op, f"codegen-flops must be at least 0, got {max_flops}")
        return
    found = find_contractions(op, ctx, "BLAS")
    if max_flops:
        compiled = [_left_to_codegen(c, max_flops) for c in found]
        if any(compiled):
            ctx.statistic("left-to-codegen", sum(compiled))
            found = [c for c, keep in zip(found, compiled) if not keep]
    emit_contract_calls(op, found, CONTRACT, threads)  # op is the module
    if found:
        ctx.statistic("contractions", len(found))
