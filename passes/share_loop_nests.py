"""``tdf-share-loop-nests``: identical loop nests compiled once.

A model written as a Python loop over its layers traces to one function
with every layer's ops in it: a GPT-2 prefill of four layers has 175 linalg
ops on buffers and only 33 different ones (the same layer norm, softmax,
GELU and residual add on buffers of the same types, four times). LLVM
optimizes and compiles each copy again, and its time grows with the layers
(0.85 s of LLVM for one layer, 2.7 s for four, 4.0 s for eight, measured
one after the other on the 2-core machine under the same load).

This pass, on buffers after the contraction, convolution and parallel
passes and before ``convert-linalg-to-loops``, gives each group of
identical linalg ops one private function and turns each op of the group
into a call of it. Two ops are identical when the function made from each
prints the same: the op, with the values it uses from outside (its
operands and the values its body reads) as the function's parameters, in
order of first use (a value used twice is one parameter), and the
``arith.constant`` ops among them copied into the function (so a constant
stays a constant to LLVM). Only groups of at least two ops of at least
``min-elements`` elements (the largest static buffer operand; a dynamic
size counts as large) are shared: a call costs a few nanoseconds, a small
loop costs LLVM little.

What a shared function loses is what LLVM knew from the caller: that two
of its parameters never overlap. ``tdf-arena-alias-scopes`` gives it back
where every call passes disjoint memory (its ``tdf.parameters`` scopes),
and tdf's code generator keeps a function with a loop and several callers
a call (``noinline``), so the function is compiled once.

Option ``min-elements`` (default 64). Statistics ``shared`` (ops replaced
by a call) and ``functions`` (functions made).

Before::

    linalg.generic {...} ins(%a0 : memref<128x256xf32>) outs(%b0 : memref<128x256xf32>) {...}
    ...
    linalg.generic {...} ins(%a1 : memref<128x256xf32>) outs(%b1 : memref<128x256xf32>) {...}

After::

    call @tdf_shared_0(%a0, %b0) : (memref<128x256xf32>, memref<128x256xf32>) -> ()
    ...
    call @tdf_shared_0(%a1, %b1) : (memref<128x256xf32>, memref<128x256xf32>) -> ()
    func.func private @tdf_shared_0(%arg0: memref<128x256xf32>, %arg1: memref<128x256xf32>) {
      linalg.generic {...} ins(%arg0 : ...) outs(%arg1 : ...) {...}
      return
    }
"""

from __future__ import annotations

import math

from mlir import ir
from mlir.dialects import func

from .ir_utils import (
    clone_remapped,
    collect_ops,
    defining_op,
    has_body,
    is_constant,
    sym_name,
    used_from_outside,
)
from .registry import PassContext, PassOption, register_pass

__all__ = ["share_loop_nests", "PREFIX"]

#: Names of the shared functions: ``tdf_shared_<n>``.
PREFIX = "tdf_shared_"
_NOT_NESTS = ("linalg.yield", "linalg.index")


def _nested_in_linalg(op) -> bool:
    parent = op.parent
    while parent is not None and parent.name != "func.func":
        if parent.name.startswith("linalg."):
            return True
        parent = parent.parent
    return False


def _elements(op) -> float:
    """The elements of ``op``'s largest buffer operand (inf when dynamic)."""
    largest = 0.0
    for value in op.operands:
        if isinstance(value.type, ir.MemRefType):
            memref = ir.MemRefType(value.type)
            if not memref.has_static_shape:
                return math.inf
            largest = max(largest, float(math.prod(memref.shape)))
    return largest


def _candidate(op, min_elements: int) -> bool:
    if not op.name.startswith("linalg.") or op.name in _NOT_NESTS or len(op.results):
        return False
    if _nested_in_linalg(op):
        return False
    return _elements(op) >= min_elements


def _outline(op, name: str, module_body):
    """A private function ``name`` at the end of ``module_body`` running a
    copy of ``op``; returns ``(function, the values a call passes)``."""
    used = used_from_outside([op])
    params = [value for value in used if not is_constant(value)]
    with ir.InsertionPoint(module_body), op.location:
        function = func.FuncOp(name, ir.FunctionType.get([p.type for p in params], []),
                               visibility="private")
    entry = function.add_entry_block()
    mapping = dict(zip(params, entry.arguments))
    with ir.InsertionPoint(entry), op.location:
        for value in used:
            if value not in mapping:
                mapping[value] = defining_op(value).clone().results[0]
        clone_remapped([op], mapping)
        func.ReturnOp([])
    return function, params


def _shape(op) -> tuple:
    """What identical ops have in common, cheap to compute: the op's name,
    operand types and number of nested ops."""
    return (op.name, tuple(str(value.type) for value in op.operands), len(collect_ops(op)))


def _key(function) -> str:
    """``function``'s text without its name."""
    text = function.operation.get_asm(use_local_scope=True)
    return text.replace(f"@{sym_name(function)}(", "@(", 1)


@register_pass(
    "tdf-share-loop-nests",
    "Identical linalg ops on buffers become calls of one private function each "
    "(compiled once)",
    options=[PassOption("min-elements", int, 64,
                        "Share only ops whose largest buffer has at least this many elements")],
    statistics=[("shared", "linalg ops replaced by a call of a shared function"),
                ("functions", "shared functions made")],
)
def share_loop_nests(op, ctx: PassContext) -> None:
    """See the module docstring."""
    min_elements = int(ctx.option("min-elements"))
    body = op.regions[0].blocks[0]
    taken = {sym_name(f) for f in body.operations if "sym_name" in f.attributes}
    candidates = []
    for function in list(body.operations):
        if function.operation.name == "func.func" and has_body(function):
            candidates += collect_ops(function, None,
                                      lambda inner: _candidate(inner, min_elements))
    # Only ops with a twin of the same kind, operand types and size are
    # worth a function's text (most ops of a long program have none).
    alike: dict = {}
    for nest in candidates:
        alike.setdefault(_shape(nest), []).append(nest)
    groups: dict = {}
    for index, nest in enumerate(n for same in alike.values() if len(same) > 1 for n in same):
        function, params = _outline(nest, f"{PREFIX}candidate_{index}", body)
        groups.setdefault(_key(function), []).append((nest, function, params))
    counter = 0
    for members in groups.values():
        kept = members[0][1] if len(members) > 1 else None
        for _, function, _ in members[1 if kept is not None else 0:]:
            function.operation.erase()
        if kept is None:
            continue
        while f"{PREFIX}{counter}" in taken:
            counter += 1
        name = f"{PREFIX}{counter}"
        taken.add(name)
        kept.operation.attributes["sym_name"] = ir.StringAttr.get(name)
        ctx.statistic("functions", 1)
        for nest, _, params in members:
            with ir.InsertionPoint(nest), nest.location:
                func.CallOp(kept, params)
            nest.erase()
            ctx.statistic("shared", 1)
