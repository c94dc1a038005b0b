"""May-alias classes of tensor values in a ``func.func`` (union-find).

Two tensors are in the same class when they may share storage after
bufferization. The rules:

* views alias their source: ``tensor.extract_slice``, ``expand_shape``,
  ``collapse_shape``, ``reshape``, ``cast``, ``bitcast``;
* destination-style results alias their destination: ``tensor.insert_slice``,
  ``tensor.insert``, ``tensor.scatter``, ``tensor.parallel_insert_slice``,
  every linalg op's result aliases its init;
* ``tdf.call_inplace`` result *i* aliases operand ``inplace[i]``; ``tdf.call``
  results are fresh;
* ``func.call`` of a function with a body in the module: result *j* aliases
  operand *i* when the callee's own analysis puts its returned value *j* in
  argument *i*'s class, and is a constant or of unknown origin when that
  class is; an operand the callee lets escape escapes. The callee's calls
  are judged as unknown ops (one level deep: linear, and no recursion). A
  call of a declaration is an unknown op;
* ``scf.for`` / ``scf.forall`` / ``scf.while``: an iter_arg aliases its init,
  the value yielded for it and the loop result; ``scf.if`` /
  ``scf.index_switch`` / ``scf.execute_region`` results alias what every
  branch yields; branch operands (``cf.br``...) alias the successor's block
  arguments;
* ``tdf.call_opaque`` is a black hole: its tensor operands escape for good
  and its tensor results join the class of every escaped value;
* ``tdf.assume_unaliased`` cuts aliasing: its result starts a fresh, owned
  class (the source itself is still checked for later uses by the passes);
* an unknown op with tensor results: results alias every tensor operand
  (and region arguments / yielded values, for ops with regions).

Each class also records why its storage is not the function's to overwrite:
``escaped`` (reached an opaque call), and ``not owned`` with a witness — a
non-donated function argument, a constant, or a tensor of unknown origin
(``bufferization.to_tensor``, an unknown op without tensor operands).

``AliasAnalysis(func, defer_inplace=True)`` leaves ``tdf.call_inplace``
results out so that a pass walking in program order can ``union`` them as it
goes (``tdf-insert-inplace`` does); the test pass ``test-tdf-alias`` uses the
complete analysis and annotates:

* every op with tensor results: ``tdf.alias_class = array<i64: ...>`` (one
  class number per result, ``-1`` for a non-tensor result; numbers are given
  in order of first appearance in the function, arguments first);
* ops with tensor block arguments (functions, loops): ``tdf.arg_alias_class``
  for the arguments of their first region's entry block;
* ``tdf.escaped`` (unit) on ops whose results may alias an escaped value.

Before::

    %s = tensor.extract_slice %t[0] [2] [1] : tensor<4xf32> to tensor<2xf32>
    %u = tdf.call @exp(%s) : (tensor<2xf32>) -> tensor<2xf32>

After ``test-tdf-alias``::

    %s = tensor.extract_slice %t[0] [2] [1] {tdf.alias_class = array<i64: 0>} : ...
    %u = tdf.call @exp(%s) {tdf.alias_class = array<i64: 1>} : ...
"""

from __future__ import annotations

import heapq
from typing import Any

from mlir import ir

from ...vocabulary import ASSUME_UNALIASED, DEST_OPERAND, DONATE_ATTR, TENSOR_VIEW_OPS
from ..ir_utils import function_bodies, function_type, is_tensor
from ..registry import PassContext, register_pass

__all__ = ["AliasAnalysis", "FRESH_OPS", "CONSTANT_OPS"]

# Ops whose tensor results are fresh, owned storage.
FRESH_OPS = frozenset({
    "tensor.empty", "tensor.concat", "tensor.pad", "tensor.generate",
    "tensor.splat", "tensor.from_elements", "tdf.call", "bufferization.alloc_tensor",
    ASSUME_UNALIASED,
})
CONSTANT_OPS = frozenset({"arith.constant", "tensor.constant"})
# Region ops whose results alias the values their regions yield.
_BRANCH_OPS = frozenset({"scf.if", "scf.index_switch", "scf.execute_region"})
_BLACK_HOLE = "<escaped>"
# Terminators and ops that relate no tensors by themselves.
_NO_ALIASING = frozenset({"func.return", "scf.yield", "scf.condition", "func.func",
                          "tensor.yield", "scf.in_parallel"})


def _arg_attrs(func) -> list[dict]:
    count = len(func.regions[0].blocks[0].arguments)
    if "arg_attrs" not in func.attributes:
        return [{} for _ in range(count)]
    return [{n.name: n.attr for n in ir.DictAttr(d)} for d in ir.ArrayAttr(func.attributes["arg_attrs"])]


