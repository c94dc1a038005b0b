"""Shapes and layouts: provable equality of dynamic tensor sizes (the
in-place "fits" rule), and the memref strides One-Shot Bufferize gives a
tensor (:func:`buffer_strides`) and the slices taken of it
(:func:`slice_strides`, :func:`inverse_view_strides`), for the kernel
variants that take a slice where it lies.

Two tensors of one type ``tensor<?x...>`` may have different sizes at run
time. An operand fits a result of dynamic shape only when every dimension is
*provably* the same size: :func:`dim_key` names the size of dimension ``d``
of a value by following the ops whose result sizes are those of an operand
(``tensor.empty`` sizes, ``tensor.dim`` of a constant dimension, ``tensor.cast``,
the inits of linalg ops, ``tensor.insert``/``insert_slice`` destinations,
``tdf.call``/``tdf.call_inplace`` results and ``tdf.assume_unaliased``) back to
a static size, an SSA size value or a dimension of a value with no such
producer (a function argument, a loop-carried value, an opaque result).
Equal keys mean equal sizes; anything else is "not provably equal"."""

from __future__ import annotations

from mlir import ir

from ...vocabulary import ASSUME_UNALIASED
from ..ir_utils import constant_int

__all__ = ["dim_key", "same_sizes", "fresh_shape_operand", "row_major", "buffer_strides",
           "slice_strides", "inverse_view_strides"]

_MAX_DEPTH = 32


def _dynamic() -> int:
    return ir.ShapedType.get_dynamic_size()


def fresh_shape_operand(op, result_index: int):
    """The operand giving the sizes of the dynamic dimensions of fresh result
    ``result_index`` of a ``tdf.call``/``tdf.call_inplace``: the first ranked
    tensor operand of the result's rank (the dialect's rule), or None."""
    rank = ir.RankedTensorType(op.results[result_index].type).rank
    for value in op.operands:
        if isinstance(value.type, ir.RankedTensorType) and ir.RankedTensorType(value.type).rank == rank:
            return value
    return None


def _size_key(value, depth):
    """The key of an index value used as a size."""
    constant = constant_int(value)
    if constant is not None:
        return constant
    owner = value.owner
    if not isinstance(owner, ir.Block) and owner.operation.name == "tensor.dim" and depth < _MAX_DEPTH:
        index = constant_int(owner.operation.operands[1])
        source = owner.operation.operands[0]
        if index is not None and isinstance(source.type, ir.RankedTensorType) \
                and 0 <= index < ir.RankedTensorType(source.type).rank:
            return dim_key(source, index, depth + 1)
    return ("value", value)


def dim_key(value, d: int, depth: int = 0):
    """A key of the size of dimension ``d`` of ranked tensor ``value``: an int
    for a static size, else a hashable-by-equality tuple; equal keys mean
    provably equal sizes."""
    type_ = ir.RankedTensorType(value.type)
    size = type_.shape[d]
    if size != _dynamic():
        return size
    owner = value.owner
    if depth >= _MAX_DEPTH or isinstance(owner, ir.Block):
        return ("dim", value, d)
    op = owner.operation
    name = op.name
    result_number = ir.OpResult(value).result_number
    if name == "tensor.empty":
        dynamic_before = sum(1 for s in type_.shape[:d] if s == _dynamic())
        return _size_key(op.operands[dynamic_before], depth + 1)
    if name in ("tensor.cast", ASSUME_UNALIASED):
        source = op.operands[0]
        if ir.RankedTensorType(source.type).rank == type_.rank:
            return dim_key(source, d, depth + 1)
    if name in ("tensor.insert", "tensor.insert_slice"):
        return dim_key(op.operands[1], d, depth + 1)
    if name.startswith("linalg.") and len(op.results) and len(op.operands) >= len(op.results):
        # Destination style: result i has the type (and sizes) of init i.
        init = op.operands[len(op.operands) - len(op.results) + result_number]
        if init.type == value.type:
            return dim_key(init, d, depth + 1)
    if name in ("tdf.call", "tdf.call_inplace"):
        index = -1
        if name == "tdf.call_inplace":
            index = list(ir.DenseI64ArrayAttr(op.attributes["inplace_indices"]))[result_number]
        if index >= 0:
            return dim_key(op.operands[index], d, depth + 1)
        source = fresh_shape_operand(op, result_number)
        if source is not None:
            return dim_key(source, d, depth + 1)
    return ("dim", value, d)


