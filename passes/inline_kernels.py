"""``tdf-inline-kernels``: raise a kernel's body to linalg-on-tensors at its
``tdf.call`` sites, so that ``tdf-fuse-elementwise`` can fuse
a chain of kernel calls into one loop and ``tdf-insert-inplace`` can decide
its storage (the fused loop computes straight into the final buffer).

A call is inlined only when its kernel is a destination-passing
``func.func`` whose body is nothing but ``arith.constant`` ops, one
all-parallel ``linalg.generic`` and ``return``, where

- the generic's ``ins`` are input parameters and its ``outs`` are exactly
  the output parameters, each once (static, identity-layout memrefs);
- no payload argument of an ``outs`` operand is read (the result does not
  depend on the fresh output's undefined contents, as ``tdf.call`` promises);
- the payload uses no value from outside the generic except those constants.

Everything else (declarations, several ops, reductions, loops, reading the
output) stays a call: ``tdf.call``/``tdf.call_inplace`` remain the contract
for calls that remain calls. Only calls in a chain are inlined (an operand
produced by, or a result used by, another inlinable kernel call): there
fusion pays, while a lone call keeps what ``tdf-insert-inplace`` does for
calls (e.g. a concat part computed in its slice). The kernel function itself
is kept. With ``remarks``, every call left alone gets a remark naming the
reason.

Before::

    func.func @scale(%in: memref<4xf32>, %out: memref<4xf32>) {
      %c = arith.constant 2.0 : f32
      linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
          ins(%in : memref<4xf32>) outs(%out : memref<4xf32>) {
      ^bb0(%a: f32, %o: f32):
        %r = arith.mulf %a, %c : f32
        linalg.yield %r : f32
      }
      return
    }
    %y = tdf.call @scale(%x) : (tensor<4xf32>) -> tensor<4xf32>

After::

    %c = arith.constant 2.0 : f32
    %e = tensor.empty() : tensor<4xf32>
    %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
        ins(%x : tensor<4xf32>) outs(%e : tensor<4xf32>) {
    ^bb0(%a: f32, %o: f32):
      %r = arith.mulf %a, %c : f32
      linalg.yield %r : f32
    } -> tensor<4xf32>
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import linalg

from .ir_utils import collect_ops, empty_tensor, function_type, has_body, op_key, sym_name
from .registry import PassContext, PassOption, register_pass

__all__ = ["MAX_FUSED_CHAIN", "inline_kernels"]

def _identity_static(t) -> bool:
    if not isinstance(t, ir.MemRefType):
        return False
    m = ir.MemRefType(t)
    if not m.has_static_shape:
        return False
    return m == ir.MemRefType.get(m.shape, m.element_type, memory_space=m.memory_space)


def _segment_sizes(op) -> tuple[int, int]:
    sizes = ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"])
    return sizes[0], sizes[1]


def _is_inside(op, ancestor) -> bool:
    current = op.operation
    target = ancestor.operation
    while current is not None:
        if current == target:
            return True
        current = current.parent
    return False


def _inlinable(kernel, n_outputs: int) -> tuple[object, list, str]:
    """``(generic, constants, "")`` when calls of ``kernel`` with
    ``n_outputs`` results can be inlined, else ``(None, [], reason)``."""
    if not has_body(kernel):
        return None, [], "the kernel has no body"
    blocks = list(kernel.regions[0].blocks)
    if len(blocks) != 1:
        return None, [], "the kernel body has several blocks"
    block = blocks[0]
    params = list(block.arguments)
    ops = list(block.operations)
    generics = [op for op in ops if op.name == "linalg.generic"]
    constants = [op for op in ops if op.name == "arith.constant"]
    if len(generics) != 1 or len(generics) + len(constants) + 1 != len(ops) \
            or ops[-1].name != "func.return" or len(ops[-1].operands):
        return None, [], "the kernel body is not one linalg.generic (plus constants)"
    generic = generics[0]
    n_ins, n_outs = _segment_sizes(generic)
    if any(str(a) != "#linalg.iterator_type<parallel>"
           for a in ir.ArrayAttr(generic.attributes["iterator_types"])):
        return None, [], "the kernel's linalg.generic is not all-parallel"
    if not all(_identity_static(p.type) for p in params):
        return None, [], "a kernel parameter is not a static identity-layout memref"
    why = _operands_problem(generic, params, block, n_ins, n_outputs) \
        or _payload_problem(generic, block, constants, n_ins)
    if why:
        return None, [], why
    return generic, constants, ""


def _operands_problem(generic, params, block, n_ins: int, n_outputs: int) -> str:
    """Why the kernel's ``generic`` does not read exactly its input
    parameters and write exactly its output parameters ("": it does)."""
    operands = list(generic.operands)
    if not all(isinstance(v.owner, ir.Block) and v.owner == block for v in operands):
        return "a linalg.generic operand is not a kernel parameter"
    first_out = len(params) - n_outputs
    outs = [ir.BlockArgument(v).arg_number for v in operands[n_ins:]]
    if sorted(outs) != list(range(first_out, len(params))):
        return "the linalg.generic outs are not exactly the output parameters"
    if any(ir.BlockArgument(v).arg_number >= first_out for v in operands[:n_ins]):
        return "the linalg.generic reads an output parameter"
    for p in params:
        if any(u.owner.operation != generic.operation for u in p.uses):
            return "a kernel parameter is used outside the linalg.generic"
    return ""


def _payload_problem(generic, block, constants, n_ins: int) -> str:
    """Why the payload of the kernel's ``generic`` cannot be inlined: it
    reads an output, a kernel parameter or a value defined outside it other
    than the kernel's ``constants`` ("": it can)."""
    payload = generic.regions[0].blocks[0]
    for arg in list(payload.arguments)[n_ins:]:
        if len(list(arg.uses)):
            return "the kernel reads its output"
    allowed = [c.result for c in constants]
    for op in collect_ops(generic):
        if op.operation == generic.operation:
            continue
        for value in op.operands:
            owner = value.owner
            if isinstance(owner, ir.Block):
                if owner == block:
                    return "the payload uses a kernel parameter directly"
                continue
            if not _is_inside(owner, generic) and not any(value == c for c in allowed):
                return "the payload uses a value defined outside the kernel's linalg.generic"
    return ""


