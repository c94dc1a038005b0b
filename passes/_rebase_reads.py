"""The read rebasing of ``tdf-insert-inplace``: after an update
``%c = tensor.insert_slice %z into %A[R]``, reads of the old ``%A`` in a
static region provably disjoint from ``R`` read ``%c`` instead (the values
are the same), so that ``%A`` is no longer read after the update's producer
and that producer may write ``R`` of ``%A`` in place
(:func:`rebase_disjoint_reads`).
"""

from __future__ import annotations

from mlir import ir

from .analysis.kernels import is_elementwise_linalg
from .ir_utils import ancestor_in, collect_ops
from .registry import PassContext

__all__ = ["rebase_disjoint_reads"]


def _static_region(op, base: int):
    """``(offsets, sizes, strides)`` of slice op ``op`` (``base``: the
    operand the slice is taken of), or None when one is dynamic."""
    segments = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))
    if any(segments[base + 1:]):
        return None
    return tuple(list(ir.DenseI64ArrayAttr(op.attributes[name]))
                 for name in ("static_offsets", "static_sizes", "static_strides"))


def _disjoint(a, b) -> bool:
    """Are static slice regions ``a`` and ``b`` (of one tensor) provably
    disjoint: in some dimension their index ranges do not meet (or one is
    empty)."""
    if any(t < 1 for t in a[2] + b[2]):
        return False  # a zero or negative step: no interval reasoning
    for oa, sa, ta, ob, sb, tb in zip(*a, *b):
        if sa == 0 or sb == 0:
            return True
        if oa + (sa - 1) * ta < ob or ob + (sb - 1) * tb < oa:
            return True
    return False


def rebase_disjoint_reads(func, ctx: PassContext | None = None) -> int:
    """Reads of the *old* value of an updated tensor, in a region provably
    disjoint from the update, read the *new* value instead: for
    ``%c = tensor.insert_slice %z into %A[R]`` (static ``R``) whose source is
    produced by ``P`` (a ``tdf.call`` or an element-wise linalg op) in the
    insert's block, every ``%r = tensor.extract_slice %A[R']`` with a static
    ``R'`` disjoint from ``R`` that is used after ``P`` is taken of ``%c``
    instead (the insert moves up to right after ``P``; a slice taken before
    ``P`` gets a copy of it after the insert for its later uses). The values
    are the same (``R'`` does not meet ``R``), but ``%A`` is no longer read
    after ``P``: ``P`` may write ``R`` of ``%A`` in place (the
    read-modify-write of rows 0..3 while rows 4..7 are read later), and
    One-Shot Bufferize, which cannot tell a call's write from a later read
    of a disjoint slice, sees no conflict. Only when that leaves ``%A`` with
    no use after ``P`` but the insert (otherwise nothing is gained and the
    IR is left alone). Returns how many inserts had reads rebased."""
    done = 0
    for insert in collect_ops(func.operation, "tensor.insert_slice"):
        region = _static_region(insert, 1)
        if region is None:
            continue
        producer = _update_producer(insert)
        if producer is None:
            continue
        reads = _disjoint_reads(insert, producer, region)
        if reads is None or not (reads[0] or reads[1]):
            continue
        _rebase(insert, producer, *reads)
        done += 1
        if ctx is not None:
            ctx.statistic("rebased-reads")
    return done


def _update_producer(insert):
    """The op ``P`` that computes the source of ``insert`` (a ``tdf.call`` or
    an element-wise linalg op before it in its block) when the destination
    is defined before ``P``; else None."""
    source, dest = insert.operands[0], insert.operands[1]
    if isinstance(source.owner, ir.Block):
        return None
    producer = source.owner.operation
    block = insert.block
    if producer.block != block or not producer.is_before_in_block(insert) or not (
            producer.name == "tdf.call" or is_elementwise_linalg(producer)):
        return None
    if not isinstance(dest.owner, ir.Block):
        definer = ancestor_in(dest.owner.operation, block)
        if definer is not None and not definer.is_before_in_block(producer):
            return None
    return producer


def _disjoint_reads(insert, producer, region):
    """``(later, early)``: the slices of the insert's destination read after
    ``producer`` (``later``: taken after it; ``early``: taken before it,
    with their uses after it), all of static regions disjoint from
    ``region``; None when the destination has any other use after
    ``producer`` (or one this cannot place)."""
    block = insert.block
    later, early = [], []
    for use in insert.operands[1].uses:
        user = use.owner.operation
        if user == insert:
            continue
        top = ancestor_in(user, block)
        if top is None or user == producer or top == producer:
            return None
        is_slice = user.name == "tensor.extract_slice"
        other = _static_region(user, 0) if is_slice else None
        if top.is_before_in_block(producer):
            if not is_slice:
                continue  # a read before the update
            uses_after = _uses_after(user, producer)
            if uses_after is None:
                return None
            if not uses_after:
                continue
            if other is None or not _disjoint(region, other):
                return None
            early.append((user, uses_after))
        else:
            if other is None or not _disjoint(region, other):
                return None
            later.append(user)
    return later, early


def _uses_after(user, producer):
    """``(owner, operand number)`` of each use of ``user``'s result after
    ``producer`` (in its block); None when a use is outside that block."""
    block = producer.block
    uses_after = []
    ok = True
    for u in user.results[0].uses:
        where = ancestor_in(u.owner, block)
        if where is None:
            ok = False
        elif where != producer and not where.is_before_in_block(producer):
            uses_after.append((u.owner.operation, u.operand_number))
    return uses_after if ok else None


def _rebase(insert, producer, later, early) -> None:
    """Moves ``insert`` right after ``producer`` and makes the ``later``
    slices, and the uses after ``producer`` of the ``early`` ones (through a
    clone taken after the insert), read the updated tensor."""
    insert.move_after(producer)
    updated = insert.results[0]
    for user in later:
        user.operands[0] = updated
    for user, uses_after in early:
        clone = user.clone(ip=ir.InsertionPoint.after(insert))
        clone.operands[0] = updated
        for owner, number in uses_after:
            owner.operands[number] = clone.results[0]
        if not list(user.results[0].uses):
            user.erase()  # a use of %A before the update is a use all the same
