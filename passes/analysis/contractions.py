"""Which linalg ops are contractions a BLAS computes, and how.

A *BLAS contraction* is a linalg op (``linalg.matmul``, ``batch_matmul``,
``matvec``, ``vecmat``, ``batch_matvec``, ``batch_vecmat``, ``dot``,
``linalg.contract`` or a ``linalg.generic``) with two inputs A, B and one
init C whose body is ``C + cast(A) * cast(B)`` (``linalg.isa_contraction_op``)
and whose indexing maps are projected permutations. Every loop dimension is
then one of:

- **batch**: in A, B and C;
- **M**: in A and C only; **N**: in B and C only;
- **K**: in A and B only (the reduction).

Element types: C is ``f32`` or ``f64``; A and B have C's type, or are
``bf16``/``f16`` inputs of an ``f32`` contraction (converted exactly). The
runtime (``tdf_rt_contract``, ``python/src/Blas.cpp``) takes at most
:data:`MAX_DIMS` loop dimensions. :func:`classify` answers for one op:
a :class:`Contraction`, or the reason it is not one (for remarks).
"""

from __future__ import annotations

from dataclasses import dataclass

from mlir import ir
from mlir.dialects import linalg

from ..ir_utils import indexing_maps, iterator_types

__all__ = ["is_strided", "BATCH", "M", "N", "K", "KIND_NAMES", "MAX_DIMS", "TYPE_CODES", "INPUT_TYPES",
           "CONTRACTION_OPS", "Contraction", "classify", "dim_positions"]

BATCH, M, N, K = 0, 1, 2, 3
KIND_NAMES = ("batch", "M", "N", "K")
#: Loop dimensions ``tdf_rt_contract`` takes.
MAX_DIMS = 6
#: Element type → the runtime's code.
TYPE_CODES = {"f32": 0, "f64": 1, "bf16": 2, "f16": 3}
#: Result element type → the input element types the runtime takes with it.
INPUT_TYPES = {"f32": ("f32", "bf16", "f16"), "f64": ("f64",)}
#: The ops :func:`classify` looks at.
CONTRACTION_OPS = ("linalg.matmul", "linalg.batch_matmul", "linalg.matvec", "linalg.vecmat",
                   "linalg.batch_matvec", "linalg.batch_vecmat", "linalg.dot",
                   "linalg.contract", "linalg.generic")
_CASTS = ("arith.extf",)


@dataclass
class Contraction:
    """A BLAS contraction: ``kinds[d]`` is the kind of loop dimension ``d``
    (:data:`BATCH`, :data:`M`, :data:`N`, :data:`K`), ``maps`` the indexing
    maps of A, B and C, ``types`` their element types."""

    op: ir.Operation
    kinds: list[int]
    maps: list
    types: tuple[str, str, str]

    @property
    def operands(self):
        return list(self.op.operands)[:3]


def is_strided(t) -> bool:
    """Whether memref type ``t`` has a strided layout (identity or
    ``strided<...>``; not an arbitrary affine map)."""
    try:
        ir.MemRefType(t).get_strides_and_offset()
    except RuntimeError:
        return False
    return True


def dim_positions(amap) -> list[int] | None:
    """The loop dimension of each result of ``amap``, or None when it is not
    a projected permutation (a constant, a sum, a repeated dimension)."""
    positions = []
    for expr in amap.results:
        if not isinstance(expr, ir.AffineDimExpr):
            return None
        position = expr.position
        if position in positions:
            return None
        positions.append(position)
    return positions


def _element(value) -> str | None:
    t = value.type
    return str(t.element_type) if isinstance(t, ir.ShapedType) else None


def _body_ok(op) -> bool:
    """Only ``extf`` casts, one ``mulf`` and one ``addf`` in the body (what
    ``isa_contraction_op`` allows, narrowed to exact float conversions)."""
    names = [o.name for o in op.regions[0].blocks[0].operations]
    return (names.count("arith.mulf") == 1 and names.count("arith.addf") == 1
            and all(n in ("arith.mulf", "arith.addf", "linalg.yield") + _CASTS for n in names))


def _kinds(maps, op) -> list[int] | str:
    a_dims, b_dims, c_dims = (dim_positions(m) for m in maps)
    if a_dims is None or b_dims is None or c_dims is None:
        return "an indexing map is not a projected permutation"
    iterators = iterator_types(op)
    kinds = []
    for d in range(maps[0].n_dims):
        where = (d in a_dims, d in b_dims, d in c_dims)
        kind = {(True, True, True): BATCH, (True, False, True): M,
                (False, True, True): N, (True, True, False): K}.get(where)
        if kind is None:
            return f"loop dimension {d} is in {'ABC'[where.index(True)] if any(where) else 'no'}" \
                   " operand alone"
        if iterators is not None and ("reduction" in iterators[d]) != (kind == K):
            return f"loop dimension {d}'s iterator type does not match its maps"
        kinds.append(kind)
    return kinds


def classify(op) -> Contraction | str:
    """A :class:`Contraction` for ``op``, or why it is not one."""
    if op.name not in CONTRACTION_OPS:
        return f"'{op.name}' is not a contraction op"
    operands = list(op.operands)
    if len(operands) != 3 or len(op.regions) != 1:
        return "not two inputs and one init"
    types = tuple(_element(v) for v in operands)
    if None in types:
        return "an operand is not shaped"
    a, b, c = types
    if c not in INPUT_TYPES or a not in INPUT_TYPES[c] or b not in INPUT_TYPES[c]:
        return f"element types {a}, {b} -> {c} (the BLAS takes f32/f64 results of " \
               "f32/f64, or bf16/f16 inputs of f32)"
    if not linalg.isa_contraction_op(op) or not _body_ok(op):
        return "the body is not C + A * B"
    maps = indexing_maps(op)
    kinds = _kinds(maps, op)
    if isinstance(kinds, str):
        return kinds
    if len(kinds) > MAX_DIMS:
        return f"{len(kinds)} loop dimensions (the runtime takes {MAX_DIMS})"
    return Contraction(op, kinds, maps, (a, b, c))
