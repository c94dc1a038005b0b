"""``tdf-schedule-for-memory``: run an op as soon as it can free a large
temporary.

The order of a traced program is the order it was written in, not the one
that needs the least memory: a training step computes every gradient, then
updates every parameter, so each gradient stays live until the updates at the
end (an MLP's weight gradients all live at once). XLA's scheduler runs each
update as soon as its gradient is ready. This pass (tensor level, in the
``inplace`` stage before ``tdf-insert-inplace``) moves an op **earlier** in its
function's entry block when that frees memory sooner:

* the op is pure and region-free or a ``linalg`` op (its region is a payload):
  ``linalg.*``, ``tensor.*``, ``arith.*``, ``math.*`` (no calls, no loops);
* it is the last use of an operand that holds at least as many bytes as all
  its results together -- a temporary computed in the block, or a donated
  argument (which the op may then update in place);
* the ops it would move above produce at least as many bytes as it frees
  (else moving it frees nothing sooner, and keeping the written order keeps
  producers next to their consumers);
* it moves to just after the latest of: the definitions of its operands and
  of the values its payload captures from above, and
  every other use of each operand it is the last use of (so it stays their
  last use, and an operand it may update in place is still dead there).
  ``tensor.empty`` / ``arith.constant`` operands used by this op alone move
  with it. Uses inside regions count at the op around them.

Moving a pure op earlier keeps every value's definition before its uses; the
results are the same bits (the property tests compare against the pass
switched off). No options; statistic ``moved``.

Before (the update of ``%w2`` waits for the other gradient)::

    %g2 = linalg.matmul ...                   // 1 MiB
    %d1 = linalg.matmul ins(%dz, %w2T ...)    // last read of %w2 but one
    %g1 = linalg.matmul ...                   // 1.5 MiB, while %g2 is live
    %e = tensor.empty()
    %w2n = linalg.generic ins(%w2, %g2) outs(%e)

After::

    %g2 = linalg.matmul ...
    %d1 = linalg.matmul ins(%dz, %w2T ...)
    %e = tensor.empty()
    %w2n = linalg.generic ins(%w2, %g2) outs(%e)   // %g2 dies here
    %g1 = linalg.matmul ...
"""

from __future__ import annotations

from mlir import ir

from .. import _tdf
from ..vocabulary import DONATE_ATTR, static_nbytes
from .ir_utils import ancestor_in, arg_dicts, defining_op, function_bodies, op_key
from .registry import PassContext, register_pass

__all__ = ["schedule_for_memory"]

_MOVABLE_DIALECTS = ("linalg.", "tensor.", "arith.", "math.")
_FREE_DEFS = ("tensor.empty", "arith.constant")


def _movable(op) -> bool:
    name = op.name
    if not name.startswith(_MOVABLE_DIALECTS):
        return False
    if len(op.regions) and not name.startswith("linalg."):
        return False
    return all(isinstance(r.type, (ir.RankedTensorType, ir.IntegerType, ir.FloatType,
                                   ir.IndexType)) for r in op.results)


def _nbytes(value) -> int | None:
    if isinstance(value.type, ir.RankedTensorType):
        return static_nbytes(value.type)
    return 0


class _Block:
    """Positions of the entry block's ops, kept current as ops move."""

    def __init__(self, block):
        self.block = block
        self.ops = [op.operation for op in block.operations]
        self.pos = {op_key(op): i for i, op in enumerate(self.ops)}

    def index(self, op) -> int:
        return self.pos[op_key(op)]

    def top(self, op):
        return ancestor_in(op, self.block)

    def move_after(self, op, anchor_index: int) -> None:
        """Moves ``op`` earlier, to just after position ``anchor_index``
        (-1: first in the block)."""
        old = self.index(op)
        new = anchor_index + 1
        assert new <= old
        self.ops.pop(old)
        op.move_before(self.ops[new])
        self.ops.insert(new, op)
        for i in range(new, old + 1):
            self.pos[op_key(self.ops[i])] = i


