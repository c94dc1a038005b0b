"""``tdf-arena-alias-scopes``: what LLVM may assume of the arena's slices.

Runs on the LLVM dialect, last in ``tdf-lower-to-cpu``. ``tdf-plan-memory``
puts a call's temporaries in one allocation (the arena, or the bytes of a
fresh result): each becomes a ``getelementptr i8`` of that allocation at a
constant offset. To LLVM's alias analysis those slices are one object
accessed at variable offsets, so it can no longer tell that a loop reading
one temporary and writing another touches disjoint bytes (with a
``malloc`` each, it could): a loop-invariant load is reloaded after every
store, and loops are not vectorized. Measured on the GPT-2 decode step of
``benchmarks/models.py``: its compiled loops took 5x the time they take
with a ``malloc`` per temporary (1.2x the whole call).

XLA has the same problem (one allocation for all temporaries) and answers
it the same way: each buffer slice gets an alias scope, and each access to
it ``!noalias`` metadata naming the slices whose bytes it never shares
(``xla/service/llvm_ir/alias_analysis.cc``). Here:

* each view ``tdf-plan-memory`` makes is located
  ``"tdf.slice:<bytes>"(<the allocation's location>)``
  (:func:`slice_location`); the memref lowering gives that location to the
  view's ``getelementptr i8 %base[offset]``;
* this pass takes every such ``getelementptr`` with a constant offset as a
  slice ``[offset, offset + bytes)`` of its base pointer, follows the
  address of every ``llvm.load`` / ``llvm.store`` back through
  ``getelementptr`` (and a descriptor's ``insertvalue`` /
  ``extractvalue``) to a slice, and gives the access the slice's scope
  (``alias_scopes``) and the scopes of every slice of the same base whose
  bytes are disjoint from its own (``noalias_scopes``).

The claim is about bytes, never about time: two slices that share a byte
at different times (the plan reuses memory) stay "may alias", so the
metadata holds whatever order LLVM puts the accesses in. An access whose
address cannot be followed to a slice gets no metadata (LLVM assumes what
it did before). Bases with more than ``max-slices`` slices are left alone
(the metadata grows with the square).

Second claim, about origins: memory a function allocates itself (a
``malloc`` / ``aligned_alloc`` in its body: the arena, a result, a
temporary) never shares a byte with memory its arguments point to (the
caller's arrays, descriptors on the caller's stack): it did not exist when
the function was entered. Each access whose address follows back (through
``getelementptr``, descriptors, and the integer arithmetic that aligns an
allocation: ``inttoptr`` of ``ptrtoint`` plus constants) to a fresh
allocation gets scope ``fresh`` and ``!noalias`` ``argument``; each access
that follows back to an entry-block argument, the reverse (a second domain,
``tdf.origin``). Without it LLVM cannot tell a loop that reads an argument
and writes a temporary from one that overwrites its own input once the
loop is unrolled: the 16 lane partials of ``tdf-split-reductions`` stayed
16 scalar chains (a row-wise ``max`` over 4096x1024 floats took 3.7 ms,
the ``sum`` 1.35 ms) where, with the claim, they are one vector.
Arguments are not claimed disjoint from each other (the same array may be
passed twice). Functions that load or store bf16/f16 values get no origin
scopes: vectorized without run-time alias checks, some of their loops make
LLVM 22.1.8's x86 back end abort ("Unexpected illegal type!").

Option ``max-slices`` (default 512). Statistics ``tagged`` (accesses given
slice scopes) and ``origins`` (accesses given an origin scope).
"""

from __future__ import annotations

import itertools

from mlir import ir

from ..vocabulary import PARALLEL_BODY_ATTR
from .ir_utils import collect_ops, constant_int, defining_op, sym_name
from .registry import PassContext, PassOption, register_pass

__all__ = ["arena_alias_scopes", "slice_location"]

_PREFIX = "tdf.slice:"
_DYNAMIC_INDEX = -2147483648  # a getelementptr index held by an operand
_DEPTH = 64


