"""Which kernels may compute a result in the storage of an input, and their
in-place variants (helper of ``tdf-insert-inplace``).

A kernel is a ``func.func`` in destination-passing style: parameters
``(inputs..., outputs...)`` with one output memref per result of the calling
``tdf.call``. Pair ``(i, j)`` (operand *i*, result *j*) is *in-place safe*
when the kernel computes the same values if output parameter ``N + j`` is
the very buffer of input parameter ``i``. That is known when

* the kernel carries ``tdf.inplace_ok = [[i, j], ...]`` (an array of
  ``[operand, result]`` pairs, the author's promise), or
* it carries the unit attribute ``tdf.elementwise`` (every output element
  depends only on the input elements at the same index: every pair whose
  memref types are equal is safe), or
* its body proves it: input ``i`` and output ``N + j`` are used by one and
  the same element-wise linalg op and by nothing else, both with identity
  indexing maps. Element-wise ops: the named ones in ``ELEMENTWISE_OPS``,
  ``linalg.map``, ``linalg.elementwise`` and ``linalg.generic`` with only
  parallel iterators.

The variant of kernel ``@k`` for indices ``[i0, -1, ...]`` takes the kernel's
parameters minus the output parameter of every in-place result (the kernel
writes those through the input parameter):

* kernels with a body: the pass clones ``@k`` as ``@k_inplace`` (suffixed by
  the indices when not ``[0]``: ``@k_inplace_1``, ``@k_inplace_0_n``),
  replacing each dropped output parameter by its input parameter; the clone
  carries ``tdf.inplace_of = @k`` and ``tdf.inplace_indices`` so it is found
  and reused, and ``tdf.elementwise`` when it is element-wise on all its
  parameters;
* declarations (resolved at JIT time) must name their variant with
  ``tdf.inplace_variant = @k_ip`` plus ``tdf.inplace_ok``: the variant
  computes *all* the pairs of ``tdf.inplace_ok`` in place; the pass declares
  ``@k_ip`` (private, copying ``tdf.elementwise``) when the module lacks it.
"""

from __future__ import annotations

from mlir import ir

__all__ = [
    "ELEMENTWISE_OPS", "INPLACE_OK_ATTR", "ELEMENTWISE_ATTR", "VARIANT_ATTR",
    "INPLACE_OF_ATTR", "KernelInfo", "is_elementwise_linalg", "identity_operands",
    "lookup_symbol", "function_type",
]

INPLACE_OK_ATTR = "tdf.inplace_ok"
ELEMENTWISE_ATTR = "tdf.elementwise"
VARIANT_ATTR = "tdf.inplace_variant"
INPLACE_OF_ATTR = "tdf.inplace_of"
INDICES_ATTR = "tdf.inplace_indices"

ELEMENTWISE_OPS = frozenset({
    "linalg.add", "linalg.sub", "linalg.mul", "linalg.div", "linalg.div_unsigned",
    "linalg.max", "linalg.min", "linalg.powf", "linalg.exp", "linalg.log",
    "linalg.abs", "linalg.ceil", "linalg.floor", "linalg.negf", "linalg.reciprocal",
    "linalg.round", "linalg.sqrt", "linalg.rsqrt", "linalg.square", "linalg.tanh",
    "linalg.erf", "linalg.copy", "linalg.map", "linalg.elementwise", "linalg.generic",
})


def function_type(func) -> ir.FunctionType:
    return ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)


def lookup_symbol(module_op, name: str):
    """The op named ``@name`` directly in ``module_op``'s body, or None."""
    for op in module_op.regions[0].blocks[0].operations:
        op = op.operation
        if "sym_name" in op.attributes and ir.StringAttr(op.attributes["sym_name"]).value == name:
            return op
    return None


def _maps(op):
    if "indexing_maps" not in op.attributes:
        return None
    return [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]


