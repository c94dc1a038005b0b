"""``tdf-scalarize-loop-carried``: rank-0 tensors carried by ``scf.for``
loops become scalars.

A loop that carries a ``tensor<i32>`` (a ``jax.lax.fori_loop`` counter, a
scalar loss, any rank-0 state of the JAX frontend) allocates a fresh
one-element buffer on every iteration once bufferized
(``tensor.from_elements`` in the body) and frees the previous one. This pass,
on tensors before the in-place stage, carries the element instead: the init
is read (``tensor.extract``), the body rebuilds the tensor where a user
needs one (a ``tensor.extract`` of it is folded away), the yield passes the
element, and the result is a ``tensor.from_elements`` after the loop. The
values are the same; only the storage of the carried scalar changes. No
options; statistic ``scalarized``.

Before::

    %r = scf.for %i = %c0 to %n step %c1 iter_args(%t = %t0) -> (tensor<i32>) {
      %v = tensor.extract %t[] : tensor<i32>
      %w = arith.addi %v, %c1_i32 : i32
      %u = tensor.from_elements %w : tensor<i32>
      scf.yield %u : tensor<i32>
    }

After::

    %s0 = tensor.extract %t0[] : tensor<i32>
    %s = scf.for %i = %c0 to %n step %c1 iter_args(%v = %s0) -> (i32) {
      %w = arith.addi %v, %c1_i32 : i32
      scf.yield %w : i32
    }
    %r = tensor.from_elements %s : tensor<i32>
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import scf, tensor

from .ir_utils import collect_ops, defining_op
from .registry import PassContext, register_pass

__all__ = ["scalarize_loop_carried"]


def _rank0(value) -> bool:
    t = value.type
    return isinstance(t, ir.RankedTensorType) and t.rank == 0


def _element_of(value):
    """The scalar in ``value`` (a rank-0 tensor): the operand of its
    ``tensor.from_elements``, else a ``tensor.extract`` at the insertion
    point."""
    owner = defining_op(value)
    if owner is not None and owner.name == "tensor.from_elements":
        return owner.operands[0]
    return tensor.extract(value, [])


def _fold_extracts(value) -> None:
    """Every ``tensor.extract value[]`` reads the scalar ``value`` was built
    from: use that scalar; drop ``value``'s ``from_elements`` if unused."""
    owner = defining_op(value)
    scalar = owner.operands[0]
    for use in list(value.uses):
        user = use.owner
        if user.name == "tensor.extract" and len(user.operands) == 1:
            user.results[0].replace_all_uses_with(scalar)
            user.erase()
    if not list(value.uses):
        owner.erase()


def _scalarize(loop) -> int:
    inits = list(loop.initArgs)
    picked = [i for i, v in enumerate(inits) if _rank0(v)]
    if not picked:
        return 0
    old_body = loop.body
    with ir.InsertionPoint(loop), loop.location:
        new_inits = [_element_of(v) if i in picked else v for i, v in enumerate(inits)]
        new = scf.ForOp(loop.lowerBound, loop.upperBound, loop.step, new_inits)
    body = new.body
    ip = ir.InsertionPoint(body)
    for op in list(old_body.operations):
        op.detach_from_parent()
        ip.insert(op)
    old_body.arguments[0].replace_all_uses_with(body.arguments[0])
    rebuilt = []
    with ir.InsertionPoint.at_block_begin(body), loop.location:
        for i, (old_arg, new_arg) in enumerate(zip(list(old_body.arguments)[1:],
                                                   list(body.arguments)[1:])):
            if i in picked:
                as_tensor = tensor.from_elements(old_arg.type, [new_arg])
                old_arg.replace_all_uses_with(as_tensor)
                rebuilt.append(as_tensor)
            else:
                old_arg.replace_all_uses_with(new_arg)
    terminator = list(body.operations)[-1]
    replaced = [inits[i] for i in picked] + [terminator.operands[i] for i in picked]
    with ir.InsertionPoint(terminator), loop.location:
        for i in picked:
            terminator.operands[i] = _element_of(terminator.operands[i])
    after = []
    with ir.InsertionPoint.after(new), loop.location:
        for i in picked:
            as_tensor = tensor.from_elements(loop.results[i].type, [new.results[i]])
            loop.results[i].replace_all_uses_with(as_tensor)
            after.append(as_tensor)
        for i, result in enumerate(loop.results):
            if i not in picked:
                result.replace_all_uses_with(new.results[i])
    loop.operation.erase()
    # The tensors the loop carried (built before it or in its body): erased
    # below when nothing uses them any more. Collected before any erasure
    # (an erased op's Python object must not be touched again).
    ours = [defining_op(v) for v in rebuilt + after]
    candidates: list = []
    for value in replaced:
        owner = defining_op(value)
        if owner is not None and owner.name == "tensor.from_elements" \
                and not any(owner == o for o in ours + candidates):
            candidates.append(owner)
    for value in rebuilt + after:
        _fold_extracts(value)
    for owner in candidates:
        if not list(owner.results[0].uses):
            owner.erase()
    return len(picked)


@register_pass(
    "tdf-scalarize-loop-carried",
    "Rank-0 tensors carried by scf.for loops carried as scalars (no buffer per iteration)",
    statistics=[("scalarized", "loop-carried rank-0 tensors made scalars")],
)
def scalarize_loop_carried(op, ctx: PassContext) -> None:
    """See the module docstring."""
    count = 0
    for loop in collect_ops(op, "scf.for"):
        count += _scalarize(loop.opview)
    ctx.statistic("scalarized", count)
