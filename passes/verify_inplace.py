"""``tdf-verify-inplace``: check every ``tdf.call_inplace`` against the rules.

This pass is tdf's one definition of "an in-place call would need a copy"
(``tdf.compile(strict=True)`` and ``tdf-lower-to-cpu{strict=true}`` both run
it with ``strict``). In-place result ``i`` of a ``tdf.call_inplace``
(hand-written or generated) needs a copy of operand ``inplace[i]`` when

* **One-Shot Bufferize** (tdf's configuration, after ``tdf-donate``, in
  analysis-only mode on a copy of the module) decides to copy that operand
  before the call (``__inplace_operands_attr__`` is ``"false"``): that is
  the copy the bufferized program would really make; or
* **tdf's safety rules** cannot prove the write safe: the operand (with every
  alias) must be dead after the call (a use in the other branch of the same
  ``scf.if`` is not a later use), unaliased (never escaped to a
  ``tdf.call_opaque``, no alias read later or by the call itself through
  another operand), owned (not a non-donated argument, not a constant).
  These rules see what One-Shot's analysis does not: escaped values, and a
  call that reads an overlapping view of the storage it writes (One-Shot
  copies the *read* then, so the in-place operand itself looks fine).

A violation is a warning (the program stays correct: the copy is made):
``in-place operand #0 (%x) ... is still used by %y (tdf.call) (dead); a copy
will be made``; with option ``strict`` it is an error and the pass fails.
When only One-Shot objects, the message says so. The rules are
:class:`tdf.passes.analysis.inplace.InplaceAnalysis`'s, One-Shot's verdict
:func:`tdf.passes.analysis.one_shot.one_shot_copies`.

With option ``donations`` it also checks **donation pairing**: each
donated argument paired with a result (JAX's rule, or the function's
``tdf.donation_pairs``: :mod:`tdf.passes.analysis.donation`) must hold that
result -- One-Shot Bufferize's analysis must find the result equivalent to
the argument. A miss is reported on the op computing the result:
``donated argument #2 (%arg2) does not hold its paired result #1
(tensor<8xf32>): %arg2 is still used by %5 (linalg.generic) after %4
(linalg.generic) (donation)``. ``tdf.compile(strict=True)`` and
``tdf-lower-to-cpu{strict=true}`` turn it on; it is off by default because a
pair can be impossible (the argument is read after its result is computed):
the in-place invariant (the output of ``tdf-insert-inplace`` passes
``tdf-verify-inplace{strict}``) is about copies, not about pairs.

Options: ``strict`` (default off), ``donations`` (default off). Statistics:
``checked`` (in-place operands checked), ``violations``, ``pairs`` (paired
donated arguments checked), ``pair-misses``.

Before / after (the IR is unchanged; diagnostics only)::

    func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
      %y = tdf.call_inplace @addone(%x) inplace [0] : (tensor<4xf32>) -> tensor<4xf32>
      return %y : tensor<4xf32>
    }
    // warning: in-place operand #0 (%arg0) is a function argument that is not
    //          donated; a copy will be made
"""

from __future__ import annotations

from mlir import ir

from ._pair_donations import explain_pair
from .analysis.donation import (
    donation_pairs,
    one_shot_equivalences,
    pairs_are_promised,
    pairs_problem,
    returns_of,
)
from .analysis.inplace import InplaceAnalysis, namer
from .analysis.manager import analyses
from .analysis.one_shot import OneShotAnalysis
from .ir_utils import collect_ops, function_bodies, op_key, sym_name
from .registry import PassContext, PassOption, register_pass

__all__ = ["verify_function", "verify_inplace", "verify_donations", "pair_misses"]


def verify_function(func, copies: dict | None = None) -> list:
    """``(op, operand, message, rule)`` for every in-place operand of a
    ``tdf.call_inplace`` in ``func`` that needs a copy (see the module
    docstring); ``copies`` is :func:`one_shot_copies` of the module (None:
    tdf's rules only)."""
    if not any(i >= 0 for call in collect_ops(func, "tdf.call_inplace")
               for i in ir.DenseI64ArrayAttr(call.attributes["inplace_indices"])):
        return []  # nothing to check: no liveness and alias analysis needed
    analysis = InplaceAnalysis(func)
    name = namer(func)
    found = []
    for op in analysis.liveness.ops:
        if op.name != "tdf.call_inplace":
            continue
        indices = list(ir.DenseI64ArrayAttr(op.attributes["inplace_indices"]))
        one_shot = (copies or {}).get(op_key(op), set())
        for result, index in zip(op.results, indices):
            if index < 0:
                continue
            why = analysis.check(op, index, result.type)
            if why is not None:
                text = "".join(p if isinstance(p, str) else name(p) for p in why.parts)
                text = text.replace(f"operand #{index} (", f"in-place operand #{index} (", 1)
                found.append((op, index, text, why.rule))
            elif index in one_shot:
                found.append((op, index, f"One-Shot Bufferize copies in-place operand #{index} "
                                         f"({name(op.operands[index])}) before this call: it is "
                                         f"still read afterwards", "one-shot"))
        analysis.note_inplace(op)
    return found