def slice_location(nbytes: int, location: ir.Location) -> ir.Location:
    """The location of a view of ``nbytes`` bytes made by tdf-plan-memory."""
    return ir.Location.name(f"{_PREFIX}{nbytes}", childLoc=location)


def _slice_bytes(location: ir.Location) -> int | None:
    """The largest ``tdf.slice:<bytes>`` in ``location`` (a fused location
    may hold several), or None."""
    found = None
    pending = [location]
    while pending:
        loc = pending.pop()
        if loc.is_a_name():
            name = loc.name_str
            if name.startswith(_PREFIX) and name[len(_PREFIX):].isdigit():
                found = max(found or 0, int(name[len(_PREFIX):]))
            pending.append(loc.child_loc)
        elif loc.is_a_fused():
            pending.extend(loc.locations)
    return found


def _byte_offset(gep) -> int | None:
    """The constant offset of an ``i8`` ``getelementptr`` with one index."""
    if ir.TypeAttr(gep.attributes["elem_type"]).value != ir.IntegerType.get_signless(8):
        return None
    raw = list(ir.DenseI32ArrayAttr(gep.attributes["rawConstantIndices"]))
    if len(raw) != 1:
        return None
    if raw[0] != _DYNAMIC_INDEX:
        return raw[0]
    return constant_int(gep.operands[1], "llvm.mlir.constant") if len(gep.operands) == 2 else None


def _slices(func) -> dict:
    """{view getelementptr: (base value, offset, bytes)}."""
    found = {}
    for gep in collect_ops(func, "llvm.getelementptr"):
        nbytes = _slice_bytes(gep.location)
        if nbytes is None:
            continue
        offset = _byte_offset(gep)
        if offset is not None and offset >= 0:
            found[gep] = (_root(gep.operands[0]), offset, nbytes)
    return found


def _root(value):
    """``value`` seen through ``extractvalue`` of an ``insertvalue`` chain."""
    for _ in range(_DEPTH):
        op = defining_op(value)
        if op is None or op.name != "llvm.extractvalue":
            break
        inserted = _inserted(op)
        if inserted is None:
            break
        value = inserted
    return value


def _inserted(extract):
    """The value an ``extractvalue`` reads, through the ``insertvalue``
    chain that built the struct, or None. (Positions compare as attributes:
    uniqued, so equal exactly when their indices are.)"""
    position = extract.attributes["position"]
    struct = extract.operands[0]
    for _ in range(_DEPTH):
        op = defining_op(struct)
        if op is None or op.name != "llvm.insertvalue":
            return None
        if op.attributes["position"] == position:
            return op.operands[1]
        struct = op.operands[0]
    return None


def _step(op, through_integers: bool):
    """The address ``op`` computes its result from, or None: the base of a
    ``getelementptr``, what an ``extractvalue`` reads, and (when
    ``through_integers``) the pointer an ``inttoptr`` aligns."""
    if op.name == "llvm.getelementptr":
        return op.operands[0]
    if op.name == "llvm.extractvalue":
        return _inserted(op)
    if op.name == "llvm.inttoptr" and through_integers:
        return _pointer_of_integer(op.operands[0])
    return None


def _walk(value, memo: dict, stop, through_integers: bool):
    """Follows ``value`` back (:func:`_step`) until ``stop(op, value)`` says
    what it is (not None; ``op`` is None for a block argument); None when
    the chain ends first. Every op passed is memoized with the answer, so
    walking all of a function's addresses is linear."""
    chain = []
    found = None
    for _ in range(_DEPTH):
        op = defining_op(value)
        if op is not None and op in memo:
            found = memo[op]
            break
        found = stop(op, value)
        if found is not None or op is None:
            break
        chain.append(op)
        value = _step(op, through_integers)
        if value is None:
            break
    for op in chain:
        memo[op] = found
    return found


