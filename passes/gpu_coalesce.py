"""``tdf-gpu-coalesce``: put the dimensions of outermost ``scf.parallel``
loops innermost first, for coalesced GPU memory accesses.

Reverses the dimensions of every outermost ``scf.parallel`` without
reductions, so that the contiguous (last) dimension of the row-major buffers
comes first. In ``tdf-lower-to-nvvm``, ``scf-parallel-loop-tiling`` then
gives it the first tile size and
``gpu-map-parallel-loops{mapping-policy=outermost-first}`` maps it to
``threadIdx.x``: consecutive threads touch consecutive addresses. Bounds and
steps are permuted together with the induction variables, so the loop
computes the same thing. No options; statistic ``reversed``.

Before::

    scf.parallel (%i, %j) = (%c0, %c0) to (%c64, %c128) step (%c1, %c1) {
      %v = memref.load %a[%i, %j] : memref<64x128xf32>

After::

    scf.parallel (%j, %i) = (%c0, %c0) to (%c128, %c64) step (%c1, %c1) {
      %v = memref.load %a[%i, %j] : memref<64x128xf32>
"""

from __future__ import annotations

from mlir import ir

from .registry import PassContext, register_pass

__all__ = ["gpu_coalesce"]


def _reverse_parallel_dims(loop) -> None:
    """Reverses the dimensions of an ``scf.parallel`` in place: bounds and
    steps are permuted, and every use of induction variable ``i`` becomes a
    use of the variable now at position ``rank - 1 - i``."""
    rank = len(loop.regions[0].blocks[0].arguments)
    if rank < 2:
        return
    operands = list(loop.operands)
    for group in range(3):  # lower bounds, upper bounds, steps
        for dim in range(rank):
            loop.operands[group * rank + dim] = operands[group * rank + rank - 1 - dim]
    args = list(loop.regions[0].blocks[0].arguments)
    uses = [[(u.owner, u.operand_number) for u in arg.uses] for arg in args]
    for dim, dim_uses in enumerate(uses):
        for owner, number in dim_uses:
            owner.operands[number] = args[rank - 1 - dim]


@register_pass(
    "tdf-gpu-coalesce",
    "Put the dimensions of outermost scf.parallel loops innermost first, for coalesced GPU mapping",
    statistics=[("reversed", "scf.parallel loops whose dimensions were reversed")],
)
def gpu_coalesce(op, ctx: PassContext) -> None:
    """See the module docstring."""
    loops = []

    def visit(inner):
        if inner.name == "scf.parallel":
            if len(inner.results) == 0:
                loops.append(inner)
            return ir.WalkResult.SKIP
        return ir.WalkResult.ADVANCE

    op.walk(visit, ir.WalkOrder.PRE_ORDER)
    for loop in loops:
        _reverse_parallel_dims(loop)
        ctx.statistic("reversed")