@register_pass(
    "tdf-verify-inplace",
    "Check every tdf.call_inplace against the in-place safety rules and One-Shot "
    "Bufferize's analysis (warning, or error with strict, where a copy would be needed)",
    options=[PassOption("strict", bool, False,
                        "Make a violation an error instead of a warning"),
             PassOption("donations", bool, False,
                        "Also check that each donated argument holds its paired result")],
    statistics=[("checked", "In-place operands checked"),
                ("violations", "In-place operands that need a copy"),
                ("pairs", "Donated arguments paired with a result, checked"),
                ("pair-misses", "Paired results not computed in their donated argument")],
)
def verify_inplace(op, ctx: PassContext) -> None:
    """The pass (see the module docstring for rules and options)."""
    with analyses(op) as cache:
        one_shot = cache.get(OneShotAnalysis, op)
        _verify_calls(op, ctx, one_shot.copies())
        if ctx.option("donations"):
            verify_donations(op, ctx, one_shot)


def _verify_calls(op, ctx: PassContext, copies: dict | None) -> None:
    strict = ctx.option("strict")
    for func in function_bodies(op):
        checked = 0
        for inner in collect_ops(func, "tdf.call_inplace"):
            checked += sum(1 for i in ir.DenseI64ArrayAttr(inner.attributes["inplace_indices"])
                           if i >= 0)
        ctx.statistic("checked", checked)
        if not checked:
            continue
        violations = verify_function(func, copies)
        if not violations:
            continue
        ctx.statistic("violations", len(violations))
        for call, _index, text, rule in violations:
            message = f"{text} ({rule})"
            if strict:
                ctx.error(call, message + "; in-place call would need a copy")
            else:
                ctx.warning(call, message + "; a copy will be made")


def pair_misses(module_op, one_shot: OneShotAnalysis | None = None) -> tuple[list, int]:
    """``(op, message)`` for every donated argument in ``module_op`` (a
    ``builtin.module``) that does not hold its paired result (One-Shot's
    analysis decides, ``one_shot`` when given; tdf's rules say why), ``op``
    being the op that computes the result (or the ``func.return``). Also
    the number of pairs checked: ``(misses, checked)``."""
    candidates = [(f, donation_pairs(f)) for f in function_bodies(module_op)
                  if pairs_are_promised(f)]
    candidates = [(f, pairs) for f, pairs in candidates if any(a >= 0 for a in pairs)]
    if not candidates:
        return [], 0
    if one_shot is None:
        equivalences = one_shot_equivalences(module_op) or {}
    else:
        equivalences = one_shot.equivalences() or {}
    misses, checked = [], 0
    for func, pairs in candidates:
        rets = returns_of(func)
        equivalent = equivalences.get(sym_name(func)) or [-1] * len(pairs)
        name = namer(func)
        for r, a in enumerate(pairs):
            if a < 0:
                continue
            checked += 1
            if r < len(equivalent) and equivalent[r] == a:
                continue
            arg = func.regions[0].blocks[0].arguments[a]
            value = rets[0].operands[r] if len(rets) == 1 else None
            where = func if value is None else (
                rets[0] if isinstance(value.owner, ir.Block) else value.owner.operation)
            if r < len(equivalent) and equivalent[r] >= 0:
                why = f"it is computed in the buffer of argument #{equivalent[r]}"
            else:
                why = explain_pair(func, r, a, module_op)
            misses.append((where, f"donated argument #{a} ({name(arg)}) does not hold its "
                                  f"paired result #{r} ({arg.type}): {why}"))
    return misses, checked


def verify_donations(op, ctx: PassContext, one_shot: OneShotAnalysis | None = None) -> None:
    """The ``donations`` check (see the module docstring)."""
    for func in function_bodies(op):
        problem = pairs_problem(func)
        if problem is not None:
            ctx.error(func, problem)
    misses, checked = pair_misses(op.operation, one_shot)
    ctx.statistic("pairs", checked)
    for where, message in misses:
        ctx.statistic("pair-misses")
        if ctx.option("strict"):
            ctx.error(where, message + " (donation)")
        else:
            ctx.warning(where, message + " (donation); the result is computed in a new buffer")
