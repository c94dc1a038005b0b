"""Run-time check sites shared by ``tdf-bounds-checks`` and
``tdf-alloc-checks``: the table of check sites kept on the module and the
declarations of the runtime's failure functions.

A check that fails calls an external function of the tdf runtime
(``tdf_rt_bounds_error`` / ``tdf_rt_alloc_error``, defined in the extension,
``python/src/Runtime.cpp``) with a **site id**: the index of the check in the
module attribute ``tdf.runtime_sites``, an array of strings
``"kind|function|op|location|dimension"`` (fields separated by ``\\x1f``).
``tdf.compile`` reads the table before handing the module to the JIT and the
native call path turns a failure into ``IndexError``/``MemoryError`` naming
the function, the op, its ``file:line:col`` and the offending value.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, func, scf

from ..vocabulary import RUNTIME_FUNCTIONS
from ..vocabulary import RUNTIME_SITES_ATTR as SITES_ATTR
from ..vocabulary import SITE_SEPARATOR as SEPARATOR
from .ir_utils import collect_ops, sym_name

# The runtime-ABI names (tdf_rt_* functions and their arity) live in
# tdf.vocabulary.
__all__ = ["SiteTable", "declare", "emit_failure_branch", "read_sites", "location_text"]


def location_text(location) -> str:
    """``file:line:col`` of an op location (the compiler substitutes the
    file name of text parsed without one)."""
    from ..errors import format_location
    return format_location(location)


def read_sites(module_op) -> list[list[str]]:
    """The site table of a module (empty when no check was inserted)."""
    attrs = module_op.attributes
    if SITES_ATTR not in attrs:
        return []
    return [ir.StringAttr(a).value.split(SEPARATOR) for a in ir.ArrayAttr(attrs[SITES_ATTR])]


class SiteTable:
    """Appends sites to a module's ``tdf.runtime_sites`` (ids are stable: a
    second pass continues the numbering)."""

    def __init__(self, module_op):
        self.module = module_op
        self.entries = [SEPARATOR.join(fields) for fields in read_sites(module_op)]
        self._added = False

    def add(self, kind: str, op, dimension: int = -1) -> int:
        func = op.parent
        while func is not None and func.name != "func.func":
            func = func.parent
        fname = sym_name(func) if func is not None else "?"
        self.entries.append(SEPARATOR.join(
            [kind, fname, op.name, location_text(op.location), str(dimension)]))
        self._added = True
        return len(self.entries) - 1

    def store(self) -> None:
        if self._added:
            self.module.attributes[SITES_ATTR] = ir.ArrayAttr.get(
                [ir.StringAttr.get(e) for e in self.entries])


def declare(module_op, name: str) -> None:
    """Adds ``func.func private @name(i64, ...)`` to the module once."""
    for existing in collect_ops(module_op, "func.func"):
        if existing.parent == module_op and sym_name(existing) == name:
            return
    i64 = ir.IntegerType.get_signless(64)
    ftype = ir.FunctionType.get([i64] * RUNTIME_FUNCTIONS[name], [])
    block = module_op.regions[0].blocks[0]
    with ir.InsertionPoint(block), ir.Location.unknown():
        func.FuncOp(name, ftype, visibility="private")


def emit_failure_branch(fail, name: str, args) -> None:
    """At the current insertion point: ``scf.if %fail { call @name(args) }``
    (each argument is an index or i64 value, cast to i64)."""
    i64 = ir.IntegerType.get_signless(64)
    casted = []
    for value in args:
        if isinstance(value, int):
            value = arith.ConstantOp(i64, value).result
        elif isinstance(value.type, ir.IndexType):
            value = arith.IndexCastOp(i64, value).result
        casted.append(value)
    if_op = scf.IfOp(fail)
    with ir.InsertionPoint(if_op.then_block):
        func.CallOp([], ir.FlatSymbolRefAttr.get(name), casted)
        scf.YieldOp([])