def same_sizes(a, b) -> bool:
    """True when ranked tensors ``a`` and ``b`` provably have the same sizes
    (same rank, every dimension's key equal)."""
    if a == b:
        return True
    ta, tb = ir.RankedTensorType(a.type), ir.RankedTensorType(b.type)
    if ta.rank != tb.rank:
        return False
    return all(dim_key(a, d) == dim_key(b, d) for d in range(ta.rank))


# -- memref layouts after One-Shot Bufferize ----------------------------------

def _dynamic_stride() -> int:
    return ir.ShapedType.get_dynamic_stride_or_offset()


def row_major(shape) -> list[int]:
    """Identity-layout strides of ``shape``: a stride is dynamic when a size
    inside it is."""
    strides: list[int] = []
    stride = 1
    for size in reversed(list(shape)):
        strides.insert(0, stride)
        if stride != _dynamic_stride():
            stride = _dynamic_stride() if size == _dynamic() else stride * size
    return strides


def _param_strides(param, tensor) -> list[int]:
    """Strides of the buffer a kernel call result of ranked tensor type
    ``tensor`` gets in a parameter of memref type ``param`` (the dialect's
    ``resultBufferType``: the parameter's layout, the result's shape)."""
    memref = ir.MemRefType(param)
    if _is_identity(memref):
        return row_major(tensor.shape)
    try:
        strides, _ = memref.get_strides_and_offset()
    except Exception:  # not a strided layout
        return [_dynamic_stride()] * tensor.rank
    return list(strides)


def _is_identity(memref) -> bool:
    return isinstance(memref.layout, ir.AffineMapAttr) and \
        memref.affine_map == ir.AffineMap.get_identity(memref.rank)


def buffer_strides(value, module_op=None, _assumed=None, _depth: int = 0) -> list[int]:
    """The strides of the memref that One-Shot Bufferize (function boundaries
    with identity layouts, as every tdf pipeline runs it) gives ranked
    tensor ``value``, one per dimension, dynamic where they are not known
    statically. A static stride is only claimed where it holds whatever
    One-Shot's analysis decides: a function argument, a ``tensor.empty`` or a
    constant has the identity layout; a ``tensor.extract_slice`` (never a
    copy) composes its source's strides with its steps; a ``tdf.call`` /
    ``tdf.call_inplace`` result has its kernel parameter's layout (looked up
    in ``module_op``); an op that may copy its destination out of place
    (``insert_slice``, ``insert``, a linalg init, a cast or reshape, an
    ``scf.for`` carried value) keeps a static layout only when it is the
    identity, the layout of the copy too. A kernel parameter given these
    strides (dynamic where unknown) always accepts the buffer through a
    ``memref.cast`` that cannot fail at run time, never a reallocation."""
    type_ = ir.RankedTensorType(value.type)
    unknown = [_dynamic_stride()] * type_.rank
    identity = row_major(type_.shape)
    if _depth >= _MAX_DEPTH:
        return unknown
    assumed = _assumed if _assumed is not None else {}
    if value in assumed:
        return assumed[value]

    def identity_if(source):
        if not isinstance(source.type, ir.RankedTensorType):
            return unknown
        strides = buffer_strides(source, module_op, assumed, _depth + 1)
        return identity if strides == row_major(ir.RankedTensorType(source.type).shape) else unknown

    owner = value.owner
    if isinstance(owner, ir.Block):
        return _block_argument_strides(value, identity, unknown, module_op, assumed, _depth)
    op = owner.operation
    name = op.name
    number = ir.OpResult(value).result_number
    if name in ("tensor.empty", "arith.constant", "bufferization.alloc_tensor"):
        return identity
    if name == "tensor.extract_slice":
        base = buffer_strides(op.operands[0], module_op, assumed, _depth + 1)
        return _extract_slice_strides(op, base, type_, unknown)
    if name in ("tdf.call", "tdf.call_inplace") and module_op is not None:
        return _call_result_strides(op, number, type_, module_op, unknown)
    copied = _copied_operand(op, number)
    if copied is not None:
        return identity_if(copied)
    if name == "scf.for":
        return _loop_strides(op, number, identity, unknown, module_op, assumed, _depth)
    return unknown


