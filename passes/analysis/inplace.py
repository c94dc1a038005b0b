"""The in-place analysis of one function: may operand ``%v`` of an op hold
one of its results, under tdf's four safety rules?

* **dead** -- neither ``%v`` nor any value that may alias it is read after the
  op (uses in nested regions and loops included: a value defined outside a
  loop and written inside it is never dead; function results count);
* **unaliased** -- ``%v`` shares no storage with a value still in use, and no
  value of its alias class ever reached a ``tdf.call_opaque``;
* **owned** -- ``%v``'s storage is not a non-donated function argument, a
  constant, or of unknown origin (``tdf.donate`` arguments are owned);
* **fits** -- ``%v`` has exactly the result's type (or, with ``size-match``, a
  larger or dynamic tensor it adapts to, :func:`size_adaptation`); a
  broadcast operand never fits.

(Calls also need the **kernel** to allow the pair:
:mod:`tdf.passes.analysis.kernels`.) :class:`InplaceAnalysis` combines
:mod:`~tdf.passes.analysis.liveness` and :mod:`~tdf.passes.analysis.alias`
and is kept current while ``tdf-insert-inplace`` rewrites in program order;
``tdf-verify-inplace`` runs the same checks on ``tdf.call_inplace`` ops. A
failed check is a :class:`Rejection`: the rule and a message whose IR
objects :func:`format_rejections` names as printed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mlir import ir

from ..ir_utils import is_tensor, op_key
from .alias import AliasAnalysis
from .liveness import Liveness

__all__ = ["RULES", "MAX_BRANCH_DEPTH", "branch_depth", "RESHAPES", "Rejection",
           "InplaceAnalysis", "size_adaptation", "namer", "format_rejections", "same_region"]


#: The safety rules, as named in rejections and statistics, and "depth":
#: a candidate left out of place to bound compile time (see
#: :data:`MAX_BRANCH_DEPTH`).
RULES = ("dead", "unaliased", "owned", "fits", "kernel", "depth")
#: Candidates nested in more ``scf.if`` / ``scf.index_switch`` ops than this
#: stay out of place. In-place updates through nested branches form one
#: alias set (each branch's result aliases what both of its arms yield), and
#: One-Shot Bufferize's analysis of it costs about the fourth power of the
#: depth (calls in place through ``scf.if`` nested 50 / 100 deep: 1.1 /
#: 26 s, the same program out of place 0.15 s at 70 deep).
MAX_BRANCH_DEPTH = 16


def branch_depth(op) -> int:
    """How many ``scf.if`` / ``scf.index_switch`` ops enclose ``op``: a
    walk up its ancestors (``Liveness.branch_depth`` answers in O(1) for the
    ops it numbered)."""
    depth = 0
    parent = op.operation.parent
    while parent is not None and parent.name != "func.func":
        depth += parent.name in ("scf.if", "scf.index_switch")
        parent = parent.parent
    return depth


#: Reshapes a slice may be seen through.
RESHAPES = ("tensor.expand_shape", "tensor.collapse_shape")


def same_region(extract, insert) -> bool:
    """Whether ``tensor.extract_slice`` ``extract`` and ``tensor.insert_slice``
    ``insert`` address the same region: the same static offsets, sizes and
    strides, and the same SSA values for the dynamic ones (not whether they
    name the same tensor)."""
    for name in ("static_offsets", "static_sizes", "static_strides"):
        if insert.attributes[name] != extract.attributes[name]:
            return False
    if (list(ir.DenseI32ArrayAttr(insert.attributes["operandSegmentSizes"]))[2:]
            != list(ir.DenseI32ArrayAttr(extract.attributes["operandSegmentSizes"]))[1:]):
        return False
    return all(a == b for a, b in zip(list(insert.operands)[2:], list(extract.operands)[1:]))


@dataclass
class Rejection:
    """Why operand ``operand`` of ``op`` cannot hold a result in place.
    ``parts`` is the message as a list of strings and IR objects (values,
    ops) named when the message is formatted."""

    rule: str
    op: object
    location: object
    operand: int
    parts: list = field(default_factory=list)


class InplaceAnalysis:
    """Liveness + aliasing of one function, kept current while the pass
    rewrites in program order. ``check(op, i, result_type)`` returns None when
    operand ``i`` of ``op`` may hold a result of ``result_type``."""

    def __init__(self, func, size_match: bool = False):
        self.func = func.operation
        self.size_match = size_match
        self.liveness = Liveness(self.func)
        self.alias = AliasAnalysis(self.func, order=self.liveness, defer_inplace=True)
        self.replaced_values: dict = {}
        self.replaced_ops: dict = {}

    # -- bookkeeping for rewrites -----------------------------------------
    def replace_op(self, old, new) -> None:
        """``new`` takes ``old``'s place: same position, results in the same
        classes. Call before erasing ``old``."""
        info = self.liveness.info
        info[op_key(new)] = info.pop(op_key(old))
        self.replaced_ops[op_key(old)] = new
        for before, after in zip(old.results, new.results):
            if is_tensor(before):
                self.alias.union(after, before)
                self.alias.forget(before)
                self.replaced_values[before] = after

    def forget_op(self, op) -> None:
        """``op`` is about to be erased (with no replacement): its results
        leave their alias classes and its numbering is dropped, so that no
        later query reaches the Python handle of an erased value."""
        op = op.operation
        for result in op.results:
            if is_tensor(result):
                self.alias.forget(result)
        self.liveness.info.pop(op_key(op), None)

    def note_inplace(self, op) -> None:
        """Union the in-place results of ``tdf.call_inplace`` ``op``."""
        indices = list(ir.DenseI64ArrayAttr(op.attributes["inplace_indices"]))
        for result, index in zip(op.results, indices):
            if index >= 0:
                self.alias.union(result, op.operands[index])

    def resolve(self, item):
        if isinstance(item, ir.Value):
            return self.replaced_values.get(item, item)
        if isinstance(item, ir.Operation):
            return self.replaced_ops.get(op_key(item), item)
        return item

    # -- the rules ----------------------------------------------------------
    def check(self, op, index: int, result_type, identity: bool = True, exact_only=True):
        """First rule operand ``index`` of ``op`` breaks, as a
        :class:`Rejection`, or None."""
        op = op.operation
        value = op.operands[index]

        def reject(rule, *parts):
            return Rejection(rule, op, op.location, index, list(parts))

        if not identity:
            return reject("fits", f"operand #{index} (", value,
                          ") is not read with the identity map (broadcast or permuted)")
        if value.type != result_type and not (not exact_only and self.size_fits(value.type, result_type)):
            return reject("fits", f"operand #{index} (", value, f") has type {value.type}, "
                          f"the result needs {result_type}")
        witness = self.alias.not_owned(value)
        if witness is not None:
            source, why = witness
            what = {"argument": "a function argument that is not donated",
                    "constant": "a constant",
                    "unknown origin": "storage of unknown origin"}[why]
            if source == value:
                return reject("owned", f"operand #{index} (", value, f") is {what}")
            return reject("owned", f"operand #{index} (", value, ") may share storage with ",
                          source, f", {what}")
        if self.alias.escaped(value):
            return reject("unaliased", f"operand #{index} (", value,
                          ") may alias a value passed to an opaque call")
        for k, other in enumerate(op.operands):
            # Another view of the same storage read by this very op (the same
            # value twice is the kernel rule's business). A tensor.empty holds
            # nothing to read (the init the rewrite replaces, which the
            # classes merged with %value through the other branch of an
            # scf.if that yields both).
            if k != index and other != value and is_tensor(other) \
                    and not _is_empty(other) and self.alias.same_class(other, value):
                return reject("unaliased", f"operand #{index} (", value,
                              f") may share storage with operand #{k} (", other,
                              ") of the same op")
        return self._check_dead(op, index, value, reject)

    def overwritten_source(self, op, value):
        """The source ``%src`` of ``value = tensor.extract_slice %src[R]``
        (possibly seen through ``tensor.expand_shape``/``collapse_shape``
        views of the slice) when the only other use of ``%src`` is a
        ``tensor.insert_slice ... into %src[R]`` with the same offsets, sizes
        and strides (the same static values and the same SSA values for the
        dynamic ones), after ``op`` in the same block (defined there too):
        writing ``value``'s storage at ``op`` is then no read of ``%src``'s
        old contents, since that insert overwrites exactly the region ``R``
        (the chain a concat of computed parts, or a part computed into its
        insert_slice destination, is rewritten to). None otherwise."""
        found = self.overwritten_sources(op, value)
        return found[0] if found else None

    def overwritten_sources(self, op, value) -> list:
        """:meth:`overwritten_source` of ``value``, then of that source, and
        so on: a slice of a slice updated and written back
        (``%o = extract_slice %A[R1]``, ``%r = extract_slice %o[R]``, write
        ``%r`` at ``op``, ``insert_slice ... into %o[R]``, then
        ``insert_slice ... into %A[R1]``): each level's only other use
        overwrites the region that holds the written storage, so none of
        them is read afterwards. The list from the innermost source out."""
        found: list[ir.Value] = []
        while len(found) < 8:
            src = self._overwritten_once(op, value)
            if src is None:
                break
            found.append(src)
            value = src
        return found

    def _overwritten_once(self, op, value):
        while True:
            owner = value.owner
            if isinstance(owner, ir.Block):
                return None
            owner = owner.operation
            if owner.name not in RESHAPES or owner.block != op.block:
                break
            value = owner.operands[0]
        if owner.name != "tensor.extract_slice":
            return None
        extract = owner
        if extract.block != op.block:
            return None
        src = extract.operands[0]
        # Defined in this block (an argument of it included): a loop around
        # the block redefines it per iteration.
        if isinstance(src.owner, ir.Block):
            if src.owner != op.block:
                return None
        elif src.owner.operation.block != op.block:
            return None
        others = [u.owner.operation for u in src.uses if u.owner.operation != extract]
        if len(others) != 1 or len(list(src.uses)) != 2:
            return None
        insert = others[0]
        if (insert.name != "tensor.insert_slice" or insert.operands[1] != src
                or insert.block != op.block
                or self.liveness.pre(insert) <= self.liveness.pre(op)):
            return None
        return src if same_region(extract, insert) else None

    def _check_dead(self, op, index, value, reject):
        liveness, alias = self.liveness, self.alias
        record = liveness.record(op)
        sources = []
        if value in alias.assumed:
            sources.append(alias.assumed[value])
        if record.cfg_block is None:
            # Without a CFG around ``op``, a use after it needs a member
            # (defined before ``op``: later members hold newer contents)
            # whose latest read is after it -- a read inside a loop around
            # ``op`` that does not contain the member's definition counts as
            # the end of that loop (AliasAnalysis.last_read). The class
            # bounds (amortized O(log n) per member over queries in program
            # order) replace a scan of the whole class for each candidate,
            # which was quadratic over a chain turned in place (and over a
            # chain through nested loops, one class); the scan below decides
            # (and names the culprit) otherwise.
            if (alias.max_use(value) <= record.pre
                    and all(alias.max_use(s) <= record.pre for s in sources)):
                return None
            live = [alias.live_members(v, record.pre) for v in [value] + sources]
            if all(members is not None for members in live):
                # Only these members can have a use after ``op``: when none
                # does (a use in the other branch of an scf.if), ``op`` is
                # the last; otherwise the scan below names the culprit.
                few = list({m: None for members in live for m in members if m != value})
                if liveness.dead_after(value, op, few) is None:
                    return None
        overwritten = self.overwritten_sources(op, value)
        aliases = [m for m in alias.members(value)
                   if m != value and not any(m == o for o in overwritten)]
        listed = set(aliases)
        for source in sources:
            for m in alias.members(source):
                if m not in listed and m != value:
                    aliases.append(m)
                    listed.add(m)
        live = liveness.dead_after(value, op, aliases)
        if live is None:
            return None
        user = live.user
        if live.value == value:
            if live.reason == "loop":
                return reject("dead", f"operand #{index} (", value, f") is defined outside the "
                              f"enclosing {user.name} and read again by its next iteration")
            if live.reason == "cfg":
                return reject("dead", f"operand #{index} (", value,
                              ") may be used in another block of the control-flow graph")
            return reject("dead", f"operand #{index} (", value, ") is still used by ", user)
        return reject("unaliased", f"operand #{index} (", value, ") may share storage with ",
                      live.value, ", which is still used by ", user)

    @staticmethod
    def size_fits(have, need) -> bool:
        """Same element type and rank, and every dimension of ``have`` is
        either dynamic (an identity-map read forces it to equal the result's
        at run time: a ``tensor.cast`` adapts it) or static and at least the
        result's (the leading corner is reused through an ``extract_slice``)."""
        return size_adaptation(have, need) is not None


