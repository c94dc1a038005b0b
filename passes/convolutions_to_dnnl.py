"""``tdf-convolutions-to-dnnl``: upstream named convolutions on memrefs
become calls of the tdf runtime's ``tdf_rt_conv``, which runs them through
oneDNN's forward convolution primitive (``python/src/Convolution.cpp``) in
destination-passing style.

Runs after bufferization, next to ``tdf-contractions-to-blas``, before the
loops. Converted: ``linalg.conv_{1,2,3}d_nwc_wcf`` / ``_nhwc_hwcf`` /
``_ndhwc_dhwcf`` (channels last) and ``linalg.conv_{1,2,3}d_ncw_fcw`` /
``_nchw_fchw`` / ``_ncdhw_fcdhw`` (channels first) on float32 memrefs with
strided layouts (any view: every operand is described to oneDNN by its own
sizes and strides), any window strides and dilations, whose output was
just filled with zero (``linalg.fill`` of ``0.0`` into a fresh allocation
or arena view, or a view of one, that no input reads, right before, no
other access in between, as for ``tdf-contractions-to-blas``): the fill is
dropped and the call writes the output. A convolution that accumulates
into an output it did not just zero stays loops (a remark with the
``remarks`` option says so), as do other element types.

The call passes a flags word (spatial rank, channels first, the thread
count) and the address of an ``i64`` descriptor on the stack
(``memref.alloca``): per operand (input, kernel, output) its aligned
pointer, offset, sizes and strides, then the window strides and
dilations. Where oneDNN is not loaded (a forked child) or refuses the
geometry, the runtime computes the convolution with reference loops.

Option ``threads`` (0: the library's default); statistic ``convolutions``.

Before::

    linalg.fill ins(%zero : f32) outs(%y : memref<8x11x11x64xf32>)
    linalg.conv_2d_nhwc_hwcf ins(%x, %w : memref<8x13x13x32xf32>, memref<3x3x32x64xf32>)
                             outs(%y : memref<8x11x11x64xf32>)

After (sketch)::

    %desc = memref.alloca() : memref<42xi64>
    ... memref.store of each operand's pointer, offset, sizes, strides ...
    func.call @tdf_rt_conv(%flags, %desc_address) : (i64, i64) -> ()
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, func, memref

from ..vocabulary import CONV
from ._contraction_calls import zero_fill_before
from ._runtime_sites import declare
from .analysis.contractions import is_strided
from .ir_utils import collect_ops
from .registry import PassContext, PassOption, register_pass

__all__ = ["convolutions_to_dnnl", "CONVOLUTIONS"]

#: Named convolution -> (spatial rank, channels first).
CONVOLUTIONS = {
    "linalg.conv_1d_nwc_wcf": (1, False), "linalg.conv_2d_nhwc_hwcf": (2, False),
    "linalg.conv_3d_ndhwc_dhwcf": (3, False), "linalg.conv_1d_ncw_fcw": (1, True),
    "linalg.conv_2d_nchw_fchw": (2, True), "linalg.conv_3d_ncdhw_fcdhw": (3, True),
}
#: i64 words per operand (pointer, offset, five sizes, five strides) and in
#: the descriptor (three operands, three window strides, three dilations).
OPERAND_WORDS = 12
DESC_WORDS = 3 * OPERAND_WORDS + 6


def _window(op, name: str, rank: int) -> list[int]:
    if name not in op.attributes:
        return [1] * rank
    return [int(v) for v in ir.DenseIntElementsAttr(op.attributes[name])]


def _why_not(op, fill) -> str | None:
    operands = list(op.operands)
    if not all(isinstance(v.type, ir.MemRefType) for v in operands):
        return ""  # on tensors: not yet bufferized, no remark
    if not all(isinstance(ir.MemRefType(v.type).element_type, ir.F32Type) for v in operands):
        return "not float32"
    if not all(is_strided(v.type) for v in operands):
        return "an operand's layout is not strided"
    if fill is None:
        return "its output is not filled with zero right before (it accumulates)"
    return None


def _emit(op, rank: int, channels_first: bool, threads: int) -> None:
    i64 = ir.IntegerType.get_signless(64)
    index = ir.IndexType.get()
    with ir.InsertionPoint(op), op.location:
        desc = memref.AllocaOp(ir.MemRefType.get([DESC_WORDS], i64), [], []).result
        consts: dict[int, ir.Value] = {}

        def const(n: int):
            if n not in consts:
                consts[n] = arith.constant(i64, n)
            return consts[n]

        def store(value, slot: int) -> None:
            if isinstance(value.type, ir.IndexType):
                value = arith.index_cast(i64, value)
            memref.store(value, desc, [arith.constant(index, slot)])

        for k, value in enumerate(list(op.operands)[:3]):
            nd = ir.MemRefType(value.type).rank
            meta = list(memref.ExtractStridedMetadataOp(value).results)
            base = k * OPERAND_WORDS
            store(memref.ExtractAlignedPointerAsIndexOp(value).result, base)
            store(meta[1], base + 1)
            for i in range(5):
                store(meta[2 + i] if i < nd else const(1), base + 2 + i)
                store(meta[2 + nd + i] if i < nd else const(0), base + 7 + i)
        windows = _window(op, "strides", rank) + [1] * (3 - rank)
        dilations = _window(op, "dilations", rank) + [1] * (3 - rank)
        for i, v in enumerate(windows + dilations):
            store(const(v), 3 * OPERAND_WORDS + i)
        address = arith.index_cast(i64, memref.ExtractAlignedPointerAsIndexOp(desc).result)
        flags = rank | int(channels_first) << 2 | threads << 32
        func.call([], CONV, [const(flags), address])


@register_pass(
    "tdf-convolutions-to-dnnl",
    "Named float32 convolutions on memrefs (conv_{1,2,3}d, channels last or first) whose "
    "output was just zeroed to calls of the runtime's oneDNN convolution",
    options=[PassOption("threads", int, 0, "threads of these calls (0: the default)"),
             PassOption("remarks", bool, False, "A remark for every convolution left as loops")],
    statistics=[("convolutions", "convolutions turned into tdf_rt_conv calls")],
)
def convolutions_to_dnnl(op, ctx: PassContext) -> None:
    """See the module docstring."""
    threads = ctx.option("threads")
    if not 0 <= threads < 1 << 16:
        ctx.error(op, f"threads must be in 0..65535, got {threads}")
        return
    found = []
    scans: dict = {}
    for target in collect_ops(op, list(CONVOLUTIONS)):
        operands = list(target.operands)
        fill = None
        if all(isinstance(v.type, ir.MemRefType) for v in operands):
            fill = zero_fill_before(target, operands[2], operands[:2], scans)
        why = _why_not(target, fill)
        if why is None:
            found.append((target, fill))
        elif why and ctx.option("remarks"):
            ctx.remark(target, f"not a oneDNN convolution: {why}")
    if not found:
        return
    declare(op, CONV)
    for target, fill in found:
        rank, channels_first = CONVOLUTIONS[target.name]
        _emit(target, rank, channels_first, threads)
        target.erase()
        assert fill is not None  # _why_not refuses a convolution without one
        fill.erase()
    ctx.statistic("convolutions", len(found))
