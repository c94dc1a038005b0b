"""``tdf-bounds-checks``: run-time checks of every dynamic index, offset,
size and stride of the ops that read or write tensor/memref elements.

Checked ops: ``tensor.extract``, ``tensor.insert``, ``tensor.extract_slice``,
``tensor.insert_slice``, ``tensor.parallel_insert_slice``, ``memref.load``,
``memref.store`` and ``memref.subview`` (what the tensor ops become after
bufferization, and what memref kernels use). For an element access, every
index ``i`` of dimension ``d`` must satisfy ``0 <= i < dim(d)``; for a slice,
offset ``o``, size ``s`` and stride ``t`` must satisfy ``0 <= s <= dim(d)``
and ``o + (s - 1) * t < dim(d)`` with ``0 <= o`` (``o <= dim(d)`` when
``s = 0``), ``t >= 0``.

A check that cannot be proven at compile time becomes::

    %fail = arith.cmpi ugt, %pos, %c7 : index
    scf.if %fail {
      func.call @tdf_rt_bounds_error(%site, %pos, %size, %stride, %dim)
    }

``tdf_rt_bounds_error`` is the tdf runtime's (``python/src/Runtime.cpp``): it
records the failure and returns to the native call trampoline, which raises
``IndexError`` (it never returns into the compiled code). ``%site`` indexes
the module attribute ``tdf.runtime_sites`` (function, op, location,
dimension). Unsigned comparisons make one compare cover both ends.

**Placement.** A check is hoisted as early as its operands allow *within
the op's own block*: right after the last op of that block defining one of
the checked values, else at the start of the block. A block runs from its
start to its terminator, so the check runs exactly when the op would; it
only runs sooner. In particular an index that is a function argument (the
KV step's ``%pos``) is checked before the function writes anything. Checks
never move out of a region (a branch not taken or a loop that runs zero
times checks nothing).

**Proven in range, no check.** Constants, ``scf.for``/``scf.parallel``/
``affine.for`` induction variables with constant bounds, ``linalg.index``
over a static iteration domain, and ``arith``
``addi``/``subi``/``muli``/``remui``/``remsi``/``divui``/``index_cast`` of
such values get an interval; a check the interval proves is dropped (the
loops of a memref kernel over its own shape cost nothing).

Before::

    func.func @step(%cache: tensor<8x4xf32>, %row: tensor<1x4xf32>, %pos: index) -> tensor<8x4xf32> {
      %new = tensor.insert_slice %row into %cache[%pos, 0] [1, 4] [1, 1]
          : tensor<1x4xf32> into tensor<8x4xf32>
      return %new : tensor<8x4xf32>
    }

After::

    func.func @step(%cache: tensor<8x4xf32>, %row: tensor<1x4xf32>, %pos: index) -> tensor<8x4xf32> {
      %c7 = arith.constant 7 : index
      %fail = arith.cmpi ugt, %pos, %c7 : index
      scf.if %fail {
        ...
        func.call @tdf_rt_bounds_error(%c0_i64, %p, %c1_i64, %c1_i64, %c8_i64) : (i64, i64, i64, i64, i64) -> ()
      }
      %new = tensor.insert_slice %row into %cache[%pos, 0] [1, 4] [1, 1] ...

**Shapes.** A linalg op whose operand dimensions on one loop dimension are
not all static gets a check that their sizes agree (``passes/_shape_checks.py``;
site kind ``shape``, the runtime raises ``ValueError``), unless they are
provably equal; a ``tensor.cast``/``memref.cast`` from a dynamic to a static
size checks that size (kind ``cast``).

No options. Statistics: ``checks`` (run-time checks inserted), ``proven``
(dimensions proven in range at compile time).
"""

from __future__ import annotations

from mlir import ir

from ..vocabulary import BOUNDS_ERROR
from ._runtime_sites import SiteTable, declare, emit_failure_branch
from ._shape_checks import emit_cast_check, emit_shape_check, plan_cast_checks, plan_shape_checks
from .ir_utils import binary, cmpi, collect_ops, dim_size, has_body, index_const, select
from .registry import PassContext, register_pass

__all__ = ["bounds_checks", "CHECKED_OPS"]

# op name → (index of the checked tensor/memref operand, kind).
CHECKED_OPS = {
    "tensor.extract": (0, "index"),
    "tensor.insert": (1, "index"),
    "memref.load": (0, "index"),
    "memref.store": (1, "index"),
    "tensor.extract_slice": (0, "slice"),
    "tensor.insert_slice": (1, "slice"),
    "tensor.parallel_insert_slice": (1, "slice"),
    "memref.subview": (0, "slice"),
}
_DYNAMIC_SIZE = None
_DYNAMIC_OFFSET = None
_MAX_DEPTH = 24