def is_elementwise_linalg(op) -> bool:
    """True for a linalg op computing every output element from the input
    elements of its own iteration point only (no reductions)."""
    op = op.operation
    if op.name not in ELEMENTWISE_OPS:
        return False
    if op.name == "linalg.generic":
        iters = ir.ArrayAttr(op.attributes["iterator_types"])
        return all("parallel" in str(it) for it in iters)
    return True


def identity_operands(op) -> list[bool]:
    """For each operand of element-wise linalg ``op``: is it accessed with
    the identity map (no broadcast, no transpose)? Scalars count as False."""
    op = op.operation
    maps = _maps(op)
    flags = []
    shaped = [v for v in op.operands if isinstance(v.type, ir.ShapedType)]
    for index, value in enumerate(op.operands):
        if not isinstance(value.type, ir.ShapedType):
            flags.append(False)
            continue
        if maps is None:
            # Named element-wise ops (and linalg.map) use identity maps on
            # operands of the iteration rank; a lower-rank operand is broadcast.
            rank = ir.ShapedType(shaped[-1].type).rank if shaped else 0
            flags.append(ir.ShapedType(value.type).rank == rank)
            continue
        position = sum(1 for v in list(op.operands)[:index] if isinstance(v.type, ir.ShapedType))
        amap = maps[position] if position < len(maps) else None
        flags.append(amap is not None and amap == ir.AffineMap.get_identity(amap.n_dims))
    return flags


def _pair_list(attr) -> list[tuple[int, int]]:
    pairs = []
    for item in ir.ArrayAttr(attr):
        if isinstance(item, ir.DenseI64ArrayAttr):
            values = list(ir.DenseI64ArrayAttr(item))
        else:
            values = [ir.IntegerAttr(x).value for x in ir.ArrayAttr(item)]
        if len(values) != 2:
            raise ValueError(f"{INPLACE_OK_ATTR} entries must be [operand, result] pairs, got {item}")
        pairs.append((values[0], values[1]))
    return pairs


