"""Which kernels may compute a result in the storage of an input (the
``kernel`` rule of ``tdf-insert-inplace``).

A kernel is a ``func.func`` in destination-passing style: parameters
``(inputs..., outputs...)`` with one output memref per result of the calling
``tdf.call``. Pair ``(i, j)`` (operand *i*, result *j*) is *in-place safe*
when the kernel computes the same values if output parameter ``N + j`` is
the very buffer of input parameter ``i``. The promise that makes this safe
(``tdf.elementwise``) is that the kernel behaves as *one* parallel loop whose
iteration *i* reads only index *i* of each input and then writes only index
*i* of each output ("each output element depends only on same-index inputs"
is not enough: ``out = a + b; out = out * a`` breaks in place). It is known

* for a kernel with a body, only from the body (:meth:`KernelInfo.body_problem`
  states the rule); a ``tdf.elementwise`` or ``tdf.inplace_ok`` attribute the
  body contradicts gets a warning naming the offending op, and no rewrite;
* for a declaration (resolved at JIT time), from its attributes: ``tdf.inplace_ok
  = [[i, j], ...]`` (an array of ``[operand, result]`` pairs, the author's
  promise) or the unit attribute ``tdf.elementwise`` (every pair whose memref
  types are equal).

The variant of kernel ``@k`` for indices ``[i0, -1, ...]`` takes the kernel's
parameters minus the output parameter of every in-place result (the kernel
writes those through the input parameter); the variants are made by
:mod:`tdf.passes._kernel_variants`:

* kernels with a body: the pass clones ``@k`` as ``@k_inplace`` (suffixed by
  the indices when not ``[0]``: ``@k_inplace_1``, ``@k_inplace_0_n``),
  replacing each dropped output parameter by its input parameter; the clone
  carries ``tdf.inplace_of = @k`` and ``tdf.inplace_indices`` so it is found
  and reused, and ``tdf.elementwise`` when the body keeps the promise even
  with every same-typed input in the written storage
  (:meth:`KernelInfo.variant_elementwise`: One-Shot Bufferize trusts it when
  a call passes one buffer as several operands);
* declarations (resolved at JIT time) must name their variant with
  ``tdf.inplace_variant = @k_ip`` plus ``tdf.inplace_ok``: the variant
  computes *all* the pairs of ``tdf.inplace_ok`` in place; the pass declares
  ``@k_ip`` (private, copying ``tdf.elementwise``) when the module lacks it.
"""

from __future__ import annotations

from mlir import ir

from ...vocabulary import (
    ELEMENTWISE_ATTR,
    INPLACE_OK_ATTR,
    INPLACE_VARIANT_ATTR,
)
from ..ir_utils import function_type, op_key

__all__ = [
    "ELEMENTWISE_OPS", "KernelInfo", "BodyProblem", "BadKernelAttribute", "is_elementwise_linalg", "identity_operands",
    "ins_outs", "reads_output",
]


