"""``tdf-outline-deep-nests``: no function nests control flow deeper than
``depth`` levels.

Every ``scf.if`` / ``scf.for`` / ``scf.while`` / ``scf.index_switch`` /
``scf.execute_region`` nested ``depth`` (default 16), ``2 * depth``, ...
such ops deep in its function moves, whole, into a private function of its
own (``tdf_nest_<n>``), and a ``func.call`` takes its place. The function's
parameters are the values the op uses from outside, in order of first use
(``arith.constant`` ops among them are copied in, so that a constant stays
a constant), and its results are the op's results. Ops in the region of
any other op (``scf.forall``, ``scf.parallel``, a linalg body...) stay where
they are, and so do the ops inside them (a ``shared_outs`` argument or a
reduction cannot cross a call).

Why: One-Shot Bufferize's analysis (run by ``tdf-insert-inplace``'s
agreement step, by ``tdf-verify-inplace`` and by ``tdf-bufferize``) puts
the values a nest of branches or loops yields into one alias set, and
checks every write of that set against every read, each check climbing the
nest; even MLIR's verifier climbs the nest for every use of an outer value.
Both grew with the square of the depth: ``scf.if`` nested 450 deep (1,350
ops, a call at each level) took 7.8 s in ``tdf-opt --tdf-lower-to-cpu``.
One-Shot Module Bufferize analyses each function on its own, callees first,
so with no function deeper than ``depth`` the time grows with the program
(0.7 s). The pass runs first, right after ``tdf-check-sizes``.

**Donation.** A tensor parameter becomes ``tdf.donate`` (so the function may
update it in place, as the nest did before it moved) when, at its one call,
the in-place rules hold for the operand
(:class:`~tdf.passes.analysis.inplace.InplaceAnalysis`: dead after the call,
owned, not sharing storage with another operand or a live value) and the
function can use it (:func:`~tdf.passes.donate.donation_is_usable`).
Callers are judged before the functions they call, so a donated parameter
is owned storage when the calls inside its function are judged. Otherwise
the parameter is read-only (``tdf-donate``): an update of it in the
function runs in a fresh buffer. One-Shot Bufferize checks every call: a
function that writes a parameter writes its operand, and the caller copies
that operand first if it is still needed.

Each function made is marked ``tdf.outlined``: its donated parameters are
no contract with a caller, so ``tdf-verify-inplace{donations}`` and
``Report.pairings`` leave it out (donation pairing still moves its results
into them where One-Shot agrees).

Programs nested less than ``depth`` deep, which is nearly all, do not
change. Option ``depth`` (0: no limit; ``tdf-lower-to-cpu{nest-depth}``).
Statistics ``outlined`` and ``donated``.

Before (``depth=2``)::

    %r = scf.if %c -> (tensor<4xf32>) {
      %s = scf.if %d -> (tensor<4xf32>) {
        %t = scf.if %e -> (tensor<4xf32>) { ... } else { ... }
        scf.yield %t : tensor<4xf32>
      } ...

After::

    %r = scf.if %c -> (tensor<4xf32>) {
      %s = scf.if %d -> (tensor<4xf32>) {
        %t = func.call @tdf_nest_0(%e, ...) : (i1, ...) -> tensor<4xf32>
        scf.yield %t : tensor<4xf32>
      } ...
    func.func private @tdf_nest_0(%e: i1, ...) -> tensor<4xf32> {
      %t = scf.if %e -> (tensor<4xf32>) { ... } else { ... }
      return %t : tensor<4xf32>
    }
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import func

from .. import _tdf
from ..vocabulary import DONATE_ATTR, OUTLINED_ATTR
from .analysis.inplace import InplaceAnalysis
from .donate import donation_is_usable
from .ir_utils import (
    arg_dicts,
    collect_ops,
    defining_op,
    has_body,
    is_constant,
    is_tensor,
    op_key,
    set_arg_dicts,
    sym_name,
    used_from_outside,
)
from .registry import PassContext, PassOption, register_pass

__all__ = ["outline_deep_nests", "NESTS", "PREFIX", "DEFAULT_DEPTH"]

#: The ops that count as one level of nesting, and that may move.
NESTS = ("scf.if", "scf.for", "scf.while", "scf.index_switch", "scf.execute_region")
#: Names of the outlined functions: ``tdf_nest_<n>``.
PREFIX = "tdf_nest_"
DEFAULT_DEPTH = 16


def _levels(function) -> list[tuple[int, object]]:
    """``(depth, op)`` for every op of :data:`NESTS` in ``function`` that
    may move: depth 0 for one right in the function's body, ``d + 1`` right
    in one of depth ``d``. An op in the region of any other op (an
    ``scf.forall``, an ``scf.parallel``, a ``linalg.generic``...) does not
    move, nor does any op inside it."""
    found = collect_ops(function, NESTS)
    if not found:
        return []
    depth: dict = {}  # op_key -> depth, or None for an op that stays
    out = []
    for op in reversed(found):  # pre-order: every op after the ops around it
        parent = op.parent
        level: int | None = 0
        if parent is not None and parent.name != "func.func":
            around = depth.get(op_key(parent)) if parent.name in NESTS else None
            level = None if around is None else around + 1
        depth[op_key(op)] = level
        if level is not None:
            out.append((level, op))
    return out


def _outline(op, name: str, module_body):
    """Moves ``op`` into a new private function ``name`` at the end of
    ``module_body`` and calls it in ``op``'s place; returns the function
    and the call."""
    used = used_from_outside([op])
    params = [value for value in used if not is_constant(value)]
    result_types = [result.type for result in op.results]
    with ir.InsertionPoint(module_body), op.location:
        function = func.FuncOp(name, ir.FunctionType.get([p.type for p in params], result_types),
                               visibility="private")
    function.attributes[OUTLINED_ATTR] = ir.UnitAttr.get()
    entry = function.add_entry_block()
    with ir.InsertionPoint(op), op.location:
        call = func.CallOp(function, params)
    for result, replacement in zip(op.results, call.results):
        result.replace_all_uses_with(replacement)
    mapping = dict(zip(params, entry.arguments))
    with ir.InsertionPoint(entry), op.location:
        for value in used:
            if value not in mapping:
                mapping[value] = defining_op(value).clone().results[0]
        ret = func.ReturnOp(list(op.results))
    op.move_before(ret)
    keys = list(mapping)
    _tdf.remap_operands([op.operation], keys, [mapping[k] for k in keys])
    return function, call


def _donate(caller, calls: list, callees: dict, ctx: PassContext) -> None:
    """Marks ``tdf.donate`` each tensor parameter of an outlined function
    whose operand, at its one call in ``caller``, may hold what the function
    writes there: the in-place rules hold at the call
    (:class:`~tdf.passes.analysis.inplace.InplaceAnalysis`: dead after it,
    owned, unaliased, the same type) and the function can use the buffer
    (:func:`~tdf.passes.donate.donation_is_usable`)."""
    analysis = InplaceAnalysis(caller)
    for call in calls:
        callee = callees[op_key(call)]
        dicts = arg_dicts(callee)
        donated = False
        for index, value in enumerate(call.operands):
            if is_tensor(value) and analysis.check(call, index, value.type) is None \
                    and donation_is_usable(callee, index):
                dicts[index][DONATE_ATTR] = ir.UnitAttr.get()
                ctx.statistic("donated", 1)
                donated = True
        if donated:
            set_arg_dicts(callee, dicts)


@register_pass(
    "tdf-outline-deep-nests",
    "Control flow nested `depth` deep in a function moves into a private function "
    "(One-Shot Bufferize's analysis grows with the square of the nesting)",
    options=[PassOption("depth", int, DEFAULT_DEPTH,
                        "Most levels of scf control flow nested in one function (0: no limit)")],
    statistics=[("outlined", "ops moved into a function of their own"),
                ("donated", "parameters of those functions donated (their operand is dead "
                            "after the call)")],
)
def outline_deep_nests(op, ctx: PassContext) -> None:
    """See the module docstring."""
    limit = int(ctx.option("depth"))
    if limit <= 0:
        return
    body = op.regions[0].blocks[0]
    functions = [f for f in body.operations if f.operation.name == "func.func" and has_body(f)]
    chosen = []
    for function in functions:
        chosen += [(level, nest) for level, nest in _levels(function)
                   if level and level % limit == 0]
    if not chosen:
        return
    taken = {sym_name(f) for f in body.operations if "sym_name" in f.attributes}
    counter = 0
    # Deepest first: each op moved then holds at most `limit` levels, the
    # deeper ones being calls already, so every op moves once.
    chosen.sort(key=lambda pair: -pair[0])
    made = []  # (function, call), deepest first
    for _, nest in chosen:
        while f"{PREFIX}{counter}" in taken:
            counter += 1
        name = f"{PREFIX}{counter}"
        taken.add(name)
        made.append(_outline(nest, name, body))
        ctx.statistic("outlined", 1)
    # Donations from the outside in: a function's own donated parameters
    # are owned storage when the calls in it are judged.
    callees = {op_key(call): function for function, call in made}
    calls_in: dict = {}
    for _, call in made:
        caller = call.operation.parent
        while caller.name != "func.func":
            caller = caller.parent
        calls_in.setdefault(op_key(caller), (caller, []))[1].append(call)
    for caller in functions + [function for function, _ in reversed(made)]:
        if op_key(caller) in calls_in:
            _donate(caller, calls_in[op_key(caller)][1], callees, ctx)
