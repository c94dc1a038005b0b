"""``tdf-launch-parallel``: the launch calls of ``tdf-outline-parallel``
become calls of tdf's thread pool.

Runs last in the LLVM lowering (after ``tdf-arena-alias-scopes``, which
counts a call of a launch declaration as a call of the body it names: both
take the same parameters). For each ``llvm.func`` declaration with a
``tdf.parallel_body`` attribute:

- the body ``@B(%t, %v...)`` becomes the task function ``@B_task(%context,
  %t)`` (internal): a new entry block loads the values ``%v...`` the body
  uses from the context and branches to the body's first block (a memref's
  descriptor is mostly unused where its shape is static);
- each call ``@launch(%n, %v...)`` becomes: those values stored in a context
  on the caller's stack (an ``!llvm.struct`` of their types, allocated in
  its entry block), then ``tdf_rt_parallel_for(@B_task, %context, %n)``;
- the declaration is erased.

The thread pool (``python/src/Parallel.cpp``) runs the task once for each
``t`` in ``[0, n)`` on the calling thread and its workers and returns when
all have returned. No function is added per loop besides its task (LLVM's
time grows with the functions it optimizes). Statistic ``launched``.

Before::

    llvm.func @tdf_parallel_0(i64, !llvm.ptr) attributes {tdf.parallel_body = @tdf_parallel_body_0}
    llvm.func @tdf_parallel_body_0(%t: i64, %x: !llvm.ptr) {...}
    ... llvm.call @tdf_parallel_0(%n, %x) : (i64, !llvm.ptr) -> ()

After::

    llvm.func internal @tdf_parallel_body_0_task(%context: !llvm.ptr, %t: i64) {
      %f0 = llvm.getelementptr %context[0, 0] : (!llvm.ptr) -> !llvm.ptr, !llvm.struct<(ptr)>
      %x = llvm.load %f0 : !llvm.ptr -> !llvm.ptr
      llvm.br ^bb1(%t, %x : i64, !llvm.ptr)
    ^bb1(...):  // the body
      ...
    }
    ... %context = llvm.alloca %one x !llvm.struct<(ptr)> : (i64) -> !llvm.ptr  // entry block
    ... %f0 = llvm.getelementptr %context[0, 0] : ...
        llvm.store %x, %f0 : !llvm.ptr, !llvm.ptr
        %task = llvm.mlir.addressof @tdf_parallel_body_0_task : !llvm.ptr
        llvm.call @tdf_rt_parallel_for(%task, %context, %n) : (!llvm.ptr, !llvm.ptr, i64) -> ()
"""

from __future__ import annotations

from mlir import ir, passmanager
from mlir.dialects import llvm

from ..vocabulary import PARALLEL_BODY_ATTR, PARALLEL_FOR
from .ir_utils import collect_ops, has_body, sym_name
from .registry import PassContext, register_pass

__all__ = ["launch_parallel"]

_POOL_TYPE = "(!llvm.ptr, !llvm.ptr, i64)"


def _struct(types: list[str]) -> str:
    return f"!llvm.struct<({', '.join(types)})>" if types else "!llvm.struct<(i8)>"


def _task_text(name: str, types: list[str]) -> str:
    """A module holding the entry block of the task function ``name`` (the
    values loaded from the context; its terminator is made later) and the
    thread pool's declaration."""
    struct = _struct(types)
    loads = "".join(
        f"    %f{k} = llvm.getelementptr %context[0, {k}] : (!llvm.ptr) -> !llvm.ptr, {struct}\n"
        f"    %v{k} = llvm.load %f{k} : !llvm.ptr -> {t}\n" for k, t in enumerate(types))
    return f"""
  llvm.func @{PARALLEL_FOR}{_POOL_TYPE}
  llvm.func internal @{name}(%context: !llvm.ptr, %t: i64) {{
{loads}    llvm.return
  }}
"""