class _Class:
    __slots__ = ("members", "escaped", "not_owned", "max_use", "pending", "active", "floor")

    def __init__(self):
        self.members = {}  # value -> None (ordered; O(1) forget)
        self.escaped = False
        self.not_owned = None  # (witness value, reason) or None
        self.max_use = -1  # latest read of a member (AliasAnalysis.last_read)
        # For live_max: members with a use, as heaps. ``pending``:
        # (definition position, node, last use), not yet defined at the
        # queries so far; ``active``: (-last use, node), defined before the
        # latest query; entries whose last use is <= ``floor`` were dropped.
        self.pending = []
        self.active = []
        self.floor = -1


class AliasAnalysis:
    """Union-find may-alias classes over the tensor values of one function.

    ``order`` (a :class:`~tdf.passes.analysis.liveness.Liveness`) is optional; when
    given, each class tracks the latest read of any of its members
    (``max_use``, :meth:`last_read`), which makes the common liveness query
    O(1).
    """

    def __init__(self, func, order=None, defer_inplace: bool = False,
                 summarize_calls: bool = True):
        self.func = func.operation
        self.order = order
        self.defer_inplace = defer_inplace
        self.summarize_calls = summarize_calls
        self._symbols: Any = None  # the module's symbol table, on the first func.call
        self._summaries: dict = {}  # callee name -> summary (None: unknown)
        # Union-find over node numbers; ``_node`` maps a value to its node.
        # A value handle hashes by the address of the IR value, which a value
        # created after an erasure may reuse: ``forget`` drops the erased
        # value's entry (its node stays, keeping the class structure), so a
        # new value at that address gets a node of its own instead of
        # silently joining the erased one's class.
        self._node: dict = {}
        self._value_of: dict = {}  # node -> value, for the values not forgotten
        self._parent: list = []
        self._class: dict = {}  # root node -> _Class
        self.assumed: dict = {}  # assume_unaliased result -> source
        self._build()

    # -- union-find -------------------------------------------------------
    def _add(self, value) -> int:
        node = self._node.get(value)
        if node is not None:
            return node
        node = self._node[value] = len(self._parent)
        self._value_of[node] = value
        self._parent.append(node)
        cls = _Class()
        cls.members[value] = None
        if self.order is not None and value is not _BLACK_HOLE:
            for use in value.uses:
                pre = self.last_read(value, use.owner)
                if pre > cls.max_use:
                    cls.max_use = pre
            if cls.max_use >= 0:
                cls.pending.append((self.order.def_pos(value), node, cls.max_use))
        if value is _BLACK_HOLE:
            cls.escaped = True
        self._class[node] = cls
        return node

    def find(self, value) -> int:
        """The representative (a node number) of ``value``'s class."""
        node = self._add(value)
        parent = self._parent
        root = node
        while parent[root] != root:
            root = parent[root]
        while parent[node] != root:  # path compression
            parent[node], node = root, parent[node]
        return root

    def union(self, a, b) -> None:
        """Puts ``a`` and ``b`` (and their classes) in one class."""
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return
        ca, cb = self._class[ra], self._class[rb]
        if len(ca.members) < len(cb.members):
            ra, rb, ca, cb = rb, ra, cb, ca
        self._parent[rb] = ra
        ca.members.update(cb.members)
        ca.escaped = ca.escaped or cb.escaped
        ca.not_owned = ca.not_owned or cb.not_owned
        ca.max_use = max(ca.max_use, cb.max_use)
        for item in cb.pending:
            heapq.heappush(ca.pending, item)
        for item in cb.active:
            heapq.heappush(ca.active, item)
        ca.floor = max(ca.floor, cb.floor)
        del self._class[rb]

    def forget(self, value) -> None:
        """Drops ``value`` (about to be erased) from its class's member list
        and from the value-to-node map; its node stays in the union-find so
        that the class structure is intact. Call it before erasing the op:
        an erased value must never be queried again."""
        if value not in self._node:
            return
        cls = self._class[self.find(value)]
        cls.members.pop(value, None)
        del self._value_of[self._node.pop(value)]

    def last_read(self, value, user) -> int:
        """The position up to which the read of ``value`` by ``user`` may
        happen: ``user``'s pre-order number or, when ``user`` sits in a loop
        that does not contain ``value``'s definition, the last number of the
        outermost such loop (every iteration reads the same ``value``, so
        it is live through the whole loop). An op numbered ``pre`` inside
        that loop is then never past the read (``pre <=`` the position):
        classes whose members are read inside loops keep the O(1) bounds."""
        order = self.order
        record = order.record(user)
        if record.loop is None:
            return record.pre
        loop = order.outer_loop_without(user, value)
        return record.pre if loop is None else order.record(loop).end

    def note_use(self, value, user) -> None:
        """``value`` got a new use by the op ``user`` (a rewrite set an
        operand): the class bounds take it into account."""
        pre = self.last_read(value, user.operation)
        node = self.find(value)
        cls = self._class[node]
        cls.max_use = max(cls.max_use, pre)
        if self.order is not None:
            heapq.heappush(cls.pending, (self.order.def_pos(value), self._node[value], pre))

    def _mark(self, value, reason: str) -> None:
        cls = self._class[self.find(value)]
        if cls.not_owned is None:
            cls.not_owned = (value, reason)

    def escape(self, value) -> None:
        """``value`` reached an opaque call: it joins the black hole."""
        self.union(_BLACK_HOLE, value)

    # -- queries ----------------------------------------------------------
    def same_class(self, a, b) -> bool:
        return self.find(a) == self.find(b)

    def members(self, value) -> list:
        """Every tensor value that may share storage with ``value`` (itself included)."""
        return [m for m in self._class[self.find(value)].members if m is not _BLACK_HOLE]

    def escaped(self, value) -> bool:
        """True when ``value`` may share storage with a value that reached an
        opaque call (or is the result of one)."""
        return self._class[self.find(value)].escaped

    def not_owned(self, value):
        """``(witness, reason)`` when ``value``'s storage may belong to someone
        else (a non-donated argument, a constant, unknown origin), else None."""
        return self._class[self.find(value)].not_owned

    def max_use(self, value) -> int:
        """The latest read (:meth:`last_read`) of any member of ``value``'s
        class."""
        return self._class[self.find(value)].max_use

    def live_max(self, value, pre: int):
        """An upper bound of the latest read (:meth:`last_read`, recorded
        when the member joined) of the members of ``value``'s class defined
        before the op numbered ``pre`` (``Liveness.def_pos < 2 * pre``), -1
        when none has a use; None when unknown (a query earlier than one
        already answered for this class: the caller scans the members).
        Amortized O(log n) per member over queries in program order, so a
        pass checking each op in turn is not quadratic in the class size."""
        cls = self._class[self.find(value)]
        if pre < cls.floor:
            return None
        pending, active = cls.pending, cls.active
        limit = 2 * pre
        while pending and pending[0][0] < limit:
            _, node, last = heapq.heappop(pending)
            heapq.heappush(active, (-last, node))
        while active and -active[0][0] <= pre:
            heapq.heappop(active)
            cls.floor = pre
        return -active[0][0] if active else -1

    def live_members(self, value, pre: int):
        """The members (not forgotten) of ``value``'s class defined before the
        op numbered ``pre`` whose recorded latest read is after it, in no
        particular order; None when unknown (see :meth:`live_max`). Costs
        the number of such members (a walk of the heap pruned at ``pre``)."""
        if self.live_max(value, pre) is None:
            return None
        active = self._class[self.find(value)].active
        found, stack = [], [0] if active else []
        while stack:
            i = stack.pop()
            neg, node = active[i]
            if -neg <= pre:
                continue
            member = self._value_of.get(node)
            if member is not None:
                found.append(member)
            stack.extend(k for k in (2 * i + 1, 2 * i + 2) if k < len(active))
        return found

    def class_ids(self) -> dict:
        """Dense class numbers (first appearance order) for every value seen."""
        ids: dict = {}
        out: dict = {}
        for value in list(self._node):
            if value is _BLACK_HOLE:
                continue
            root = self.find(value)
            if root not in ids:
                ids[root] = len(ids)
            out[value] = ids[root]
        return out

    # -- construction -----------------------------------------------------
    def _build(self) -> None:
        func = self.func
        entry = func.regions[0].blocks[0]
        for arg, attrs in zip(entry.arguments, _arg_attrs(func)):
            if not is_tensor(arg):
                continue
            self._add(arg)
            if DONATE_ATTR not in attrs:
                self._mark(arg, "argument")
        self._add(_BLACK_HOLE)

        def visit(op):
            self._visit(op.operation)
            return ir.WalkResult.ADVANCE

        for block in func.regions[0].blocks:
            for op in block.operations:
                op.operation.walk(visit, ir.WalkOrder.PRE_ORDER)

    def _tensors(self, values):
        return [v for v in values if is_tensor(v)]

    def _visit(self, op) -> None:
        results = self._tensors(op.results)
        for region in op.regions:
            for block in region.blocks:
                for arg in block.arguments:
                    if is_tensor(arg):
                        self._add(arg)
        for result in results:
            self._add(result)
        if not self._relate_leaf(op, results) and not self._relate_regions(op):
            if op.name in _NO_ALIASING or not (results or op.regions):
                return
            self._unknown(op, results)

    def _relate_leaf(self, op, results) -> bool:
        """The rules of ops without regions (views, destinations, calls,
        fresh values, constants, linalg); False when ``op`` is none of them."""
        name = op.name
        if name in TENSOR_VIEW_OPS:
            self.union(op.results[0], op.operands[0])
        elif name in DEST_OPERAND:
            # tensor.parallel_insert_slice has no result: it writes into a
            # shared_outs block argument of the enclosing scf.forall, which
            # already aliases the loop's init and result (see _loop).
            if len(op.results):
                self.union(op.results[0], op.operands[DEST_OPERAND[name]])
        elif name == ASSUME_UNALIASED:
            self.assumed[op.results[0]] = op.operands[0]
        elif name == "tdf.call_inplace":
            if not self.defer_inplace:
                self._relate_inplace_call(op)
        elif name == "tdf.call_opaque":
            for value in self._tensors(op.operands) + results:
                self.escape(value)
        elif name == "func.call":
            return self._relate_call(op, results)
        elif name in FRESH_OPS:
            pass
        elif name in CONSTANT_OPS:
            for result in results:
                self._mark(result, "constant")
        elif name.startswith("linalg."):
            self._relate_linalg(op)
        else:
            return False
        return True

    def _relate_inplace_call(self, op) -> None:
        """A ``tdf.call_inplace`` result aliases the operand it is computed in."""
        indices = list(ir.DenseI64ArrayAttr(op.attributes["inplace_indices"]))
        for result, index in zip(op.results, indices):
            if index >= 0:
                self.union(result, op.operands[index])

    def _summary(self, name: str):
        """Per result of function ``@name``: ``(arguments its returned value
        may alias, "constant" / "unknown origin" / None, escaped)``, and the
        escaped arguments, from the callee's own analysis (its calls judged
        as unknown ops); None for a declaration or a missing symbol."""
        if name in self._summaries:
            return self._summaries[name]
        summary = None
        if self._symbols is None:
            try:
                self._symbols = ir.SymbolTable(self.func.parent)
            except (TypeError, ValueError, RuntimeError, AttributeError):
                self._symbols = {}
        try:
            callee = self._symbols[name].operation
        except (KeyError, IndexError, TypeError):
            callee = None
        if callee is not None and callee.name == "func.func" and len(callee.regions[0].blocks):
            inner = AliasAnalysis(callee, summarize_calls=False)
            args = list(callee.regions[0].blocks[0].arguments)
            returns = [op for block in callee.regions[0].blocks
                       for op in block.operations if op.operation.name == "func.return"]
            results = []
            for j in range(len(function_type(callee).results)):
                aliases, reason, escaped = set(), None, False
                for ret in returns:
                    value = ret.operands[j]
                    if not is_tensor(value):
                        continue
                    aliases |= {i for i, a in enumerate(args)
                                if is_tensor(a) and inner.same_class(a, value)}
                    witness = inner.not_owned(value)
                    if witness is not None and witness[1] != "argument":
                        reason = reason or witness[1]
                    escaped = escaped or inner.escaped(value)
                results.append((sorted(aliases), reason, escaped))
            escaping = [i for i, a in enumerate(args) if is_tensor(a) and inner.escaped(a)]
            summary = (results, escaping)
        self._summaries[name] = summary
        return summary

    def _relate_call(self, op, results) -> bool:
        """``func.call`` by the callee's summary (:meth:`_summary`); False
        (an unknown op) without one."""
        if not self.summarize_calls:
            return False
        summary = self._summary(ir.FlatSymbolRefAttr(op.attributes["callee"]).value)
        if summary is None or len(summary[0]) != len(op.results):
            return False
        per_result, escaping = summary
        operands = list(op.operands)
        for i in escaping:
            self.escape(operands[i])
        for result, (aliases, reason, escaped) in zip(op.results, per_result):
            if not is_tensor(result):
                continue
            for i in aliases:
                self.union(result, operands[i])
            if reason is not None:
                self._mark(result, reason)
            if escaped:
                self.escape(result)
        return True

    def _relate_linalg(self, op) -> None:
        """A linalg op's tensor result aliases its init."""
        count = len(op.results)
        inits = list(op.operands)[len(op.operands) - count:] if count else []
        for result, init in zip(op.results, inits):
            if is_tensor(result) and is_tensor(init):
                self.union(result, init)

    def _relate_regions(self, op) -> bool:
        """The rules of loops, branches and branch terminators; False when
        ``op`` is none of them."""
        name = op.name
        if name == "scf.for":
            self._loop(op, list(op.operands)[3:], list(op.regions[0].blocks[0].arguments)[1:])
        elif name == "scf.forall":
            outs = self._tensors(op.operands)
            args = self._tensors(op.regions[0].blocks[0].arguments)
            self._loop(op, outs, args)
        elif name == "scf.while":
            self._while(op)
        elif name in _BRANCH_OPS:
            for region in op.regions:
                for block in region.blocks:
                    term = _terminator(block)
                    if term is not None and term.name in ("scf.yield",):
                        for value, result in zip(term.operands, op.results):
                            self._union_tensors(value, result)
        elif len(op.successors):
            operands = self._tensors(op.operands)
            for succ in op.successors:
                for arg in succ.arguments:
                    if is_tensor(arg):
                        for value in operands:
                            self.union(arg, value)
        else:
            return False
        return True

    def _while(self, op) -> None:
        before = op.regions[0].blocks[0]
        after = op.regions[1].blocks[0]
        inits = list(op.operands)
        yielded = list(_terminator(after).operands)
        for init, arg, value in zip(inits, before.arguments, yielded):
            self._union_tensors(init, arg, value)
        cond = list(_terminator(before).operands)[1:]
        for value, arg, result in zip(cond, after.arguments, op.results):
            self._union_tensors(value, arg, result)

    def _union_tensors(self, *values) -> None:
        tensors = [v for v in values if v is not None and is_tensor(v)]
        for other in tensors[1:]:
            self.union(tensors[0], other)

    def _loop(self, op, inits, args) -> None:
        body = op.regions[0].blocks[0]
        term = _terminator(body)
        yielded = list(term.operands) if term is not None and term.name == "scf.yield" else []
        for k, (init, arg) in enumerate(zip(inits, args)):
            group = [init, arg]
            if k < len(yielded):
                group.append(yielded[k])
            if k < len(op.results):
                group.append(op.results[k])
            self._union_tensors(*group)

    def _unknown(self, op, results) -> None:
        """Conservative: results, region arguments and yielded values alias
        every tensor operand; without tensor operands, unknown origin."""
        related = self._tensors(op.operands)
        for region in op.regions:
            for block in region.blocks:
                related += self._tensors(block.arguments)
                term = _terminator(block)
                if term is not None:
                    related += self._tensors(term.operands)
        related += results
        if not self._tensors(op.operands):
            for result in results:
                self._mark(result, "unknown origin")
        self._union_tensors(*related)


