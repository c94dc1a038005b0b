"""Liveness of tensor values in ``func.func`` bodies, linear in program size.

One pre-order walk numbers every op of a function (``pre``) and records the
last number inside it (``end``): an op's nested regions occupy the interval
``(pre, end]``. Value definitions get positions on a doubled scale so that
they sit *between* ops:

* a result of op ``O`` is defined at ``2*end(O) + 1`` (after everything nested
  in ``O``: a loop's results exist once the loop is done);
* a block argument of a region of ``O`` is defined at ``2*pre(O) + 1`` (inside
  ``O``, before its body).

A use at op ``U`` happens *after* op ``P`` when

1. ``pre(U) > pre(P)`` (later in program order; a use in the other branch of
   an ``scf.if`` counts too: conservative), or
2. ``U`` and ``P`` are in a loop that does not contain the definition of the
   used value: the next iteration executes ``U`` again after ``P`` ("a use
   inside a loop is live for the whole loop"). Every region-holding op is a
   loop except ``scf.if``, ``scf.index_switch``, ``scf.execute_region`` and
   ``func.func``, or
3. ``P`` is in a region with several blocks (a CFG) and ``U`` is not in
   ``P``'s block: with branches, any other block may run after ``P``.

``Liveness.dead_after(value, op)`` answers "may ``op`` overwrite ``value``'s
storage as far as uses are concerned": it returns ``None`` when no use of the
value (or of the given aliases) can execute after ``op``, otherwise a
:class:`LiveUse` naming the value and the op that still reads it. A function
result (``func.return`` operand) is a use like any other. Queries cost the
number of uses of the values involved plus the loop depth of ``op``; nothing
walks the program again and ``Operation.is_before_in_block`` (which aborts
across blocks) is never called.

The test pass ``test-tdf-liveness`` annotates every op that is the last use
of one of its tensor operands with ``tdf.last_use = [operand numbers]``
(sorted; a value passed twice is listed at both numbers), and every
region-holding op (a loop, an ``scf.if``) with ``tdf.live_through`` when a
tensor defined outside it is used inside it and dies with it:
``tdf.live_through = ["%name", ...]`` (names as printed with function-local
numbering).

Before::

    %y = tdf.call @exp(%x) : (tensor<4xf32>) -> tensor<4xf32>
    %z = tdf.call @add(%x, %y) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>

After ``test-tdf-liveness``::

    %y = tdf.call @exp(%x) : ...
    %z = tdf.call @add(%x, %y) {tdf.last_use = [0, 1]} : ...
"""

from __future__ import annotations

from dataclasses import dataclass

from mlir import ir

from ..ir_utils import function_bodies, is_tensor, op_key
from ..registry import PassContext, register_pass

__all__ = ["Liveness", "LiveUse", "NON_LOOP_OPS"]

# Region-holding ops whose regions run at most once per execution of the op.
NON_LOOP_OPS = frozenset({
    "scf.if", "scf.index_switch", "scf.execute_region", "func.func", "builtin.module",
})



@dataclass
class _OpInfo:
    pre: int
    end: int
    loop: object  # innermost enclosing loop op (ir.Operation) or None
    cfg_block: list | None  # [first, last, block]: P's block in a multi-block region


@dataclass(frozen=True)
class LiveUse:
    """Why a value is not dead: ``value`` (the value itself or an alias) is
    still read by ``user`` (an op) after the candidate op; ``reason`` is one of
    ``"later-use"``, ``"loop"`` (read again by a later iteration) or ``"cfg"``
    (a use in another block of a control-flow graph)."""

    value: object
    user: object
    reason: str