def _copied_operand(op, number: int):
    """The operand whose buffer result ``number`` of ``op`` reuses unless
    One-Shot copies it out of place (a destination, an init, the source of
    a cast or reshape), or None."""
    name = op.name
    if name in ("tensor.insert_slice", "tensor.insert"):
        return op.operands[1]
    if name in ("tensor.cast", ASSUME_UNALIASED, "tensor.expand_shape",
                "tensor.collapse_shape"):
        return op.operands[0]
    if name.startswith("linalg.") and len(op.operands) >= len(op.results):
        return op.operands[len(op.operands) - len(op.results) + number]
    return None


def _block_argument_strides(value, identity, unknown, module_op, assumed, depth):
    """:func:`buffer_strides` of a block argument: the identity for a
    function's argument (identity layouts at the boundary), a loop-carried
    value's for an ``scf.for`` iteration argument, else unknown."""
    owner = value.owner
    parent = owner.owner.operation if owner.owner is not None else None
    if parent is None:
        return unknown
    if parent.name == "func.func":
        # entry block: the function's arguments (identity layouts at
        # the boundary); another block's arguments are unknown
        return identity if owner == parent.regions[0].blocks[0] else unknown
    if parent.name == "scf.for":
        index = ir.BlockArgument(value).arg_number - 1
        if index < 0:
            return unknown
        return _loop_strides(parent, index, identity, unknown, module_op, assumed, depth)
    return unknown


def _extract_slice_strides(op, base, type_, unknown):
    """:func:`buffer_strides` of the result (type ``type_``) of
    ``tensor.extract_slice`` ``op`` whose source has strides ``base``."""
    sizes = list(ir.DenseI64ArrayAttr(op.attributes["static_sizes"]))
    steps = list(ir.DenseI64ArrayAttr(op.attributes["static_strides"]))
    full = [_dynamic_stride() if b == _dynamic_stride() or k == _dynamic_stride() else b * k
            for b, k in zip(base, steps)]
    if len(sizes) == type_.rank:
        return full
    # Rank-reduced: the kept dimensions are the result's; which unit
    # dimensions were dropped is ambiguous, so unit dimensions of the
    # result get a dynamic stride (any value fits them).
    kept, j = [], 0
    shape = list(type_.shape)
    for size, stride in zip(sizes, full):
        if j < len(shape) and (size == shape[j] or size == _dynamic()):
            kept.append(stride if shape[j] != 1 else _dynamic_stride())
            j += 1
        elif size != 1:
            return unknown
    return kept if j == len(shape) else unknown


def _call_result_strides(op, number: int, type_, module_op, unknown):
    """:func:`buffer_strides` of result ``number`` of a ``tdf.call`` /
    ``tdf.call_inplace`` ``op``: its kernel parameter's layout."""
    from ..ir_utils import function_type, lookup_symbol
    kernel = lookup_symbol(module_op, ir.FlatSymbolRefAttr(op.attributes["callee"]).value)
    if kernel is None or kernel.name != "func.func":
        return unknown
    inputs = list(function_type(kernel).inputs)
    indices = [-1] * len(op.results)
    if op.name == "tdf.call_inplace":
        indices = list(ir.DenseI64ArrayAttr(op.attributes["inplace_indices"]))
    if indices[number] >= 0:
        param = indices[number]
    else:
        param = len(op.operands) + sum(1 for i in indices[:number] if i < 0)
    if param >= len(inputs) or not isinstance(inputs[param], ir.MemRefType):
        return unknown
    return _param_strides(inputs[param], type_)