def _terminator(block):
    ops = block.operations
    if len(ops) == 0:
        return None
    return ops[len(ops) - 1].operation


def annotate_aliases(func) -> None:
    """Sets ``tdf.alias_class`` / ``tdf.arg_alias_class`` / ``tdf.escaped``."""
    func = func.operation
    analysis = AliasAnalysis(func)
    ids = analysis.class_ids()

    def ids_of(values):
        return ir.DenseI64ArrayAttr.get([ids.get(v, -1) if is_tensor(v) else -1 for v in values])

    def visit(op):
        op = op.operation
        if len(op.results) and any(is_tensor(r) for r in op.results):
            op.attributes["tdf.alias_class"] = ids_of(op.results)
            if any(is_tensor(r) and analysis.escaped(r) for r in op.results):
                op.attributes["tdf.escaped"] = ir.UnitAttr.get()
        if len(op.regions) and len(op.regions[0].blocks):
            args = op.regions[0].blocks[0].arguments
            if any(is_tensor(a) for a in args):
                op.attributes["tdf.arg_alias_class"] = ids_of(args)
        return ir.WalkResult.ADVANCE

    func.walk(visit, ir.WalkOrder.PRE_ORDER)


@register_pass(
    "test-tdf-alias",
    "Annotate ops with the may-alias classes of their tensor results (tdf.alias_class)",
)
def test_alias(op, ctx: PassContext) -> None:
    """Test pass: annotates alias classes; no options.

    Before::

        %v = tensor.expand_shape %t [[0, 1]] output_shape [2, 2] : tensor<4xf32> into tensor<2x2xf32>

    After::

        %v = tensor.expand_shape %t [[0, 1]] output_shape [2, 2]
               {tdf.alias_class = array<i64: 0>} : tensor<4xf32> into tensor<2x2xf32>

    where ``0`` is also the class of ``%t`` (see ``tdf.arg_alias_class`` on the
    function when ``%t`` is an argument).
    """
    for func in function_bodies(op):
        annotate_aliases(func)
