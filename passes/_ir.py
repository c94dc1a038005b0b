"""Small IR helpers shared by tdf's passes, the compiler and the GPU driver:
collecting ops, and reading or writing ``func.func`` attributes."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from mlir import ir
from mlir.dialects import tensor

__all__ = ["collect_ops", "function_type", "sym_name", "is_public", "has_body",
           "arg_dicts", "set_arg_dicts", "ancestor_in", "empty_tensor",
           "copy_attributes"]


def collect_ops(root, names: str | Iterable[str] | None = None,
                where: Callable[[ir.Operation], bool] | None = None) -> list:
    """The ops at or under ``root`` (post-order, as ``Operation.walk``) whose
    name is ``names`` (one name or a collection; None: any) and for which
    ``where(op)`` holds (None: always)."""
    wanted = {names} if isinstance(names, str) else (set(names) if names is not None else None)
    found = []

    def visit(op):
        if (wanted is None or op.name in wanted) and (where is None or where(op)):
            found.append(op)
        return ir.WalkResult.ADVANCE

    root.operation.walk(visit)
    return found


def function_type(func) -> ir.FunctionType:
    return ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)


def sym_name(func) -> str:
    return ir.StringAttr(func.attributes["sym_name"]).value


def is_public(func) -> bool:
    return ("sym_visibility" not in func.attributes
            or ir.StringAttr(func.attributes["sym_visibility"]).value == "public")


def has_body(func) -> bool:
    return len(func.regions[0].blocks) > 0


def arg_dicts(func) -> list[dict]:
    """The argument attribute dictionaries of ``func`` as Python dicts
    (name → attribute), one per argument."""
    if "arg_attrs" not in func.attributes:
        return [{} for _ in function_type(func).inputs]
    return [{n.name: n.attr for n in ir.DictAttr(d)} for d in ir.ArrayAttr(func.attributes["arg_attrs"])]


def set_arg_dicts(func, dicts: list[dict]) -> None:
    """Writes back dictionaries read with :func:`arg_dicts`."""
    func.attributes["arg_attrs"] = ir.ArrayAttr.get([ir.DictAttr.get(d) for d in dicts])


def ancestor_in(op, block):
    """``op`` or the op around it that sits directly in ``block``, or None."""
    op = op.operation
    while op is not None:
        if op.block == block:
            return op
        parent = op.parent
        if parent is None or parent.name == "func.func":
            return None
        op = parent.operation
    return None


def empty_tensor(type_) -> ir.Value:
    """``tensor.empty`` of static-shaped ``type_`` at the current insertion point."""
    type_ = ir.RankedTensorType(type_)
    return tensor.EmptyOp(list(type_.shape), type_.element_type, encoding=type_.encoding).result


def copy_attributes(source, target, skip: Iterable[str] = ("callee",)) -> None:
    """Copies every attribute of op ``source`` to op ``target`` but those
    named in ``skip``."""
    for name in list(source.attributes):
        if isinstance(name, str) and name not in skip:
            target.attributes[name] = source.attributes[name]
