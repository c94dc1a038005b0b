"""The op rewrites of ``tdf-insert-inplace``, in program order:
``tdf.call @k(...)`` becomes ``tdf.call_inplace @k_inplace(...) inplace
[...]`` (the in-place kernel variant generated or reused,
:func:`tdf.passes._kernel_variants.inplace_variant`), and an element-wise
linalg op whose init is a ``tensor.empty`` takes a dead input as its init.
Each candidate operand is checked with
:class:`~tdf.passes.analysis.inplace.InplaceAnalysis`; the rejected ones are
recorded as :class:`~tdf.passes.analysis.inplace.Rejection`.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import tensor

from ..dialects import tdf as tdf_d
from ..vocabulary import ELEMENTWISE_ATTR, INPLACE_OK_ATTR
from ._kernel_variants import inplace_variant, layout_variant, strided_type
from .analysis.inplace import (
    MAX_BRANCH_DEPTH,
    InplaceAnalysis,
    Rejection,
    branch_depth,
    size_adaptation,
)
from .analysis.kernels import (
    BadKernelAttribute,
    KernelInfo,
    identity_operands,
    is_elementwise_linalg,
    reads_output,
)
from .analysis.shapes import fresh_shape_operand, same_sizes, slice_strides
from .ir_utils import copy_attributes, function_type, is_tensor, lookup_symbol, op_key

__all__ = ["InplaceRewriter"]

#: An operand passed over without a rejection (its buffer holds another result).
_SKIP = Rejection("fits", None, None, -1, [])


def _slice_layout_variant(module_op, name, operands, indices, results) -> str:
    """The in-place kernel variant to call instead of ``@name`` (step 3):
    each in-place parameter ``i`` whose operand is the result of a
    ``tensor.extract_slice`` -- passed to the call once, of static shape,
    with static sizes -- takes the layout that slice's subview has after
    bufferization, ``strided<[strides], offset: ?>`` (:func:`slice_strides`:
    a unit dimension's stride is ``?``), in one clone of the variant
    (:func:`layout_variant`, ``tdf.strided_of = @name``), so that One-Shot
    Bufferize passes the subview with a ``memref.cast`` instead of copying
    it into a fresh identity-layout buffer and back (the read-modify-write
    of a row: ``extract_slice``, call in place, ``insert_slice`` at the same
    place). Only the layout of the parameter changes: which storage the
    result reuses was decided before. Only when every stride of a dimension
    larger than one is known statically (a slice of a loop-carried value or
    with a dynamic step keeps the identity variant and its copy, which
    vectorizes better than a kernel on unknown strides). ``name`` unchanged
    when the variant is a declaration or its body uses a parameter in an op
    whose types depend on the layout.

    The in-place result (one of ``results``) then has the slice's layout:
    only when its every use is as the source of a ``tensor.insert_slice``
    (whose result has its destination's buffer), so that no other buffer
    type changes -- a strided parameter chosen earlier for a slice of a
    value derived from this result relies on that value's layout
    (:func:`~tdf.passes.analysis.shapes.buffer_strides`), and a loop yielding it
    would get a fully dynamic layout."""
    changes = {}
    kernel = None
    for j, i in enumerate(indices):
        if i < 0:
            continue
        if any(use.owner.operation.name != "tensor.insert_slice" or use.operand_number != 0
               for use in results[j].uses):
            continue
        value = operands[i]
        if isinstance(value.owner, ir.Block) \
                or value.owner.operation.name != "tensor.extract_slice" \
                or sum(1 for other in operands if other == value) != 1:
            continue
        tensor = ir.RankedTensorType(value.type)
        if not tensor.has_static_shape:
            continue
        strides = slice_strides(value.owner.operation, tensor.shape, base=0, module_op=module_op)
        dynamic = ir.ShapedType.get_dynamic_stride_or_offset()
        if strides is None or any(s == dynamic for s, n in zip(strides, tensor.shape) if n != 1):
            continue
        if kernel is None:
            kernel = lookup_symbol(module_op, name)
            if kernel is None or kernel.name != "func.func":
                return name
        param = function_type(kernel).inputs[i]
        if not isinstance(param, ir.MemRefType) or list(param.shape) != list(tensor.shape):
            continue
        changes[i] = strided_type(param, strides)
    if not changes:
        return name
    variant, _ = layout_variant(module_op, kernel, changes)
    return name if variant is None else variant


class InplaceRewriter:
    """Rewrites the ``tdf.call`` and element-wise linalg ops of one function
    in program order (:meth:`run`); records the rejected candidates
    (``rejections``) and the ``tdf.call_inplace`` ops it made
    (``generated``: ``(op, original callee)``)."""

    def __init__(self, func, module_op, ctx, size_match: bool, warned=None):
        self.func = func.operation
        self.module_op = module_op
        self.ctx = ctx
        self.analysis = InplaceAnalysis(func, size_match)
        self.size_match = size_match
        self.rejections: list[Rejection] = []
        self.to_erase: list[ir.Operation] = []
        self.kernels: dict = {}
        self.warned = warned if warned is not None else set()
        self.generated: list = []  # (tdf.call_inplace made from a tdf.call, its callee attr)

    def stat(self, name, amount=1):
        if self.ctx is not None:
            self.ctx.statistic(name, amount)

    def run(self) -> int:
        rewrites = 0
        for op in list(self.analysis.liveness.ops):
            if op.name == "tdf.call_inplace":
                self.analysis.note_inplace(op)
            elif op.name == "tdf.call":
                rewrites += self.call(op)
            elif op.name.startswith("linalg.") and is_elementwise_linalg(op):
                rewrites += self.linalg(op)
        for op in self.to_erase:
            op.erase()
        return rewrites

    def warn_contradiction(self, kernel, params, j) -> None:
        """Warns (once per kernel and pair) when ``tdf.elementwise`` or
        ``tdf.inplace_ok`` promises a pair that the kernel's body breaks."""
        problem = kernel.contradiction(params, j)
        key = (kernel.name, params, j)
        if problem is None or key in self.warned or self.ctx is None:
            return
        self.warned.add(key)
        attr = INPLACE_OK_ATTR if (params[0], j) in kernel.declared_pairs else ELEMENTWISE_ATTR
        self.ctx.warning(problem.op, f"@{kernel.name} is marked {attr} but its body does not "
                                     f"keep the promise for operand #{params[0]} and result "
                                     f"#{j}: {problem.message}; not computed in place")

    def reject(self, rejection: Rejection) -> None:
        self.rejections.append(rejection)
        self.stat(f"rejected-{rejection.rule}")

    def kernel_info(self, op):
        callee = ir.FlatSymbolRefAttr(op.attributes["callee"]).value
        key = (callee, len(op.operands), len(op.results))
        if key not in self.kernels:
            kernel = lookup_symbol(self.module_op, callee)
            info = None
            if kernel is not None and kernel.name == "func.func":
                try:
                    info = KernelInfo(kernel, len(op.operands), len(op.results))
                except BadKernelAttribute as err:
                    if self.ctx is None:
                        raise
                    self.ctx.error(kernel, f"@{callee}: {err}")
            self.kernels[key] = info
        return self.kernels[key]

    def too_deep(self, op) -> bool:
        """Whether ``op`` is nested in more branches than
        :data:`MAX_BRANCH_DEPTH` (rejected with rule ``depth``)."""
        liveness = self.analysis.liveness
        depth = liveness.branch_depth(op) if op_key(op) in liveness.info else branch_depth(op)
        if depth <= MAX_BRANCH_DEPTH:
            return False
        self.reject(Rejection("depth", op, op.location, 0, [
            f"nested in {depth} scf.if/scf.index_switch ops (more than {MAX_BRANCH_DEPTH}): "
            f"in-place updates through nested branches make One-Shot Bufferize's analysis "
            f"polynomial in the depth; left out of place"]))
        return True

    def call(self, op) -> int:
        kernel = self.kernel_info(op)
        if kernel is None or self.too_deep(op):
            return 0
        operands = list(op.operands)
        indices, taken, pending = self._choose_call_operands(op, kernel, operands)
        if all(i < 0 for i in indices):
            for rejection in pending.values():
                self.reject(rejection)
            return 0
        name = self._call_variant(op, kernel, operands, indices)
        if name is None:
            return 0
        for rejection in pending.values():
            # an operand rejected for one result but used by another is fine
            if rejection.operand not in taken:
                self.reject(rejection)
        self._replace_call(op, name, operands, indices)
        return 1

    def _choose_call_operands(self, op, kernel, operands):
        """``(indices, taken, pending)``: for each result of call ``op`` the
        operand it is computed in (-1: none), the operands chosen, and the
        first rejection of each operand not chosen."""
        indices = [-1] * len(op.results)
        taken: set[int] = set()
        pending: dict[int, Rejection] = {}
        for j in range(len(op.results)):
            for i, value in enumerate(operands):
                if i in taken or not is_tensor(value):
                    continue
                why = self._call_operand_problem(op, kernel, operands, taken, i, j)
                if why is _SKIP:
                    continue
                if why is not None:
                    pending.setdefault(i, why)
                    continue
                indices[j] = i
                taken.add(i)
                break
        return indices, taken, pending

    def _call_operand_problem(self, op, kernel, operands, taken, i: int, j: int):
        """None when result ``j`` of call ``op`` may be computed in operand
        ``i``; else a :class:`Rejection`, or ``_SKIP`` when the operand's
        buffer already holds another result."""
        value, result = operands[i], op.results[j]
        if value.type != result.type:
            return Rejection("fits", op, op.location, i, [
                f"operand #{i} (", value, f") has type {value.type}, "
                f"result #{j} needs {result.type}"])
        shape_source = None if ir.RankedTensorType(result.type).has_static_shape \
            else fresh_shape_operand(op, j)
        if shape_source is not None and not same_sizes(value, shape_source):
            # A fresh dynamic result has the sizes of the shape
            # operand; equal types do not mean equal sizes.
            return Rejection("fits", op, op.location, i, [
                f"operand #{i} (", value, ") is not provably of the size of result "
                f"#{j}, which takes its dynamic sizes from ", shape_source])
        if any(operands[t] == value for t in taken):
            return _SKIP  # that buffer already holds another result
        same = tuple([i] + [k for k, other in enumerate(operands)
                            if k != i and other == value])
        if not kernel.safe(same, j):
            self.warn_contradiction(kernel, same, j)
            problem = None if kernel.is_declaration else kernel.body_problem(same, j)
            detail = (f": {problem.message}" if problem is not None
                      else " (mark it tdf.elementwise or tdf.inplace_ok)")
            return Rejection("kernel", op, op.location, i, [
                f"@{kernel.name} is not known to be element-wise on operand #{i} "
                f"and result #{j}{detail}"])
        return self.analysis.check(op, i, result.type)

    def _call_variant(self, op, kernel, operands, indices):
        """The in-place variant of ``kernel`` for ``indices`` (generated or
        reused, strided for a slice written back), or None after a
        rejection."""
        repeated = [i for i in indices if i >= 0
                    and sum(1 for other in operands if other == operands[i]) > 1]
        if repeated and not kernel.is_declaration and not kernel.variant_elementwise(indices):
            # One-Shot Bufferize lets a call read and write one buffer through
            # two operands only when the callee is tdf.elementwise; the variant
            # cannot carry it, so the operand would be copied.
            i = repeated[0]
            self.reject(Rejection("kernel", op, op.location, i, [
                f"operand #{i} (", operands[i], f") is passed several times and the in-place "
                f"variant of @{kernel.name} is not element-wise on all its same-typed inputs "
                f"(One-Shot Bufferize would copy it)"]))
            return None
        if not kernel.variant_indices_ok(indices):
            self.reject(Rejection("kernel", op, op.location, max(indices), [
                f"@{kernel.name} is a declaration whose tdf.inplace_variant computes the pairs "
                f"of tdf.inplace_ok, not inplace {indices}"]))
            return None
        name, why = inplace_variant(kernel, self.module_op, indices)
        if name is None:
            self.reject(Rejection("kernel", op, op.location, max(indices), [why]))
            return None
        return _slice_layout_variant(self.module_op, name, operands, indices, list(op.results))

    def _replace_call(self, op, name: str, operands, indices) -> None:
        """Replaces ``tdf.call`` ``op`` by ``tdf.call_inplace @name`` with
        ``indices``, keeping the analyses current."""
        with ir.InsertionPoint(op), op.location:
            new = tdf_d.CallInplaceOp([r.type for r in op.results], ir.FlatSymbolRefAttr.get(name),
                                      operands, ir.DenseI64ArrayAttr.get(indices)).operation
        copy_attributes(op, new)
        for old, fresh in zip(op.results, new.results):
            old.replace_all_uses_with(fresh)
        self.analysis.replace_op(op, new)
        self.analysis.note_inplace(new)
        self.generated.append((new, op.attributes["callee"]))
        op.erase()
        self.stat("rewrites")
        self.stat("inplace-results", sum(1 for i in indices if i >= 0))

    def linalg(self, op) -> int:
        results = list(op.results)
        if not results or not all(is_tensor(r) for r in results) or self.too_deep(op):
            return 0
        count = len(results)
        operands = list(op.operands)
        first_init = len(operands) - count
        identity = identity_operands(op)
        changed = 0
        taken: set[int] = set()
        for j, result in enumerate(results):
            init_index = first_init + j
            init = operands[init_index]
            if isinstance(init.owner, ir.Block) or init.owner.operation.name != "tensor.empty":
                continue
            if not identity[init_index] or reads_output(op, init_index):
                continue  # the payload reads the (undefined) init: leave it alone
            chosen, pending = self._choose_linalg_input(op, operands, first_init, identity,
                                                        taken, result)
            for rejection in pending:
                self.reject(rejection)
            if chosen is None:
                continue
            value = self._adapted_init(op, operands[chosen], result)
            op.operands[init_index] = value
            self.analysis.alias.union(result, value)
            taken.add(chosen)
            if len(list(init.uses)) == 0:
                self.to_erase.append(init.owner.operation)
            self.stat("inplace-results")
            changed = 1
        if changed:
            self.stat("rewrites")
        return changed

    def _choose_linalg_input(self, op, operands, first_init: int, identity, taken, result):
        """``(i, rejections)``: the first input of linalg ``op`` that
        ``result`` may be computed in (None: none), and the rejections of
        the inputs tried before it."""
        pending = []
        for i in range(first_init):
            value = operands[i]
            if i in taken or not is_tensor(value):
                continue
            repeated = [k for k in range(first_init) if k != i and operands[k] == value]
            if any(not identity[k] for k in repeated):
                pending.append(Rejection("fits", op, op.location, i, [
                    f"operand #{i} (", value, ") is also read broadcast"]))
                continue
            why = self.analysis.check(op, i, result.type, identity=identity[i],
                                      exact_only=not self.size_match)
            if why is not None:
                pending.append(why)
                continue
            return i, pending
        return None, pending

    def _adapted_init(self, op, value, result):
        """``value`` as the init of ``result`` of ``op``: itself, or (under
        ``size-match``) a ``tensor.cast`` / leading-corner
        ``tensor.extract_slice`` of it created before ``op``."""
        if value.type == result.type:
            return value
        source = value
        with ir.InsertionPoint(op), op.location:
            if size_adaptation(value.type, result.type) == "cast":
                value = tensor.CastOp(result.type, value).result
            else:
                rank = ir.RankedTensorType(result.type).rank
                value = tensor.ExtractSliceOp(result.type, value, [], [], [], [0] * rank,
                                              list(ir.RankedTensorType(result.type).shape),
                                              [1] * rank).result
            self.analysis.liveness.info[op_key(value.owner)] = \
                self.analysis.liveness.record(op)
        self.analysis.alias.union(value, source)
        return value