def _make_task(body, name: str, kept: list[int], module_body, declare_pool: bool):
    """The task function ``name`` running ``body``'s blocks (moved into it,
    ``body`` erased); its context holds the body's parameters ``kept``
    (those it uses, the task number not counted)."""
    first = body.regions[0].blocks[0]
    arguments = list(first.arguments)
    types = [str(arguments[k + 1].type) for k in kept]
    parsed = ir.Module.parse(_task_text(name, types))
    pool, task = list(parsed.body.operations)
    task.move_before(body)
    if declare_pool:
        pool.move_before(list(module_body.operations)[0])
    entry = task.regions[0].blocks[0]
    for position in reversed(range(1, len(arguments))):  # unused: not passed
        if position - 1 not in kept:
            first.erase_argument(position)
    for block in list(body.regions[0].blocks):
        block.append_to(task.regions[0])
    values = [op.result for op in entry.operations if op.name == "llvm.load"]
    terminator = list(entry.operations)[-1]
    with ir.InsertionPoint(terminator), terminator.location:
        llvm.BrOp([entry.arguments[1], *values], first)
    terminator.erase()
    body.erase()


def _launch(call, task_name: str, kept: list[int], types: list[str], caller) -> None:
    """Replaces the launch ``call`` in ``caller`` with stores of its values
    ``kept`` into a context and a call of the thread pool."""
    ptr = ir.Type.parse("!llvm.ptr")
    i64 = ir.IntegerType.get_signless(64)
    struct = ir.TypeAttr.get(ir.Type.parse(_struct(types)))
    entry = caller.regions[0].blocks[0]
    with ir.InsertionPoint.at_block_begin(entry), call.location:
        one = llvm.ConstantOp(i64, ir.IntegerAttr.get(i64, 1)).result
        context = llvm.AllocaOp(ptr, one, struct).result
    operands = list(call.operands)
    with ir.InsertionPoint(call), call.location:
        for k, value in enumerate(operands[1 + j] for j in kept):
            field = llvm.GEPOp(ptr, context, [], ir.DenseI32ArrayAttr.get([0, k]), struct,
                               None).result
            llvm.StoreOp(value, field)
        task = llvm.AddressOfOp(ptr, task_name).result
        llvm.CallOp(None, [task, context, operands[0]], [], [],
                    callee=ir.FlatSymbolRefAttr.get(PARALLEL_FOR))
    call.erase()


@register_pass(
    "tdf-launch-parallel",
    "The launch calls of tdf-outline-parallel (LLVM dialect) store their values in a "
    "context and call the thread pool (tdf_rt_parallel_for) with the body as a task function",
    statistics=[("launched", "parallel loops given a task function")],
)
def launch_parallel(op, ctx: PassContext) -> None:
    """See the module docstring."""
    module_body = op.regions[0].blocks[0]
    launches = [f for f in collect_ops(op, "llvm.func")
                if PARALLEL_BODY_ATTR in f.attributes and not has_body(f)]
    if not launches:
        return
    functions = {sym_name(f): f for f in module_body.operations if "sym_name" in f.attributes}
    calls: dict = {}
    for caller in functions.values():
        if caller.name != "llvm.func" or not has_body(caller):
            continue
        for call in collect_ops(caller, "llvm.call"):
            if "callee" in call.attributes:
                callee = ir.FlatSymbolRefAttr(call.attributes["callee"]).value
                calls.setdefault(callee, []).append((call, caller))
    declare_pool = PARALLEL_FOR not in functions
    # Folds the descriptors each body builds of its parameters and reads one
    # field of: what a body does not read need not be passed.
    canonicalize = passmanager.PassManager.parse("llvm.func(canonicalize)")
    for launch in launches:
        name = sym_name(launch)
        body_name = ir.FlatSymbolRefAttr(launch.attributes[PARALLEL_BODY_ATTR]).value
        body = functions.get(body_name)
        sites = calls.get(name, [])
        if body is None or not has_body(body) or body_name in calls or \
                any(len(call.operands) != len(body.regions[0].blocks[0].arguments)
                    for call, _ in sites):
            ctx.error(launch, f"launch declaration @{name} needs a body function @{body_name} "
                              f"that only its calls run, taking what they pass")
            return
        canonicalize.run(body)
        arguments = list(body.regions[0].blocks[0].arguments)[1:]
        kept = [k for k, a in enumerate(arguments) if next(iter(a.uses), None) is not None]
        types = [str(arguments[k].type) for k in kept]
        task_name = f"{body_name}_task"
        _make_task(body, task_name, kept, module_body, declare_pool)
        declare_pool = False
        for call, caller in sites:
            _launch(call, task_name, kept, types, caller)
        launch.erase()
        ctx.statistic("launched", 1)
