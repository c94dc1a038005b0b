"""Live intervals of the heap buffers of a bufferized function.

The schedule is the function's entry block: op *i* of the block has number
*i*, and an op nested in a region counts as the block-level op around it (a
buffer used anywhere inside a loop is live for the whole loop). The interval
of a buffer runs from its allocation to the last use of any **alias** of it;
the aliases are found by following, transitively:

* views (``memref.subview``, ``cast``, ``reinterpret_cast``, ``expand_shape``,
  ``collapse_shape``, ``view``, ``transpose``, ``extract_strided_metadata``,
  ``memory_space_cast``): the result aliases the source;
* region-carrying ops: an ``scf.for`` init aliases the iter_arg and the
  result; an ``scf.while`` init aliases the ``before`` argument; a value
  yielded by ``scf.yield`` / passed by ``scf.condition`` aliases the parent's
  result and, in a loop, the next iteration's argument;
* any other op with memref results (a call, an unknown op): every result may
  alias every memref operand.

On bufferized IR an in-place write produces no new value (a linalg op writes
into its ``outs`` memref), so the uses of the aliases are exactly the reads
and writes of the storage: lifetimes are extended through every in-place
update and view (the hazard of a planner that looks at SSA values only).

A buffer is **plannable** when its allocation (``memref.alloc``) has a static
shape with a known byte size, it sits in the entry block or inside
``scf.for``/``scf.while``/``scf.if``/``scf.index_switch``/
``scf.execute_region`` regions, and no alias of it

* is returned (it is a fresh *result*: :attr:`Buffer.result` is set when it
  escapes only that way, directly in the entry block),
* is passed to a call of a body-less function that returns memrefs (an opaque
  callee may keep it), or to an op that turns a pointer into an integer or an
  LLVM value (``memref.extract_aligned_pointer_as_index``,
  ``builtin.unrealized_conversion_cast``, ``llvm.*``),
* is carried from one iteration of a loop around the allocation to the next
  (yielded by that loop's body: each iteration needs its own storage then).

What is not plannable keeps its own allocation (``Buffer.reason`` says why).
"""

from __future__ import annotations

from dataclasses import dataclass

from mlir import ir

from ...vocabulary import element_nbytes, static_nbytes
from ..ir_utils import (
    ancestor_in,
    collect_ops,
    defining_op,
    function_type,
    has_body,
    identity_layout,
    op_key,
    sym_name,
)

__all__ = ["Buffer", "FunctionBuffers", "function_buffers", "aliases", "shared_storage_conflicts"]

VIEW_OPS = frozenset({
    "memref.cast", "memref.subview", "memref.reinterpret_cast", "memref.expand_shape",
    "memref.collapse_shape", "memref.view", "memref.transpose",
    "memref.extract_strided_metadata", "memref.memory_space_cast",
})
#: Ops whose results may carry a pointer in a form the analysis cannot follow.
POINTER_ESCAPES = frozenset({
    "memref.extract_aligned_pointer_as_index", "builtin.unrealized_conversion_cast",
})
#: Region ops whose regions run at most once per execution of the op.
ONCE_REGIONS = frozenset({"scf.if", "scf.index_switch", "scf.execute_region"})
#: Loops whose bodies may hold a per-iteration buffer.
LOOPS = frozenset({"scf.for", "scf.while"})


@dataclass
class Buffer:
    """One ``memref.alloc`` of a function and its live interval
    ``[start, end]`` over the entry block's ops. ``size`` is its byte size
    (None when dynamic); ``reason`` is None when it can be planned, else why
    not; ``result`` is True for a fresh buffer the function returns."""

    op: ir.Operation
    size: int | None
    start: int
    end: int
    reason: str | None = None
    result: bool = False
    names: _Names | None = None

    @property
    def name(self) -> str:
        value = self.op.results[0]
        return self.names(value) if self.names is not None else value.get_name()


class _Names:
    """Values' names as printed in one function, from one ``AsmState`` made
    on first use (``Value.get_name()`` alone prints the whole function each
    time: 4 ms per name on a decode step)."""

    def __init__(self, func: ir.Operation):
        self.func = func
        self.state: ir.AsmState | None = None

    def __call__(self, value: ir.Value) -> str:
        if self.state is None:
            self.state = ir.AsmState(self.func)
        return value.get_name(self.state)


