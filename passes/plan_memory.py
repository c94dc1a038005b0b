"""``tdf-plan-memory``: one arena per call for a function's temporaries.

Runs on bufferized IR before deallocation (``tdf-bufferize`` runs it after
``tdf-drop-donated-results``). Each ``memref.alloc`` of a function gets a
live interval over the function's schedule
(:mod:`~tdf.passes.analysis.buffers`: aliases followed through views,
loops and branches; a buffer used inside a loop is live for the whole loop).
The plannable ones (static size, not returned, not carried from one loop
iteration to the next, no pointer escape) get offsets
(:mod:`~tdf.passes.analysis.placement`: best fit over several greedy
orders, 64-byte aligned) in

* **the arena**: one ``memref.alloc`` of bytes at function entry (marked
  ``tdf.arena``), so a call
  makes one allocation for all its temporaries, and an allocation inside a
  loop body moves out of the loop;
* **a fresh result buffer** while the result is not live yet (as XLA places
  temporaries inside an output allocation): the result's allocation moves to
  function entry, as bytes, and the result becomes a view at offset 0.

A buffer an ``scf.for`` body computes for the next iteration is first
copied into the iteration's own carried buffer at the end of the body
(``tdf.passes._loop_carries``, as XLA keeps a while loop's state in one
buffer), so that it too is an ordinary temporary. Each planned allocation
becomes a ``memref.view`` of its bin, located ``"tdf.slice:<bytes>"(...)``
(what ``tdf-arena-alias-scopes`` tells LLVM about it). Deallocation
(ownership-based, later in ``tdf-bufferize``) then frees the arena once, at
the end of the call; the arena is allocated per call, so compiled functions
stay safe to call from several threads at once. The plan is re-checked on
the rewritten IR before the pass returns -- offsets read back from the
views, live intervals recomputed over the new IR
(:func:`~tdf.passes.analysis.buffers.shared_storage_conflicts`): an overlap
would be an internal error, never a wrong answer. A function whose input
already has views of one buffer sharing bytes while live (IR written that
way) is not planned. Allocations that stay their own: dynamic
shapes, buffers carried across loop iterations that could not be kept in
one buffer, returned buffers (unless they host temporaries). (``i1``
buffers are planned as bytes: ``tdf-widen-i1-memrefs`` retypes the views
later, as numpy stores bool.)

The function gets ``tdf.memory_plan``: ``arena`` (bytes), ``lower_bound``
(the most bytes of all its static buffers live at once, fresh results and
allocations left alone included: no placement does better), ``planned``, ``hosted`` (temporaries placed in
results), ``kept`` (allocations left alone), ``kept_bytes`` (their static
bytes; dynamic ones count 0), ``dynamic`` (how many have a dynamic size),
``kept_in_loops`` (static bytes of allocations left alone inside loops:
two iterations' worth can be live at once), ``results`` (bytes of fresh
result buffers), ``hosts`` (bytes of the results holding temporaries),
``carried`` (loop-carried buffers now kept in one buffer per loop). ``tdf.compile``'s ``memory_analysis()`` reads it.

Option ``remarks`` (default false): a remark per allocation with its size,
interval and offset (or why it keeps its own allocation).

Before::

    %a = memref.alloc() {alignment = 64 : i64} : memref<64xf32>
    linalg.exp ins(%x : memref<64xf32>) outs(%a : memref<64xf32>)
    %b = memref.alloc() {alignment = 64 : i64} : memref<64xf32>
    linalg.exp ins(%a : memref<64xf32>) outs(%b : memref<64xf32>)
    %c = memref.alloc() {alignment = 64 : i64} : memref<64xf32>
    linalg.exp ins(%b : memref<64xf32>) outs(%c : memref<64xf32>)
    return %c : memref<64xf32>

After (``%a`` lives in the result's bytes before the result is written,
``%b`` in the arena)::

    %arena = memref.alloc() {alignment = 64 : i64} : memref<256xi8>
    %host = memref.alloc() {alignment = 64 : i64} : memref<256xi8>
    %a = memref.view %host[%c0][] : memref<256xi8> to memref<64xf32>
    ...
    %b = memref.view %arena[%c0][] : memref<256xi8> to memref<64xf32>
    ...
    %c = memref.view %host[%c0][] : memref<256xi8> to memref<64xf32>
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, memref

from ..vocabulary import ARENA_ATTR, MEMORY_PLAN_ATTR
from ._loop_carries import carry_in_place
from .analysis.buffers import LOOPS, Buffer, function_buffers, shared_storage_conflicts
from .analysis.placement import ALIGNMENT, Block, Host, Placement, check, lower_bound, place
from .arena_alias_scopes import slice_location
from .ir_utils import collect_ops, function_bodies
from .registry import PassContext, PassOption, register_pass
from .unown_opaque_results import opaque_callees

__all__ = ["plan_memory", "plan_function"]


def _i64(n: int) -> ir.Attribute:
    return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), n)


def _byte_buffer(size: int, entry) -> ir.Value:
    """``memref.alloc() {tdf.arena} : memref<size x i8>`` at the start of
    ``entry``."""
    with ir.InsertionPoint.at_block_begin(entry):
        mtype = ir.MemRefType.get([size], ir.IntegerType.get_signless(8))
        alloc = memref.AllocOp(mtype, [], [], alignment=_i64(ALIGNMENT).value)
        alloc.attributes[ARENA_ATTR] = ir.UnitAttr.get()
        return alloc.result


def _as_view(buffer: Buffer, base: ir.Value, offset: int) -> None:
    """Replaces ``buffer``'s allocation with a view of ``base`` at byte
    ``offset`` (the view sits where the allocation was)."""
    alloc = buffer.op
    with ir.InsertionPoint(alloc), alloc.location:
        shift = arith.ConstantOp(ir.IndexType.get(), offset).result
        view = memref.ViewOp(alloc.results[0].type, base, shift, [],
                             loc=slice_location(buffer.size or 0, alloc.location)).result
    alloc.results[0].replace_all_uses_with(view)
    alloc.erase()


def _in_loop(op: ir.Operation) -> bool:
    parent = op.parent
    while parent is not None and parent.operation.name != "func.func":
        if parent.operation.name in LOOPS:
            return True
        parent = parent.operation.parent
    return False


def _whole_block(buffer: Buffer) -> Block:
    """A buffer left alone, as a block for the lower bound: a fresh result
    from its allocation to the end; a loop-carried one twice (the iteration
    reading it and the one writing the next)."""
    size = buffer.size or 0
    if not buffer.result and _in_loop(buffer.op):
        size *= 2
    return Block(size, buffer.start, buffer.end, buffer.name)


def _remark(ctx, buffer: Buffer, where: str) -> None:
    size = "dynamic size" if buffer.size is None else f"{buffer.size} bytes"
    ctx.remark(buffer.op, f"{buffer.name}: {size}, live [{buffer.start}, {buffer.end}]: {where}")


def plan_function(func: ir.Operation, opaque: set, ctx: PassContext | None = None,
                  remarks: bool = False) -> dict | None:
    """Plans and rewrites one function; returns the plan's figures (the
    ``tdf.memory_plan`` entries) or None when the function is not planned
    (several blocks, or views in the input that share bytes while live)."""
    if len(func.regions[0].blocks) != 1:
        return None
    # Views the input already made of one buffer that are live at once and
    # share bytes (IR written that way, not a plan of ours): planning could
    # not keep them apart, and the check after the rewrite would blame the
    # plan. Such a function keeps its own allocations.
    if collect_ops(func, "memref.view") and shared_storage_conflicts(func, opaque):
        if remarks and ctx is not None:
            ctx.remark(func, "not planned: views of one buffer in the input share bytes "
                             "while live")
        return None
    carried = carry_in_place(func, opaque)
    found = function_buffers(func, opaque)
    if found is None:
        return None
    temps = [b for b in found.buffers if b.reason is None]
    results = [b for b in found.buffers if b.result]
    kept = [b for b in found.buffers if b.reason is not None]
    blocks = [Block(b.size or 0, b.start, b.end, b.name) for b in temps]
    hosts = [Host(b.size or 0, b.start, b.end, b.name) for b in results]
    placement = place(blocks, hosts) if temps else Placement()
    errors = check(blocks, hosts, placement)
    if errors:
        raise RuntimeError("tdf-plan-memory: internal error, the plan overlaps: " + "; ".join(errors))
    used_hosts = sorted({bin_ for bin_, _ in placement.where if bin_ >= 0})
    figures = {
        "arena": placement.arena,
        "lower_bound": lower_bound(blocks + [_whole_block(b) for b in kept if b.size]),
        "planned": len(temps),
        "hosted": sum(1 for bin_, _ in placement.where if bin_ >= 0),
        "kept": len(kept),
        "kept_bytes": sum(b.size or 0 for b in kept if not b.result),
        "kept_in_loops": sum(b.size or 0 for b in kept if not b.result and _in_loop(b.op)),
        "dynamic": sum(1 for b in found.buffers if b.size is None),
        "results": sum(b.size or 0 for b in results),
        "hosts": sum(hosts[h].size for h in used_hosts),
        "carried": carried,
    }
    if remarks and ctx is not None:
        for buffer, (bin_, offset) in zip(temps, placement.where):
            where = "arena" if bin_ < 0 else f"result {results[bin_].name}"
            _remark(ctx, buffer, f"{where} + {offset}")
        for buffer in kept:
            _remark(ctx, buffer, f"own allocation ({buffer.reason})")
    if temps:
        _rewrite(found.func, temps, results, placement, used_hosts)
        conflicts = shared_storage_conflicts(func, opaque)
        if conflicts:
            raise RuntimeError("tdf-plan-memory: internal error, the rewritten function "
                               "shares bytes between live buffers: " + "; ".join(conflicts))
    func.attributes[MEMORY_PLAN_ATTR] = ir.DictAttr.get(
        {k: _i64(v) for k, v in figures.items()})
    return figures


def _rewrite(func, temps, results, placement: Placement, used_hosts) -> None:
    entry = func.regions[0].blocks[0]
    with func.location:
        arena = _byte_buffer(placement.arena, entry) if any(
            bin_ < 0 and t.size for t, (bin_, _) in zip(temps, placement.where)) else None
        bases = {}
        for h in used_hosts:
            bases[h] = _byte_buffer(results[h].size, entry)
        for buffer, (bin_, offset) in zip(temps, placement.where):
            base = arena if bin_ < 0 else bases[bin_]
            if base is None:  # a zero-size buffer and no arena: any bytes do
                base = arena = _byte_buffer(0, entry)
            _as_view(buffer, base, offset)
        for h in used_hosts:
            _as_view(results[h], bases[h], 0)


@register_pass(
    "tdf-plan-memory",
    "One arena per call: temporaries placed by live interval (and inside fresh results)",
    options=[PassOption("remarks", bool, False,
                        "A remark per allocation: size, live interval, offset or why it is kept")],
    statistics=[("planned", "allocations placed in an arena or a result"),
                ("kept", "allocations left alone"),
                ("arena-bytes", "bytes of the arenas")],
)
def plan_memory(op, ctx: PassContext) -> None:
    """See the module docstring."""
    opaque = opaque_callees(op.operation)
    for func in function_bodies(op):
        figures = plan_function(func, opaque, ctx, bool(ctx.option("remarks")))
        if figures is not None:
            ctx.statistic("planned", figures["planned"])
            ctx.statistic("kept", figures["kept"])
            ctx.statistic("arena-bytes", figures["arena"])