def _dynamic_markers():
    global _DYNAMIC_SIZE, _DYNAMIC_OFFSET
    if _DYNAMIC_SIZE is None:
        _DYNAMIC_SIZE = ir.ShapedType.get_dynamic_size()
        _DYNAMIC_OFFSET = ir.ShapedType.get_dynamic_stride_or_offset()
    return _DYNAMIC_SIZE, _DYNAMIC_OFFSET


# ------------------------------------------------------------ intervals


def _int_attr(op, name="value"):
    try:
        return ir.IntegerAttr(op.attributes[name]).value
    except (ValueError, KeyError):
        return None


def _affine_constant(map_attr):
    try:
        amap = ir.AffineMapAttr(map_attr).value
    except ValueError:
        return None
    if amap.n_inputs != 0 or len(amap.results) != 1:
        return None
    text = str(amap.results[0])
    try:
        return int(text)
    except ValueError:
        return None


def _interval(value, depth=0):
    """A sound ``(low, high)`` of an index/integer value, or None."""
    if depth > _MAX_DEPTH:
        return None
    owner = value.owner
    if isinstance(owner, ir.Block):
        return _induction_interval(value, depth)
    op = owner.operation
    name = op.name
    if name == "linalg.index":
        return _linalg_index_interval(op)
    if name == "arith.constant":
        v = _int_attr(op)
        return None if v is None else (v, v)
    if name in ("arith.index_cast", "arith.index_castui", "arith.extsi"):
        return _interval(op.operands[0], depth + 1)
    if name in _BINARY_INTERVALS:
        a = _interval(op.operands[0], depth + 1)
        b = _interval(op.operands[1], depth + 1)
        return _BINARY_INTERVALS[name](a, b)
    return None


def _loop_range(low, high, step):
    """The interval of an induction variable from those of its bounds and
    step (any None, or a step that may not be positive: None)."""
    if low is None or high is None or step is None or step[0] <= 0:
        return None
    return (low[0], max(low[0], high[1] - 1))


def _induction_interval(value, depth):
    """:func:`_interval` of a block argument: the induction variable of an
    ``scf.for``, ``scf.parallel`` or constant-bound ``affine.for``."""
    parent = value.owner.owner
    if parent is None:
        return None
    arg = ir.BlockArgument(value).arg_number
    name = parent.name
    if name == "scf.for" and arg == 0:
        return _loop_range(*(_interval(parent.operands[i], depth + 1) for i in range(3)))
    if name == "scf.parallel":
        n = len(parent.operands)
        rank = list(ir.DenseI32ArrayAttr(parent.attributes["operandSegmentSizes"]))[0]
        if arg >= rank or n < 3 * rank:
            return None
        return _loop_range(*(_interval(parent.operands[k * rank + arg], depth + 1)
                             for k in range(3)))
    if name == "affine.for" and arg == 0 and len(parent.operands) == 0:
        low = _affine_constant(parent.attributes["lowerBoundMap"]) \
            if "lowerBoundMap" in parent.attributes else None
        high = _affine_constant(parent.attributes["upperBoundMap"]) \
            if "upperBoundMap" in parent.attributes else None
        step = _int_attr(parent, "step")
        if low is None or high is None or step is None or step <= 0:
            return None
        return (low, max(low, high - 1))
    return None


def _both(rule):
    """``rule(a, b)`` when both intervals are known, else None."""
    return lambda a, b: None if a is None or b is None else rule(a, b)


def _remainder(a, b):
    if a is not None and a[0] >= 0 and b is not None and b[0] > 0:
        return (0, min(a[1], b[1] - 1))
    return None


def _product(a, b):
    products = [x * y for x in a for y in b]
    return (min(products), max(products))


#: The interval of a binary arith op's result from its operands' intervals.
_BINARY_INTERVALS = {
    "arith.addi": _both(lambda a, b: (a[0] + b[0], a[1] + b[1])),
    "arith.subi": _both(lambda a, b: (a[0] - b[1], a[1] - b[0])),
    "arith.muli": _both(_product),
    "arith.remui": _remainder,
    "arith.remsi": _remainder,
    "arith.divui": _both(lambda a, b: (a[0] // b[1], a[1] // b[0])
                         if a[0] >= 0 and b[0] > 0 else None),
    "arith.minsi": _both(lambda a, b: (min(a[0], b[0]), min(a[1], b[1]))),
    "arith.maxsi": _both(lambda a, b: (max(a[0], b[0]), max(a[1], b[1]))),
}


def _linalg_index_interval(op):
    """``linalg.index d`` ranges over the iteration domain of its linalg op:
    ``[0, n - 1]`` where an operand's indexing map has ``d`` as a result
    whose dimension ``n`` is static."""
    dim = _int_attr(op, "dim")
    parent = op.parent
    if dim is None or parent is None or "indexing_maps" not in parent.attributes:
        return None
    dyn_size, _ = _dynamic_markers()
    maps = [ir.AffineMapAttr(m).value for m in ir.ArrayAttr(parent.attributes["indexing_maps"])]
    for operand, amap in zip(parent.operands, maps):
        if not isinstance(operand.type, (ir.RankedTensorType, ir.MemRefType)):
            continue
        shape = ir.ShapedType(operand.type).shape
        for k, expr in enumerate(amap.results):
            if str(expr) == f"d{dim}" and k < len(shape) and shape[k] != dyn_size and shape[k] > 0:
                return (0, shape[k] - 1)
    return None


# -------------------------------------------------------------- helpers


def _as_value(x):
    return index_const(x) if isinstance(x, int) else x


def _segments(op):
    return list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))