@register_pass(
    "tdf-inline-kernels",
    "Raise single-linalg.generic kernel bodies to linalg-on-tensors at their tdf.call sites "
    "(then tdf-fuse-elementwise can fuse chains of kernel calls)",
    options=[PassOption("remarks", bool, False, "A remark for every tdf.call left as a call")],
    statistics=[("inlined", "tdf.call ops replaced by the kernel's linalg.generic")],
)
def inline_kernels(op, ctx: PassContext) -> None:
    """See the module docstring."""
    kernels = {sym_name(f): f for f in collect_ops(op, "func.func")}
    verdicts = {}
    plans = []
    for call in collect_ops(op, "tdf.call"):
        callee = ir.FlatSymbolRefAttr(call.attributes["callee"]).value
        kernel = kernels.get(callee)
        if kernel is None:
            continue
        key = (callee, len(call.results))
        if key not in verdicts:
            verdicts[key] = _inlinable(kernel, len(call.results))
        generic, constants, reason = verdicts[key]
        if generic is not None and not _types_match(call, kernel):
            generic, reason = None, "operand types differ from the kernel's parameters"
        plans.append((call, kernel, generic, constants, reason))
    inlinable = [p[0] for p in plans if p[2] is not None]
    chained = _chained(inlinable)
    chained_keys = {op_key(c) for c in chained}
    flags = [generic is not None and op_key(call) in chained_keys for call, _, generic, _, _ in plans]
    for (call, _kernel, generic, constants, reason), in_chain in zip(plans, flags):
        callee = ir.FlatSymbolRefAttr(call.attributes["callee"]).value
        if generic is not None and not in_chain:
            generic, reason = None, "no inlinable kernel call produces its operand or uses its result"
        if generic is None:
            if ctx.option("remarks"):
                ctx.remark(call, f"tdf.call @{callee} kept as a call: {reason}")
            continue
        _inline(call, generic, constants)
        ctx.statistic("inlined")


