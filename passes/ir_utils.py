"""IR utilities shared by tdf's passes, analyses, compiler and GPU driver
(:mod:`tdf.passes.ir_utils`): the one public home for small helpers on the
MLIR Python bindings that are not about any one pass.

- **looking at IR**: :func:`collect_ops`, :func:`function_bodies`,
  :func:`ancestor_in`, :func:`lookup_symbol`, :func:`is_tensor`,
  :func:`op_key` (a stable dictionary key for an op), :func:`defining_op`,
  :func:`memref_root`, :func:`used_from_outside` (what a function made
  of some ops would take as parameters), :func:`is_constant`,
  :func:`constant_int`; linalg ops' :func:`indexing_maps`
  and :func:`iterator_types`;
- **function attributes**: :func:`function_type`, :func:`sym_name`,
  :func:`is_public`, :func:`has_body`, :func:`arg_dicts` /
  :func:`set_arg_dicts`;
- **building IR** at the current insertion point, with the bindings' typed
  op builders: :func:`index_const`, :func:`cmpi`, :func:`binary`,
  :func:`select`, :func:`dim_size`, :func:`empty_tensor`,
  :func:`copy_attributes` from one op to its replacement, and
  :func:`clone_remapped` (copies of ops reading other values).
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Iterable

from mlir import ir
from mlir.dialects import arith, linalg, memref, tensor

from .. import _tdf
from ..vocabulary import MEMREF_VIEW_OPS, static_nbytes

__all__ = ["collect_ops", "function_bodies", "ancestor_in", "lookup_symbol", "is_tensor",
           "op_key", "defining_op", "identity_layout", "memref_root", "used_from_outside", "is_constant", "constant_int", "clone_remapped", "indexing_maps", "iterator_types", "function_type", "sym_name", "is_public", "has_body", "arg_dicts",
           "set_arg_dicts", "index_const", "cmpi", "binary", "select", "dim_size",
           "empty_tensor", "copy_attributes", "CMPI_PREDICATES"]


# -- looking at IR ------------------------------------------------------------

def collect_ops(root, names: str | Iterable[str] | None = None,
                where: Callable[[ir.Operation], bool] | None = None) -> list:
    """The ops at or under ``root`` (post-order, as ``Operation.walk``) whose
    name is ``names`` (one name or a collection; None: any) and for which
    ``where(op)`` holds (None: always)."""
    wanted = [names] if isinstance(names, str) else (list(names) if names is not None else None)
    found = _tdf.collect_ops(root.operation, wanted)
    return found if where is None else [op for op in found if where(op)]


def defining_op(value):
    """The op that defines ``value`` (an ``ir.Operation``), or None for a
    block argument."""
    owner = value.owner
    return None if isinstance(owner, ir.Block) else owner.operation


def used_from_outside(ops: list) -> list:
    """The values ``ops`` and the ops in their regions use but that none of
    them defines, in order of first use (each op's operands before those
    of the ops nested in it, those in post-order), each once. Computed in
    C++ (``_tdf.used_from_outside``)."""
    return _tdf.used_from_outside([op.operation for op in ops])


def constant_int(value, op_name: str = "arith.constant") -> int | None:
    """The integer an ``op_name`` constant (``arith.constant``, or
    ``llvm.mlir.constant`` in the LLVM dialect) defines ``value`` as, or
    None."""
    op = defining_op(value)
    if op is None or op.name != op_name:
        return None
    try:
        return ir.IntegerAttr(op.attributes["value"]).value
    except (ValueError, KeyError, TypeError):
        return None


def is_constant(value) -> bool:
    """Whether ``value`` is an ``arith.constant``'s result."""
    op = defining_op(value)
    return op is not None and op.name == "arith.constant" and not op.regions


def identity_layout(memref_type) -> bool:
    """Whether memref type ``memref_type`` has the identity layout (the
    layout of a fresh buffer or a function argument's)."""
    layout = ir.MemRefType(memref_type).layout
    if not isinstance(layout, ir.AffineMapAttr):
        return False
    amap = layout.value
    return amap == ir.AffineMap.get_identity(amap.n_dims, context=layout.context)


def memref_root(value):
    """The memref ``value`` is a view of (through :data:`MEMREF_VIEW_OPS`):
    an allocation, a block argument or another op's result."""
    while (owner := defining_op(value)) is not None and owner.name in MEMREF_VIEW_OPS:
        value = owner.operands[0]
    return value


def _arena_bytes(value) -> tuple[int, int] | None:
    """[start, end) bytes of a ``memref.view`` at a constant offset with a
    static shape (a slot of ``tdf-plan-memory``'s arena; a view's type has
    the identity layout); None for anything else."""
    owner = defining_op(value)
    if owner is None or owner.name != "memref.view":
        return None
    start, size = constant_int(owner.operands[1]), static_nbytes(value.type)
    if start is None or size is None:
        return None
    return start, start + size


def may_share_storage(a, b) -> bool:
    """Whether memrefs ``a`` and ``b`` may share bytes: the same
    :func:`memref_root`, unless both are slots of one arena
    (``memref.view`` at constant offsets) whose byte ranges are disjoint."""
    if memref_root(a) != memref_root(b):
        return False
    ra, rb = _arena_bytes(a), _arena_bytes(b)
    return ra is None or rb is None or not (ra[1] <= rb[0] or rb[1] <= ra[0])


def indexing_maps(op) -> list:
    """The ``ir.AffineMap`` of each operand of linalg op ``op`` (named ops
    included)."""
    return [ir.AffineMapAttr(m).value for m in linalg.get_indexing_maps(op)]