def _new_scopes(names, description: str, count: int) -> list:
    """``count`` new alias scopes in a new domain named ``description``."""
    domain = f"#llvm.alias_scope_domain<id = distinct[{next(names)}]<>, " \
             f"description = \"{description}\">"
    text = ", ".join(f"#llvm.alias_scope<id = distinct[{next(names)}]<>, "
                     f"domain = {domain}>" for _ in range(count))
    return list(ir.ArrayAttr(ir.Attribute.parse(f"[{text}]")))


def _apart(a: tuple, b: tuple) -> bool:
    """Whether slices ``a`` and ``b`` of one base share no byte (items 1
    and 2 of each: offset and bytes)."""
    return a[1] + a[2] <= b[1] or b[1] + b[2] <= a[1]


def _metadata(slices: dict, limit: int, names) -> dict:
    """{view: (alias_scopes, noalias_scopes)}: a scope per view, one domain
    per base; the noalias list names the byte-disjoint views of its base."""
    by_base: dict = {}
    for view, (base, offset, nbytes) in slices.items():
        by_base.setdefault(base, []).append((view, offset, nbytes))
    out = {}
    for views in by_base.values():
        if len(views) > limit or len(views) < 2:
            continue
        scopes = _new_scopes(names, "tdf.arena", len(views))
        order = sorted(range(len(views)), key=lambda i: views[i][1])
        for i, (view, _, _) in enumerate(views):
            disjoint = [scopes[j] for j in order if _apart(views[j], views[i])]
            if disjoint:
                out[view] = (ir.ArrayAttr.get([scopes[i]]), ir.ArrayAttr.get(disjoint))
    return out


#: Calls whose result is memory allocated there and then.
_ALLOCATORS = frozenset({"malloc", "aligned_alloc"})
#: Integer ops of the alignment arithmetic an allocation's pointer goes
#: through (``(p + a - 1) - (p + a - 1) % a``).
_ALIGN_OPS = frozenset({"llvm.add", "llvm.sub", "llvm.urem", "llvm.and"})


class _Provenance:
    """What an address is computed from, within its function: the view
    (:meth:`view_of`) and the origin (:meth:`origin_of`) of its memory; and
    whether two addresses never share a byte (:meth:`disjoint`), also when
    both are parameters of a private function, through all its callers."""

    def __init__(self, op, slices: dict):
        self.slices = slices
        self.view_memo: dict = {}
        self.origin_memo: dict = {}
        self.pairs: dict = {}
        self.sites = _call_sites(op)

    def view_of(self, value):
        """The slice view ``value`` is computed from, or None."""
        return _walk(value, self.view_memo, lambda op, _: op if op in self.slices else None, False)

    def origin_of(self, func, value):
        """``("fresh", None)`` for memory an allocation call of ``func``
        returned, ``("argument", i)`` for memory its entry-block argument
        ``i`` points to, None for anything else (a loaded pointer, a select,
        a call's result)."""
        entry = func.regions[0].blocks[0]

        def stop(op, value):
            if op is None:
                return ("argument", ir.BlockArgument(value).arg_number) \
                    if value.owner == entry else None
            if op.name == "llvm.call" and "callee" in op.attributes and \
                    ir.FlatSymbolRefAttr(op.attributes["callee"]).value in _ALLOCATORS:
                return ("fresh", None)
            return None

        return _walk(value, self.origin_memo, stop, True)

    def disjoint(self, func, a, b) -> bool:
        """Whether addresses ``a`` and ``b`` of ``func`` point into memory
        that never shares a byte: byte-disjoint slices of one allocation,
        an allocation of ``func`` and memory it was passed, or two
        parameters of a private ``func`` that every call passes such
        memory (:meth:`params_disjoint`)."""
        slice_a = self.slices.get(self.view_of(a))
        slice_b = self.slices.get(self.view_of(b))
        if slice_a is not None and slice_b is not None and slice_a[0] == slice_b[0] and \
                _apart(slice_a, slice_b):
            return True
        origin_a, origin_b = self.origin_of(func, a), self.origin_of(func, b)
        if origin_a is None or origin_b is None:
            return False
        if {origin_a[0], origin_b[0]} == {"fresh", "argument"}:
            return True
        return origin_a[0] == origin_b[0] == "argument" and \
            self.params_disjoint(func, origin_a[1], origin_b[1])

    def params_disjoint(self, func, i: int, j: int) -> bool:
        """Whether every call of ``func`` (private, its address never taken)
        passes disjoint memory for its parameters ``i`` and ``j``. A cycle of
        calls back to ``func`` answers False while it is followed."""
        if i == j:
            return False
        key = (sym_name(func), min(i, j), max(i, j))
        if key in self.pairs:
            return self.pairs[key]
        self.pairs[key] = False
        sites = self.sites.get(sym_name(func)) or []
        found = bool(sites) and all(
            len(call.operands) > max(i, j)
            and self.disjoint(caller, call.operands[i], call.operands[j])
            for call, caller in sites)
        self.pairs[key] = found
        return found


