"""Loop-carried buffers kept in one buffer for the whole loop (part of
``tdf-plan-memory``).

With ``allow-return-allocs-from-loops`` One-Shot Bufferize gives an
``scf.for`` body that computes a new value of an iter_arg a fresh buffer per
iteration, yielded to the next one (and the previous one freed there): one
allocation per step, and the planner cannot put such a buffer in the arena
(the iteration reading it and the one writing the next would share it). As
XLA does for a while loop's carried state, the value is instead copied into
the iter_arg's own buffer at the end of the iteration, and that buffer is
yielded: the per-iteration buffer is then an ordinary temporary (the arena
holds it) and the carried state lives in one buffer for the whole loop.

Conditions, for iter_arg *k* of an ``scf.for`` whose body yields at position
*k* a ``memref.alloc`` of the body (with the iter_arg's static, identity
type), used by that yield once:

* the iter_arg (and every alias of it) is only read and written in the
  iteration: not yielded, not returned, no pointer escape -- so the copy,
  just before the yield, comes after its last use;
* when the iteration's last use of the iter_arg comes before the first use
  of the new value's buffer (a recurrence ``h = f(g(h), x)`` whose ``g``
  reads ``h`` into a temporary first), the new value is computed in the
  iter_arg's buffer itself and there is no copy at all (XLA computes a while
  loop's new state in the carried buffer the same way); and when one op
  ``W`` overwrites all of the new value's buffer after that last use (an
  in-place chain ``t = x @ wx; t += h @ wh; t = tanh(t + b)``), ``W``
  writes the iter_arg's buffer and the later uses read it, no copy either;
* the buffer the loop starts from is one the function may overwrite: an
  allocation of the same block that nothing uses after the loop starts
  (no views of it, no ops with regions using it); otherwise a fresh
  buffer is allocated before the loop and the initial value copied into it
  (one copy per call instead of one allocation per step).

Before::

    %r = scf.for %i = %c0 to %n step %c1 iter_args(%h = %init) -> (memref<4xf32>) {
      %new = memref.alloc() : memref<4xf32>
      linalg.exp ins(%h : memref<4xf32>) outs(%new : memref<4xf32>)
      scf.yield %new : memref<4xf32>
    }

After::

    %r = scf.for %i = %c0 to %n step %c1 iter_args(%h = %init) -> (memref<4xf32>) {
      %new = memref.alloc() : memref<4xf32>
      linalg.exp ins(%h : memref<4xf32>) outs(%new : memref<4xf32>)
      memref.copy %new, %h : memref<4xf32> to memref<4xf32>
      scf.yield %h : memref<4xf32>
    }
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import memref

from .analysis.buffers import VIEW_OPS, aliases
from .ir_utils import (
    ancestor_in,
    collect_ops,
    defining_op,
    identity_layout,
    indexing_maps,
    op_key,
)

__all__ = ["carry_in_place"]


def _plain(mtype) -> bool:
    return mtype.has_static_shape and identity_layout(mtype) and mtype.memory_space is None


def _yielded_alloc(loop, k: int, body):
    """The ``memref.alloc`` of ``body`` the loop yields at position ``k``
    (used once by the yield), or None."""
    yielded = body.operations[len(body.operations) - 1].operands[k]
    alloc = defining_op(yielded)
    if alloc is None or alloc.name != "memref.alloc" or alloc.block != body:
        return None
    if yielded.type != body.arguments[k + 1].type or not _plain(ir.MemRefType(yielded.type)):
        return None
    in_yield = [u for u in yielded.uses if u.owner.operation.name == "scf.yield"]
    return alloc if len(in_yield) == 1 else None


def _reusable_init(loop, k: int):
    """The loop's initial buffer at position ``k`` when the loop may write
    it: an allocation of the loop's block, of the same type, used (directly,
    no views) by the loop and by ops before it only."""
    init = loop.operands[3 + k]
    alloc = defining_op(init)
    if alloc is None or alloc.name != "memref.alloc" or alloc.block != loop.block:
        return None
    if init.type != loop.results[k].type:
        return None
    before = set()
    for op in loop.block.operations:
        if op.operation == loop:
            break
        before.add(op_key(op))
    for use in init.uses:
        owner = use.owner.operation
        if owner == loop:
            continue
        if op_key(owner) not in before or owner.name in VIEW_OPS or len(owner.regions):
            return None
    return init


def _carry(loop, k: int, opaque: set) -> bool:
    body = loop.regions[0].blocks[0]
    alloc = _yielded_alloc(loop, k, body)
    if alloc is None:
        return False
    state = body.arguments[k + 1]
    _, loops, escapes = aliases(state, opaque)
    if loops or escapes:
        return False
    if _reusable_init(loop, k) is None:
        with ir.InsertionPoint(loop), loop.location:
            fresh = memref.AllocOp(ir.MemRefType(state.type), [], [], alignment=64).result
            memref.CopyOp(loop.operands[3 + k], fresh)
        loop.operands[3 + k] = fresh
    terminator = body.operations[len(body.operations) - 1]
    if _dead_before_written(body, state, alloc, opaque):
        alloc.results[0].replace_all_uses_with(state)
        alloc.erase()
        return True
    if _retarget_last_writer(body, state, alloc, opaque):
        return True
    with ir.InsertionPoint(terminator), terminator.location:
        memref.CopyOp(alloc.results[0], state)
    terminator.operands[k] = state
    return True


def _positions(values, body, order: dict, skip=()) -> list[int]:
    """Positions in ``body`` (of the top-level op holding each use) of the
    uses of ``values``, the ops in ``skip`` left out."""
    found = []
    for v in values:
        for use in v.uses:
            op = _owner_op(use)
            if op_key(op) in skip:
                continue
            top = ancestor_in(op, body)
            if top is not None:
                found.append(order[op_key(top)])
    return found


def _dead_before_written(body, state, alloc, opaque: set) -> bool:
    """Whether the iteration's last use of the carried state comes before the
    first use of the new value's buffer: then the new value may be computed in
    the carried buffer itself (as XLA's while loops do), with no copy."""
    order = {op_key(op): i for i, op in enumerate(body.operations)}
    terminator = body.operations[len(body.operations) - 1]
    yield_key = {op_key(terminator)}
    state_values = aliases(state, opaque)[0]
    # The new value reaches the next iteration's state through the yield:
    # only its aliases within this iteration count.
    new_values = [v for v in aliases(alloc.results[0], opaque)[0] if v not in state_values]
    state_uses = _positions(state_values, body, order, yield_key)
    new_uses = _positions(new_values, body, order, yield_key)
    return not new_uses or not state_uses or max(state_uses) < min(new_uses)


def carry_in_place(func, opaque: set) -> int:
    """Rewrites the loop-carried buffers of ``func`` (see the module doc);
    returns how many."""
    count = 0
    for loop in collect_ops(func, "scf.for"):
        for k in range(len(loop.results)):
            if isinstance(loop.results[k].type, ir.MemRefType) and _carry(loop, k, opaque):
                count += 1
    return count


def _owner_op(use):
    return use.owner.operation if isinstance(use.owner, ir.OpView) else use.owner


def _overwrites(op, buffer) -> bool:
    """Whether linalg ``op`` writes every element of ``buffer``, its one
    init, without reading the init's old value (all-parallel iterators, the
    identity map on the init, the body's init argument unused)."""
    if not op.name.startswith("linalg.") or "iterator_types" not in op.attributes \
            or "operandSegmentSizes" not in op.attributes:
        return False
    if any("parallel" not in str(it) for it in ir.ArrayAttr(op.attributes["iterator_types"])):
        return False
    if list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))[-1] != 1 \
            or op.operands[len(op.operands) - 1] != buffer:
        return False
    out_map = indexing_maps(op)[-1]
    if out_map != ir.AffineMap.get_identity(out_map.n_dims, context=out_map.context):
        return False
    if not len(op.regions) or not len(op.regions[0].blocks):
        return False
    block = op.regions[0].blocks[0]
    return not list(block.arguments[len(block.arguments) - 1].uses)