def iterator_types(op) -> list[str] | None:
    """``"parallel"`` / ``"reduction"`` per loop of an op with an
    ``iterator_types`` attribute (``linalg.generic``), else None."""
    if "iterator_types" not in op.attributes:
        return None
    return ["reduction" if "reduction" in str(t) else "parallel"
            for t in ir.ArrayAttr(op.attributes["iterator_types"])]


def function_bodies(op) -> list:
    """Every ``func.func`` with a body at or under ``op`` (as ``ir.Operation``)."""
    found = []

    def visit(inner):
        inner = inner.operation
        if inner.name == "func.func" and len(inner.regions[0].blocks) > 0:
            found.append(inner)
            return ir.WalkResult.SKIP
        return ir.WalkResult.ADVANCE

    op.operation.walk(visit, ir.WalkOrder.PRE_ORDER)
    return found


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


def lookup_symbol(module_op, name: str):
    """The op named ``@name`` directly in ``module_op``'s body, or None."""
    for op in module_op.regions[0].blocks[0].operations:
        op = op.operation
        if "sym_name" in op.attributes and ir.StringAttr(op.attributes["sym_name"]).value == name:
            return op
    return None


def is_tensor(value) -> bool:
    """True for a value of ranked or unranked tensor type."""
    return isinstance(value.type, (ir.RankedTensorType, ir.UnrankedTensorType))


_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_OP_CAPSULE = b"mlir.ir.Operation._CAPIPtr"


def op_key(op) -> int:
    """A stable dictionary key for an operation: its address. (The bindings'
    ``Operation.__hash__`` hashes the op's contents, which change when its
    operands are rewritten, so ops cannot key a dict across rewrites.)"""
    return _capsule_pointer(op.operation._CAPIPtr, _OP_CAPSULE)


# -- function attributes ------------------------------------------------------

def function_type(func) -> ir.FunctionType:
    """The ``function_type`` of a ``func.func``."""
    return ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)


def sym_name(func) -> str:
    """The symbol name of an op (without ``@``)."""
    return ir.StringAttr(func.attributes["sym_name"]).value


def is_public(func) -> bool:
    """A ``func.func`` without ``sym_visibility`` or with ``"public"``."""
    return ("sym_visibility" not in func.attributes
            or ir.StringAttr(func.attributes["sym_visibility"]).value == "public")


def has_body(func) -> bool:
    """A ``func.func`` with a body (not a declaration)."""
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


# -- building IR (at the current insertion point) -----------------------------

#: ``arith.cmpi`` predicates by name.
CMPI_PREDICATES = {"eq": 0, "ne": 1, "slt": 2, "sle": 3, "sgt": 4, "sge": 5,
                   "ult": 6, "ule": 7, "ugt": 8, "uge": 9}

#: The binary arith ops :func:`binary` builds, by name.
_BINARY_OPS = {
    "arith.addi": arith.AddIOp, "arith.subi": arith.SubIOp, "arith.muli": arith.MulIOp,
    "arith.divsi": arith.DivSIOp, "arith.divui": arith.DivUIOp, "arith.andi": arith.AndIOp,
    "arith.ori": arith.OrIOp, "arith.addf": arith.AddFOp, "arith.subf": arith.SubFOp,
    "arith.mulf": arith.MulFOp,
}


def index_const(n: int):
    """``arith.constant n : index``."""
    return arith.ConstantOp(ir.IndexType.get(), n).result


def cmpi(predicate: str, lhs, rhs):
    """``arith.cmpi <predicate>, lhs, rhs`` (an i1)."""
    return arith.CmpIOp(CMPI_PREDICATES[predicate], lhs, rhs).result


def binary(name: str, lhs, rhs):
    """A binary arith op ``name`` (``"arith.addi"``, ...) whose result has
    ``lhs``'s type."""
    return _BINARY_OPS[name](lhs, rhs).result


def select(condition, true_value, false_value):
    """``arith.select``."""
    return arith.SelectOp(condition, true_value, false_value).result


def dim_size(value, d: int):
    """``tensor.dim`` / ``memref.dim`` of ``value``'s dimension ``d``."""
    dialect = tensor if isinstance(value.type, ir.RankedTensorType) else memref
    return dialect.DimOp(value, index_const(d)).result


def empty_tensor(type_) -> ir.Value:
    """``tensor.empty`` of static-shaped ``type_``."""
    type_ = ir.RankedTensorType(type_)
    return tensor.EmptyOp(list(type_.shape), type_.element_type, encoding=type_.encoding).result


def copy_attributes(source, target, skip: Iterable[str] = ("callee",)) -> None:
    """Copies every attribute of op ``source`` to op ``target`` but those
    named in ``skip``."""
    for name in list(source.attributes):
        if isinstance(name, str) and name not in skip:
            target.attributes[name] = source.attributes[name]


def clone_remapped(ops: list, mapping: dict) -> list:
    """Copies of ``ops`` at the current insertion point, in order, in which
    every operand (of a copy or of an op nested in it) that is a key of
    ``mapping`` reads ``mapping[key]`` instead; each op's results map to its
    copy's (``mapping`` is updated) for the copies after it."""
    copies = []
    for op in ops:
        copy = op.clone()
        copies.append(copy)
        mapping.update(zip(op.results, copy.results))
    keys = list(mapping)
    _tdf.remap_operands([copy.operation for copy in copies], keys, [mapping[k] for k in keys])
    return copies
