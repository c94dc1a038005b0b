"""The slice rewrites of ``tdf-insert-inplace``: a part computed straight into
its slice of a larger buffer.

* :func:`rewrite_concats`: a ``tensor.concat`` of freshly computed parts
  becomes one ``tensor.empty`` of the result with each part computed into
  an ``extract_slice`` of it and chained with ``tensor.insert_slice``;
* :func:`rewrite_insert_slices`: ``%c = tensor.insert_slice %r into %d[...]``
  whose source is freshly computed gets the part computed into
  ``extract_slice %d[...]`` (when the destination's storage may be written
  there: :class:`~tdf.passes.analysis.inplace.InplaceAnalysis`).

A linalg part takes the slice as its init; a ``tdf.call`` part becomes a
``tdf.call_inplace`` of a clone of its kernel whose output parameter takes
the slice's strided layout (:func:`tdf.passes._kernel_variants.layout_variant`).
See ``tdf-insert-inplace`` for the conditions and examples.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import tensor

from ..dialects import tdf as tdf_d
from ._kernel_variants import layout_variant, strided_type
from .analysis.inplace import RESHAPES, InplaceAnalysis, Rejection, same_region
from .analysis.kernels import identity_operands, is_elementwise_linalg
from .analysis.shapes import inverse_view_strides, row_major, slice_strides
from .ir_utils import (
    ancestor_in,
    collect_ops,
    copy_attributes,
    empty_tensor,
    function_type,
    is_tensor,
    lookup_symbol,
    op_key,
)
from .registry import PassContext

__all__ = ["rewrite_concats", "rewrite_insert_slices", "slice_plan", "compute_into",
           "STRIDED_READERS", "FILL_OPS"]

#: Ops that read a tensor element by element wherever it lies: a part read
#: again by them after its insert may stay in the destination's (strided) row.
STRIDED_READERS = frozenset({"tensor.extract", "vector.transfer_read", "tensor.dim"})
#: Linalg ops that write every element of their init without reading it and
#: are computed into a slice like an element-wise part.
FILL_OPS = frozenset({"linalg.fill"})


def _part_producer(part, concat, module_op, rejections, index):
    """How ``part`` (operand ``index`` of ``concat``) can be computed straight
    into its slice of the result: ``("linalg", op)`` for an element-wise linalg
    op with a ``tensor.empty`` init, ``("call", (op, variant))`` for a
    single-result ``tdf.call`` of a kernel with a body (``variant`` takes the
    slice's strided layout), or None. The producer must be used only by
    ``concat``, in its block, with a static shape. A ``tdf.call`` part that
    cannot be rewritten adds a :class:`Rejection` to ``rejections``."""
    owner = part.owner
    if isinstance(owner, ir.Block):
        return None
    producer = owner.operation
    if list(concat.operands).index(part) != index:
        return None  # a repeated part: rejected at its first position
    is_call = producer.name == "tdf.call"
    if not is_call and not is_elementwise_linalg(producer):
        return None

    def reject(rule, *parts):
        if is_call:
            rejections.append(Rejection(rule, producer, producer.location, index, [
                f"part #{index} (", part, ") of tensor.concat: ", *parts]))
        return None

    uses = [u.owner.operation for u in part.uses]
    if len(uses) != 1:
        other = next((u for u in uses if u != concat), concat)
        return reject("dead", "it is also used by ", other,
                      "; it is computed in its own buffer and copied")
    if producer.block != concat.block:
        return reject("dead", "it is defined in another block; it is copied")
    if len(producer.results) != 1 or not ir.RankedTensorType(part.type).has_static_shape:
        return reject("fits", "only a single static-shaped result is computed into a slice")
    return slice_plan(producer, row_major(ir.RankedTensorType(concat.results[0].type).shape),
                       module_op, reject)


def slice_plan(producer, strides, module_op, reject):
    """The part of the machinery shared by ``tensor.concat`` and
    ``tensor.insert_slice``: how ``producer`` (single static-shaped result,
    used once, checked by the caller) can compute its result into a slice of
    a larger buffer whose memref layout has ``strides`` (dynamic offset).
    ``("linalg", op)`` for an element-wise linalg op with a ``tensor.empty``
    init; ``("call", (op, variant))`` for a ``tdf.call`` of a kernel with a
    body, ``variant`` being its clone whose output parameter takes the layout
    ``strided<strides, offset: ?>`` (:func:`layout_variant`); otherwise None,
    or ``reject("kernel", why)`` when the kernel cannot take the layout."""
    if producer.name != "tdf.call":
        init = producer.operands[len(producer.operands) - 1]
        if isinstance(init.owner, ir.Block) or init.owner.operation.name != "tensor.empty":
            return None
        return ("linalg", producer)
    if module_op is None:
        return None
    callee = ir.FlatSymbolRefAttr(producer.attributes["callee"]).value
    kernel = lookup_symbol(module_op, callee)
    if kernel is None or kernel.name != "func.func":
        return None
    n = len(producer.operands)
    if n >= len(function_type(kernel).inputs):
        return None
    param_type = strided_type(function_type(kernel).inputs[n], strides)
    variant, why = layout_variant(module_op, kernel, n, param_type)
    if variant is None:
        return reject("kernel", why)
    return ("call", (producer, variant))


def compute_into(plan, view, analysis=None):
    """Rewrites the producer of ``plan`` (see :func:`slice_plan`) to compute
    its result into ``view`` (a slice of the destination, of the result's
    type). A call becomes ``tdf.call_inplace
    @variant(%in..., %view) inplace [n]``, created at the current insertion
    point; a linalg op takes ``view`` as its init (its ``tensor.empty`` is
    erased when unused, after ``analysis``, when given, forgets it: the
    Python handle of an erased op's value must never be touched again).
    Returns ``(old_op, new_op, result)``."""
    kind, producer = plan
    if kind == "linalg":
        empty = producer.operands[len(producer.operands) - 1]
        producer.operands[len(producer.operands) - 1] = view
        if len(list(empty.uses)) == 0:
            if analysis is not None:
                analysis.forget_op(empty.owner.operation)
            empty.owner.operation.erase()
        return producer, producer, producer.results[0]
    call, variant = producer
    operands = list(call.operands)
    new = tdf_d.CallInplaceOp([call.results[0].type], ir.FlatSymbolRefAttr.get(variant),
                              operands + [view], ir.DenseI64ArrayAttr.get([len(operands)]),
                              loc=call.location).operation
    copy_attributes(call, new)
    call.results[0].replace_all_uses_with(new.results[0])
    return call, new, new.results[0]


def rewrite_concats(func, ctx: PassContext | None = None, module_op=None,
                    rejections: list | None = None) -> int:
    """Rewrites every eligible ``tensor.concat`` in ``func`` (see the module
    doc); returns how many. Parts computed by ``tdf.call`` need ``module_op``
    (default: the function's parent) to find the kernel and add its strided
    variant; the parts left as they are append a :class:`Rejection` to
    ``rejections``."""
    func = func.operation
    if module_op is None and func.parent is not None:
        module_op = func.parent.operation
    if rejections is None:
        rejections = []
    concats = collect_ops(func, "tensor.concat")
    done = 0
    for concat in concats:
        result_type = ir.RankedTensorType(concat.results[0].type)
        if not result_type.has_static_shape:
            continue
        parts = list(concat.operands)
        found: list[Rejection] = []
        producers = [_part_producer(p, concat, module_op, found, i) for i, p in enumerate(parts)]
        for rejection in found:
            rejections.append(rejection)
            if ctx is not None:
                ctx.statistic(f"rejected-{rejection.rule}")
        if not any(producers):
            continue
        dim = ir.IntegerAttr(concat.attributes["dim"]).value
        rank = result_type.rank
        with ir.InsertionPoint(concat), concat.location:
            dest = empty_tensor(result_type)
            offset = 0
            for part, plan in zip(parts, producers):
                shape = list(ir.RankedTensorType(part.type).shape)
                offsets = [0] * rank
                offsets[dim] = offset
                static = (offsets, shape, [1] * rank)
                if plan is not None:
                    view = tensor.ExtractSliceOp(part.type, dest, [], [], [], *static).result
                    if plan[0] == "linalg":
                        plan[1].move_before(concat)
                    old, new, part = compute_into(plan, view)
                    if old is not new:
                        old.erase()
                dest = tensor.InsertSliceOp(part, dest, [], [], [], *static).result
                offset += shape[dim]
        concat.results[0].replace_all_uses_with(dest)
        concat.erase()
        done += 1
        if ctx is not None:
            ctx.statistic("concats")
    return done


def _create_inverse(view, value):
    """The inverse reshape of ``view`` applied to ``value`` (a tensor of
    ``view``'s result type), at the current insertion point."""
    source_type = view.operands[0].type
    reassociation = view.attributes["reassociation"]
    if view.name == "tensor.expand_shape":
        return tensor.CollapseShapeOp(source_type, value, reassociation).result
    return tensor.ExpandShapeOp(source_type, value, reassociation, [],
                                list(ir.RankedTensorType(source_type).shape)).result


def rewrite_insert_slices(func, ctx: PassContext | None = None, module_op=None,
                          rejections: list | None = None,
                          analysis: InplaceAnalysis | None = None) -> int:
    """Computes freshly computed parts straight into the slice of their
    ``tensor.insert_slice`` destination (see the module doc); returns how
    many. A candidate is ``%c = tensor.insert_slice %r into %d[...]`` whose
    source ``%r`` is, through zero or more ``tensor.expand_shape`` /
    ``collapse_shape`` views, the result of a single-result ``tdf.call`` or
    of an element-wise linalg op with a ``tensor.empty`` init. It is
    rewritten (``%s = extract_slice %d[...]`` and the inverse views right
    before the producer, which then writes ``%s``) only when

    * the part and its views have no other use, in the insert's block, with
      static shapes (``dead``/``fits``);
    * ``%d`` and the dynamic offsets are defined before the producer
      (``dead``: otherwise the producer would have to move);
    * ``%d`` is owned and never escaped (``owned``/``unaliased``): for a
      non-donated argument One-Shot copies the destination first, and
      writing it before that copy would be wrong (an ``scf.for`` iter_arg is
      the loop's own: One-Shot copies an init it may not write before the
      loop);
    * neither ``%d`` nor an alias of it is used after the producer except by
      the insert itself (``dead``/``unaliased``): not between the producer
      and the insert, not after the insert;
    * the producer does not read ``%d``'s storage (``unaliased``): no
      operand of the producer, and no tensor it transitively reads among
      the values defined after ``%d``, is in ``%d``'s alias class, whatever
      the offsets (a part computed from an overlapping slice would be
      overwritten while it is read) -- except a read of the very region it
      is written into, ``extract_slice %d[R]`` read with the identity map by
      an element-wise producer and used nowhere else (``d[R] = f(d[R],
      ...)``, a scatter-add's row update: each element is read before the
      same iteration point writes it); the producer then reads and writes
      the one new slice;
    * the kernel has a body taking the slice's layout (``kernel``), as for
      a concat.

    Each rejected candidate appends a :class:`Rejection` (on the insert) to
    ``rejections``."""
    func = func.operation
    if module_op is None and func.parent is not None:
        module_op = func.parent.operation
    if rejections is None:
        rejections = []
    inserts = collect_ops(func, "tensor.insert_slice")
    candidates = []
    for insert in inserts:
        chain, value = [], insert.operands[0]
        while not isinstance(value.owner, ir.Block) and value.owner.operation.name in RESHAPES:
            chain.append(value.owner.operation)
            value = chain[-1].operands[0]
        if isinstance(value.owner, ir.Block):
            continue
        producer = value.owner.operation
        if producer.name == "tdf.call" or (
                (is_elementwise_linalg(producer) or producer.name in FILL_OPS)
                and len(producer.results) == 1
                and is_tensor(producer.results[0])
                and not isinstance(producer.operands[len(producer.operands) - 1].owner, ir.Block)
                and producer.operands[len(producer.operands) - 1].owner.operation.name
                == "tensor.empty"):
            candidates.append((insert, chain, producer))
    if not candidates:
        return 0
    if analysis is None:
        analysis = InplaceAnalysis(func)
    done = 0
    for insert, chain, producer in candidates:
        why = _insert_slice_plan(insert, chain, producer, module_op, analysis)
        if isinstance(why, Rejection):
            rejections.append(why)
            if ctx is not None:
                ctx.statistic(f"rejected-{why.rule}")
            continue
        if why is None:
            continue
        plan, direct = why
        _rewrite_insert_slice(insert, chain, producer, plan, analysis, direct)
        done += 1
        if ctx is not None:
            ctx.statistic("insert-slices")
    return done


def _insert_slice_plan(insert, chain, producer, module_op, analysis):
    """``(plan, strides)`` for a candidate of :func:`rewrite_insert_slices`,
    a :class:`Rejection`, or None (nothing to do, nothing to say)."""
    dest = insert.operands[1]
    part = producer.results[0]

    def reject(rule, *parts):
        return Rejection(rule, insert, insert.location, 1, [
            "part (", part, ") of tensor.insert_slice into ", dest, ": ", *parts])

    problem = _part_problem(insert, chain, producer, reject)
    if problem is not None:
        return problem
    strides = _part_slice_strides(insert, chain, part, module_op, reject)
    if isinstance(strides, Rejection):
        return strides
    for check in (_destination_problem, _destination_live_problem):
        problem = check(insert, producer, analysis, reject)
        if problem is not None:
            return problem
    plan = slice_plan(producer, strides[0], module_op, lambda rule, why: reject(rule, why))
    if plan is None or isinstance(plan, Rejection):
        return plan
    return plan, strides[1]


def _part_problem(insert, chain, producer, reject):
    """A :class:`Rejection` when the part (``producer``'s result) and its
    views ``chain`` cannot be computed into the slice: several results,
    another use, another block, a dynamic shape; else None."""
    if len(producer.results) != 1:
        return reject("fits", "only a single-result producer is computed into a slice")
    part = producer.results[0]
    # chain[0] produces the insert's source; chain[-1] reads the part.
    values = [part] + [view.results[0] for view in reversed(chain)]
    consumers = list(reversed(chain)) + [insert]
    for value, consumer in zip(values, consumers):
        users = [u.owner.operation for u in value.uses]
        if len(users) != 1 and not (not chain and _read_again_after(insert, part, users)):
            other = next((u for u in users if u != consumer), consumer)
            return reject("dead", "it is also used by ", other,
                          "; it is computed in its own buffer and copied")
    for op in [producer] + chain:
        if op.block != insert.block:
            return reject("dead", "it is computed in another block; it is copied")
    for value in values:
        if not ir.RankedTensorType(value.type).has_static_shape:
            return reject("fits", "only a static-shaped part is computed into a slice")
    return None


def _part_slice_strides(insert, chain, part, module_op, reject):
    """``(strides, direct)``: the strides of the slice the part is computed
    into, and whether the views only add or drop unit dimensions (they then
    vanish: the part is the slice seen rank-reduced, one extract/insert
    pair, no reshape); or a :class:`Rejection`."""
    direct = slice_strides(insert, ir.RankedTensorType(part.type).shape, module_op=module_op)
    if direct is not None:
        return direct, True
    shape = list(ir.RankedTensorType(insert.operands[0].type).shape)
    strides = slice_strides(insert, shape, module_op=module_op)
    if strides is None:
        return reject("fits", "the slice has dynamic sizes or strides")
    for view in chain:
        strides = inverse_view_strides(view, strides, shape)
        if strides is None:
            return reject("fits", "the slice is not contiguous along the dimensions ",
                          view, " reshapes")
        shape = list(ir.RankedTensorType(view.operands[0].type).shape)
    return strides, False


_NOT_OWNED = {"argument": "a function argument that is not donated (One-Shot copies it "
                          "before the insert)",
              "constant": "a constant",
              "unknown origin": "storage of unknown origin"}


def _loop_state(value) -> bool:
    """Whether ``value`` is an ``scf.for`` iter_arg. Its storage is the
    loop's own: the body writes it (the insert), so One-Shot Bufferize copies
    an init it may not write (a non-donated argument, a constant) before the
    loop, and otherwise the init's buffer passes to the loop, its last use."""
    if not isinstance(value, ir.BlockArgument) or value.arg_number == 0:
        return False
    parent = value.owner.owner
    return parent is not None and parent.name == "scf.for"


def _destination_problem(insert, producer, analysis, reject):
    """A :class:`Rejection` when the destination (or a dynamic offset) is
    defined after ``producer``, is not owned or may have escaped; else
    None."""
    dest = insert.operands[1]
    for value in [dest] + list(insert.operands)[2:]:
        if analysis.liveness.defined_after(value, producer):
            return reject("dead", value, " is defined after the part's producer ", producer,
                          "; the part is computed in its own buffer and copied")
    witness = None if _loop_state(dest) else analysis.alias.not_owned(dest)
    if witness is not None:
        source, why = witness
        what = _NOT_OWNED[why]
        if source == dest:
            return reject("owned", "the destination is ", what)
        return reject("owned", "the destination may share storage with ", source, f", {what}")
    if analysis.alias.escaped(dest):
        return reject("unaliased", "the destination may alias a value passed to an opaque call")
    return None


def _destination_live_problem(insert, producer, analysis, reject):
    """A :class:`Rejection` when the destination or an alias is used after
    ``producer`` other than by ``insert``, or ``producer`` reads storage the
    destination may share; else None."""
    liveness, alias = analysis.liveness, analysis.alias
    dest = insert.operands[1]
    aliases = [m for m in alias.members(dest) if m != dest]
    if dest in alias.assumed:
        source = alias.assumed[dest]
        aliases += [m for m in alias.members(source) if m not in aliases and m != dest]
    live = liveness.dead_after(dest, producer, aliases, ignore=(insert,))
    if live is not None:
        user = live.user
        where = ("between the part's producer and the insert"
                 if live.reason == "later-use" and liveness.pre(user) < liveness.pre(insert)
                 else "after the insert" if live.reason == "later-use"
                 else "by a later loop iteration" if live.reason == "loop"
                 else "in another block of the control-flow graph")
        if live.value == dest:
            if live.reason == "loop":
                return reject("dead", "the destination is defined outside the enclosing ",
                              user.name, " and read again by its next iteration")
            return reject("dead", "the destination is still used by ", user, f" ({where})")
        return reject("unaliased", "the destination may share storage with ", live.value,
                      ", which is still used by ", user, f" ({where})")
    reader = _reads_destination(producer, dest, liveness, alias, insert)
    if reader is not None:
        value, via = reader
        return reject("unaliased", "its producer reads ", value,
                      " (through " + via + "), which may overlap the slice it would be "
                      "written into" if via else
                      ", which may overlap the slice it would be written into")
    return None


def _read_again_after(insert, part, users) -> bool:
    """May ``part``, inserted by ``insert`` and also used by ``users``, be
    computed in the destination's slice all the same? Its other uses then
    read the slice (the part's value, in the destination's storage, which
    the alias analysis now sees as one class: nothing may write it in place
    while the part is still read). Only when every other user is a linalg
    op or an element read (``tensor.extract``, ``vector.transfer_read``,
    ``tensor.dim``: a strided buffer is no copy for them; a kernel call or a
    function result would copy the strided slice into an identity-layout
    buffer, no better than today's copy) after the insert in its block, and the
    insert's result is not used before the last of them (a later
    ``insert_slice`` into the updated tensor could overwrite the row while
    the part is still read: One-Shot Bufferize would then copy the whole
    destination)."""
    block = insert.block
    last = None
    for user in users:
        if user == insert:
            continue
        top = ancestor_in(user, block)
        if not (user.name.startswith("linalg.") or user.name in STRIDED_READERS) \
                or top is None or top == insert \
                or top.is_before_in_block(insert):
            return False
        if last is None or last.is_before_in_block(top):
            last = top
    if last is None:
        return False
    for use in insert.results[0].uses:
        top = ancestor_in(use.owner, block)
        if top is None or top == last or top.is_before_in_block(last):
            return False
    return True


def _same_point_reads(producer, insert) -> list:
    """The operands of ``producer`` that read, at each iteration point, the
    element the producer writes there: ``tensor.extract_slice`` of the
    insert's destination at the insert's very offsets, sizes and strides,
    read with the identity map by an element-wise linalg producer, and used
    by nothing else. Such a read-modify-write (``d[R] = f(d[R], ...)``, a
    scatter-add's row update) may be computed in the slice itself: each
    element is read before the same iteration writes it."""
    if not is_elementwise_linalg(producer) or producer.name == "tdf.call":
        return []
    identity = identity_operands(producer)
    found = []
    for k, value in enumerate(list(producer.operands)[:-1]):
        extract = value.owner.operation if isinstance(value.owner, ir.OpView) else value.owner
        if not isinstance(extract, ir.Operation) or extract.name != "tensor.extract_slice":
            continue
        if k < len(identity) and identity[k] and len(list(value.uses)) == 1 \
                and value.type == producer.results[0].type \
                and extract.operands[0] == insert.operands[1] \
                and same_region(extract, insert):
            found.append(value)
    return found


def _reads_destination(producer, dest, liveness, alias, insert):
    """``(value, via)`` when ``producer`` reads, directly or through what it
    transitively reads among the values defined after ``dest``, a value
    that may share storage with ``dest`` (``via`` names the op in between,
    "" when the producer reads it directly); None otherwise. Conservative:
    any overlap of storage counts, whatever the offsets (static, dynamic or
    chosen by ``scf.if``): computing the part into ``dest``'s slice would
    overwrite what it still reads."""
    classes = [dest]
    if dest in alias.assumed:
        classes.append(alias.assumed[dest])

    def overlaps(value):
        return any(alias.same_class(value, c) for c in classes)

    init = (len(producer.operands) - 1) if producer.name != "tdf.call" else None
    start = [v for k, v in enumerate(producer.operands) if k != init and is_tensor(v)]
    same_point = _same_point_reads(producer, insert)
    for value in start:
        if overlaps(value) and value not in same_point:
            return value, ""
    dest_pos = liveness.def_pos(dest)
    seen = set()
    stack = [(v, None) for v in start if v not in same_point]
    while stack:
        value, via = stack.pop()
        owner = value.owner
        if isinstance(owner, ir.Block):
            continue
        op = owner.operation
        key = op_key(op)
        if key in seen or liveness.def_pos(value) <= dest_pos:
            continue
        seen.add(key)
        for operand in op.operands:
            if not is_tensor(operand):
                continue
            if overlaps(operand):
                return operand, op.name
            stack.append((operand, op))
    return None


def _rewrite_insert_slice(insert, chain, producer, plan, analysis, direct: bool) -> None:
    """Creates ``%s = extract_slice %d[...]`` and the inverse views before
    ``producer`` and lets the producer compute into them; keeps ``analysis``
    current (new ops take the producer's position, their results join the
    destination's class). ``direct``: the views only add/drop unit
    dimensions, so ``%s`` takes the part's type (rank-reduced) and the insert
    takes the part itself (the views are erased): bufferized, the extract
    and the insert then make the same subview and no copy is left."""
    liveness, alias = analysis.liveness, analysis.alias
    dest = insert.operands[1]
    record = liveness.record(producer)
    segments = list(ir.DenseI32ArrayAttr(insert.attributes["operandSegmentSizes"]))
    created = []
    with ir.InsertionPoint(producer), insert.location:
        dynamic = list(insert.operands)[2:]
        offsets, sizes = segments[2], segments[3]
        view = tensor.ExtractSliceOp(
            producer.results[0].type if direct else insert.operands[0].type, dest,
            dynamic[:offsets], dynamic[offsets:offsets + sizes], dynamic[offsets + sizes:],
            *(insert.attributes[name]
              for name in ("static_offsets", "static_sizes", "static_strides"))).result
        created.append(view)
        for reshape in ([] if direct else chain):
            view = _create_inverse(reshape, view)
            created.append(view)
    for value in created:
        liveness.info[op_key(value.owner)] = record
    # A read of the very region the part is written into (d[R] = f(d[R], ..))
    # reads the new slice instead: one value read and written point by
    # point, which One-Shot Bufferize writes in place (two slices of the
    # same region would look like a write under a read, and be copied).
    if direct:
        for k, operand in enumerate(list(producer.operands)):
            if operand in _same_point_reads(producer, insert):
                producer.operands[k] = view
    with ir.InsertionPoint(producer):
        old, new, _ = compute_into(plan, view, analysis)
    if old is not new:
        analysis.replace_op(old, new)
    for value in created:
        alias.union(value, dest)
    if old is not new:
        analysis.note_inplace(new)
        old.erase()
    else:
        alias.union(new.results[0], view)
    if direct and chain:
        insert.operands[0] = new.results[0]
        alias.note_use(new.results[0], insert)
        for reshape in chain:  # chain[0] fed the insert, chain[-1] read the part
            analysis.forget_op(reshape)
            reshape.erase()