@dataclass
class FunctionBuffers:
    """The buffers of one function; ``length`` is the number of schedule
    positions (ops in the entry block)."""

    func: ir.Operation
    buffers: list[Buffer]
    length: int


def _owner(use) -> ir.Operation:
    return use.owner.operation if hasattr(use.owner, "operation") else use.owner


def _region_index(op: ir.Operation, block) -> int:
    for index, region in enumerate(op.regions):
        for candidate in region.blocks:
            if candidate == block:
                return index
    return -1


def _yield_targets(yield_op: ir.Operation, index: int) -> tuple[list, ir.Operation | None]:
    """Values that operand ``index`` of a terminator flows to, and the loop
    it carries a value around (None when it does not)."""
    parent = yield_op.parent.operation
    name = parent.name
    if yield_op.name == "scf.condition":  # before region of scf.while
        if index == 0:
            return [], None
        return [parent.results[index - 1], parent.regions[1].blocks[0].arguments[index - 1]], None
    if name in ONCE_REGIONS:
        return [parent.results[index]], None
    if name == "scf.for":
        body = parent.regions[0].blocks[0]
        return [parent.results[index], body.arguments[index + 1]], parent
    if name == "scf.while":  # after region: back to the before region
        return [parent.regions[0].blocks[0].arguments[index]], parent
    return list(parent.results), parent  # unknown: conservative


def _use_targets(use) -> tuple[list, ir.Operation | None, str | None]:
    """``(aliases, carried_by_loop, escape)`` for one use of a memref."""
    op = _owner(use)
    name = op.name
    index = use.operand_number
    if name == "func.return":
        return [], None, "returned"
    if name in POINTER_ESCAPES or name.startswith("llvm."):
        return [], None, f"its address escapes through {name}"
    if name in VIEW_OPS:
        return ([r for r in op.results if isinstance(r.type, ir.MemRefType)]
                if index == 0 else []), None, None
    if name in ("scf.yield", "scf.condition"):
        targets, loop = _yield_targets(op, index)
        return targets, loop, None
    if name == "scf.for" and index >= 3:
        return [op.results[index - 3], op.regions[0].blocks[0].arguments[index - 2]], None, None
    if name == "scf.while":
        return [op.regions[0].blocks[0].arguments[index]], None, None
    results = [r for r in op.results if isinstance(r.type, (ir.MemRefType, ir.UnrankedMemRefType))]
    return results, None, None


def aliases(value, opaque: set | None = None):
    """``(values, loops, escapes)``: every value that may alias ``value``
    (itself included), the loops that carry one of them from an iteration to
    the next, and the ways it escapes (``"returned"``, ...; empty when it
    does not)."""
    opaque = opaque or set()
    seen = {value}
    work = [value]
    loops: list[ir.Operation] = []
    escapes: set[str] = set()
    while work:
        current = work.pop()
        for use in current.uses:
            op = _owner(use)
            if op.name == "func.call" and \
                    ir.FlatSymbolRefAttr(op.attributes["callee"]).value in opaque:
                escapes.add("passed to an opaque call")
            targets, loop, why = _use_targets(use)
            if why is not None:
                escapes.add(why)
            if loop is not None:
                loops.append(loop)
            for target in targets:
                if target not in seen:
                    seen.add(target)
                    work.append(target)
    return list(seen), loops, escapes


def _is_ancestor(op: ir.Operation, inner: ir.Operation) -> bool:
    current = inner.parent
    while current is not None:
        if current.operation == op:
            return True
        current = current.operation.parent
    return False


def _placement_problem(alloc: ir.Operation, entry) -> str | None:
    """Why an allocation cannot be planned for where it sits, or None."""
    mtype = ir.MemRefType(alloc.results[0].type)
    if not mtype.has_static_shape:
        return "dynamic shape"
    if not identity_layout(mtype):
        return "non-identity layout"
    if element_nbytes(mtype.element_type) is None:
        return f"element type {mtype.element_type}"
    if mtype.memory_space is not None:
        return "non-default memory space"
    op = alloc
    while op.block != entry:
        parent = op.parent
        if parent is None or parent.operation.name == "func.func":
            return "outside the entry block"
        if parent.operation.name not in LOOPS | ONCE_REGIONS:
            return f"inside {parent.operation.name}"
        op = parent.operation
    return None