def _slice_parts(op):
    """(offsets, sizes, strides) of a slice op: each entry an int or a Value."""
    dyn_size, dyn_offset = _dynamic_markers()
    segments = _segments(op)
    start = sum(segments[:-3])
    operands = list(op.operands)
    groups = []
    for k, (attr, marker) in enumerate((("static_offsets", dyn_offset), ("static_sizes", dyn_size),
                                        ("static_strides", dyn_offset))):
        dynamic = iter(operands[start + sum(segments[-3:][:k]): start + sum(segments[-3:][:k + 1])])
        groups.append([next(dynamic) if v == marker else v
                       for v in ir.DenseI64ArrayAttr(op.attributes[attr])])
    return groups


def _checked_type(op, operand):
    t = op.operands[operand].type
    return ir.ShapedType(t)


def _range_of(x):
    return (x, x) if isinstance(x, int) else _interval(x)


def _slice_in_bounds(o, s, t, dim) -> bool:
    """Whether intervals prove the slice dimension in bounds (``dim`` an int)."""
    ro, rs, rt = _range_of(o), _range_of(s), _range_of(t)
    if ro is None or rs is None or rt is None:
        return False
    if ro[0] < 0 or rs[0] < 0 or rt[0] < 0 or rs[1] > dim:
        return False
    if rs[0] == 0:
        return rs[1] == 0 and ro[1] <= dim
    return ro[1] + (rs[1] - 1) * rt[1] < dim


# ----------------------------------------------------------------- pass


class _Anchors:
    """Positions of ops in their blocks (computed before any insertion)."""

    def __init__(self):
        self._positions = {}

    def _position(self, op):
        block = op.block
        key = block
        table = self._positions.get(key)
        if table is None:
            table = self._positions[key] = {o.operation: i for i, o in enumerate(block.operations)}
        return table.get(op.operation)

    def insertion_point(self, op, values):
        """The earliest point of ``op``'s block at which every value of
        ``values`` is defined."""
        block = op.operation.block
        latest, latest_pos = None, -1
        for value in values:
            owner = value.owner
            if isinstance(owner, ir.Block):
                continue
            def_op = owner.operation
            if def_op.block != block:
                continue
            pos = self._position(def_op)
            if pos is not None and pos > latest_pos:
                latest, latest_pos = def_op, pos
        if latest is None:
            first = block.operations[0]
            return ir.InsertionPoint(first)
        return ir.InsertionPoint.after(latest)


def _anchor_op(op):
    """The op checks are placed before: a parallel_insert_slice lives in the
    ``scf.forall.in_parallel`` terminator, whose region takes no other op."""
    if op.name == "tensor.parallel_insert_slice":
        return op.parent
    return op


@register_pass(
    "tdf-bounds-checks",
    "Check every dynamic index, offset, size and stride of tensor/memref element "
    "and slice accesses at run time (failure calls the tdf runtime: IndexError)",
    statistics=[("checks", "Run-time bounds checks inserted"),
                ("proven", "Dimensions proven in bounds at compile time")],
)
def bounds_checks(op, ctx: PassContext) -> None:
    """See the module docstring."""
    module = op
    sites = SiteTable(module)
    targets = []
    for func in collect_ops(module, "func.func"):
        if has_body(func):
            targets += collect_ops(func, CHECKED_OPS)
    anchors = _Anchors()
    plans = []
    for target in targets:
        plan = _plan(target, ctx)
        if plan:
            anchor = _anchor_op(target)
            plans.append((target, anchor, plan))
    inserted = False
    for target, anchor, plan in plans:
        needed = [v for check in plan for v in check["values"]]
        with anchors.insertion_point(anchor, needed), target.location:
            for check in plan:
                _emit(target, check, sites)
                ctx.statistic("checks")
                inserted = True
    # Linalg ops over dynamic sizes: operand dimensions on one loop agree
    # (passes/_shape_checks.py).
    for func in collect_ops(module, "func.func"):
        if not has_body(func):
            continue
        for linalg_op in collect_ops(func, where=lambda o: o.name.startswith("linalg.")):
            pairs = plan_shape_checks(linalg_op)
            with ir.InsertionPoint(linalg_op), linalg_op.location:
                for pair in pairs:
                    emit_shape_check(linalg_op, pair, sites)
                    ctx.statistic("checks")
                    inserted = True
        for cast in collect_ops(func, ("tensor.cast", "memref.cast")):
            dims = plan_cast_checks(cast)
            with ir.InsertionPoint(cast), cast.location:
                for d in dims:
                    emit_cast_check(cast, d, sites)
                    ctx.statistic("checks")
                    inserted = True
    if inserted:
        declare(module, BOUNDS_ERROR)
        sites.store()


