"""``tdf-unroll-innermost-loops``: LLVM may unroll innermost loops only.

Runs right before ``convert-scf-to-cf``. Every ``scf.for`` / ``scf.while``
that holds another loop gets the attribute ``loop_annotation =
#llvm.loop_annotation<unroll = <disable = true>>``: ``convert-scf-to-cf``
moves it to the loop's back-edge branch (it moves every attribute whose
value is of the LLVM dialect), ``convert-cf-to-llvm`` makes it that
``llvm.br``'s own ``loop_annotation``, and LLVM reads it as
``llvm.loop.unroll.disable``. Innermost loops keep LLVM's own
unrolling and vectorization decisions, and an outer loop is still
vectorized when LLVM unrolls the loop inside it away.

Why: with constant trip counts, LLVM's full unroller copied whole loop
nests after vectorizing their innermost loop. A row ``max`` over 2 x 4 x 512
floats (Llama decode's softmax, ``maximumf``, whose vector form is a
sequence of compares and blends) became 23 KB of machine code, every copy
of the vector loop run once per unrolled outer iteration, and alone took
108 ms of LLVM time (25 ms with this annotation) for a loop nest that runs
in microseconds. Measured in ``benchmarks/README.md`` (*LLVM unrolls
innermost loops only*). Statistic ``annotated``.
"""

from __future__ import annotations

from mlir import ir

from .ir_utils import collect_ops, op_key
from .registry import PassContext, register_pass

__all__ = ["ANNOTATION", "NO_UNROLL", "unroll_innermost_loops"]

_LOOPS = ("scf.for", "scf.while")
#: The attribute ``convert-scf-to-cf`` moves to a loop's back edge (named
#: as ``llvm.br``'s and ``llvm.cond_br``'s own).
ANNOTATION = "loop_annotation"
#: Its value here: LLVM must not unroll the loop.
NO_UNROLL = "#llvm.loop_annotation<unroll = <disable = true>>"


def _enclosing_loop(op):
    """The innermost ``scf.for`` / ``scf.while`` holding ``op`` (within its
    function), or None."""
    parent = op.parent
    while parent is not None:
        name = parent.name
        if name in _LOOPS:
            return parent
        if name in ("func.func", "builtin.module"):
            return None
        parent = parent.parent
    return None


@register_pass(
    "tdf-unroll-innermost-loops",
    "Loops holding other loops get llvm.loop_annotation<unroll disable>: LLVM unrolls "
    "innermost loops only",
    statistics=[("annotated", "loops LLVM may no longer unroll")],
)
def unroll_innermost_loops(op, ctx: PassContext) -> None:
    """See the module docstring."""
    outer = {}
    for loop in collect_ops(op.operation, _LOOPS):
        parent = _enclosing_loop(loop)
        if parent is not None:
            outer[op_key(parent)] = parent
    if not outer:
        return
    annotation = ir.Attribute.parse(NO_UNROLL)
    for loop in outer.values():
        if ANNOTATION not in loop.attributes:
            loop.attributes[ANNOTATION] = annotation
            ctx.statistic("annotated", 1)
