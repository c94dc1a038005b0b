"""Step 6 of ``tdf-insert-inplace``: each donated argument's paired result
(:mod:`tdf.passes.analysis.donation`, JAX's pairing) is computed in the
argument's buffer, when that is safe.

The returned value is followed back through the ops that compute into
their destination (a linalg op whose payload reads its init, the
destination of ``tensor.insert_slice``/``insert``/``scatter``, the in-place
operand of ``tdf.call_inplace``, both branches of ``scf.if``) to the op
that first writes that storage, the **cut** (through ``tensor.expand_shape``/
``collapse_shape`` too: a linalg op computing the result in another shape
takes the operand that is the argument reshaped to its init's type, as
for an optimizer's ``g + decay * t`` on a bias computed as ``1xN`` after
reshape propagation):

* a linalg op whose payload does not read its init: the init becomes the
  argument (``outs(%g)`` → ``outs(%nu)``: Adam's ``nu`` no longer lands in
  the dead temporary ``%g`` that step 4 picked);
* a single-result ``tdf.call``: it becomes ``tdf.call_inplace @k(%in...,
  %arg) inplace [n]`` (the argument is the kernel's output parameter);
* a ``tensor.empty`` (the root of a chain of inserts): every use of it
  becomes the argument.

The cut is taken only when the argument's old contents are dead there:
no value that may share its storage (an earlier result computed in it
included) is used after the cut (loops, branches and the function's
results count, as for every in-place rule), the cut reads the argument only
element by element (an element-wise linalg op reading it with the identity
map; anything else, a call or a broadcast, is rejected) and the argument
never reached an opaque call. A rank-0 result that cannot be cut (a scalar
computed by ``arith`` ops and wrapped by ``tensor.from_elements``: a
``TrainState.step``, an optax ``count``, a ``cache_index``) is stored into
the argument right before ``func.return`` (``tensor.insert %v into
%arg[]``, a ``memref.store`` once bufferized), when no other result may
share the argument's storage.

One-Shot Bufferize's analysis is the judge: pairs it already finds in place
are left alone, and a rewrite after which it does not find the result
equivalent to the argument is undone. So the output keeps passing
``tdf-verify-inplace{strict}``: the argument is written only where it is
dead.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mlir import ir
from mlir.dialects import tensor

from ..dialects import tdf as tdf_d
from ..vocabulary import DEST_OPERAND
from .analysis.donation import donation_pairs, one_shot_verdicts, returns_of
from .analysis.inplace import InplaceAnalysis, namer
from .analysis.kernels import identity_operands, is_elementwise_linalg, reads_output
from .ir_utils import (
    ancestor_in,
    copy_attributes,
    function_bodies,
    function_type,
    identity_layout,
    is_tensor,
    lookup_symbol,
    op_key,
    sym_name,
)
from .registry import PassContext

__all__ = ["DonationPlanner", "pair_donations", "explain_pair"]

# Users of a chain's tensor.empty that may take the argument instead.
_EMPTY_USERS = frozenset({"tensor.extract_slice", "tensor.insert_slice", "tensor.insert",
                          "tensor.scatter", "tensor.dim", "tensor.expand_shape",
                          "tensor.collapse_shape"})


@dataclass
class _Applied:
    """One rewritten pair: how to undo it, and ops to erase once unused."""

    function: str
    result: int
    argument: int
    undo: list = field(default_factory=list)
    garbage: list = field(default_factory=list)


def _result_number(value) -> int:
    return ir.OpResult(value).result_number


def _terminator(block):
    ops = list(block.operations)
    return ops[-1].operation if ops else None


def _step(op, value):
    """One step back from ``value``, a result of ``op``: the value ``op``
    updates (its destination), a cut site (a tuple), or why not (a list)."""
    name = op.name
    if name == "tensor.empty":
        return ("empty", op)
    k = _result_number(value)
    if name == "tdf.call":
        if len(op.results) != 1:
            return ["it is a result of ", op, ", a call with several results"]
        return ("call", op)
    if name.startswith("linalg.") and len(op.operands) >= len(op.results):
        index = len(op.operands) - len(op.results) + k
        if op.operands[index].type != value.type:
            return ["it is computed by ", op, ", whose init has another type"]
        if not reads_output(op, index):
            return ("init", op, index)
        return op.operands[index]
    if name in DEST_OPERAND and k == 0:
        return op.operands[DEST_OPERAND[name]]
    if name == "tdf.call_inplace":
        index = list(ir.DenseI64ArrayAttr(op.attributes["inplace_indices"]))[k]
        if index < 0:
            return ["it is a fresh result of ", op, ", a call with several results"]
        return op.operands[index]
    return ["it is computed by ", op, ", which cannot compute into a given buffer"]


#: Views that only regroup dimensions: the result is the operand's storage
#: in the same order (One-Shot Bufferize: equivalent buffers).
_RESHAPES = frozenset({"tensor.collapse_shape", "tensor.expand_shape"})


def _reshape_of(value, arg) -> bool:
    """Is ``value`` ``arg`` seen through reshapes only (its storage, in
    order)?"""
    while value != arg:
        owner = value.owner
        if isinstance(owner, ir.Block) or owner.operation.name not in _RESHAPES:
            return False
        value = owner.operation.operands[0]
    return True


def _view_operand(op, arg, type_):
    """An operand of ``op`` that is ``arg`` reshaped to ``type_`` (the
    storage an init of that type takes when the result reaches the return
    through reshapes), or None."""
    for operand in op.operands:
        if operand.type == type_ and _reshape_of(operand, arg):
            return operand
    return None


def _walk(value, arg, sites):
    """Follows ``value`` back to its cuts (appended to ``sites``), into both
    branches of each ``scf.if`` (a worklist: deep nesting cannot exhaust
    Python's recursion limit) and through reshapes (a cut reached through
    one takes the operand that is ``arg`` in the cut's shape: a bias
    gradient ``g + decay * t`` computed as ``1xN`` and collapsed); a
    message when it cannot, None when done."""
    work, steps = [(value, None)], 0
    while work:
        value, reshape = work.pop()
        while value != arg:
            steps += 1
            if steps > 4096:
                return ["its chain of updates is too long"]
            owner = value.owner
            if isinstance(owner, ir.Block):
                return ["it is ", value, ", a block argument that is not ", arg]
            op = owner.operation
            if op.name == "scf.if":
                k = _result_number(value)
                work += [(_terminator(region.blocks[0]).operands[k], reshape)
                         for region in op.regions]
                break
            if op.name in _RESHAPES:
                value, reshape = op.operands[0], op
                continue
            step = _step(op, value)
            if isinstance(step, tuple):
                if reshape is not None and value.type != arg.type:
                    view = _view_operand(op, arg, value.type) if step[0] == "init" else None
                    if view is None:
                        return ["it is computed by ", op, " in another shape (", reshape, ")"]
                    step = (*step, view)
                sites.append(step)
                break
            if isinstance(step, list):
                return step
            value = step
    return None


class DonationPlanner:
    """Where paired results of one function (a single-block ``func.func``)
    can be cut into their donated argument (see the module docstring)."""

    def __init__(self, func, module_op=None):
        self.func = func.operation
        self.module_op = module_op
        self.block = self.func.regions[0].blocks[0]
        self.analysis = InplaceAnalysis(self.func)
        for op in self.analysis.liveness.ops:
            if op.name == "tdf.call_inplace":
                self.analysis.note_inplace(op)
        self.ret = _terminator(self.block)

    # -- planning -----------------------------------------------------------
    def plan(self, result: int, argument: int):
        """``(sites, None)``: the cuts that put result ``result`` in donated
        argument ``argument`` (empty: nothing to do), or ``(None, why)``
        (a message as a list of strings and IR objects)."""
        sites, why, _ = self._plan(result, argument)
        return sites, why

    def _plan(self, result: int, argument: int):
        """:meth:`plan`, and the cut op whose only problem is a later read
        of the argument (a candidate for :meth:`move_target`), or None."""
        arg = self.block.arguments[argument]
        value = self.ret.operands[result]
        alias = self.analysis.alias
        if alias.escaped(arg):
            return None, [arg, " may alias a value passed to an opaque call"], None
        sites: list = []
        why = _walk(value, arg, sites)
        blocker = None
        if why is None:
            why, blocker = self._check_sites(sites, arg)
        if why is None:
            return sites, None, None
        if ir.RankedTensorType(arg.type).rank == 0:
            store_why = self._store_problem(result, arg)
            if store_why is None:
                return [("store", result)], None, None
        return None, why, blocker

    def has_work(self, result: int, argument: int) -> bool:
        """Is there a cut to try for this pair, now or after a move?"""
        return bool(self.plan(result, argument)[0]) \
            or self.move_target(result, argument) is not None

    def move_target(self, result: int, argument: int):
        """``(op, after)`` when result ``result`` could be cut into donated
        argument ``argument`` but for reads of the argument after the cut
        ``op``, and ``op`` may move right after ``after`` (the last op of its
        block that reads the argument, or a value that may share its
        storage): the results of ``op`` are used only after ``after``; else
        None. (XLA schedules such an update after the last read, too.)"""
        _, _, op = self._plan(result, argument)
        if op is None:
            return None
        arg = self.block.arguments[argument]
        liveness, alias = self.analysis.liveness, self.analysis.alias
        record = liveness.record(op)
        if record.loop is not None or record.cfg_block is not None:
            return None
        block, start = op.block, record.pre
        last = None
        for member in alias.members(arg):
            if member != arg and liveness.defined_after(member, op):
                continue
            for use in member.uses:
                user = use.owner.operation
                if user == op:
                    continue
                anchor = ancestor_in(user, block)
                if anchor is None:
                    return None
                pre = liveness.pre(anchor)
                if pre > start and (last is None or pre > liveness.pre(last)):
                    last = anchor
        if last is None or last == _terminator(block):
            return None
        for value in op.results:
            for use in value.uses:
                anchor = ancestor_in(use.owner.operation, block)
                if anchor is None or liveness.pre(anchor) <= liveness.pre(last):
                    return None
        return op, last

    def _check_sites(self, sites, arg):
        """``(why, blocker)``: the first problem of the cuts (None: none), and
        the cut op when that problem is only a later read (see
        :meth:`move_target`)."""
        seen = set()
        for site in sites:
            kind, op = site[0], site[1]
            if kind == "empty":
                if op_key(op) in seen:
                    continue
                seen.add(op_key(op))
                why = self._empty_problem(op, arg)
                if why is not None:
                    return why, None
                continue
            if kind == "init":
                why = self._reads_problem(op, arg, site[2])
            else:
                why = self._call_problem(op) or self._reads_problem(op, arg, None)
            if why is not None:
                return why, None
            why = self._dead_problem(op, arg)
            if why is not None:
                return why, op if len(sites) == 1 else None
        return None, None

    def _reads_problem(self, op, arg, init_index):
        """``op`` writes ``arg``'s storage: it may read it only element by
        element (an element-wise linalg op, the identity map, the type of the
        storage it writes)."""
        alias = self.analysis.alias
        identity = None
        if init_index is not None and is_elementwise_linalg(op):
            identity = identity_operands(op)
        for j, operand in enumerate(op.operands):
            if j == init_index or not is_tensor(operand) or not alias.same_class(operand, arg):
                continue
            if identity is not None and identity[j] \
                    and operand.type == op.operands[init_index].type:
                continue
            return [op, " reads ", operand, ", which may share storage with ", arg,
                    ", other than element by element"]
        return None

    def _dead_problem(self, op, arg):
        alias, liveness = self.analysis.alias, self.analysis.liveness
        members = [m for m in alias.members(arg) if m != arg]
        live = liveness.dead_after(arg, op, members)
        if live is None:
            return None
        if live.reason == "loop":
            return [op, " runs in ", live.user, ", whose next iteration reads ", arg, " again"]
        if live.reason == "cfg":
            return [arg, " may be used in another block of the control-flow graph"]
        if live.value == arg:
            return [arg, " is still used by ", live.user, " after ", op]
        return [arg, " may share storage with ", live.value, ", which is still used by ",
                live.user, " after ", op]

    def _call_problem(self, op):
        if self.module_op is None:
            return ["no module to look up the kernel of ", op, " in"]
        callee = ir.FlatSymbolRefAttr(op.attributes["callee"]).value
        kernel = lookup_symbol(self.module_op, callee)
        if kernel is None or kernel.name != "func.func":
            return ["the kernel of ", op, " is not a func.func"]
        params = list(function_type(kernel).inputs)
        out = ir.RankedTensorType(op.results[0].type)
        param = params[-1] if len(params) == len(op.operands) + 1 else None
        if not isinstance(param, ir.MemRefType) or list(param.shape) != list(out.shape) \
                or param.element_type != out.element_type or not identity_layout(param):
            return ["the output parameter of the kernel of ", op,
                    " cannot take the argument's buffer"]
        return None

    def _empty_problem(self, empty, arg):
        users = [(u.owner.operation, u.operand_number) for u in empty.results[0].uses]
        liveness = self.analysis.liveness
        if not users:
            return ["it is an unused tensor.empty"]
        first = min((u for u, _ in users), key=liveness.pre)
        for user, index in users:
            linalg_init = (user.name.startswith("linalg.")
                           and index >= len(user.operands) - len(user.results))
            if not linalg_init and user.name not in _EMPTY_USERS:
                return [empty, " is also used by ", user, ", which might keep or expose it"]
            why = self._reads_problem(user, arg, index if user == first and linalg_init else None)
            if why is not None:
                return why
        return self._dead_problem(first, arg)

    def _store_problem(self, result, arg):
        alias = self.analysis.alias
        for k, other in enumerate(self.ret.operands):
            if k != result and is_tensor(other) and alias.same_class(other, arg):
                return ["result #", str(k), " (", other, ") may share storage with ", arg]
        return self._dead_problem(self.ret, arg)

    # -- rewriting ------------------------------------------------------------
    def apply(self, sites, result: int, argument: int) -> _Applied:
        """Rewrites the cuts of :meth:`plan`; the returned record undoes them."""
        arg = self.block.arguments[argument]
        done = _Applied(sym_name(self.func), result, argument)
        handled = set()
        for site in sites:
            kind = site[0]
            if kind == "init":
                op, index = site[1], site[2]
                old = op.operands[index]
                op.operands[index] = site[3] if len(site) > 3 else arg
                done.undo.append(("operand", op, index, old))
                if not isinstance(old.owner, ir.Block) and old.owner.operation.name == "tensor.empty":
                    done.garbage.append(old.owner.operation)
            elif kind == "empty":
                empty = site[1]
                if op_key(empty) in handled:
                    continue
                handled.add(op_key(empty))
                for user, index in [(u.owner.operation, u.operand_number)
                                    for u in empty.results[0].uses]:
                    user.operands[index] = arg
                    done.undo.append(("operand", user, index, empty.results[0]))
                done.garbage.append(empty)
            elif kind == "call":
                done.undo.append(("call", self._call_into(site[1], arg)))
            else:
                self._store(done, result, arg)
        return done

    def _call_into(self, call, arg):
        operands = list(call.operands)
        with ir.InsertionPoint(call), call.location:
            new = tdf_d.CallInplaceOp([call.results[0].type], call.attributes["callee"],
                                      operands + [arg],
                                      ir.DenseI64ArrayAttr.get([len(operands)])).operation
        copy_attributes(call, new)
        call.results[0].replace_all_uses_with(new.results[0])
        call.erase()
        return new

    def _store(self, done, result, arg):
        ret = self.ret
        value = ret.operands[result]
        owner = value.owner
        created = []
        location = ret.location if isinstance(owner, ir.Block) else owner.operation.location
        with ir.InsertionPoint(ret), location:
            if (not isinstance(owner, ir.Block) and owner.operation.name == "tensor.from_elements"
                    and len(owner.operation.operands) == 1):
                scalar = owner.operation.operands[0]
                done.garbage.append(owner.operation)
            else:
                extract = tensor.ExtractOp(value, [])
                created.append(extract.operation)
                scalar = extract.result
            insert = tensor.InsertOp(scalar, arg, [])
            created.insert(0, insert.operation)
        ret.operands[result] = insert.result
        # Undone in reverse: the return reads its old value again before the
        # created ops, which it reads now, are erased.
        done.undo.append(("erase", created))
        done.undo.append(("operand", ret, result, value))


def _undo(applied: _Applied) -> None:
    for action in reversed(applied.undo):
        if action[0] == "operand":
            _, op, index, old = action
            op.operands[index] = old
        elif action[0] == "erase":
            for op in action[1]:
                op.erase()
        else:
            call = action[1]
            operands = list(call.operands)[:-1]
            with ir.InsertionPoint(call), call.location:
                new = tdf_d.CallOp([call.results[0].type], call.attributes["callee"],
                                   operands).operation
            copy_attributes(call, new, skip=("callee", "inplace_indices"))
            call.results[0].replace_all_uses_with(new.results[0])
            call.erase()


def _format(func, parts) -> str:
    name = namer(func)
    return "".join(p if isinstance(p, str) else name(p) for p in parts)


def _candidates(module_op, only=None):
    """``(func, [(result, argument)])`` for every single-block function with
    paired results (``only``: that function alone)."""
    found = []
    for func in function_bodies(module_op):
        func = func.operation
        if func.name != "func.func" or len(func.regions[0].blocks) != 1:
            continue
        if only is not None and op_key(func) != op_key(only.operation):
            continue
        pairs = [(r, a) for r, a in enumerate(donation_pairs(func)) if a >= 0]
        if pairs and len(returns_of(func)) == 1:
            found.append((func, pairs))
    return found


def _misses(candidates, verdicts):
    """The pairs One-Shot does not find in place, per candidate function
    (functions missing from ``verdicts`` are left out)."""
    todo = []
    for func, pairs in candidates:
        if sym_name(func) not in verdicts:
            continue
        equivalent = verdicts[sym_name(func)][0] or []
        missed = [(r, a) for r, a in pairs if r >= len(equivalent) or equivalent[r] != a]
        if missed:
            todo.append((func, missed))
    return todo


def _copies(verdicts, name) -> int:
    return (verdicts or {}).get(name, ([], 1 << 30))[1]


def _may_need_a_cut(func, result: int, argument: int) -> bool:
    """Cheap first look, no analysis: a pair whose result is its argument on
    every path, or that no cut and no store could help, needs nothing."""
    arg = func.regions[0].blocks[0].arguments[argument]
    sites: list = []
    why = _walk(returns_of(func)[0].operands[result], arg, sites)
    return bool(sites) or (why is not None and ir.RankedTensorType(arg.type).rank == 0)


def _worth_a_look(candidates, module_op):
    """The candidates tdf's own analysis can do something for: a pair whose
    result is not its argument on every path and that has a cut, or a cut
    blocked only by a later read (:meth:`DonationPlanner.move_target`).
    Deciding this first keeps One-Shot Bufferize's analysis (the judge, the
    costly part) out of programs with nothing to pair."""
    found = []
    for func, pairs in candidates:
        if not any(_may_need_a_cut(func, r, a) for r, a in pairs):
            continue
        planner = DonationPlanner(func, module_op)
        if any(planner.has_work(r, a) for r, a in pairs):
            found.append((func, pairs))
    return found


def _move_later(todo, module_op) -> dict:
    """Each cut whose only obstacle is a later read of its argument moves
    right after that read (:meth:`DonationPlanner.move_target`). Returns
    ``{function: [(op, its old next op)]}`` in move order."""
    moved: dict = {}
    for func, missed in todo:
        planner = DonationPlanner(func, module_op)
        moves, seen = [], set()
        for r, a in missed:
            found = planner.move_target(r, a)
            if found is not None and op_key(found[0]) not in seen:
                seen.add(op_key(found[0]))
                moves.append(found)
        for op, after in moves:
            moved.setdefault(sym_name(func), []).append((op, _next_in_block(op)))
            op.move_after(after)
    return moved


def _next_in_block(op):
    """The op after ``op`` in its block (``op`` is never the terminator)."""
    found = False
    for other in op.block.operations:
        if found:
            return other.operation
        found = other.operation == op
    raise ValueError("no op after the moved op")


def _undo_moves(moves) -> None:
    for op, old_next in reversed(moves):
        op.move_before(old_next)


def _cut(todo, module_op) -> list:
    """Plans the cuts of every missed pair (on the unchanged functions),
    then applies them; returns the :class:`_Applied` records."""
    applied: list[_Applied] = []
    for func, missed in todo:
        planner = DonationPlanner(func, module_op)
        plans: list = []
        used: set = set()
        for r, a in missed:
            sites = planner.plan(r, a)[0]
            keys = {op_key(s[1]) for s in sites or () if s[0] != "store"}
            if sites and not keys & used:
                used |= keys
                plans.append((r, a, sites))
        # Each pair has its own argument; One-Shot judges the whole below.
        for r, a, sites in plans:
            applied.append(planner.apply(sites, r, a))
    return applied


def _judge(applied, before, module_op, moved=None) -> tuple[int, dict]:
    """One-Shot Bufferize's verdict on ``applied`` (and the ``moved`` ops,
    ``{function: moves}``): a function with more copies than ``before`` is
    restored entirely; otherwise a pair it does not find in place is undone
    (and, when none of a function's pairs holds, its moves too). Returns
    ``(pairs kept, verdicts)``: the verdicts after, for the functions whose
    state One-Shot has seen (one partly restored is left out)."""
    moved = moved or {}
    after = one_shot_verdicts(module_op) or {}
    names = {r.function for r in applied} | set(moved)
    worse = {n for n in names if _copies(after, n) > _copies(before, n)}
    kept: dict = {}
    undone: dict = {}
    for record in reversed(applied):
        equivalent: list = (after.get(record.function) or ([], 0))[0] or []
        if (record.function not in worse and record.result < len(equivalent)
                and equivalent[record.result] == record.argument):
            kept[record.function] = kept.get(record.function, 0) + 1
            continue
        _undo(record)
        undone[record.function] = undone.get(record.function, 0) + 1
    for name, moves in moved.items():
        if name in worse or not kept.get(name):
            _undo_moves(moves)
    for record in applied:
        for op in record.garbage:
            if all(len(list(r.uses)) == 0 for r in op.results):
                op.erase()
    verdicts = dict(after)
    for name in names:
        if not kept.get(name) and name in before:
            verdicts[name] = before[name]  # all undone: as before
        elif undone.get(name):
            verdicts.pop(name, None)  # partly undone: not known
    return sum(kept.values()), verdicts


def pair_donations(module_op, ctx: PassContext | None = None, only=None) -> int:
    """Step 6 of ``tdf-insert-inplace`` on every function under
    ``module_op`` (a ``builtin.module``; ``only``: just that function):
    returns how many paired results now land in their donated argument's
    buffer. First the cuts; then, for the pairs still missed, each cut
    whose only obstacle is a later read moves after that read, and the cuts
    are tried again. One-Shot Bufferize judges each round (:func:`_judge`),
    and is not asked at all when tdf's analysis finds nothing to do.
    The pairs still missed are ``tdf-verify-inplace{donations}``'s to
    report (with :func:`explain_pair`'s reasons)."""
    module_op = module_op.operation
    if module_op.name != "builtin.module":
        return 0
    candidates = _worth_a_look(_candidates(module_op, only), module_op)
    if not candidates:
        return 0
    verdicts = one_shot_verdicts(module_op)
    if verdicts is None:
        return 0
    kept = 0
    todo = _misses(candidates, verdicts)
    applied = _cut(todo, module_op)
    if applied:
        count, verdicts = _judge(applied, verdicts, module_op)
        kept += count
        todo = _misses(candidates, verdicts)
    moved = _move_later(todo, module_op) if todo else {}
    if moved:
        applied = _cut(_misses(candidates, verdicts), module_op)
        count, verdicts = _judge(applied, verdicts, module_op, moved)
        kept += count
    if ctx is not None and kept:
        ctx.statistic("paired-donations", kept)
    return kept


def explain_pair(func, result: int, argument: int, module_op=None) -> str:
    """Why tdf cannot compute result ``result`` of ``func`` in donated
    argument ``argument`` (for reports and diagnostics), or a note that
    One-Shot Bufferize decided otherwise when tdf's rules see no obstacle."""
    func = func.operation
    if len(func.regions[0].blocks) != 1 or len(returns_of(func)) != 1:
        return "the function has several blocks or returns"
    planner = DonationPlanner(func, module_op)
    sites, why = planner.plan(result, argument)
    if why is not None:
        return _format(func, why)
    if not sites:
        return ("One-Shot Bufferize computes the update on a copy of the argument "
                "(its old value is still read after the update)")
    return "One-Shot Bufferize does not compute it in the argument's buffer"

