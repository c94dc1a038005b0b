"""``tdf-outline-loop-nests``: large functions as a sequence of calls to
small ones, for LLVM.

LLVM's loop passes cost grows faster than linearly with the size of a
function (scalar evolution and induction-variable simplification work on the
whole function: a GPT-2 prefill step lowered to one function of 316 loops
spends two thirds of ``opt -O2`` in ``IndVarSimplify``). This pass, at the
start of the LLVM lowering (bufferized IR, before the loops are explicit),
moves the compute ops of a function's entry block -- ``linalg`` ops, ``scf``
loops and branches without results, ``memref.copy`` -- in runs of at most
``chunk`` consecutive ops into private functions
(``__tdf_part_<function>_<n>``) called in their place. The values a run uses
from outside (memrefs, indices, scalars; values its regions capture
included) become the callee's parameters. Functions with fewer than
``min-ops`` such ops are left alone. ``arith.constant`` operands are cloned
into the callee instead (loop bounds and sizes stay constants for LLVM). ``tdf.compile`` marks the calls
``no_inline`` once lowered, so LLVM optimizes each part on its own.

Options: ``min-ops`` (default 24), ``chunk`` (default 4). Statistic
``outlined`` (functions created).

Before::

    func.func @main(%x: memref<64xf32>, %y: memref<64xf32>) {
      linalg.exp ins(%x : memref<64xf32>) outs(%y : memref<64xf32>)
      ...
    }

After::

    func.func @main(%x: memref<64xf32>, %y: memref<64xf32>) {
      call @__tdf_part_main_0(%x, %y) : (memref<64xf32>, memref<64xf32>) -> ()
      ...
    }
    func.func private @__tdf_part_main_0(%a: memref<64xf32>, %b: memref<64xf32>) {
      linalg.exp ins(%a : memref<64xf32>) outs(%b : memref<64xf32>)
      return
    }
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import func as func_d

from .ir_utils import defining_op, function_bodies, op_key, sym_name
from .registry import PassContext, PassOption, register_pass

__all__ = ["outline_loop_nests", "PART_PREFIX"]

#: Name prefix of the outlined functions (``tdf.compile`` keeps calls to them
#: out of LLVM's inliner).
PART_PREFIX = "__tdf_part_"


def _outlinable(op) -> bool:
    if len(op.results):
        return False
    name = op.name
    return name.startswith("linalg.") or name in ("scf.for", "scf.while", "scf.if",
                                                   "scf.parallel", "memref.copy")


def _runs(block, chunk: int) -> list[list]:
    runs, current = [], []
    for op in block.operations:
        op = op.operation
        if _outlinable(op):
            current.append(op)
            if len(current) == chunk:
                runs.append(current)
                current = []
        else:
            if current:
                runs.append(current)
            current = []
    if current:
        runs.append(current)
    return runs


def _inside(op, keys: set) -> bool:
    """True when ``op`` is one of the ops of ``keys`` or nested in one."""
    while op is not None:
        if op_key(op) in keys:
            return True
        parent = op.parent
        if parent is None or parent.name == "func.func":
            return False
        op = parent.operation
    return False


def _captured(run: list) -> list:
    """The values the ops of ``run`` use that are defined outside it, in
    order of first use."""
    keys = {op_key(op) for op in run}
    seen, found = set(), []

    def visit(inner):
        for value in inner.operands:
            definer = defining_op(value)
            if definer is not None:
                outside = not _inside(definer, keys)
            else:
                owner = value.owner.owner  # the op whose region holds the block
                outside = owner is None or owner.name == "func.func" or \
                    not _inside(owner.operation, keys)
            if outside and value not in seen:
                seen.add(value)
                found.append(value)
        return ir.WalkResult.ADVANCE

    for op in run:
        op.walk(visit)
    return found


def _outline(run: list, name: str, module_block, after):
    """Moves ``run`` into a new private function placed after ``after``;
    returns the function."""
    values = _captured(run)
    constants = [v for v in values if (d := defining_op(v)) is not None
                 and d.name == "arith.constant"]
    captured = [v for v in values if v not in constants]
    with run[0].location:
        ftype = ir.FunctionType.get([v.type for v in captured], [])
        with ir.InsertionPoint(module_block):
            callee = func_d.FuncOp(name, ftype)
        callee.operation.move_after(after)
        callee.attributes["sym_visibility"] = ir.StringAttr.get("private")
        body = callee.add_entry_block()
        with ir.InsertionPoint(run[0]):
            func_d.CallOp([], ir.FlatSymbolRefAttr.get(name), captured)
        with ir.InsertionPoint(body):
            ret = func_d.ReturnOp([])
    for op in run:
        op.move_before(ret)
    # Constants are cloned into the callee (loop bounds stay known to LLVM).
    clones = []
    with ir.InsertionPoint.at_block_begin(body):
        for value in constants:
            clones.append(defining_op(value).clone().results[0])
    keys = {op_key(op) for op in run}
    for value, arg in list(zip(captured, body.arguments)) + list(zip(constants, clones)):
        for use in list(value.uses):
            owner = use.owner.operation if hasattr(use.owner, "operation") else use.owner
            if _inside(owner, keys):
                owner.operands[use.operand_number] = arg
    return callee.operation


@register_pass(
    "tdf-outline-loop-nests",
    "Large functions as calls to small private functions (LLVM's loop passes stay linear)",
    options=[PassOption("min-ops", int, 24, "Outline only functions with this many compute ops"),
             PassOption("chunk", int, 4, "Compute ops per outlined function")],
    statistics=[("outlined", "functions created")],
)
def outline_loop_nests(op, ctx: PassContext) -> None:
    """See the module docstring."""
    min_ops, chunk = int(ctx.option("min-ops")), max(1, int(ctx.option("chunk")))
    module_block = op.operation.regions[0].blocks[0]
    count = 0
    for func in function_bodies(op):
        if len(func.regions[0].blocks) != 1 or sym_name(func).startswith(PART_PREFIX):
            continue
        block = func.regions[0].blocks[0]
        runs = _runs(block, chunk)
        if sum(len(r) for r in runs) < min_ops:
            continue
        base = sym_name(func)
        anchor = func
        for n, run in enumerate(runs):
            name = f"{PART_PREFIX}{base}_{n}"
            anchor = _outline(run, name, module_block, anchor)
            count += 1
    ctx.statistic("outlined", count)

