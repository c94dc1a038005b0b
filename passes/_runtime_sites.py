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

from ..vocabulary import RUNTIME_SITES_ATTR as SITES_ATTR
from ._ir import collect_ops, sym_name

SEPARATOR = "\x1f"
BOUNDS_ERROR = "tdf_rt_bounds_error"
ALLOC_ERROR = "tdf_rt_alloc_error"
#: The BLAS route of contractions (``tdf-contractions-to-blas``,
#: ``python/src/Blas.cpp``): flags, three (pointer, offset) pairs, the rank
#: and (size, three strides) for each of up to six loop dimensions.
CONTRACT = "tdf_rt_contract"
# The functions the tdf runtime defines in every engine: name → number of
# i64 parameters.
RUNTIME_FUNCTIONS = {BOUNDS_ERROR: 5, ALLOC_ERROR: 2, CONTRACT: 32}


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
    for func in collect_ops(module_op, "func.func"):
        if func.parent == module_op and sym_name(func) == name:
            return
    i64 = ir.IntegerType.get_signless(64)
    ftype = ir.FunctionType.get([i64] * RUNTIME_FUNCTIONS[name], [])
    block = module_op.regions[0].blocks[0]
    with ir.InsertionPoint(block), ir.Location.unknown():
        ir.Operation.create("func.func", regions=1, attributes={
            "sym_name": ir.StringAttr.get(name),
            "function_type": ir.TypeAttr.get(ftype),
            "sym_visibility": ir.StringAttr.get("private"),
        })


# arith.cmpi predicates by name.
CMPI_PREDICATES = {"eq": 0, "ne": 1, "slt": 2, "sle": 3, "sgt": 4, "sge": 5,
                   "ult": 6, "ule": 7, "ugt": 8, "uge": 9}


def index_const(n: int):
    """``arith.constant n : index`` at the current insertion point."""
    index = ir.IndexType.get()
    return ir.Operation.create("arith.constant", results=[index],
                               attributes={"value": ir.IntegerAttr.get(index, n)}).result


def cmpi(predicate: str, lhs, rhs):
    """``arith.cmpi <predicate>, lhs, rhs`` (an i1) at the current insertion point."""
    i64 = ir.IntegerType.get_signless(64)
    return ir.Operation.create(
        "arith.cmpi", results=[ir.IntegerType.get_signless(1)], operands=[lhs, rhs],
        attributes={"predicate": ir.IntegerAttr.get(i64, CMPI_PREDICATES[predicate])}).result


def binary(name: str, lhs, rhs):
    """A binary arith op ``name`` whose result has ``lhs``'s type."""
    return ir.Operation.create(name, results=[lhs.type], operands=[lhs, rhs]).result


def emit_failure_branch(fail, name: str, args) -> None:
    """At the current insertion point: ``scf.if %fail { call @name(args) }``
    (each argument is an index or i64 value, cast to i64)."""
    i64 = ir.IntegerType.get_signless(64)
    casted = []
    for value in args:
        if isinstance(value, int):
            value = ir.Operation.create("arith.constant", results=[i64],
                                        attributes={"value": ir.IntegerAttr.get(i64, value)}).result
        elif isinstance(value.type, ir.IndexType):
            value = ir.Operation.create("arith.index_cast", results=[i64], operands=[value]).result
        casted.append(value)
    if_op = ir.Operation.create("scf.if", operands=[fail], regions=2)
    block = if_op.regions[0].blocks.append()
    with ir.InsertionPoint(block):
        ir.Operation.create("func.call", operands=casted,
                            attributes={"callee": ir.FlatSymbolRefAttr.get(name)})
        ir.Operation.create("scf.yield")
