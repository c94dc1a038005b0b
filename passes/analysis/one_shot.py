"""What One-Shot Bufferize itself decides about in-place calls: its analysis
(tdf's One-Shot configuration after ``tdf-donate``, analysis only, on a copy
of the module) annotates every op with ``__inplace_operands_attr__``;
:func:`one_shot_copies` reads which in-place operands of each
``tdf.call_inplace`` it would copy before the call. ``tdf-verify-inplace``
and ``tdf-insert-inplace`` both judge calls by it.
"""

from __future__ import annotations

from mlir import ir, passmanager

from ...vocabulary import INPLACE_OPERANDS_ATTR
from ..ir_utils import collect_ops, op_key
from ..pipelines import ONE_SHOT_ANALYSIS

__all__ = ["ANALYSIS_PIPELINE", "one_shot_copies", "view_copied"]

#: One-Shot Bufferize's own analysis with the options of every tdf pipeline.
ANALYSIS_PIPELINE = "builtin.module(" + ", ".join(ONE_SHOT_ANALYSIS) + ")"


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
        pm = passmanager.PassManager.parse(ANALYSIS_PIPELINE, context=context)
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
            if INPLACE_OPERANDS_ATTR not in analysed.attributes:
                continue
            flags = [ir.StringAttr(a).value
                     for a in ir.ArrayAttr(analysed.attributes[INPLACE_OPERANDS_ATTR])]
            indices = list(ir.DenseI64ArrayAttr(call.attributes["inplace_indices"]))
            bad = {i for i in indices if 0 <= i < len(flags)
                   and (flags[i] == "false" or view_copied(analysed.operands[i]))}
            if bad:
                found[op_key(call)] = bad
        return found
    finally:
        clone.erase()


_VIEWS = ("tensor.extract_slice", "tensor.expand_shape", "tensor.collapse_shape")


def view_copied(value) -> bool:
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
        if INPLACE_OPERANDS_ATTR in owner.attributes:
            flags = [ir.StringAttr(a).value
                     for a in ir.ArrayAttr(owner.attributes[INPLACE_OPERANDS_ATTR])]
            if flags and flags[0] == "false":
                return True
        value = owner.operands[0]
    return False
