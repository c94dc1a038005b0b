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

A violation is a warning (the copy is made, the seed's X0): ``in-place
operand #0 (%x) ... is still used by %y (tdf.call) (dead); a copy will be
made``; with option ``strict`` it is an error and the pass fails (X1). When
only One-Shot objects, the message says so.

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
from mlir import passmanager

from ._ir import collect_ops
from .insert_inplace import InplaceAnalysis, _namer
from .liveness import function_bodies, op_key
from .registry import PassContext, PassOption, register_pass

__all__ = ["verify_function", "one_shot_copies", "ANALYSIS_PIPELINE"]

# One-Shot Bufferize's own analysis with the options of every tdf pipeline.
# Imported lazily from .pipelines (which imports this module's registry).
ANALYSIS_PIPELINE = None


def _analysis_pipeline() -> str:
    global ANALYSIS_PIPELINE
    if ANALYSIS_PIPELINE is None:
        from .pipelines import one_shot
        ANALYSIS_PIPELINE = "builtin.module(tdf-donate, " + one_shot("test-analysis-only") + ")"
    return ANALYSIS_PIPELINE


def one_shot_copies(module_op) -> dict | None:
    """``{op_key(call): {operand, ...}}``: the in-place operands of each
    ``tdf.call_inplace`` under ``module_op`` that One-Shot Bufferize's
    analysis (on a copy of the module) would copy before the call -- the
    operand itself, or a view it is taken through (an out-of-place
    ``extract_slice`` is a copy of the slice the call then writes). None
    when the analysis cannot run (not a module, or One-Shot fails: the
    bufferization itself will report that)."""
    module_op = module_op.operation
    if module_op.name != "builtin.module":
        return None
    calls = collect_ops(module_op, "tdf.call_inplace")
    if not calls:
        return {}
    clone = module_op.clone()
    context = module_op.context
    handler = context.attach_diagnostic_handler(lambda diagnostic: True)
    try:
        pm = passmanager.PassManager.parse(_analysis_pipeline(), context=context)
        pm.run(clone)
    except ir.MLIRError:
        return None
    finally:
        handler.detach()
    copied = collect_ops(clone, "tdf.call_inplace")
    try:
        if len(copied) != len(calls):
            return None
        found = {}
        for call, analysed in zip(calls, copied):
            if "__inplace_operands_attr__" not in analysed.attributes:
                continue
            flags = [ir.StringAttr(a).value
                     for a in ir.ArrayAttr(analysed.attributes["__inplace_operands_attr__"])]
            indices = list(ir.DenseI64ArrayAttr(call.attributes["inplace_indices"]))
            bad = {i for i in indices if 0 <= i < len(flags)
                   and (flags[i] == "false" or _view_copied(analysed.operands[i]))}
            if bad:
                found[op_key(call)] = bad
        return found
    finally:
        clone.erase()


_VIEWS = ("tensor.extract_slice", "tensor.expand_shape", "tensor.collapse_shape")


def _view_copied(value) -> bool:
    """Is ``value`` (in the analysed clone) a view -- ``extract_slice``,
    ``expand_shape``/``collapse_shape``, possibly of another view -- that
    One-Shot Bufferize makes out of place, i.e. a copy of the storage the
    in-place call was meant to write (its write then lands in the copy)?"""
    for _ in range(16):
        owner = value.owner
        if isinstance(owner, ir.Block):
            return False
        owner = owner.operation
        if owner.name not in _VIEWS:
            return False
        if "__inplace_operands_attr__" in owner.attributes:
            flags = [ir.StringAttr(a).value
                     for a in ir.ArrayAttr(owner.attributes["__inplace_operands_attr__"])]
            if flags and flags[0] == "false":
                return True
        value = owner.operands[0]
    return False


def verify_function(func, copies: dict | None = None) -> list:
    """``(op, operand, message, rule)`` for every in-place operand of a
    ``tdf.call_inplace`` in ``func`` that needs a copy (see the module
    docstring); ``copies`` is :func:`one_shot_copies` of the module (None:
    tdf's rules only)."""
    analysis = InplaceAnalysis(func)
    name = _namer(func)
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
                        "Make a violation an error instead of a warning")],
    statistics=[("checked", "In-place operands checked"),
                ("violations", "In-place operands that need a copy")],
)
def verify_inplace(op, ctx: PassContext) -> None:
    """The pass (see the module docstring for rules and options)."""
    strict = ctx.option("strict")
    copies = one_shot_copies(op)
    for func in function_bodies(op):
        violations = verify_function(func, copies)
        checked = 0
        for inner in collect_ops(func, "tdf.call_inplace"):
            checked += sum(1 for i in ir.DenseI64ArrayAttr(inner.attributes["inplace_indices"])
                           if i >= 0)
        ctx.statistic("checked", checked)
        if not violations:
            continue
        ctx.statistic("violations", len(violations))
        for call, index, text, rule in violations:
            message = f"{text} ({rule})"
            if strict:
                ctx.error(call, message + "; in-place call would need a copy")
            else:
                ctx.warning(call, message + "; a copy will be made")