def _plan(op, ctx):
    """The run-time checks ``op`` needs: a list of dicts (kind, dimension,
    index/offset/size/stride as ints or Values, values needing definition)."""
    operand, kind = CHECKED_OPS[op.name]
    shaped = _checked_type(op, operand)
    if not shaped.has_rank:
        return []
    source = op.operands[operand]
    shape = list(shaped.shape)
    dyn_size, _ = _dynamic_markers()
    checks = []
    if kind == "index":
        start = operand + 1
        indices = list(op.operands)[start:start + len(shape)]
        for d, index in enumerate(indices):
            dim = shape[d]
            if dim != dyn_size:
                r = _interval(index)
                if r is not None and 0 <= r[0] and r[1] < dim:
                    ctx.statistic("proven")
                    continue
            values = [index] + ([source] if dim == dyn_size else [])
            checks.append({"kind": "index", "dim": d, "offset": index, "size": 1, "stride": 1,
                           "bound": dim, "source": source, "values": values})
        return checks
    offsets, sizes, strides = _slice_parts(op)
    for d in range(min(len(shape), len(offsets))):
        o, s, t, dim = offsets[d], sizes[d], strides[d], shape[d]
        if dim != dyn_size and _slice_in_bounds(o, s, t, dim):
            if not all(isinstance(x, int) for x in (o, s, t)):
                ctx.statistic("proven")
            continue
        values = [x for x in (o, s, t) if not isinstance(x, int)]
        if dim == dyn_size:
            values.append(source)
        checks.append({"kind": "slice", "dim": d, "offset": o, "size": s, "stride": t,
                       "bound": dim, "source": source, "values": values})
    return checks


def _dim_value(check):
    dyn_size, _ = _dynamic_markers()
    if check["bound"] != dyn_size:
        return check["bound"]
    source = check["source"]
    return dim_size(source, check["dim"])


def _emit(op, check, sites):
    dim = _dim_value(check)
    o, s, t = check["offset"], check["size"], check["stride"]
    if check["kind"] == "index":
        if isinstance(dim, int):
            fail = cmpi("ugt", o, index_const(dim - 1)) if dim > 0 else cmpi("uge", o, index_const(0))
        else:
            fail = cmpi("uge", o, dim)
    else:
        fail = _slice_failure(o, s, t, dim)
    site = sites.add(check["kind"], op, check["dim"])
    emit_failure_branch(fail, BOUNDS_ERROR, [site, _as_value(o), _as_value(s), _as_value(t),
                                            _as_value(dim)])


def _slice_failure(o, s, t, dim):
    """An i1 that is true when the slice dimension is out of bounds."""
    if isinstance(s, int) and isinstance(t, int) and t == 1 and isinstance(dim, int):
        if s > dim or s < 0:
            return cmpi("eq", index_const(0), index_const(0))  # always fails
        return cmpi("ugt", _as_value(o), index_const(dim - s))
    o_v, s_v, t_v, d_v = (_as_value(x) for x in (o, s, t, dim))
    zero, one = index_const(0), index_const(1)
    size_bad = cmpi("ugt", s_v, d_v)                          # s < 0 or s > dim
    if isinstance(t, int) and t == 1:
        room = binary("arith.subi", d_v, s_v)
        return binary("arith.ori", size_bad, cmpi("ugt", o_v, room))
    # General stride: s == 0 → o <= dim; s >= 1 → o < dim and
    # t <= (dim - 1 - o) / (s - 1) (no overflow: the division bounds t).
    empty = cmpi("eq", s_v, zero)
    empty_bad = cmpi("ugt", o_v, d_v)
    start_bad = cmpi("uge", o_v, d_v)
    room = binary("arith.subi", binary("arith.subi", d_v, one), o_v)
    many = cmpi("ugt", s_v, one)
    denominator = select(many, binary("arith.subi", s_v, one), one)
    max_stride = binary("arith.divui", room, denominator)
    stride_bad = binary("arith.andi", many, cmpi("ugt", t_v, max_stride))
    nonempty_bad = binary("arith.ori", start_bad, stride_bad)
    bad = select(empty, empty_bad, nonempty_bad)
    return binary("arith.ori", size_bad, bad)
