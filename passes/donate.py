"""``tdf-donate``: turn argument donation into bufferization writability.

Every ``func.func`` with a body: a tensor argument marked ``tdf.donate`` gets
``bufferization.writable = true`` (One-Shot Bufferize may then update its
buffer in place), every other tensor argument ``bufferization.writable =
false`` (it is never written: an update copies it first).

A malformed ``tdf.donation_pairs`` (the pairs of donated arguments and
results ``tdf.jax.jit`` states, :mod:`tdf.passes.analysis.donation`) is an
error.

A donated argument that no result and no update can use gets a warning naming
it (JAX's "Some donated buffers were not usable"); option ``strict`` makes it
an error. Usable means: a function result has the argument's type, or the
argument (or a view of it) is the destination of an update
(``tensor.insert_slice``/``tensor.insert``/``tensor.scatter`` dest, a
destination-style init such as a linalg ``outs``, a ``tdf.call_inplace``
in-place operand, an ``scf.for`` iter_arg init).

Before::

    func.func @step(%cache: tensor<4x8xf32> {tdf.donate}, %row: tensor<1x8xf32>)

After::

    func.func @step(%cache: tensor<4x8xf32> {bufferization.writable = true, tdf.donate},
                    %row: tensor<1x8xf32> {bufferization.writable = false})
"""

from __future__ import annotations

from mlir import ir

from ..vocabulary import ASSUME_UNALIASED, DEST_OPERAND, DONATE_ATTR, TENSOR_VIEW_OPS, WRITABLE_ATTR
from .analysis.donation import pairs_problem
from .ir_utils import arg_dicts, collect_ops, function_type, has_body, set_arg_dicts
from .registry import PassContext, PassOption, register_pass

# Ops whose result is a view of operand #0.
_VIEW_OPS = TENSOR_VIEW_OPS | {ASSUME_UNALIASED}


def _is_update_use(use) -> bool:
    owner = use.owner
    name = owner.name
    index = use.operand_number
    if DEST_OPERAND.get(name) == index:
        return True
    if name == "tdf.call_inplace":
        indices = list(ir.DenseI64ArrayAttr(owner.attributes["inplace_indices"]))
        return index in indices
    if name == "scf.for":
        return index >= 3  # lower bound, upper bound, step, then iter_args
    if name.startswith("linalg."):
        # Destination-style ops: the inits are the trailing operands, one per result.
        return index >= len(owner.operands) - len(owner.results) and len(owner.results) > 0
    return False


def _updated(value) -> bool:
    """True when ``value`` or a view of it (transitively) is the destination
    of an update. A worklist, so a long chain of views cannot exhaust
    Python's recursion limit."""
    work, seen = [value], set()
    while work:
        current = work.pop()
        for use in current.uses:
            if _is_update_use(use):
                return True
            owner = use.owner
            if owner.name in _VIEW_OPS and use.operand_number == 0 and len(owner.results):
                result = owner.results[0]
                if result not in seen:
                    seen.add(result)
                    work.append(result)
    return False


def donation_is_usable(func, index: int) -> bool:
    """JAX's rule (a result has the argument's type) or an in-place update."""
    arg = func.regions[0].blocks[0].arguments[index]
    result_types = list(function_type(func).results)
    if any(t == arg.type for t in result_types):
        return True
    return _updated(arg)


def donate_function(func, ctx: PassContext) -> None:
    problem = pairs_problem(func)
    if problem is not None:
        ctx.error(func, problem)
    block = func.regions[0].blocks[0]
    dicts = arg_dicts(func)
    changed = False
    for index, arg in enumerate(block.arguments):
        if not isinstance(arg.type, ir.RankedTensorType):
            continue
        donated = DONATE_ATTR in dicts[index]
        writable = ir.BoolAttr.get(donated)
        if WRITABLE_ATTR not in dicts[index] or ir.BoolAttr(dicts[index][WRITABLE_ATTR]).value != donated:
            dicts[index][WRITABLE_ATTR] = writable
            changed = True
        if donated:
            ctx.statistic("donated")
            if not donation_is_usable(func, index):
                ctx.statistic("unusable")
                name = ir.StringAttr(func.attributes["sym_name"]).value
                message = (f"donated argument #{index} of @{name} (type {arg.type}) "
                           f"cannot be used: no result has its type and nothing updates it")
                if ctx.option("strict"):
                    ctx.error(func, message)
                else:
                    ctx.warning(func, message + "; its buffer will not be reused")
        else:
            ctx.statistic("readonly")
    if changed:
        set_arg_dicts(func, dicts)


def tensor_functions(op):
    """Every func.func with a body at or under ``op``."""
    return collect_ops(op, "func.func", has_body)


@register_pass(
    "tdf-donate",
    "Mark tdf.donate arguments bufferization.writable=true and every other tensor argument false",
    options=[PassOption("strict", bool, False,
                        "Make an unusable donated argument an error instead of a warning")],
    statistics=[("donated", "Donated tensor arguments made writable"),
                ("readonly", "Tensor arguments made read-only"),
                ("unusable", "Donated arguments no result or update can use")],
)
def donate(op, ctx: PassContext) -> None:
    """Runs on any op; handles every func.func with a body at or under it."""
    for func in tensor_functions(op):
        donate_function(func, ctx)
