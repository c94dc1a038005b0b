"""``tdf-drop-donated-results``: drop public-function results that are a
donated argument, updated in place.

Runs after One-Shot Bufferize and before deallocation (it is part of
``tdf-bufferize``). A result of a public function with a body that nothing in
the module calls is dropped from the signature when it is (through
``memref.cast`` ops) exactly one of the function's ``tdf.donate`` arguments,
with the same type: the caller keeps using its own buffer, updated in place,
and deallocation does not clone it. The attribute ``tdf.returned_args``
records, per original result, the argument it was (or -1); the runtime reads
it to hand the donated array back. Functions called inside the module, and
functions with several ``func.return`` ops, are left alone. ``tdf.donate`` is
removed from every function's arguments (the LLVM lowering must not see it).
No options; statistic ``dropped``.

Before::

    func.func @step(%cache: memref<8x4xf32> {tdf.donate}, %row: memref<1x4xf32>)
        -> memref<8x4xf32> {
      ...
      return %cache : memref<8x4xf32>
    }

After::

    func.func @step(%cache: memref<8x4xf32>, %row: memref<1x4xf32>)
        attributes {tdf.returned_args = array<i64: 0>} {
      ...
      return
    }
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import func as func_d

from ..vocabulary import DONATE_ATTR, RETURNED_ARGS_ATTR
from .ir_utils import (
    arg_dicts,
    collect_ops,
    function_type,
    has_body,
    is_public,
    set_arg_dicts,
    sym_name,
)
from .registry import PassContext, register_pass

__all__ = ["RETURNED_ARGS_ATTR", "drop_donated_results"]


def _called_symbols(op) -> set:
    calls = collect_ops(op, ("func.call", "tdf.call", "tdf.call_inplace", "tdf.call_opaque"))
    return {ir.FlatSymbolRefAttr(call.attributes["callee"]).value for call in calls}


def _strip_casts(value):
    while not isinstance(value.owner, ir.Block) and value.owner.operation.name == "memref.cast":
        value = value.owner.operands[0]
    return value


@register_pass(
    "tdf-drop-donated-results",
    "Drop public-function results that are a donated argument (updated in place) "
    "and record them in tdf.returned_args",
    statistics=[("dropped", "Results dropped because they are a donated argument")],
)
def drop_donated_results(op, ctx: PassContext) -> None:
    """See the module docstring."""
    called = _called_symbols(op)
    for func in collect_ops(op, "func.func"):
        if has_body(func) and is_public(func) and sym_name(func) not in called:
            _drop_donated_results(func, ctx)
        _strip_donate(func)


def _strip_donate(func) -> None:
    """``tdf.donate`` is consumed: the LLVM lowering must not see it."""
    if "arg_attrs" not in func.attributes:
        return
    dicts = arg_dicts(func)
    if not any(DONATE_ATTR in d for d in dicts):
        return
    for d in dicts:
        d.pop(DONATE_ATTR, None)
    set_arg_dicts(func, dicts)


def _returned_arguments(func, ret) -> list[int]:
    """Per operand of ``ret``: the donated argument of ``func`` it is (through
    casts, with the same type), or -1."""
    block = func.regions[0].blocks[0]
    dicts = arg_dicts(func)
    mapping = []
    for value in ret.operands:
        source = _strip_casts(value)
        index = -1
        if isinstance(source.owner, ir.Block) and source.owner == block:
            arg_index = ir.BlockArgument(source).arg_number
            if DONATE_ATTR in dicts[arg_index] and source.type == value.type:
                index = arg_index
        mapping.append(index)
    return mapping


def _drop_donated_results(func, ctx: PassContext) -> None:
    """Drops the results of ``func`` that are one of its donated arguments."""
    ftype = function_type(func)
    if not any(isinstance(t, ir.MemRefType) for t in ftype.results):
        return
    returns = collect_ops(func, "func.return")
    if len(returns) != 1:
        return  # several exits (unstructured control flow): leave alone
    ret = returns[0]
    mapping = _returned_arguments(func, ret)
    if all(i < 0 for i in mapping):
        return
    kept = [v for v, i in zip(ret.operands, mapping) if i < 0]
    with ir.InsertionPoint(ret), ret.location:
        func_d.ReturnOp(kept)
    ret.erase()
    new_results = [t for t, i in zip(ftype.results, mapping) if i < 0]
    func.attributes["function_type"] = ir.TypeAttr.get(
        ir.FunctionType.get(list(ftype.inputs), new_results))
    if "res_attrs" in func.attributes:
        res = [a for a, i in zip(ir.ArrayAttr(func.attributes["res_attrs"]), mapping) if i < 0]
        if res:
            func.attributes["res_attrs"] = ir.ArrayAttr.get(res)
        else:
            del func.attributes["res_attrs"]
    func.attributes[RETURNED_ARGS_ATTR] = ir.DenseI64ArrayAttr.get(mapping)
    ctx.statistic("dropped", sum(1 for i in mapping if i >= 0))
