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

from dataclasses import dataclass, field

from mlir import ir

from ..ir_utils import function_bodies, is_tensor, op_key
from ..registry import PassContext, register_pass

__all__ = ["Liveness", "LiveUse", "NON_LOOP_OPS"]

# Region-holding ops whose regions run at most once per execution of the op.
NON_LOOP_OPS = frozenset({
    "scf.if", "scf.index_switch", "scf.execute_region", "func.func", "builtin.module",
})
# Region-holding ops of which one execution runs one region only.
_BRANCH_OPS = frozenset({"scf.if", "scf.index_switch"})



@dataclass
class _OpInfo:
    pre: int
    end: int
    loop: object  # innermost enclosing loop op (ir.Operation) or None
    cfg_block: list | None  # [first, last, block]: P's block in a multi-block region
    branch: _Branch | None = None  # innermost enclosing region of an scf.if / index_switch
    post: int = 0  # post-order number
    #: A loop op's own record: the op, and ``loop_up[k]``, the record of its
    #: ``2**k``-th enclosing loop (binary lifting, as :class:`_Branch`;
    #: empty for other ops).
    op: object = None
    loop_up: list = field(default_factory=list)


class _Branch:
    """A region of an ``scf.if`` / ``scf.index_switch``: the last pre-order
    number inside it (``region_end``), the ``end`` of the op (``op_end``)
    and the enclosing branch region; ``up[k]`` is its ``2**k``-th
    enclosing one (binary lifting: the first enclosing branch whose op
    contains a given number is found in O(log depth)); ``depth`` counts it
    and the enclosing ones (the ``scf.if`` / ``scf.index_switch`` ops
    around an op whose innermost branch region it is)."""

    __slots__ = ("region_end", "op_end", "up", "depth")

    def __init__(self, parent: _Branch | None):
        self.region_end = 0
        self.op_end = 0
        self.depth: int = 1 if parent is None else parent.depth + 1
        up: list[_Branch] = []
        while parent is not None:
            up.append(parent)
            parent = parent.up[len(up) - 1] if len(parent.up) >= len(up) else None
        self.up: list[_Branch] = up

    def containing(self, pre: int) -> _Branch | None:
        """The innermost of this branch and its enclosing ones whose op
        contains pre-order number ``pre`` (ops nest: ``op_end`` grows
        outwards)."""
        node = self
        if node.op_end >= pre:
            return node
        k = len(node.up) - 1
        while k >= 0:
            if k < len(node.up) and node.up[k].op_end < pre:
                node = node.up[k]
            k -= 1
        return node.up[0] if node.up else None