def _private(func) -> bool:
    """Whether no code outside the module can call ``func``."""
    if "sym_visibility" in func.attributes and \
            ir.StringAttr(func.attributes["sym_visibility"]).value == "private":
        return True
    return "linkage" in func.attributes and \
        str(func.attributes["linkage"]) in ("#llvm.linkage<private>", "#llvm.linkage<internal>")


#: Ops that take a function's address (its callers are then unknown).
_ADDRESS_OF = {"llvm.mlir.addressof": "global_name", "llvm.dso_local_equivalent": "function_name"}


def _call_sites(op) -> dict:
    """{private function name: [(direct llvm.call, calling function)]} for
    the functions defined in ``op`` whose address is never taken. A call of
    a launch declaration of ``tdf-outline-parallel`` counts as a call of the
    body it names (``tdf-launch-parallel`` passes the body the same values,
    the count's place taken by the task number)."""
    all_funcs = collect_ops(op.operation, "llvm.func")
    funcs = [func for func in all_funcs if func.regions[0].blocks]
    sites: dict = {sym_name(func): [] for func in funcs if _private(func)}
    bodies = {sym_name(func): ir.FlatSymbolRefAttr(func.attributes[PARALLEL_BODY_ATTR]).value
              for func in all_funcs
              if not func.regions[0].blocks and PARALLEL_BODY_ATTR in func.attributes}
    for caller in funcs:
        for call in collect_ops(caller, "llvm.call"):
            if "callee" in call.attributes:
                callee = ir.FlatSymbolRefAttr(call.attributes["callee"]).value
                callee = bodies.get(callee, callee)
                if callee in sites:
                    sites[callee].append((call, caller))
    for taking in collect_ops(op.operation, tuple(_ADDRESS_OF)):
        attribute = _ADDRESS_OF[taking.name]
        if attribute in taking.attributes:
            sites.pop(ir.FlatSymbolRefAttr(taking.attributes[attribute]).value, None)
    return sites


def _pointer_of_integer(value):
    """The one pointer an alignment computation (``ptrtoint`` of it, plus
    constants through add/sub/urem/and) starts from, or None."""
    pointers = []
    pending = [value]
    for _ in range(_DEPTH):
        if not pending:
            break
        op = defining_op(pending.pop())
        if op is None:
            return None
        if op.name == "llvm.ptrtoint":
            pointers.append(op.operands[0])
        elif op.name in _ALIGN_OPS:
            pending.extend(op.operands)
        elif op.name != "llvm.mlir.constant":
            return None
    # The pointer may be reached more than once (``x - x % a`` reads ``x`` twice).
    if pending or not pointers or any(p != pointers[0] for p in pointers[1:]):
        return None
    return pointers[0]


def _half_precision(access) -> bool:
    """Whether ``access`` loads or stores bf16/f16 values (scalars or vectors)."""
    value = access.results[0] if access.name == "llvm.load" else access.operands[0]
    element = value.type
    if isinstance(element, ir.VectorType):
        element = element.element_type
    return isinstance(element, (ir.BF16Type, ir.F16Type))