ELEMENTWISE_OPS = frozenset({
    "linalg.add", "linalg.sub", "linalg.mul", "linalg.div", "linalg.div_unsigned",
    "linalg.max", "linalg.min", "linalg.powf", "linalg.exp", "linalg.log",
    "linalg.abs", "linalg.ceil", "linalg.floor", "linalg.negf", "linalg.reciprocal",
    "linalg.round", "linalg.sqrt", "linalg.rsqrt", "linalg.square", "linalg.tanh",
    "linalg.erf", "linalg.copy", "linalg.map", "linalg.elementwise", "linalg.generic",
})


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
    the identity map (no broadcast, no transpose)? Scalars count as False.

    ``indexing_maps`` has one map per operand, scalar operands (rank-0 maps
    ``(d0, ...) -> ()``) included, so operand ``k`` is read through map ``k``."""
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
        amap = maps[index] if index < len(maps) else None
        flags.append(amap is not None
                     and len(amap.results) == ir.ShapedType(value.type).rank
                     and amap == ir.AffineMap.get_identity(amap.n_dims))
    return flags


# Structured ops without ``operandSegmentSizes``: their number of outputs.
_SINGLE_INIT_OPS = frozenset({"linalg.map", "linalg.transpose", "linalg.broadcast"})


def ins_outs(op) -> tuple[int, int] | None:
    """``(inputs, outputs)`` operand counts of linalg op ``op``, or None when
    the op is not a destination-style linalg op this module knows."""
    op = op.operation
    if not op.name.startswith("linalg."):
        return None
    if "operandSegmentSizes" in op.attributes:
        sizes = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))
        if len(sizes) == 2:
            return sizes[0], sizes[1]
        return None
    if op.name in _SINGLE_INIT_OPS:
        return len(op.operands) - 1, 1
    return None


def reads_output(op, index: int) -> bool:
    """Does linalg op ``op`` read the old contents of its output operand
    ``index`` (its payload uses the output's block argument)? True when the
    payload cannot be matched to the operands (conservative)."""
    op = op.operation
    if len(op.regions) != 1 or len(op.regions[0].blocks) != 1:
        return True
    args = op.regions[0].blocks[0].arguments
    if len(args) != len(op.operands):
        return True
    return len(list(args[index].uses)) > 0


class BadKernelAttribute(ValueError):
    """A kernel's ``tdf.inplace_ok`` is not a list of [operand, result]
    pairs (the in-place passes report it as an error at the kernel)."""


def _pair_list(attr) -> list[tuple[int, int]]:
    """The pairs of a ``tdf.inplace_ok`` value: ``[[0, 0], [1, 0]]`` (arrays
    of integers, or ``array<i64: 0, 0>`` entries)."""
    def bad():
        return BadKernelAttribute(f"'{INPLACE_OK_ATTR}' must be a list of [operand, result] "
                                  f"pairs of integers, e.g. [[0, 0]], got {attr}")
    if not isinstance(attr, ir.ArrayAttr):
        raise bad()
    pairs = []
    for item in attr:
        if isinstance(item, ir.DenseI64ArrayAttr):
            values = list(item)
        elif isinstance(item, ir.ArrayAttr) and all(isinstance(x, ir.IntegerAttr) for x in item):
            values = [ir.IntegerAttr(x).value for x in item]
        else:
            raise bad()
        if len(values) != 2:
            raise bad()
        pairs.append((values[0], values[1]))
    return pairs


class BodyProblem:
    """Why a kernel body does not keep the in-place promise for a pair:
    ``op`` is the offending op (or the kernel), ``message`` says what it
    does."""

    def __init__(self, op, message: str):
        self.op = op
        self.message = message


class KernelInfo:
    """What a kernel allows: ``safe(params, j)`` and the variant
    lookup/creation for a set of indices.

    A kernel with a body is judged by its body (:meth:`body_problem`); its
    ``tdf.elementwise`` / ``tdf.inplace_ok`` attributes only matter for
    declarations. :meth:`contradiction` tells when an attribute promises a
    pair that the body breaks."""

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
        self.variant_name = (ir.FlatSymbolRefAttr(attrs[INPLACE_VARIANT_ATTR]).value
                             if INPLACE_VARIANT_ATTR in attrs else None)
        self._problems: dict = {}

    def _types_match(self, i: int, j: int) -> bool:
        inputs = list(self.ftype.inputs)
        return (self.n + j < len(inputs) and i < self.n
                and isinstance(inputs[i], ir.MemRefType) and inputs[i] == inputs[self.n + j])

    def promised(self, i: int, j: int) -> bool:
        """Does an attribute promise pair ``(i, j)``?"""
        return (i, j) in self.declared_pairs or (self.elementwise_attr and self._types_match(i, j))

    def safe(self, params, j: int) -> bool:
        """May result ``j`` be computed in the buffer of operand ``params[0]``,
        which the call also passes as every operand in ``params``?"""
        params = tuple(params)
        i = params[0]
        if self.is_declaration:
            if (i, j) in self.declared_pairs:
                return all((k, j) in self.declared_pairs or self.elementwise_attr for k in params)
            return self.elementwise_attr and self._types_match(i, j)
        return self._types_match(i, j) and self.body_problem(params, j) is None

    def contradiction(self, params, j: int) -> BodyProblem | None:
        """The body's :class:`BodyProblem` for a pair an attribute promises."""
        if self.is_declaration or not self.promised(params[0], j):
            return None
        return self.body_problem(tuple(params), j)

    def body_problem(self, params: tuple, j: int) -> BodyProblem | None:
        """None when the body provably computes the same outputs if output
        parameter ``N + j`` and every input parameter in ``params`` are one
        buffer ``B``; otherwise what breaks it. The rule (conservative; all in
        the kernel's single block, in program order):

        * every use of a parameter in ``params`` or of the output is an
          operand of a linalg op directly in the kernel's block;
        * the inputs are only read (never a linalg output);
        * the output is not read or written before its first writer ``W``,
          and ``W`` does not read its old contents (payload, or as an input);
        * ``W`` is element-wise (only parallel iterators) and accesses the
          inputs and the output through identity indexing maps: its
          iteration *i* reads index *i* of the inputs, then writes index *i*;
        * no op after ``W`` reads an input (``B`` now holds the output).

        Before ``W`` the inputs may be read any way (``B`` still holds them);
        after ``W`` only the output's name is used, with the same contents
        in both cases."""
        key = (params, j)
        if key in self._problems:
            return self._problems[key]
        problem = self._body_problem(params, j)
        self._problems[key] = problem
        return problem

    def _body_problem(self, params: tuple, j: int) -> BodyProblem | None:
        kernel = self.kernel
        region = kernel.regions[0]
        if len(region.blocks) != 1:
            return BodyProblem(kernel, f"@{self.name} has more than one block")
        out = self.n + j
        if out >= len(region.blocks[0].arguments):
            return BodyProblem(kernel, f"@{self.name} has no output parameter #{out}")
        accesses = self._accesses(params, out)
        if isinstance(accesses, BodyProblem):
            return accesses
        writes = [a for a in accesses if a[3] and a[2] >= a[4]]
        for _where, user, number, is_out, n_in in accesses:
            if not is_out and number >= n_in:
                return BodyProblem(user, f"{user.name} writes an input parameter of "
                                         f"@{self.name} (its operand #{number})")
        if not writes:
            return BodyProblem(kernel, f"@{self.name} never writes output parameter #{out}")
        problem = self._order_problem(accesses, writes[0], out)
        if problem is not None:
            return problem
        return self._writer_problem(accesses, writes[0], out)

    def _accesses(self, params: tuple, out: int):
        """``(position, op, operand number, is_output_param, the op's input
        count)`` of every use of parameters ``params`` and ``out`` in the
        kernel's block, in block order; a :class:`BodyProblem` when one is
        not a linalg op directly in the block."""
        block = self.kernel.regions[0].blocks[0]
        args = block.arguments
        position = {}
        for index, inner in enumerate(block.operations):
            position[op_key(inner.operation)] = index
        accesses: list[tuple[int, ir.Operation, int, bool, int]] = []
        for param in list(params) + [out]:
            label = f"output parameter #{out}" if param == out else f"input parameter #{param}"
            for use in args[param].uses:
                user = use.owner.operation
                where = position.get(op_key(user))
                counts = ins_outs(user)
                if where is None or counts is None:
                    return BodyProblem(user, f"{user.name} uses {label} of @{self.name}, and only "
                                             f"linalg ops directly in the kernel's block are analysed")
                accesses.append((where, user, use.operand_number, param == out, counts[0]))
        accesses.sort(key=lambda a: a[0])
        return accesses

    def _order_problem(self, accesses, write, out: int) -> BodyProblem | None:
        """The output parameter read before ``write`` (the first write of
        it), or an input read after it."""
        first, writer = write[0], write[1]
        for where, user, number, is_out, _n_in in accesses:
            if is_out and where < first:
                return BodyProblem(user, f"{user.name} reads output parameter #{out} of "
                                         f"@{self.name} before it is written")
            if not is_out and where > first:
                return BodyProblem(user, f"{user.name} reads an input parameter of @{self.name} "
                                         f"(its operand #{number}) after {writer.name} wrote output "
                                         f"parameter #{out} in its storage")
        return None

    def _writer_problem(self, accesses, write, out: int) -> BodyProblem | None:
        """The op of ``write`` (the first write of the output parameter) is
        not element-wise on the parameters, or reads the output's old
        contents."""
        first, writer, n_ins = write[0], write[1], write[4]
        if not is_elementwise_linalg(writer):
            return BodyProblem(writer, f"{writer.name} writes output parameter #{out} of "
                                       f"@{self.name} and is not element-wise (a reduction or a "
                                       f"non-parallel loop)")
        flags = identity_operands(writer)
        for where, _user, number, is_out, _n_in in accesses:
            if where != first:
                continue
            if not flags[number]:
                return BodyProblem(writer, f"{writer.name} accesses operand #{number} with a "
                                           f"non-identity indexing map (transposed, broadcast, "
                                           f"reversed or constant index)")
            if is_out and (number < n_ins or reads_output(writer, number)):
                return BodyProblem(writer, f"{writer.name} reads the old contents of output "
                                           f"parameter #{out} of @{self.name}")
        return None

    def variant_indices_ok(self, indices: list[int]) -> bool:
        """Declarations: the named variant implements exactly the declared pairs."""
        if not self.is_declaration:
            return True
        chosen = {(i, j) for j, i in enumerate(indices) if i >= 0}
        return self.variant_name is not None and chosen == self.declared_pairs


    def variant_elementwise(self, indices) -> bool:
        """Does the in-place variant for ``indices`` keep the ``tdf.elementwise``
        promise (what One-Shot Bufferize's ``bufferizesToElementwiseAccess``
        relies on when the call passes one buffer as several operands)? Yes
        when, for every in-place result ``j``, the body keeps the promise even
        with *every* input parameter of the output's type in its storage."""
        inputs = list(self.ftype.inputs)
        for j, i in enumerate(indices):
            if i < 0:
                continue
            group = tuple([i] + [k for k in range(self.n) if k != i and inputs[k] == inputs[self.n + j]])
            if self.body_problem(group, j) is not None:
                return False
        return True