def _loop_strides(loop, index, identity, unknown, module_op, assumed, depth):
    """Strides of carried value ``index`` of ``scf.for`` ``loop`` (its region
    argument and its result have one buffer type): the identity when the init
    and the yielded value both have it (One-Shot promotes a mismatch to a
    fully dynamic layout)."""
    n_control = 3
    init = loop.operands[n_control + index]
    body = loop.regions[0].blocks[0]
    arg = body.arguments[1 + index]
    if not isinstance(init.type, ir.RankedTensorType):
        return unknown
    if buffer_strides(init, module_op, assumed, depth + 1) != row_major(
            ir.RankedTensorType(init.type).shape):
        return unknown
    terminator = list(body.operations)[-1]
    yielded = terminator.operands[index]
    inner = dict(assumed)
    inner[arg] = identity
    if buffer_strides(yielded, module_op, inner, depth + 1) != identity:
        return unknown
    return identity


# -- slices of buffers --------------------------------------------------------

def _reassociation(op) -> list[list[int]]:
    return [[ir.IntegerAttr(i).value for i in ir.ArrayAttr(group)]
            for group in ir.ArrayAttr(op.attributes["reassociation"])]


def slice_strides(op, shape, base: int = 1, module_op=None) -> list[int] | None:
    """Memref strides of the slice a ``tensor.insert_slice`` ``op`` writes
    (``base=1``: in its destination) or a ``tensor.extract_slice`` reads
    (``base=0``: in its source), seen with the static ``shape`` (its sizes,
    possibly with unit dimensions dropped: a rank reduction), in the buffer
    One-Shot Bufferize gives that destination or source
    (:func:`buffer_strides`, kernels looked up in
    ``module_op``: dynamic where not known statically, e.g. a slice of a
    loop-carried value); unit dimensions get a dynamic stride (any value fits
    them, so rank reduction needs no guessing). A kernel parameter of this
    layout takes the slice's subview through a ``memref.cast`` that never
    fails. None when the source has a dynamic shape, a size is dynamic or
    ``shape`` is no rank reduction of the sizes."""
    source = op.operands[base]
    sizes = list(ir.DenseI64ArrayAttr(op.attributes["static_sizes"]))
    steps = list(ir.DenseI64ArrayAttr(op.attributes["static_strides"]))
    dynamic = ir.ShapedType.get_dynamic_size()
    if not ir.RankedTensorType(source.type).has_static_shape or dynamic in sizes:
        return None
    full = [_dynamic_stride() if r == _dynamic_stride() or k == _dynamic_stride() else r * k
            for r, k in zip(buffer_strides(source, module_op), steps)]
    out, shape, j = [], list(shape), 0
    for size, stride in zip(sizes, full):
        if j < len(shape) and shape[j] == size:
            out.append(stride if size != 1 else _dynamic_stride())
            j += 1
        elif size != 1:
            return None
    return out if j == len(shape) else None


def inverse_view_strides(view, strides, shape) -> list[int] | None:
    """Strides after applying the inverse of reshape ``view`` (result of
    type ``shape``/``strides``) to get back to its source: a collapse for an
    ``expand_shape``, an expansion for a ``collapse_shape``. None when a
    collapse would merge dimensions that are not contiguous in memory."""
    groups = _reassociation(view)
    if view.name == "tensor.expand_shape":  # we collapse groups of `shape`
        out = []
        for group in groups:
            sized = [(shape[d], strides[d]) for d in group if shape[d] != 1]
            for (_, outer), (size, inner) in zip(sized, sized[1:]):
                if _dynamic_stride() in (outer, inner) or outer != inner * size:
                    return None
            out.append(sized[-1][1] if len(sized) and _size(sized) != 1 else _dynamic_stride())
        return out
    source = ir.RankedTensorType(view.operands[0].type).shape  # we expand
    out = [0] * len(source)
    for d, group in enumerate(groups):
        current = strides[d]
        for k in reversed(group):
            out[k] = _dynamic_stride() if source[k] == 1 or current == _dynamic_stride() else current
            if current != _dynamic_stride():
                current *= source[k]
    return out


def _size(sized) -> int:
    total = 1
    for size, _ in sized:
        total *= size
    return total