def _interval(values, entry, order: dict, start: int) -> int:
    end = start
    for value in values:
        for use in value.uses:
            top = ancestor_in(_owner(use), entry)
            if top is not None:
                end = max(end, order[op_key(top)])
    return end


def function_buffers(func: ir.Operation, opaque: set | None = None) -> FunctionBuffers | None:
    """The buffers of ``func`` (a ``func.func`` with one block), or None
    when its body has several blocks (unstructured control flow: not
    planned)."""
    region = func.regions[0]
    if len(region.blocks) != 1:
        return None
    entry = region.blocks[0]
    order = {op_key(op): i for i, op in enumerate(entry.operations)}
    buffers = []
    names = _Names(func)
    for alloc in collect_ops(func, "memref.alloc"):
        top = ancestor_in(alloc, entry)
        if top is None:
            continue
        start = order[op_key(top)]
        values, loops, escapes = aliases(alloc.results[0], opaque)
        end = _interval(values, entry, order, start)
        size = static_nbytes(alloc.results[0].type)
        reason = _placement_problem(alloc, entry)
        result = False
        if reason is None and escapes:
            result = escapes == {"returned"} and alloc.block == entry
            reason = min(escapes - {"returned"}, default="returned")
        if reason is None and any(_is_ancestor(loop, alloc) for loop in loops):
            reason = "carried from one loop iteration to the next"
        buffers.append(Buffer(alloc, size, start, len(order) if result else end, reason, result,
                              names))
    return FunctionBuffers(func, buffers, len(order))


def functions(module_op) -> list[tuple[str, ir.Operation]]:
    """``(name, func)`` of every ``func.func`` with a body directly in the module."""
    return [(sym_name(f), f.operation) for f in module_op.regions[0].blocks[0].operations
            if f.operation.name == "func.func" and has_body(f)
            and function_type(f) is not None]


def shared_storage_conflicts(func: ir.Operation, opaque: set | None = None) -> list[str]:
    """Checks a planned function from its IR alone: for every byte buffer
    (``memref.alloc`` of ``i8``) its ``memref.view`` ops are read back (the
    offset constant, the view's byte size) with their live intervals
    recomputed over the rewritten IR; two views of one buffer that are live
    at once must not share a byte. Returns the conflicts found (empty: the
    plan is sound)."""
    region = func.regions[0]
    if len(region.blocks) != 1:
        return []
    entry = region.blocks[0]
    order = {op_key(op): i for i, op in enumerate(entry.operations)}
    views: dict[int, list[tuple[int, int, int, int, str]]] = {}
    for view in collect_ops(func, "memref.view"):
        base = view.operands[0]
        shift = defining_op(view.operands[1])
        if shift is None or shift.name != "arith.constant":
            continue
        size = static_nbytes(view.results[0].type)
        if size is None:
            continue
        top = ancestor_in(view, entry)
        if top is None:
            continue
        offset = ir.IntegerAttr(shift.attributes["value"]).value
        values, _, escapes = aliases(view.results[0], opaque)
        start = order[op_key(top)]
        end = len(order) if "returned" in escapes else _interval(values, entry, order, start)
        base_def = defining_op(base)
        key = op_key(base_def) if base_def is not None else id(base)
        views.setdefault(key, []).append((start, end, offset, offset + size, view.results[0]))
    conflicts = []
    names = _Names(func)
    for members in views.values():
        members.sort(key=lambda m: m[:4])
        for i, (s1, e1, lo1, hi1, n1) in enumerate(members):
            for s2, e2, lo2, hi2, n2 in members[i + 1:]:
                if s2 > e1:
                    break
                if lo1 < hi2 and lo2 < hi1:
                    conflicts.append(f"{names(n1)} [{s1}, {e1}] bytes [{lo1}, {hi1}) and {names(n2)} "
                                     f"[{s2}, {e2}] bytes [{lo2}, {hi2}) are live at once")
    return conflicts
