"""``tdf-alloc-checks``: a failed heap allocation raises ``MemoryError``
instead of being written through.

``finalize-memref-to-llvm`` lowers ``memref.alloc`` to ``malloc`` (or
``_mlir_memref_to_llvm_alloc``) and never looks at the result: a program
whose buffer cannot be allocated writes through NULL. This pass, run on
buffer IR (after ``tdf-bufferize``), follows every ``memref.alloc`` that may
allocate bytes with a null test of its aligned pointer (NULL stays NULL under
the alignment rounding) and a call of the tdf runtime's
``tdf_rt_alloc_error(site, bytes)``, which returns to the native call
trampoline; the call raises ``MemoryError`` naming the function, the
allocation's ``file:line:col`` and the byte count. Before::

    %buf = memref.alloc() : memref<1000000000000xf32>

After::

    %buf = memref.alloc() : memref<1000000000000xf32>
    %p = memref.extract_aligned_pointer_as_index %buf : memref<1000000000000xf32> -> index
    %null = arith.cmpi eq, %p, %c0 : index
    scf.if %null {
      func.call @tdf_rt_alloc_error(%site, %bytes) : (i64, i64) -> ()
    }

An allocation with dynamic sizes is also checked *before* it: each dynamic
size must be non-negative and the byte count must fit in int64 (the
lowering multiplies the sizes without an overflow check, so a size of
2^62 + 1 f32 elements allocated 4 bytes and the program wrote past them; a
negative size allocated a wrapped count). A failure calls
``tdf_rt_alloc_error`` with a site of kind ``alloc-size`` naming the
dimension and its size: ``ValueError`` for a negative size, ``MemoryError``
when the byte count overflows. Before the alloc::

    %neg = arith.cmpi slt, %n, %c0 : index
    %div = arith.select %pos, %n, %c1 : index        // %pos: %n > 0
    %max = arith.divsi %cINT64_MAX, %div : index
    %big = arith.cmpi sgt, %bytes_so_far, %max : index
    %bad = arith.ori %neg, (%pos and %big)
    scf.if %bad { func.call @tdf_rt_alloc_error(%site, %n) }

Statically empty allocations are not checked. No options; statistics
``checks`` and ``size-checks``.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import memref

from ..vocabulary import ALLOC_ERROR, element_nbytes
from ._runtime_sites import SiteTable, declare, emit_failure_branch
from .ir_utils import binary, cmpi, collect_ops, has_body, index_const, select
from .registry import PassContext, register_pass

__all__ = ["alloc_checks"]


INT64_MAX = 2**63 - 1


def _check_sizes_before(alloc, mtype, static_bytes: int, sites: SiteTable, ctx: PassContext):
    """Before ``alloc``: every dynamic size is >= 0 and the byte count
    (``static_bytes`` times the dynamic sizes) fits in int64. Returns the
    byte count (an index value)."""
    dynamic = ir.ShapedType.get_dynamic_size()
    dims = [d for d, size in enumerate(mtype.shape) if size == dynamic]
    with ir.InsertionPoint(alloc), alloc.location:
        zero, one, top = index_const(0), index_const(1), index_const(INT64_MAX)
        so_far = index_const(static_bytes)
        for dim, size in zip(dims, list(alloc.operands)[:len(dims)]):
            negative = cmpi("slt", size, zero)
            positive = cmpi("sgt", size, zero)
            divisor = select(positive, size, one)
            limit = binary("arith.divsi", top, divisor)
            too_big = binary("arith.andi", positive, cmpi("sgt", so_far, limit))
            bad = binary("arith.ori", negative, too_big)
            site = sites.add("alloc-size", alloc, dim)
            emit_failure_branch(bad, ALLOC_ERROR, [site, size])
            so_far = binary("arith.muli", so_far, size)
            ctx.statistic("size-checks")
    return so_far


@register_pass(
    "tdf-alloc-checks",
    "Test every memref.alloc for NULL at run time (failure calls the tdf runtime: MemoryError)",
    statistics=[("checks", "Allocation checks inserted"),
                ("size-checks", "Dynamic sizes checked before an allocation")],
)
def alloc_checks(op, ctx: PassContext) -> None:
    """See the module docstring."""
    module = op
    sites = SiteTable(module)
    allocs = []
    for func in collect_ops(module, "func.func"):
        if has_body(func):
            allocs += collect_ops(func, "memref.alloc")
    dynamic = ir.ShapedType.get_dynamic_size()
    checked = 0
    for alloc in allocs:
        mtype = ir.MemRefType(alloc.results[0].type)
        static = 1
        for size in mtype.shape:
            if size != dynamic:
                static *= size
        if static == 0:
            continue
        static *= element_nbytes(mtype.element_type) or 8
        nbytes = None
        if any(size == dynamic for size in mtype.shape):
            nbytes = _check_sizes_before(alloc, mtype, static, sites, ctx)
        with ir.InsertionPoint.after(alloc), alloc.location:
            pointer = memref.ExtractAlignedPointerAsIndexOp(alloc.results[0]).result
            null = cmpi("eq", pointer, index_const(0))
            if nbytes is None:
                nbytes = index_const(static)
            site = sites.add("alloc", alloc)
            emit_failure_branch(null, ALLOC_ERROR, [site, nbytes])
        ctx.statistic("checks")
        checked += 1
    if checked:
        declare(module, ALLOC_ERROR)
        sites.store()