def _is_empty(value) -> bool:
    owner = value.owner
    return not isinstance(owner, ir.Block) and owner.operation.name == "tensor.empty"


def size_adaptation(have, need):
    """``"cast"``, ``"slice"`` or None: how a value of type ``have`` can be the
    init of a result of type ``need`` under ``size-match``."""
    if not (isinstance(have, ir.RankedTensorType) and isinstance(need, ir.RankedTensorType)):
        return None
    if have.element_type != need.element_type or have.rank != need.rank or not need.has_static_shape:
        return None
    if have.has_static_shape:
        return "slice" if all(h >= n for h, n in zip(have.shape, need.shape)) else None
    dynamic = ir.ShapedType.get_dynamic_size()
    return "cast" if all(h in (n, dynamic) for h, n in zip(have.shape, need.shape)) else None


def namer(func):
    """A function naming IR objects of ``func`` as printed: a value by its
    SSA name, an op by its first result and name."""
    state = ir.AsmState(func)

    def name(item):
        if isinstance(item, ir.Value):
            return item.get_name(state)
        if isinstance(item, ir.Operation) or hasattr(item, "operation"):
            op = item.operation
            if len(op.results):
                return f"{op.results[0].get_name(state)} ({op.name})"
            if op.name == "func.return":
                return "func.return (a function result)"
            return op.name
        return str(item)

    return name


def format_rejections(func, rejections, analysis=None) -> list[tuple[object, str]]:
    """``(location, message)`` for each rejection, values named as printed."""
    name = namer(func.operation)

    def resolve(item):
        return analysis.resolve(item) if analysis is not None else item

    out = []
    for rejection in rejections:
        parts = [resolve(p) for p in rejection.parts]
        text = "".join(p if isinstance(p, str) else name(p) for p in parts)
        out.append((rejection.location, f"in-place rejected ({rejection.rule}): {text}"))
    return out