class Liveness:
    """Program-order numbering of one ``func.func`` and liveness queries."""

    def __init__(self, func):
        self.func = func.operation
        self.info: dict = {}  # op_key -> _OpInfo
        self.ops: list = []  # every op of the body, in pre-order
        self._number()

    # -- numbering --------------------------------------------------------
    def _number(self) -> None:
        """One walk: pre/end numbers, innermost loop, CFG block range.

        An explicit worklist, not recursion: region nesting depth is bounded
        only by the parser's limit (tdf.limits), far above Python's."""
        info = self.info
        counter = 0
        func_record = info[op_key(self.func)] = _OpInfo(0, 0, None, None)
        ops = self.ops
        # Tasks, last first: ("op", op, loop, cfg), ("block", block, loop,
        # cfg, multi), ("end", record) and ("block-end", block_cfg).
        stack = []

        def push_regions(regions, loop, cfg):
            for region in reversed(list(regions)):
                blocks = list(region.blocks)
                multi = len(blocks) > 1
                for block in reversed(blocks):
                    stack.append(("block", block, loop, cfg, multi))

        push_regions(self.func.regions, None, None)
        while stack:
            task = stack.pop()
            kind = task[0]
            if kind == "op":
                _, op, loop, cfg = task
                counter += 1
                record = _OpInfo(counter, counter, loop, cfg)
                info[op_key(op)] = record
                ops.append(op)
                regions = op.regions
                if len(regions):
                    stack.append(("end", record))
                    inner_loop = loop if op.name in NON_LOOP_OPS else op
                    push_regions(regions, inner_loop, cfg)
            elif kind == "block":
                _, block, loop, cfg, multi = task
                block_cfg = [counter + 1, None, block] if multi else cfg
                if multi:
                    stack.append(("block-end", block_cfg))
                children = [child.operation for child in block.operations]
                for child in reversed(children):
                    stack.append(("op", child, loop, block_cfg))
            elif kind == "end":
                task[1].end = counter
            else:  # block-end
                task[1][1] = counter
        func_record.end = counter

    # -- positions --------------------------------------------------------
    def record(self, op) -> _OpInfo:
        """The numbering record of ``op``."""
        return self.info[op_key(op)]

    def pre(self, op) -> int:
        """Pre-order number of ``op`` (the function is 0)."""
        return self.info[op_key(op)].pre

    def end(self, op) -> int:
        """Largest pre-order number inside ``op`` (``pre(op)`` without regions)."""
        return self.info[op_key(op)].end

    def def_pos(self, value) -> int:
        """Where ``value`` is defined, on the doubled scale (see module doc)."""
        owner = value.owner
        if isinstance(owner, ir.Block):
            parent = owner.owner.operation
            return 2 * self.info[op_key(parent)].pre + 1
        return 2 * self.info[op_key(owner)].end + 1

    def defined_after(self, value, op) -> bool:
        """True when ``value`` comes into existence after ``op`` starts
        (``op``'s own results, later ops' results, results of a loop around
        ``op``)."""
        return self.def_pos(value) > 2 * self.info[op_key(op)].pre

    def _contains_def(self, loop, dpos: int) -> bool:
        record = self.info[op_key(loop)]
        return 2 * record.pre < dpos <= 2 * record.end

    def outer_loop_without(self, op, value):
        """The outermost loop around ``op`` that does not contain ``value``'s
        definition (a later iteration re-executes ``op`` with the same
        ``value``), or None."""
        dpos = self.def_pos(value)
        found = None
        loop = self.info[op_key(op)].loop
        while loop is not None and not self._contains_def(loop, dpos):
            found = loop
            loop = self.info[op_key(loop)].loop
        return found

    # -- queries ----------------------------------------------------------
    def use_after(self, user, op, value, loop_out=None):
        """Returns the reason (``"later-use"``, ``"loop"``, ``"cfg"``) why the
        use of ``value`` at ``user`` may execute after ``op``, or None.
        ``loop_out`` is ``outer_loop_without(op, value)`` when precomputed."""
        user = user.operation
        upre = self.info[op_key(user)].pre
        record = self.info[op_key(op)]
        if upre > record.pre and not self.exclusive_branches(user, op):
            return "later-use"
        if loop_out is not None:
            lrec = self.info[op_key(loop_out)]
            if lrec.pre < upre <= lrec.end:
                return "loop"
        if record.cfg_block is not None:
            first, last, _ = record.cfg_block
            if not first <= upre <= last:
                return "cfg"
        return None

    @staticmethod
    def exclusive_branches(user, op) -> bool:
        """True when ``user`` and ``op`` sit in different regions of one
        ``scf.if`` / ``scf.index_switch`` (one execution of it runs only one
        of them; a loop around it is the ``loop`` rule's business)."""
        blocks = {}
        current = op.operation
        while current.parent is not None:
            parent = current.parent.operation
            blocks[op_key(parent)] = current.block
            if parent.name == "func.func":
                break
            current = parent
        current = user.operation
        while current.parent is not None:
            parent = current.parent.operation
            block = blocks.get(op_key(parent))
            if block is not None:
                return (parent.name in ("scf.if", "scf.index_switch")
                        and block.region != current.block.region)
            if parent.name == "func.func":
                return False
            current = parent
        return False

    def dead_after(self, value, op, aliases=(), ignore=()):
        """None when neither ``value`` nor any of ``aliases`` can be read after
        ``op`` (``op``'s own operands excepted, unless ``op`` runs again in a
        loop while ``value`` stays the same); otherwise a :class:`LiveUse`.
        Uses by the ops in ``ignore`` are skipped too (a later op that
        overwrites what ``op`` writes, e.g. the ``tensor.insert_slice`` a part
        is computed for).

        Aliases defined after ``op`` starts (its results, later values) hold
        newer contents and are skipped: any later view of the old contents is
        itself a later use of an older alias."""
        op = op.operation
        record = self.info[op_key(op)]
        for candidate in (value, *aliases):
            if candidate is not value and self.defined_after(candidate, op):
                continue
            dpos = self.def_pos(candidate)
            if record.cfg_block is not None:
                first, last, block = record.cfg_block
                own_arg = isinstance(candidate.owner, ir.Block) and candidate.owner == block
                if not own_arg and not 2 * first <= dpos <= 2 * last + 1:
                    return LiveUse(candidate, op, "cfg")
            loop_out = self.outer_loop_without(op, candidate)
            if loop_out is not None and candidate == value:
                return LiveUse(candidate, loop_out, "loop")
            for use in candidate.uses:
                user = use.owner.operation
                if user == op or any(user == other for other in ignore):
                    continue
                reason = self.use_after(user, op, candidate, loop_out)
                if reason is not None:
                    return LiveUse(candidate, user, reason)
        return None

    def last_use_operands(self, op) -> list[int]:
        """Operand numbers of ``op`` holding a tensor whose last use is ``op``."""
        op = op.operation
        found = []
        for index, operand in enumerate(op.operands):
            if is_tensor(operand) and self.dead_after(operand, op) is None:
                found.append(index)
        return found

    def live_through(self, op) -> list:
        """Tensors defined outside region-holding ``op``, used inside it, and
        dead after it (their last use is inside ``op``)."""
        op = op.operation
        record = self.info[op_key(op)]
        seen, found = set(), []
        start = 2 * record.pre
        stop = 2 * record.end + 1

        def visit(inner):
            inner = inner.operation
            if inner != op:
                for operand in inner.operands:
                    if not is_tensor(operand) or operand in seen:
                        continue
                    dpos = self.def_pos(operand)
                    if start < dpos <= stop:
                        continue
                    seen.add(operand)
                    later = any(self.info[op_key(u.owner)].pre > record.end
                                for u in operand.uses)
                    if not later:
                        found.append(operand)
            return ir.WalkResult.ADVANCE

        op.walk(visit)
        return found