def _tag_origins(found: list, names, ctx: PassContext) -> None:
    """Origin scopes (a ``tdf.origin`` domain of the function's own) for
    ``found``, its ``(access, origin)``: memory a function allocates is not
    memory it was passed."""
    kinds = {origin[0] for _, origin in found if origin is not None}
    if not {"fresh", "argument"} <= kinds:
        return  # nothing to tell apart
    fresh, argument = _new_scopes(names, "tdf.origin", 2)
    for access, origin in found:
        if origin is None:
            continue
        own, other = (fresh, argument) if origin[0] == "fresh" else (argument, fresh)
        _add_scopes(access, own, [other])
        ctx.statistic("origins", 1)


def _tag_parameters(func, origins: list, provenance: _Provenance, names,
                    ctx: PassContext) -> None:
    """Parameter scopes (a ``tdf.parameters`` domain of ``func``'s own):
    parameters of a private function that every call passes disjoint
    memory (:meth:`_Provenance.params_disjoint`); ``origins`` are its
    ``(access, origin)``."""
    if sym_name(func) not in provenance.sites:
        return
    found = [(access, origin[1]) for access, origin in origins
             if origin is not None and origin[0] == "argument"]
    params = sorted({index for _, index in found})
    apart = {i: [j for j in params if provenance.params_disjoint(func, i, j)] for i in params}
    tagged = sorted({i for i in params if apart[i]} | {j for i in params for j in apart[i]})
    if not tagged:
        return
    scopes = dict(zip(tagged, _new_scopes(names, "tdf.parameters", len(tagged))))
    for access, index in found:
        if apart[index]:
            _add_scopes(access, scopes[index], [scopes[j] for j in apart[index]])
            ctx.statistic("parameters", 1)


def _add_scopes(access, own, others: list) -> None:
    scopes = list(ir.ArrayAttr(access.attributes["alias_scopes"])) \
        if "alias_scopes" in access.attributes else []
    noalias = list(ir.ArrayAttr(access.attributes["noalias_scopes"])) \
        if "noalias_scopes" in access.attributes else []
    access.attributes["alias_scopes"] = ir.ArrayAttr.get(scopes + [own])
    access.attributes["noalias_scopes"] = ir.ArrayAttr.get(noalias + others)


def _address(access):
    return access.operands[0 if access.name == "llvm.load" else 1]


@register_pass(
    "tdf-arena-alias-scopes",
    "Alias scopes for tdf-plan-memory's slices: accesses to disjoint bytes do not alias",
    options=[PassOption("max-slices", int, 512,
                        "Bases with more slices get no metadata")],
    statistics=[("tagged", "loads and stores given slice scopes"),
                ("origins", "loads and stores given an origin scope"),
                ("parameters", "loads and stores given a parameter scope")],
)
def arena_alias_scopes(op, ctx: PassContext) -> None:
    """See the module docstring."""
    limit = int(ctx.option("max-slices"))
    names = itertools.count()
    funcs = [func for func in collect_ops(op.operation, "llvm.func") if func.regions[0].blocks]
    slices: dict = {}
    for func in funcs:
        slices.update(_slices(func))
    metadata = _metadata(slices, limit, names) if len(slices) >= 2 else {}
    provenance = _Provenance(op, slices)
    for func in funcs:
        accesses = collect_ops(func, ("llvm.load", "llvm.store"))
        if metadata:
            for access in accesses:
                view = provenance.view_of(_address(access))
                if view not in metadata:
                    continue
                access.attributes["alias_scopes"], access.attributes["noalias_scopes"] = \
                    metadata[view]
                ctx.statistic("tagged", 1)
        # LLVM 22.1.8's x86 back end aborts ("Unexpected illegal type!" in
        # LegalizeDAG) on some bf16 loops once they can be vectorized without
        # run-time alias checks: functions with half-precision accesses keep
        # LLVM's own view of where their memory comes from.
        if any(_half_precision(access) for access in accesses):
            continue
        origins = [(access, provenance.origin_of(func, _address(access)))
                   for access in accesses]
        _tag_origins(origins, names, ctx)
        _tag_parameters(func, origins, provenance, names, ctx)