def _retarget_last_writer(body, state, alloc, opaque: set) -> bool:
    """When the new value's buffer gets its final contents from one op ``W``
    that overwrites all of it (an element-wise ``tanh(t + b)`` writing into
    ``t``, ``t`` an in-place chain that started before the state's last
    read), and the state is no longer read from ``W`` on: ``W`` writes the
    carried buffer instead, the later uses of the new value use the carried
    buffer, and no copy is needed (the buffer stays a temporary for the ops
    up to ``W``)."""
    order = {op_key(op): i for i, op in enumerate(body.operations)}
    terminator = body.operations[len(body.operations) - 1]
    value = alloc.results[0]

    def position(op):
        top = ancestor_in(op, body)
        return None if top is None else order[op_key(top)]

    writers = [_owner_op(use) for use in value.uses if _owner_op(use).block == body
               and _overwrites(_owner_op(use), value)]
    if not writers:
        return False
    last = max(writers, key=position)
    at = position(last)
    state_values = aliases(state, opaque)[0]
    state_uses = _positions(state_values, body, order, {op_key(terminator)})
    if state_uses and max(state_uses) >= at:
        return False
    # Every other alias of the buffer (a view, a region's result) must be
    # done with it before W: only direct uses are moved to the carried buffer.
    for v in aliases(value, opaque)[0]:
        if v != value and v not in state_values and \
                max(_positions([v], body, order), default=-1) >= at:
            return False
    later = [use for use in value.uses
             if (position(_owner_op(use)) or -1) > at]
    last.operands[len(last.operands) - 1] = state
    for use in later:
        _owner_op(use).operands[use.operand_number] = state
    return True
