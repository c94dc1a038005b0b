"""``tdf-vectorize-contractions``: tile and vectorize matmuls on memrefs with
the upstream transform dialect, instead of the scalar triple loop that
``convert-linalg-to-loops`` makes of them.

Runs after bufferization, before ``convert-linalg-to-loops``. Every
``linalg.matmul`` on static f32/f64 memrefs is
handled by one transform script applied from Python
(``transform.interpreter.apply_named_sequence``), one stage per op:

1. ``transform.structured.tile_using_for`` with tile sizes ``[m, n, k]``: per dimension the largest of 8/4/2 (m),
   32/16/8/4 (n) and 8/4/2/1 (k) that divides the size and is at most the
   ``tile-sizes`` cap (default ``8,32,8``), so every tile is full: an
   m×n block of the result stays in registers over k steps;
2. ``transform.structured.vectorize`` with the same static vector sizes;
3. upstream vector lowering patterns: reductions to ``vector.contract``,
   contractions to outer products (``vector.fma``), transfers to loads.

A matmul with a dynamic shape, a non-float element type, an odd number of
rows, or a result width with no tile of at least 4 stays loops
(``remarks`` says so), and so does every ``linalg.batch_matmul``.

Element-wise linalg ops are left to ``convert-linalg-to-loops``: their loops
are unit-stride and LLVM's loop vectorizer already turns them into AVX2 code
(with math ops as polynomials, see ``tdf-math-approximation``).

Before::

    linalg.matmul ins(%a, %b : memref<64x64xf32>, memref<64x64xf32>)
                  outs(%c : memref<64x64xf32>)

After (sketch)::

    scf.for %i = %c0 to %c64 step %c8 {
      scf.for %j = %c0 to %c64 step %c32 {
        scf.for %k = %c0 to %c64 step %c8 {
          %a_t = vector.transfer_read ... : vector<8x8xf32>
          %b_t = vector.transfer_read ... : vector<8x32xf32>
          %c_t = vector.transfer_read ... : vector<8x32xf32>
          ... 64 x vector.fma : vector<32xf32> ...
          vector.transfer_write ...
"""

from __future__ import annotations

from mlir import ir

from .ir_utils import collect_ops
from .registry import PassContext, PassOption, register_pass

# linalg.batch_matmul is not handled: its unit batch tile dimension makes
# upstream's vector patterns loop forever, like an m tile of 1 (below).
_OPS = ("linalg.matmul",)


_TAG = "tdf.vectorize_id"
# No m tile of 1: upstream's unit-dimension vector patterns do not converge
# on a 1xN contraction (the transform never returns).
_PREFERRED = {"m": (8, 4, 2), "n": (32, 16, 8, 4), "k": (8, 4, 2, 1)}


def _tile(size: int, cap: int, prefs) -> int | None:
    for t in prefs:
        if t <= cap and size % t == 0:
            return t
    return None


def _tile_sizes(op, caps) -> list[int] | None:
    """Static tile = vector sizes for ``op``: per
    dimension the largest preferred size (at most the cap) that divides it,
    so that every tile is full and no masks are needed. None when a shape is
    dynamic, m is odd or the result dimension n has no tile of at least 4."""
    a, b = (ir.MemRefType(v.type) for v in list(op.operands)[:2])
    if not (a.has_static_shape and b.has_static_shape):
        return None
    m_size, k_size = a.shape[-2], a.shape[-1]
    n_size = b.shape[-1]
    sizes = [_tile(m_size, caps[0], _PREFERRED["m"]), _tile(n_size, caps[1], _PREFERRED["n"]),
             _tile(k_size, caps[2], _PREFERRED["k"])]
    if None in sizes:
        return None
    return [s for s in sizes if s is not None]


def _stage(index: int, op_name: str, sizes: list[int]) -> str:
    handles = ", ".join(["!transform.any_op"] * (len(sizes) + 1))
    loops = ", ".join(f"%l{index}_{i}" for i in range(len(sizes)))
    return f"""
    %op{index} = transform.structured.match ops{{["{op_name}"]}} attributes {{{_TAG} = {index} : i64}}
        in %root : (!transform.any_op) -> !transform.any_op
    %tiled{index}, {loops} = transform.structured.tile_using_for %op{index}
        tile_sizes {sizes} : (!transform.any_op) -> ({handles})
    transform.structured.vectorize %tiled{index} vector_sizes {sizes} : !transform.any_op"""


def _script(stages: list[str]) -> str:
    return f"""
module attributes {{transform.with_named_sequence}} {{
  transform.named_sequence @__transform_main(%root: !transform.any_op {{transform.readonly}}) {{
{''.join(stages)}
    %funcs = transform.structured.match ops{{["func.func"]}} in %root
        : (!transform.any_op) -> !transform.any_op
    transform.apply_patterns to %funcs {{
      transform.apply_patterns.vector.reduction_to_contract
      transform.apply_patterns.vector.transfer_permutation_patterns
      transform.apply_patterns.canonicalization
    }} : !transform.any_op
    transform.apply_patterns to %funcs {{
      transform.apply_patterns.vector.lower_masked_transfers
      transform.apply_patterns.vector.lower_contraction lowering_strategy = "outerproduct"
      transform.apply_patterns.vector.transfer_permutation_patterns
      transform.apply_patterns.vector.lower_transfer max_transfer_rank = 1
      transform.apply_patterns.vector.lower_transpose
      transform.apply_patterns.vector.lower_outerproduct
      transform.apply_patterns.vector.lower_broadcast
      transform.apply_patterns.vector.lower_shape_cast
      transform.apply_patterns.canonicalization
    }} : !transform.any_op
    transform.yield
  }}
}}
"""


def _eligible(op) -> bool:
    for value in op.operands:
        if not isinstance(value.type, ir.MemRefType):
            return False
        element = str(ir.MemRefType(value.type).element_type)
        if element not in ("f32", "f64"):
            return False
    return True


@register_pass(
    "tdf-vectorize-contractions",
    "Tile and vectorize linalg.matmul on memrefs (transform dialect: "
    "tile_using_for, vectorize, vector.contract to FMAs)",
    options=[PassOption("tile-sizes", str, "8,32,8", "Largest tile and vector sizes m,n,k"),
             PassOption("remarks", bool, False, "A remark for every matmul left as loops")],
    statistics=[("vectorized", "linalg.matmul ops tiled and vectorized")],
)
def vectorize_contractions(op, ctx: PassContext) -> None:
    """See the module docstring. Ops on tensors (not yet bufferized) or on
    other element types are left alone."""
    try:
        m, n, k = (int(s) for s in ctx.option("tile-sizes").split(","))
        if min(m, n, k) < 1:
            raise ValueError
    except ValueError:
        ctx.error(op, f"tile-sizes must be three positive integers 'm,n,k', got "
                      f"'{ctx.option('tile-sizes')}'")
        return
    stages = []
    for index, target in enumerate(collect_ops(op, _OPS)):
        sizes = _tile_sizes(target, (m, n, k)) if _eligible(target) else None
        if sizes is None:
            if ctx.option("remarks"):
                ctx.remark(target, "not vectorized: operands are not static f32/f64 memrefs "
                                   "whose sizes have full tiles (the op stays loops)")
            continue
        target.attributes[_TAG] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), index)
        stages.append(_stage(index, target.name, sizes))
    if not stages:
        return
    from mlir.dialects.transform import interpreter

    script = ir.Module.parse(_script(stages))
    entry = next(o for o in script.body.operations if o.name == "transform.named_sequence")
    interpreter.apply_named_sequence(op, entry, script)
    ctx.statistic("vectorized", len(stages))