def _last_user_position(value, blk: _Block, skip) -> int | None:
    """The position of the last op of the block that uses ``value`` (or
    holds a use), ``skip`` not counted; None when there is none."""
    last = _tdf.last_user_in_block(value, blk.block, skip.operation)
    return None if last is None else blk.index(last)


def _target(op, blk: _Block, donated) -> tuple[int, list] | None:
    """Where ``op`` may move to (the position it goes after) and the free
    definitions that move with it; None when it should stay."""
    here = blk.index(op)
    result_bytes = 0
    for r in op.results:
        size = _nbytes(r)
        if size is None:
            return None
        result_bytes += size
    after, killed, carried = -1, 0, []
    for operand in op.operands:
        definer = defining_op(operand)
        if definer is not None and definer.name in _FREE_DEFS and \
                len(list(operand.uses)) == 1 and definer.block == blk.block:
            after = max([after] + [blk.index(blk.top(defining_op(v)))
                                   for v in definer.operands if defining_op(v) is not None
                                   and blk.top(defining_op(v)) is not None])
            carried.append(definer)
            continue
        if definer is not None:
            top = blk.top(definer)
            if top is None:
                return None
            after = max(after, blk.index(top))
        if after >= here - 1 - len(carried):
            # No room to move: ``after`` and ``carried`` only grow from here
            # (the test below), so the users of the other operands need no
            # look (most ops read what the op just before them made).
            return None
        last = _last_user_position(operand, blk, op)
        if last is not None and last > here:
            continue  # not its last use
        size = _nbytes(operand)
        owned = definer is not None or operand in donated
        if owned and size:
            killed = max(killed, size)
        if last is not None:
            after = max(after, last)
    if killed < max(result_bytes, 1) or after >= here - 1 - len(carried):
        return None
    after = max(after, _captured_after(op, blk))
    if after >= here - 1 - len(carried):
        return None
    if _allocated_between(blk, after, here) < killed:
        return None  # nothing large is made meanwhile: moving frees nothing sooner
    return after, carried


def _allocated_between(blk: _Block, after: int, here: int) -> int:
    """Bytes of the tensors the ops between positions ``after`` and
    ``here`` produce (``tensor.empty`` aside): what the freed operand would
    otherwise coexist with."""
    total = 0
    for other in blk.ops[after + 1:here]:
        if other.name == "tensor.empty":
            continue
        for r in other.results:
            if isinstance(r.type, ir.RankedTensorType):
                total += static_nbytes(r.type) or 0
    return total


def _captured_after(op, blk: _Block) -> int:
    """The latest position of an op of the block defining a value that
    ``op``'s regions use (a payload capturing a scalar from above)."""
    latest = -1
    key = op_key(op)

    def visit(inner):
        nonlocal latest
        for value in inner.operands:
            definer = defining_op(value)
            if definer is None:
                continue
            top = blk.top(definer)
            if top is not None and op_key(top) != key:
                latest = max(latest, blk.index(top))
        return ir.WalkResult.ADVANCE

    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                inner.operation.walk(visit)
    return latest


@register_pass(
    "tdf-schedule-for-memory",
    "Move pure ops earlier when they are the last use of a large temporary",
    statistics=[("moved", "ops moved earlier")],
)
def schedule_for_memory(op, ctx: PassContext) -> None:
    """See the module docstring."""
    moved = 0
    for func in function_bodies(op):
        if len(func.regions[0].blocks) != 1:
            continue
        block = func.regions[0].blocks[0]
        dicts = arg_dicts(func)
        donated = [a for a, d in zip(block.arguments, dicts) if DONATE_ATTR in d]
        blk = _Block(block)
        for candidate in list(blk.ops):
            if not _movable(candidate):
                continue
            found = _target(candidate, blk, donated)
            if found is None:
                continue
            after, carried = found
            for free in carried:
                if blk.index(free) > after:  # already above (a hoisted constant): stays
                    blk.move_after(free, after)
                    after = blk.index(free)
            blk.move_after(candidate, after)
            moved += 1
    ctx.statistic("moved", moved)