def _lifted(parent: _OpInfo | None) -> list:
    """``loop_up`` of a loop whose innermost enclosing loop has record
    ``parent``: its ``2**k``-th enclosing loops."""
    up: list = []
    while parent is not None:
        up.append(parent)
        parent = parent.loop_up[len(up) - 1] if len(parent.loop_up) >= len(up) else None
    return up


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
        self._through: dict | None = None  # live_through of every region op
        self._number()

    # -- numbering --------------------------------------------------------
    def _number(self) -> None:
        """One walk: pre/end numbers, innermost loop, CFG block range,
        innermost branch region.

        An explicit worklist, not recursion: region nesting depth is bounded
        only by the parser's limit (tdf.limits), far above Python's."""
        info = self.info
        counter = post = 0
        func_record = info[op_key(self.func)] = _OpInfo(0, 0, None, None)
        ops = self.ops
        # Tasks, last first: ("op", op, loop, cfg, branch), ("block", block,
        # loop, cfg, multi, branch), ("end", record, branches),
        # ("region-end", branch) and ("block-end", block_cfg).
        stack: list = []

        def push_regions(op, loop, cfg, branch):
            branches = []
            for region in reversed(list(op.regions)):
                if op.name in _BRANCH_OPS:
                    region_branch = _Branch(branch)
                    branches.append(region_branch)
                    stack.append(("region-end", region_branch))
                else:
                    region_branch = branch
                blocks = list(region.blocks)
                multi = len(blocks) > 1
                for block in reversed(blocks):
                    stack.append(("block", block, loop, cfg, multi, region_branch))
            return branches

        push_regions(self.func, None, None, None)
        while stack:
            task = stack.pop()
            kind = task[0]
            if kind == "op":
                _, op, loop, cfg, branch = task
                counter += 1
                record = _OpInfo(counter, counter, loop, cfg, branch)
                info[op_key(op)] = record
                ops.append(op)
                if not len(op.regions):
                    post += 1
                    record.post = post
                else:
                    end_task: tuple = ("end", record, [])
                    stack.append(end_task)
                    inner_loop = loop if op.name in NON_LOOP_OPS else op
                    if inner_loop is op:
                        record.op = op
                        record.loop_up = _lifted(info[op_key(loop)] if loop is not None
                                                 else None)
                    end_task[2].extend(push_regions(op, inner_loop, cfg, branch))
            elif kind == "block":
                _, block, loop, cfg, multi, branch = task
                block_cfg = [counter + 1, None, block] if multi else cfg
                if multi:
                    stack.append(("block-end", block_cfg))
                children = [child.operation for child in block.operations]
                for child in reversed(children):
                    stack.append(("op", child, loop, block_cfg, branch))
            elif kind == "end":
                task[1].end = counter
                post += 1
                task[1].post = post
                for region_branch in task[2]:
                    region_branch.op_end = counter
            elif kind == "region-end":
                task[1].region_end = counter
            else:  # block-end
                task[1][1] = counter
        func_record.end = counter

    # -- positions --------------------------------------------------------
    def record(self, op) -> _OpInfo:
        """The numbering record of ``op``."""
        return self.info[op_key(op)]

    def branch_depth(self, op) -> int:
        """How many ``scf.if`` / ``scf.index_switch`` ops enclose ``op``; O(1)."""
        branch = self.info[op_key(op)].branch
        return 0 if branch is None else branch.depth

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

    def outer_loop_without(self, op, value):
        """The outermost loop around ``op`` that does not contain ``value``'s
        definition (a later iteration re-executes ``op`` with the same
        ``value``), or None. O(log depth): the loops around ``op`` that
        contain the definition are the outer ones (binary lifting over
        ``loop_up``)."""
        dpos = self.def_pos(value)
        loop = self.info[op_key(op)].loop
        if loop is None:
            return None
        node = self.info[op_key(loop)]
        if 2 * node.pre < dpos <= 2 * node.end:
            return None
        k = len(node.loop_up) - 1
        while k >= 0:
            if k < len(node.loop_up):
                up = node.loop_up[k]
                if not 2 * up.pre < dpos <= 2 * up.end:
                    node = up
            k -= 1
        return node.op

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

    def exclusive_branches(self, user, op) -> bool:
        """True when ``user`` and ``op`` sit in different regions of one
        ``scf.if`` / ``scf.index_switch`` (one execution of it runs only one
        of them; a loop around it is the ``loop`` rule's business).
        O(log depth): the innermost branch region around ``op`` whose op
        contains ``user`` decides (``user`` outside that region)."""
        upre = self.info[op_key(user.operation)].pre
        record = self.info[op_key(op.operation)]
        if record.branch is None:
            return False
        if upre < record.pre:
            user, op = op, user
            upre, record = record.pre, self.info[op_key(op.operation)]
            if record.branch is None:
                return False
        found = record.branch.containing(upre)
        return found is not None and not found.region_end >= upre

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
        dead after it (their last use is inside ``op``), in the order a
        post-order walk of ``op`` first reads them. All region ops are
        answered by one pass over the uses (:meth:`_live_through_all`)."""
        if self._through is None:
            self._through = self._live_through_all()
        return [value for _, value in sorted(self._through.get(op_key(op.operation), []),
                                             key=lambda pair: pair[0])]

    def _live_through_all(self) -> dict:
        """``{op_key(O): [(first post-order read, value)]}``: a tensor is live
        through ``O`` exactly when ``O`` strictly contains its last user (in
        pre-order) but not its definition, so each value walks up from its
        last user once (linear in the output, not the nesting depth times the
        program)."""
        info = self.info
        through: dict = {}
        seen = set()
        for inner in self.ops:
            for operand in inner.operands:
                if not is_tensor(operand) or operand in seen:
                    continue
                seen.add(operand)
                users = [info[op_key(use.owner)] for use in operand.uses]
                last = max(users, key=lambda record: record.pre)
                dpos = self.def_pos(operand)
                holder = self.ops[last.pre - 1].parent
                while holder is not None:
                    holder = holder.operation
                    if holder.name == "func.func":
                        break
                    record = info[op_key(holder)]
                    if 2 * record.pre < dpos <= 2 * record.end + 1:
                        break
                    first = min(user.post for user in users
                                if record.pre < user.pre <= record.end)
                    through.setdefault(op_key(holder), []).append((first, operand))
                    holder = holder.parent
        return through


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
