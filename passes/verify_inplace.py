"""``tdf-verify-inplace``: check every ``tdf.call_inplace`` against the rules.

For each in-place result ``i`` of a ``tdf.call_inplace`` (hand-written or
generated), operand ``inplace[i]`` must be dead after the call (with every
alias), unaliased (never escaped), owned (not a non-donated argument, not a
constant) and of the result's type (the verifier already checks that). A
violation means One-Shot Bufferize copies the operand before the call (the
seed's X0): a warning ``operand #0 (%x) of this in-place call is still used
by %y (tdf.call); a copy will be made``. With option ``strict`` it is an error
instead (X1) and the pass fails; the blocking use gets a note.

Options: ``strict`` (default off). Statistics: ``checked`` (in-place operands
checked), ``violations``.

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

from .insert_inplace import InplaceAnalysis, _namer
from .liveness import function_bodies
from .registry import PassContext, PassOption, register_pass

__all__ = ["verify_function"]


def verify_function(func) -> list:
    """``(op, operand, Rejection)`` for every in-place operand of a
    ``tdf.call_inplace`` in ``func`` that breaks a safety rule."""
    analysis = InplaceAnalysis(func)
    found = []
    for op in analysis.liveness.ops:
        if op.name != "tdf.call_inplace":
            continue
        indices = list(ir.DenseI64ArrayAttr(op.attributes["inplace_indices"]))
        for result, index in zip(op.results, indices):
            if index < 0:
                continue
            why = analysis.check(op, index, result.type)
            if why is not None:
                found.append((op, index, why))
        analysis.note_inplace(op)
    return found


@register_pass(
    "tdf-verify-inplace",
    "Check every tdf.call_inplace against the in-place safety rules "
    "(warning, or error with strict, where a copy would be needed)",
    options=[PassOption("strict", bool, False,
                        "Make a violation an error instead of a warning")],
    statistics=[("checked", "In-place operands checked"),
                ("violations", "In-place operands that need a copy")],
)
def verify_inplace(op, ctx: PassContext) -> None:
    """The pass (see the module docstring for rules and options)."""
    strict = ctx.option("strict")
    for func in function_bodies(op):
        violations = verify_function(func)
        checked = 0

        def count(inner):
            nonlocal checked
            if inner.operation.name == "tdf.call_inplace":
                checked += sum(1 for i in ir.DenseI64ArrayAttr(
                    inner.operation.attributes["inplace_indices"]) if i >= 0)
            return ir.WalkResult.ADVANCE

        func.walk(count)
        ctx.statistic("checked", checked)
        if not violations:
            continue
        ctx.statistic("violations", len(violations))
        name = _namer(func)
        for call, index, why in violations:
            text = "".join(p if isinstance(p, str) else name(p) for p in why.parts)
            text = text.replace(f"operand #{index} (", f"in-place operand #{index} (", 1)
            message = f"{text} ({why.rule})"
            if strict:
                ctx.error(call, message + "; in-place call would need a copy")
            else:
                ctx.warning(call, message + "; a copy will be made")
