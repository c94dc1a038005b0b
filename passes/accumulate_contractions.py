"""``tdf-accumulate-contractions``: ``a + x @ w`` as one contraction that
accumulates into ``a``.

Runs on tensors after kernel fusion. An element-wise ``linalg.generic``
whose body adds two of its inputs, ``A + B``, where ``B`` is a contraction
(``linalg.contract`` / ``matmul`` / ``batch_matmul``, ``C = C + sum a*b``)
over a zero ``linalg.fill``, gets ``B`` computed over ``A`` instead: the
contraction's init becomes ``A`` (``A + x @ w``, the BLAS route's
``beta = 1``), the add becomes a read of the contraction's result, and the
generic no longer reads ``A`` (dropped by the canonicalization that
follows). XLA's CPU backend fuses a dot with its addend the same way
("output fusion"). An RNN cell ``tanh(x @ wx + h @ wh + b)`` then needs one
temporary instead of two, and one pass over it less.

Conditions: both inputs read with the identity map of the generic's
(all-parallel) iteration space, their block arguments used only by that
add, ``A`` and ``B`` each used only by the generic, ``A`` defined before
the contraction in the same block, the same type as the contraction's
result, and the fill's value a zero. The result differs from the add of
two separately rounded terms only in rounding (the sum is formed in
another order), as XLA's does.

No options; statistic ``accumulated``.

Before::

    %z = linalg.fill ins(%cst0 : f32) outs(%e : tensor<4x8xf32>) -> tensor<4x8xf32>
    %b = linalg.matmul ins(%h, %w : ...) outs(%z : tensor<4x8xf32>) -> tensor<4x8xf32>
    %r = linalg.generic ... ins(%a, %b : ...) outs(%e2 : ...) {
      ^bb0(%x: f32, %y: f32, %o: f32):
        %s = arith.addf %x, %y : f32
        %t = math.tanh %s : f32
        linalg.yield %t : f32
    }

After (before canonicalization)::

    %b = linalg.matmul ins(%h, %w : ...) outs(%a : tensor<4x8xf32>) -> tensor<4x8xf32>
    %r = linalg.generic ... ins(%a, %b : ...) outs(%e2 : ...) {
      ^bb0(%x: f32, %y: f32, %o: f32):
        %t = math.tanh %y : f32
        linalg.yield %t : f32
    }
"""

from __future__ import annotations

from mlir import ir

from .analysis.kernels import identity_operands, is_elementwise_linalg
from .ir_utils import collect_ops, defining_op, function_bodies
from .registry import PassContext, register_pass

__all__ = ["accumulate_contractions"]

CONTRACTIONS = frozenset({"linalg.contract", "linalg.matmul", "linalg.batch_matmul"})


def _zero_fill(value) -> bool:
    fill = defining_op(value)
    if fill is None or fill.name != "linalg.fill":
        return False
    scalar = defining_op(fill.operands[0])
    if scalar is None or scalar.name != "arith.constant":
        return False
    try:
        return ir.FloatAttr(scalar.attributes["value"]).value == 0.0
    except (ValueError, TypeError):
        return False


def _single_use(value) -> bool:
    return len(list(value.uses)) == 1


def _accumulator(generic, a_index: int, b_index: int):
    """The contraction producing input ``b_index`` of ``generic`` when it
    may accumulate into input ``a_index``, else None."""
    a, b = generic.operands[a_index], generic.operands[b_index]
    contraction = defining_op(b)
    if contraction is None or contraction.name not in CONTRACTIONS:
        return None
    if len(contraction.results) != 1 or not _single_use(a) or not _single_use(b):
        return None
    if a.type != b.type or not _zero_fill(contraction.operands[len(contraction.operands) - 1]):
        return None
    producer = defining_op(a)
    if isinstance(a, ir.BlockArgument) or producer is None:
        return None
    if producer.block != contraction.block or not producer.is_before_in_block(contraction):
        return None
    return contraction


def _rewrite(generic) -> bool:
    if generic.name != "linalg.generic" or not is_elementwise_linalg(generic):
        return False
    inputs = len(generic.operands) - len(generic.results)
    identity = identity_operands(generic)
    body = generic.regions[0].blocks[0]
    for op in body.operations:
        if op.name != "arith.addf" or not all(
                isinstance(v, ir.BlockArgument) and v.owner == body for v in op.operands):
            continue
        i, j = (v.arg_number for v in op.operands)
        if i == j or i >= inputs or j >= inputs or not (identity[i] and identity[j]):
            continue
        if not all(_single_use(body.arguments[k]) for k in (i, j)):
            continue
        for a_index, b_index in ((i, j), (j, i)):
            contraction = _accumulator(generic, a_index, b_index)
            if contraction is None:
                continue
            contraction.operands[len(contraction.operands) - 1] = generic.operands[a_index]
            op.results[0].replace_all_uses_with(body.arguments[b_index])
            op.erase()
            return True
    return False


@register_pass(
    "tdf-accumulate-contractions",
    "a + x @ w as one contraction accumulating into a (XLA's dot output fusion)",
    statistics=[("accumulated", "contractions now accumulating into an addend")],
)
def accumulate_contractions(op, ctx: PassContext) -> None:
    """See the module docstring."""
    for func in function_bodies(op):
        for generic in collect_ops(func, "linalg.generic"):
            if _rewrite(generic):
                ctx.statistic("accumulated", 1)