class KernelInfo:
    """What a kernel allows: ``safe(i, j)``, ``reads_same(i, k, j)`` and the
    variant lookup/creation for a set of indices."""

    def __init__(self, kernel, num_operands: int, num_results: int):
        self.kernel = kernel.operation
        self.name = ir.StringAttr(self.kernel.attributes["sym_name"]).value
        self.n = num_operands
        self.m = num_results
        self.ftype = function_type(self.kernel)
        self.is_declaration = len(self.kernel.regions[0].blocks) == 0
        attrs = self.kernel.attributes
        self.declared_pairs = set(_pair_list(attrs[INPLACE_OK_ATTR])) if INPLACE_OK_ATTR in attrs else set()
        self.elementwise_attr = ELEMENTWISE_ATTR in attrs
        self.variant_name = (ir.FlatSymbolRefAttr(attrs[VARIANT_ATTR]).value
                             if VARIANT_ATTR in attrs else None)
        self._param_user = {}
        self._body_elementwise = False
        if not self.is_declaration:
            self._analyse_body()

    def _analyse_body(self) -> None:
        """Maps each parameter to the single element-wise op reading/writing it
        with an identity map, when that is all it is used for."""
        block = self.kernel.regions[0].blocks[0]
        users = set()
        for index, arg in enumerate(block.arguments):
            uses = list(arg.uses)
            if not uses:
                self._param_user[index] = "unused"
                continue
            owners = {u.owner.operation for u in uses}
            if len(owners) != 1:
                continue
            owner = next(iter(owners))
            if not is_elementwise_linalg(owner) or owner.parent != self.kernel:
                continue
            flags = identity_operands(owner)
            if all(flags[u.operand_number] for u in uses):
                self._param_user[index] = owner
                users.add(owner)
        params = len(block.arguments)
        self._body_elementwise = (
            len(users) == 1 and
            all(self._param_user.get(i) is not None for i in range(params)
                if isinstance(block.arguments[i].type, ir.ShapedType)))

    def _types_match(self, i: int, j: int) -> bool:
        inputs = list(self.ftype.inputs)
        return self.n + j < len(inputs) and inputs[i] == inputs[self.n + j]

    def safe(self, i: int, j: int) -> bool:
        """May result ``j`` be computed in the buffer of operand ``i``?"""
        if (i, j) in self.declared_pairs:
            return True
        if self.elementwise_attr:
            return self._types_match(i, j)
        if self.is_declaration:
            return False
        out = self._param_user.get(self.n + j)
        inp = self._param_user.get(i)
        if out is None or out == "unused" or inp is None:
            return False
        return self._types_match(i, j) and (inp == "unused" or inp == out)

    def reads_same(self, k: int, j: int) -> bool:
        """Operand ``k`` is the same value as the in-place operand of result
        ``j``: is reading it while result ``j`` is written safe?"""
        if self.elementwise_attr or (k, j) in self.declared_pairs:
            return True
        if self.is_declaration:
            return False
        out = self._param_user.get(self.n + j)
        reader = self._param_user.get(k)
        return reader == "unused" or (reader is not None and reader == out)

    def variant_indices_ok(self, indices: list[int]) -> bool:
        """Declarations: the named variant implements exactly the declared pairs."""
        if not self.is_declaration:
            return True
        chosen = {(i, j) for j, i in enumerate(indices) if i >= 0}
        return self.variant_name is not None and chosen == self.declared_pairs

    # -- variants ---------------------------------------------------------
    def _variant_type(self, indices) -> ir.FunctionType:
        inputs = list(self.ftype.inputs)
        drop = {self.n + j for j, i in enumerate(indices) if i >= 0}
        return ir.FunctionType.get([t for p, t in enumerate(inputs) if p not in drop], [])

    def variant(self, module_op, indices: list[int]) -> tuple[str | None, str]:
        """``(symbol name, "")`` of the in-place variant for ``indices``
        (creating it when needed), or ``(None, why)``."""
        wanted = self._variant_type(indices)
        if self.is_declaration:
            name = self.variant_name
            existing = lookup_symbol(module_op, name)
            if existing is not None:
                if existing.name != "func.func" or function_type(existing) != wanted:
                    return None, f"@{name} (tdf.inplace_variant of @{self.name}) does not have type {wanted}"
                return name, ""
            with ir.InsertionPoint.after(self.kernel), self.kernel.location:
                decl = ir.Operation.create("func.func", regions=1, attributes={
                    "sym_name": ir.StringAttr.get(name),
                    "function_type": ir.TypeAttr.get(wanted),
                    "sym_visibility": ir.StringAttr.get("private"),
                })
                if self.elementwise_attr:
                    decl.attributes[ELEMENTWISE_ATTR] = ir.UnitAttr.get()
            return name, ""
        key = ir.DenseI64ArrayAttr.get(indices)
        for op in module_op.regions[0].blocks[0].operations:
            op = op.operation
            if (INPLACE_OF_ATTR in op.attributes
                    and ir.FlatSymbolRefAttr(op.attributes[INPLACE_OF_ATTR]).value == self.name
                    and op.attributes[INDICES_ATTR] == key):
                return ir.StringAttr(op.attributes["sym_name"]).value, ""
        base = f"{self.name}_inplace"
        if list(indices) != [0]:
            base += "_" + "_".join("n" if i < 0 else str(i) for i in indices)
        name, suffix = base, 0
        while lookup_symbol(module_op, name) is not None:
            suffix += 1
            name = f"{base}_{suffix}"
        clone = self.kernel.clone(ip=ir.InsertionPoint.after(self.kernel))
        clone.attributes["sym_name"] = ir.StringAttr.get(name)
        clone.attributes["sym_visibility"] = ir.StringAttr.get("private")
        clone.attributes[INPLACE_OF_ATTR] = ir.FlatSymbolRefAttr.get(self.name)
        clone.attributes[INDICES_ATTR] = key
        for attr in (INPLACE_OK_ATTR, VARIANT_ATTR):
            if attr in clone.attributes:
                del clone.attributes[attr]
        block = clone.regions[0].blocks[0]
        drop = sorted(((self.n + j, i) for j, i in enumerate(indices) if i >= 0), reverse=True)
        for param, source in drop:
            block.arguments[param].replace_all_uses_with(block.arguments[source])
            block.erase_argument(param)
        if "arg_attrs" in clone.attributes:
            dicts = list(ir.ArrayAttr(clone.attributes["arg_attrs"]))
            keep = [d for p, d in enumerate(dicts) if p not in {q for q, _ in drop}]
            clone.attributes["arg_attrs"] = ir.ArrayAttr.get(keep)
        clone.attributes["function_type"] = ir.TypeAttr.get(wanted)
        if self.elementwise_attr or self._body_elementwise:
            clone.attributes[ELEMENTWISE_ATTR] = ir.UnitAttr.get()
        return name, ""


