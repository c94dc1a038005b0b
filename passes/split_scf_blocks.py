"""``tdf-split-scf-blocks``: make ``convert-scf-to-cf`` linear in the number
of scf ops in one block.

Upstream ``convert-scf-to-cf`` lowers each ``scf.if``/``scf.for``/... by
splitting its block at the op and moving the whole remaining tail of the
block into a new one. A function body holding N structured ops in one block
therefore moves O(N^2) ops (``benchmarks/compile_scaling.py`` measures it).

This pass, run right before it, pre-splits every block of a ``func.func``
body after each structured-control-flow op (an ``scf`` op with regions),
from the last one to the first, so that each op is moved exactly once; the
blocks are chained with ``cf.br`` and no value crosses a block boundary
other than by dominance (the first block dominates the next). Each scf op is
then followed only by its block's terminator, and ``convert-scf-to-cf``
moves two ops per split. Blocks inside scf regions are left alone (those
regions must stay single-block until they are lowered). Before::

    func.func @f(%c: i1, %a: f32) -> f32 {
      %x = scf.if %c -> f32 { ... }
      %y = arith.addf %x, %a : f32
      return %y : f32
    }

After::

    func.func @f(%c: i1, %a: f32) -> f32 {
      %x = scf.if %c -> f32 { ... }
      cf.br ^bb1
    ^bb1:
      %y = arith.addf %x, %a : f32
      return %y : f32
    }

The program computes exactly the same thing: only unconditional branches
between straight-line pieces are added (``convert-cf-to-llvm`` and LLVM
merge them back).
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import cf

from .ir_utils import collect_ops
from .registry import PassContext, register_pass


def _splits_after(op) -> bool:
    """A structured-control-flow op that ``convert-scf-to-cf`` splits its
    block at."""
    op = op.operation  # an OpView's .name may be an attribute (memref.get_global)
    return op.name.startswith("scf.") and len(op.regions) > 0


def _split_block(block, ctx: PassContext) -> None:
    ops = list(block.operations)
    # Only split where something besides the terminator follows the op.
    points = [i for i in range(len(ops) - 2) if _splits_after(ops[i])]
    carried = None  # the cf.br ending the previously split-off tail
    end = len(ops)
    for i in reversed(points):
        tail = ops[i + 1:end]
        if carried is not None:
            tail.append(carried)
        new_block = block.create_after()
        for moved in tail:
            new_block.append(moved)
        with ir.InsertionPoint(block):
            carried = cf.br([], new_block, loc=ops[i].operation.location).operation
        end = i + 1
        ctx.statistic("splits")


@register_pass(
    "tdf-split-scf-blocks",
    "Split function-body blocks after each scf op (last to first) so that "
    "convert-scf-to-cf moves each op once",
    statistics=[("splits", "Blocks split after a structured control-flow op")],
)
def split_scf_blocks(op, ctx: PassContext) -> None:
    """See the module docstring."""
    for func in collect_ops(op, "func.func"):
        for region in func.regions:
            for block in list(region.blocks):
                _split_block(block, ctx)