def annotate_liveness(func) -> None:
    """Sets ``tdf.last_use`` / ``tdf.live_through`` on the ops of ``func``."""
    func = func.operation
    liveness = Liveness(func)
    state = ir.AsmState(func)
    for op in liveness.ops:
        last = liveness.last_use_operands(op)
        if last:
            op.attributes["tdf.last_use"] = ir.DenseI64ArrayAttr.get(last)
        if len(op.regions) and op.name not in ("func.func",):
            through = liveness.live_through(op)
            if through:
                op.attributes["tdf.live_through"] = ir.ArrayAttr.get(
                    [ir.StringAttr.get(v.get_name(state)) for v in through])


@register_pass(
    "test-tdf-liveness",
    "Annotate ops with the tensors whose last use they are (tdf.last_use, tdf.live_through)",
)
def test_liveness(op, ctx: PassContext) -> None:
    """Test pass: annotates every function's ops with liveness results.

    ``tdf.last_use = array<i64: ...>``: operand numbers of the op whose tensor
    is dead after it; ``tdf.live_through = ["%v", ...]``: tensors from outside
    a region-holding op that die inside it. No options.

    Before::

        %y = tdf.call @exp(%x) : (tensor<4xf32>) -> tensor<4xf32>
        return %y : tensor<4xf32>

    After::

        %y = tdf.call @exp(%x) {tdf.last_use = array<i64: 0>} : ...
        return {tdf.last_use = array<i64: 0>} %y : tensor<4xf32>
    """
    for func in function_bodies(op):
        annotate_liveness(func)
