"""Kernel variants that ``tdf-insert-inplace`` generates (or looks up):

* :func:`inplace_variant`: the in-place variant of a kernel for the chosen
  ``(operand, result)`` pairs -- a clone ``@k_inplace`` (``tdf.inplace_of``,
  ``tdf.inplace_indices``) that writes each in-place result through its input
  parameter, or, for a declaration, its ``tdf.inplace_variant``;
* :func:`layout_variant`: a clone ``@k_strided`` (``tdf.strided_of``) whose
  parameters take a strided layout, so that a slice of a larger buffer is
  passed without a copy.

Which pairs are safe is the analysis' business
(:class:`tdf.passes.analysis.kernels.KernelInfo`).
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import func

from ..vocabulary import (
    ELEMENTWISE_ATTR,
    INPLACE_INDICES_ATTR,
    INPLACE_OF_ATTR,
    INPLACE_OK_ATTR,
    INPLACE_VARIANT_ATTR,
    STRIDED_OF_ATTR,
)
from .analysis.kernels import KernelInfo
from .ir_utils import function_type, lookup_symbol

__all__ = ["LAYOUT_AGNOSTIC_USERS", "inplace_variant", "strided_type", "layout_variant"]


# -- variants ---------------------------------------------------------
def _variant_type(info: KernelInfo, indices) -> ir.FunctionType:
    inputs = list(info.ftype.inputs)
    drop = {info.n + j for j, i in enumerate(indices) if i >= 0}
    return ir.FunctionType.get([t for p, t in enumerate(inputs) if p not in drop], [])


def inplace_variant(info: KernelInfo, module_op, indices: list[int]) -> tuple[str | None, str]:
    """``(symbol name, "")`` of the in-place variant for ``indices``
    (creating it when needed), or ``(None, why)``."""
    wanted = _variant_type(info, indices)
    if info.is_declaration:
        name = info.variant_name
        if name is None:
            return None, f"@{info.name} is a declaration that names no tdf.inplace_variant"
        existing = lookup_symbol(module_op, name)
        if existing is not None:
            if existing.name != "func.func" or function_type(existing) != wanted:
                return None, f"@{name} (tdf.inplace_variant of @{info.name}) does not have type {wanted}"
            return name, ""
        with ir.InsertionPoint.after(info.kernel), info.kernel.location:
            decl = func.FuncOp(name, wanted, visibility="private").operation
            if info.elementwise_attr:
                decl.attributes[ELEMENTWISE_ATTR] = ir.UnitAttr.get()
        return name, ""
    key = ir.DenseI64ArrayAttr.get(indices)
    for op in module_op.regions[0].blocks[0].operations:
        op = op.operation
        if (INPLACE_OF_ATTR in op.attributes
                and ir.FlatSymbolRefAttr(op.attributes[INPLACE_OF_ATTR]).value == info.name
                and op.attributes[INPLACE_INDICES_ATTR] == key):
            return ir.StringAttr(op.attributes["sym_name"]).value, ""
    base = f"{info.name}_inplace"
    if list(indices) != [0]:
        base += "_" + "_".join("n" if i < 0 else str(i) for i in indices)
    name, suffix = base, 0
    while lookup_symbol(module_op, name) is not None:
        suffix += 1
        name = f"{base}_{suffix}"
    clone = info.kernel.clone(ip=ir.InsertionPoint.after(info.kernel))
    clone.attributes["sym_name"] = ir.StringAttr.get(name)
    clone.attributes["sym_visibility"] = ir.StringAttr.get("private")
    clone.attributes[INPLACE_OF_ATTR] = ir.FlatSymbolRefAttr.get(info.name)
    clone.attributes[INPLACE_INDICES_ATTR] = key
    for attr in (INPLACE_OK_ATTR, INPLACE_VARIANT_ATTR):
        if attr in clone.attributes:
            del clone.attributes[attr]
    block = clone.regions[0].blocks[0]
    drop = sorted(((info.n + j, i) for j, i in enumerate(indices) if i >= 0), reverse=True)
    for param, source in drop:
        block.arguments[param].replace_all_uses_with(block.arguments[source])
        block.erase_argument(param)
    if "arg_attrs" in clone.attributes:
        dicts = list(ir.ArrayAttr(clone.attributes["arg_attrs"]))
        keep = [d for p, d in enumerate(dicts) if p not in {q for q, _ in drop}]
        clone.attributes["arg_attrs"] = ir.ArrayAttr.get(keep)
    clone.attributes["function_type"] = ir.TypeAttr.get(wanted)
    if info.variant_elementwise(indices):
        clone.attributes[ELEMENTWISE_ATTR] = ir.UnitAttr.get()
    return name, ""




# Ops that accept a memref of any strided layout for the operand they use
# (their verifiers and result types do not depend on the layout).
LAYOUT_AGNOSTIC_USERS = frozenset({
    "memref.load", "memref.store", "memref.dim", "memref.copy",
    "affine.load", "affine.store", "vector.transfer_read", "vector.transfer_write",
})


def strided_type(memref_type, strides) -> ir.MemRefType:
    """``memref_type`` with layout ``strided<strides, offset: ?>``."""
    memref_type = ir.MemRefType(memref_type)
    layout = ir.StridedLayoutAttr.get(ir.ShapedType.get_dynamic_stride_or_offset(), list(strides))
    return ir.MemRefType.get(memref_type.shape, memref_type.element_type, layout,
                             memref_type.memory_space)


def layout_variant(module_op, kernel, param, param_type=None) -> tuple[str | None, str]:
    """``(name, "")`` of a clone of kernel ``kernel`` (a ``func.func`` with a
    body) whose parameter ``param`` has type ``param_type`` (the same shape in
    another layout, e.g. a row of a larger buffer) -- or, with ``param`` a
    dict ``{parameter: type}`` and no ``param_type``, each of those
    parameters its type -- created once per kernel and signature and marked
    ``tdf.strided_of = @kernel``; or ``(None, why)`` when the kernel is a
    declaration or its body uses such a parameter in an op whose types
    depend on the layout (a ``memref.subview``, a call, ...)."""
    kernel = kernel.operation
    changes = dict(param) if isinstance(param, dict) else {param: param_type}
    name = ir.StringAttr(kernel.attributes["sym_name"]).value
    if len(kernel.regions[0].blocks) == 0:
        return None, (f"@{name} is a declaration: its output parameter only takes an identity "
                      f"layout, so the part is computed in a fresh buffer and copied into its slice")
    inputs = list(function_type(kernel).inputs)
    wanted = ir.FunctionType.get([changes.get(p, t) for p, t in enumerate(inputs)], [])
    for op in module_op.regions[0].blocks[0].operations:
        op = op.operation
        if (STRIDED_OF_ATTR in op.attributes
                and ir.FlatSymbolRefAttr(op.attributes[STRIDED_OF_ATTR]).value == name
                and function_type(op) == wanted):
            return ir.StringAttr(op.attributes["sym_name"]).value, ""
    for p in changes:
        arg = kernel.regions[0].blocks[0].arguments[p]
        for use in arg.uses:
            user = use.owner.operation
            if not (user.name.startswith("linalg.") or user.name in LAYOUT_AGNOSTIC_USERS):
                label = f"parameter #{p}" if isinstance(param, dict) else "output parameter"
                return None, (f"@{name} uses its {label} in {user.name}, whose types depend "
                              f"on the layout, so the part is computed in a fresh buffer and "
                              f"copied into its slice")
    base, suffix = f"{name}_strided", 0
    variant = base
    while lookup_symbol(module_op, variant) is not None:
        suffix += 1
        variant = f"{base}_{suffix}"
    clone = kernel.clone(ip=ir.InsertionPoint.after(kernel))
    clone.attributes["sym_name"] = ir.StringAttr.get(variant)
    clone.attributes["sym_visibility"] = ir.StringAttr.get("private")
    clone.attributes[STRIDED_OF_ATTR] = ir.FlatSymbolRefAttr.get(name)
    for attr in (INPLACE_OK_ATTR, INPLACE_VARIANT_ATTR, INPLACE_OF_ATTR, INPLACE_INDICES_ATTR):
        if attr in clone.attributes:
            del clone.attributes[attr]
    for p, type_ in changes.items():
        clone.regions[0].blocks[0].arguments[p].set_type(type_)
    clone.attributes["function_type"] = ir.TypeAttr.get(wanted)
    return variant, ""