#: Longest run of chained calls fused into one loop (see ``_chained``).
MAX_FUSED_CHAIN = 64


def _chained(calls: list) -> list:
    """The calls of ``calls`` that feed or are fed by another one: inlining
    pays where ``tdf-fuse-elementwise`` can then fuse. A lone call
    stays a call (``tdf-insert-inplace`` handles it, e.g. computing a
    concat part in its slice through a strided kernel variant). A chain
    whose result reaches a ``tensor.insert_slice`` is fused too:
    ``tdf-insert-inplace`` computes the fused element-wise part straight
    into its slice of the destination."""
    index = {op_key(call): i for i, call in enumerate(calls)}
    parent = list(range(len(calls)))

    def find(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    linked = [False] * len(calls)
    for i, call in enumerate(calls):
        for value in call.operands:
            if isinstance(value.owner, ir.Block):
                continue
            j = index.get(op_key(value.owner))
            if j is not None:
                parent[find(i)] = find(j)
                linked[i] = linked[j] = True
    member = list(linked)
    # Fusing a chain of k generics clones O(k) payloads per fusion step, O(k^2)
    # in all: every MAX_FUSED_CHAIN-th call of a chain stays a call, so that
    # compile time stays linear in the chain length.
    run = [0] * len(calls)
    for i, call in enumerate(calls):
        if not member[i]:
            continue
        for value in call.operands:
            if isinstance(value.owner, ir.Block):
                continue
            j = index.get(op_key(value.owner))
            if j is not None and member[j]:
                run[i] = max(run[i], run[j] + 1)
        if run[i] >= MAX_FUSED_CHAIN:
            member[i], run[i] = False, 0
    return [call for i, call in enumerate(calls) if member[i]]


def _types_match(call, kernel) -> bool:
    params = list(function_type(kernel).inputs)
    values = list(call.operands) + list(call.results)
    if len(params) != len(values):
        return False
    for p, v in zip(params, values):
        if not isinstance(v.type, ir.RankedTensorType):
            return False
        m, t = ir.MemRefType(p), ir.RankedTensorType(v.type)
        if list(m.shape) != list(t.shape) or m.element_type != t.element_type or t.encoding:
            return False
    return True


def _inline(call, generic, constants) -> None:
    n_ins, n_outs = _segment_sizes(generic)
    n_call_ins = len(call.operands)
    operands = list(generic.operands)
    param_of = [ir.BlockArgument(v).arg_number for v in operands]
    with ir.InsertionPoint(call), call.location:
        mapping = {}
        for const in constants:
            clone = const.clone()
            mapping[const.result] = clone.result
        ins = [call.operands[i] for i in param_of[:n_ins]]
        result_types = []
        empties = []
        for i in param_of[n_ins:]:
            rtype = call.results[i - n_call_ins].type
            result_types.append(rtype)
            empties.append(empty_tensor(rtype))
        new = linalg.GenericOp(result_types, ins, empties, generic.attributes["indexing_maps"],
                               generic.attributes["iterator_types"]).operation
        copy = generic.clone()
        copy.regions[0].blocks[0].append_to(new.regions[0])
        copy.erase()
    for inner in collect_ops(new):
        for number, value in enumerate(inner.operands):
            for old, replacement in mapping.items():
                if value == old:
                    inner.operands[number] = replacement
    for k, i in enumerate(param_of[n_ins:]):
        call.results[i - n_call_ins].replace_all_uses_with(new.results[k])
    call.erase()
