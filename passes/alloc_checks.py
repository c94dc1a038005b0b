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

Statically empty allocations are not checked. No options; statistic
``checks``.
"""

from __future__ import annotations

from mlir import ir

from ..vocabulary import element_nbytes
from ._ir import collect_ops, has_body
from ._runtime_sites import ALLOC_ERROR, SiteTable, declare, emit_failure_branch
from .registry import PassContext, register_pass

__all__ = ["alloc_checks"]


def _index_const(n):
    index = ir.IndexType.get()
    return ir.Operation.create("arith.constant", results=[index],
                               attributes={"value": ir.IntegerAttr.get(index, n)}).result


@register_pass(
    "tdf-alloc-checks",
    "Test every memref.alloc for NULL at run time (failure calls the tdf runtime: MemoryError)",
    statistics=[("checks", "Allocation checks inserted")],
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
    index = ir.IndexType.get()
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
        with ir.InsertionPoint.after(alloc), alloc.location:
            pointer = ir.Operation.create("memref.extract_aligned_pointer_as_index",
                                          results=[index], operands=[alloc.results[0]]).result
            null = ir.Operation.create(
                "arith.cmpi", results=[ir.IntegerType.get_signless(1)],
                operands=[pointer, _index_const(0)],
                attributes={"predicate": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 0)}).result
            nbytes = _index_const(static)
            dyn_count = sum(1 for s in mtype.shape if s == dynamic)
            for size_value in list(alloc.operands)[:dyn_count]:
                nbytes = ir.Operation.create("arith.muli", results=[index],
                                             operands=[nbytes, size_value]).result
            site = sites.add("alloc", alloc)
            emit_failure_branch(null, ALLOC_ERROR, [site, nbytes])
        ctx.statistic("checks")
        checked += 1
    if checked:
        declare(module, ALLOC_ERROR)
        sites.store()