# -- layout variants (concat parts computed into a slice) ---------------------

STRIDED_OF_ATTR = "tdf.strided_of"

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


def layout_variant(module_op, kernel, param: int, param_type) -> tuple[str | None, str]:
    """``(name, "")`` of a clone of kernel ``kernel`` (a ``func.func`` with a
    body) whose parameter ``param`` has type ``param_type`` (the same shape in
    another layout, e.g. a row of a larger buffer), created once per kernel and
    signature and marked ``tdf.strided_of = @kernel``; or ``(None, why)`` when
    the kernel is a declaration or its body uses the parameter in an op whose
    types depend on the layout (a ``memref.subview``, a call, ...)."""
    kernel = kernel.operation
    name = ir.StringAttr(kernel.attributes["sym_name"]).value
    if len(kernel.regions[0].blocks) == 0:
        return None, (f"@{name} is a declaration: its output parameter only takes an identity "
                      f"layout, so the part is computed in a fresh buffer and copied into its slice")
    inputs = list(function_type(kernel).inputs)
    wanted = ir.FunctionType.get(inputs[:param] + [param_type] + inputs[param + 1:], [])
    for op in module_op.regions[0].blocks[0].operations:
        op = op.operation
        if (STRIDED_OF_ATTR in op.attributes
                and ir.FlatSymbolRefAttr(op.attributes[STRIDED_OF_ATTR]).value == name
                and function_type(op) == wanted):
            return ir.StringAttr(op.attributes["sym_name"]).value, ""
    arg = kernel.regions[0].blocks[0].arguments[param]
    for use in arg.uses:
        user = use.owner.operation
        if not (user.name.startswith("linalg.") or user.name in LAYOUT_AGNOSTIC_USERS):
            return None, (f"@{name} uses its output parameter in {user.name}, whose types depend "
                          f"on the layout, so the part is computed in a fresh buffer and copied "
                          f"into its slice")
    base, suffix = f"{name}_strided", 0
    variant = base
    while lookup_symbol(module_op, variant) is not None:
        suffix += 1
        variant = f"{base}_{suffix}"
    clone = kernel.clone(ip=ir.InsertionPoint.after(kernel))
    clone.attributes["sym_name"] = ir.StringAttr.get(variant)
    clone.attributes["sym_visibility"] = ir.StringAttr.get("private")
    clone.attributes[STRIDED_OF_ATTR] = ir.FlatSymbolRefAttr.get(name)
    for attr in (INPLACE_OK_ATTR, VARIANT_ATTR, INPLACE_OF_ATTR, INDICES_ATTR):
        if attr in clone.attributes:
            del clone.attributes[attr]
    clone.regions[0].blocks[0].arguments[param].set_type(param_type)
    clone.attributes["function_type"] = ir.TypeAttr.get(wanted)
    return variant, ""
