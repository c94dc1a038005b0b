"""``tdf-insert-inplace``: run kernel calls and element-wise ops in place.

(This text, the module docstring of ``passes/insert_inplace.py``, is the
one description of the pass; ``docs/Passes.md`` refers to it.)

**The rules.** A result may be computed in the storage of an operand ``%v``
only when the four safety rules hold at that op (checked by
:class:`tdf.passes.analysis.inplace.InplaceAnalysis`):

* **dead** — neither ``%v`` nor any value that may alias it is used after
  the op (uses in nested regions and loops included: a value defined outside
  a loop and written inside it is never dead; function results count; a
  multi-block region is treated conservatively);
* **unaliased** — ``%v`` shares no storage with a value still in use, and no
  value of its alias class ever reached a ``tdf.call_opaque``; the op reads no
  other view of that storage (a ``tensor.empty`` init, which holds nothing,
  does not count: in a branch the last reader of a dead value takes it even
  when the other branch's result, yielded with this one, already holds it);
* **owned** — ``%v``'s storage is not a non-donated function argument, a
  constant, or of unknown origin (``tdf.donate`` arguments are owned);
* **fits** — ``%v`` has exactly the result's type; a broadcast or permuted
  input never fits (option ``size-match``, below, relaxes this for linalg ops).

Calls additionally need the **kernel** rule (:mod:`tdf.passes.analysis.kernels`,
``docs/Passes.md``: ``tdf.elementwise``, ``tdf.inplace_ok``, or a body proven
element-wise) for the group of parameters the call passes the value to
(``add(%x, %x)``: parameters 0 and 1). ``add(%z, %z)`` may run in place in
``%z``: the other reads of ``%z`` by the same op are element-wise. Ops are
visited in program order, so chains of calls run in one buffer.

**Depth** (not a safety rule: a compile-time bound). A call or linalg op
nested in more than 16 ``scf.if`` / ``scf.index_switch`` ops
(:data:`tdf.passes.analysis.inplace.MAX_BRANCH_DEPTH`) stays out of place
(statistic ``rejected-depth``). Updates in place through nested branches
form one alias set (each branch's result aliases what both its arms yield),
and One-Shot Bufferize's analysis of that set, run by the agreement step
below and by bufferization, costs about the fourth power of the depth:
calls in place through ``scf.if`` nested 50 / 100 deep compiled in 1.1 / 26
s through ``tdf-lower-to-cpu``; with the bound 0.27 / 0.84 s, and 400 deep
12.6 s (quadratic, as One-Shot is on the same program with no call in place:
1.8 s at 400). In the CPU pipeline ``tdf-outline-deep-nests`` runs first and
leaves no function nested more than 16 deep, so the bound applies only when
this pass runs without it.

The dead rule treats ``%s = extract_slice %d[R]`` written in place as no read
of ``%d`` when ``%d``'s only other use is a later ``insert_slice ... into
%d[R]`` with the same static offsets, sizes and strides in the same block (the
concat chain), and so on up a chain of slices: a slice of a slice updated and
written back at every level (``%o = extract_slice %A[R1]``, ``%r =
extract_slice %o[R]``, ``insert_slice ... into %o[R]``, ``insert_slice ...
into %A[R1]``) runs in place, with no allocation and no copy; any other later
read of ``%d`` (or of ``%o``, or the block written back elsewhere) still
blocks.

**The rewrites**, per function, in this order:

0. *Reads of disjoint slices after an update* (:func:`rebase_disjoint_reads`,
   statistic ``rebased-reads``): for ``%c = tensor.insert_slice %z into
   %A[R]`` (static ``R``, ``%z`` made by a ``tdf.call`` or element-wise linalg
   op ``P`` in the insert's block), every ``tensor.extract_slice %A[R']`` with
   a static ``R'`` provably disjoint from ``R`` (some dimension's index ranges
   do not meet) that is used after ``P`` is taken of ``%c`` instead (the
   insert moves up to right after ``P``; a slice taken before ``P`` is
   re-taken after the insert for its later uses). Same values, but ``%A`` is
   no longer read after ``P``, so ``P`` may write ``R`` in place (rows 0..3
   updated while rows 4..7 are read later), and One-Shot Bufferize — which
   cannot tell a call's write from a later read of a disjoint slice and
   otherwise copies the slice, or all of ``%A`` when the old value is read
   after the insert — sees no conflict. Only when this leaves ``%A`` with no
   use after ``P`` but the insert; an overlapping or dynamic ``R'``, or any
   other later use of ``%A``, leaves the IR alone.
1. *Concat parts* (:func:`rewrite_concats`, statistic ``concats``):
   ``tensor.concat`` whose parts are element-wise linalg ops with a
   ``tensor.empty`` init, or single-result ``tdf.call``s of kernels with a
   body (each part used only by the concat, same block, static shape) →
   ``tensor.empty`` of the result + per part ``extract_slice`` +
   ``insert_slice``. A linalg part takes the slice as its init; a call part
   becomes ``tdf.call_inplace @k_strided(%in..., %slice) inplace [n]`` on a
   clone of the kernel whose output parameter has the slice's layout
   ``strided<[row-major strides of the result], offset: ?>`` (one clone per
   kernel and layout, marked ``tdf.strided_of = @k``). After One-Shot
   Bufferize + ``canonicalize, cse``: one allocation, zero copies (the
   subview is ``memref.cast`` to the dynamic offset). Left as a copy, with a
   remark: a part also used elsewhere (``dead``), a declaration-only kernel
   (its output takes an identity layout only) or a kernel that uses its
   output parameter in an op whose types depend on the layout
   (``memref.subview``, ``func.call``, ...; only linalg ops, loads/stores,
   ``memref.dim``, ``memref.copy`` and vector transfers are accepted)
   (``kernel``). Measured (3 parts of 1x8xf32, ``tdf.compile``): in-place off
   4 allocations (192 B) + 3 copies; on 1 allocation (96 B), 0 copies.
2. *Inserted parts* (:func:`rewrite_insert_slices`, statistic
   ``insert-slices``): ``%c = tensor.insert_slice %r into %d[...]`` whose
   source is a freshly computed part — a single-result ``tdf.call``, an
   element-wise linalg op or a ``linalg.fill`` with a ``tensor.empty`` init, possibly through
   ``tensor.expand_shape`` / ``collapse_shape`` views (the functional
   log-concat and KV-decode pattern) — is computed straight into ``%s =
   tensor.extract_slice %d[...]`` created just before the producer, with the
   same machinery as a concat part (``slice_plan`` / ``compute_into`` in
   ``tdf.passes._inplace_slices``: a slice init for linalg, the
   ``@k_strided`` variant for calls). Views that only add or drop unit
   dimensions vanish: ``%s`` is the rank-reduced slice of the part's type and
   the insert takes the part itself; other views are inverted on ``%s`` (an
   ``expand_shape`` of the part becomes a ``collapse_shape`` of the slice,
   rejected with ``fits`` when the slice is not contiguous there). The
   variant's layout is ``strided<[strides, ? for unit dims], offset: ?>``
   (One-Shot's subview casts to it): the destination buffer's strides times
   the slice's steps, where the destination's are those One-Shot gives it
   whatever its analysis decides
   (:func:`tdf.passes.analysis.shapes.buffer_strides`: identity for a
   function argument, ``tensor.empty``, fresh call result or an ``scf.for``
   carried value whose init and yield keep it; composed through
   ``extract_slice``s; a kernel parameter's layout for a call result; ``?``
   where unknown), so the cast never fails at run time. Conditions (a remark
   per rejected candidate, on the insert, naming the rule and the blocking
   value):

   * the part and each view have exactly one use, all in the insert's block,
     static shapes (``dead`` / ``fits``) — except a part inserted without
     views and read again after the insert only by linalg ops and element
     reads (``tensor.extract``, ``vector.transfer_read``, ``tensor.dim``),
     with the insert's result unused before the last of them: those readers
     then read the destination's row (a strided view costs them nothing; a
     kernel call or a function result would copy it into an identity-layout
     buffer, no better than the copy into the row it replaces), and nothing
     can overwrite the row while they still read it;
   * ``%d`` and the dynamic offsets are defined before the producer
     (``dead``: nothing is moved);
   * ``%d`` is owned — a ``tensor.empty``, fresh value, donated argument or
     ``scf.for`` iter_arg (One-Shot copies an init it may not write before
     the loop); a non-donated argument is rejected (``owned``): One-Shot
     copies the whole destination before the insert, and writing it before
     that copy would be wrong — and never escaped (``unaliased``);
   * neither ``%d`` nor any alias is used after the producer except by the
     insert itself: not between producer and insert, not after the insert,
     not by a later loop iteration (``dead`` / ``unaliased``);
   * the producer reads nothing that may share storage with ``%d``
     (``unaliased``): no tensor operand of the producer (a linalg part's
     ``tensor.empty`` init excepted), and no tensor operand of any op it
     transitively depends on among the values defined after ``%d``, is in
     ``%d``'s alias class (or in the class of the source of a
     ``tdf.assume_unaliased`` ``%d``) — whatever the offsets (static,
     dynamic, or a slice chosen by ``scf.if``) and even when the regions are
     provably disjoint: computing the part into ``%d``'s slice would
     otherwise overwrite what the producer still reads (``%r0 =
     extract_slice %A[0][4][1]; %z = call @exp(%r0); insert_slice %z into
     %A[1][4][1]``). One exception: an element-wise linalg producer reading,
     with the identity map, ``extract_slice %d[R]`` at the insert's very
     offsets, sizes and strides, used nowhere else (``d[R] = f(d[R], ...)``,
     a scatter-add's row update): each element is read before the same
     iteration point writes it, and the producer reads and writes the one
     new slice (One-Shot then updates the row in place, no copy);
   * the kernel has a body that takes the layout (``kernel``), as for concat
     parts.

   After One-Shot Bufferize + ``canonicalize, cse, canonicalize`` the kernel
   writes the destination's subview: zero ``memref.copy``, no intermediate
   allocation (the second ``canonicalize`` removes the self-copy that appears
   when ``cse`` merges the extract's and the insert's subviews;
   ``tdf-bufferize`` ends with ``cse, canonicalize``).
3. *Calls* (statistics ``rewrites``, ``inplace-results``): ``tdf.call
   @k(...)`` → ``tdf.call_inplace @k_inplace(...) inplace [...]``, one index
   per result (``-1`` where no operand qualifies, e.g. ``[0, -1]``),
   generating or reusing the in-place kernel variant. Result ``j`` may take
   operand ``i`` when the operand passes the four rules, is not already
   holding another result of the call (not even as a repeated value) and the
   kernel rule holds. When the in-place operand is passed more than once, the
   generated variant must also carry ``tdf.elementwise`` (One-Shot Bufferize
   copies otherwise); if it cannot, the call is left alone (``kernel``).
   *Read-modify-write of a slice*: an in-place operand ``%r =
   tensor.extract_slice %A[...]`` (static sizes, passed once) whose result is
   only inserted back (every use an ``insert_slice`` source) takes a clone of
   the variant whose parameter has ``%r``'s bufferized layout
   (``@k_inplace_strided``, ``tdf.strided_of = @k_inplace``; strides as in
   step 2, all static for dimensions larger than one, else the identity
   variant and its copy), so the row of a donated ``%A`` is updated where it
   lies: 0 allocations and 0 copies instead of 2 and 2. The variant's body
   uses its in-place parameter only in linalg ops (the kernel rule), so it is
   layout-agnostic; declarations keep their identity-layout variant.
4. *Element-wise linalg ops* (named, ``linalg.map``, ``linalg.elementwise``,
   all-parallel ``linalg.generic``) with a ``tensor.empty`` init that the
   payload does not read: the init becomes the dead input read with the
   identity map (indexing map ``k`` belongs to operand ``k``, scalar operands
   included).
5. *Agreement with One-Shot Bufferize* (:func:`keep_one_shot_agreement`):
   One-Shot Bufferize's analysis runs on a copy of the module (the definition
   of "a copy would be needed", see ``tdf-verify-inplace``); every
   ``tdf.call_inplace`` made by step 3 whose in-place operand it would still
   copy goes back to the original ``tdf.call`` (remark ``in-place rejected
   (dead): One-Shot Bufferize would copy operand #i ...``), and unused
   generated variants are erased. Hence the invariant: the output of
   ``tdf-insert-inplace`` always passes ``tdf-verify-inplace{strict}``.
6. *Donation pairing* (:func:`tdf.passes._pair_donations.pair_donations`,
   statistic ``paired-donations``): each donated argument is paired with a
   result as JAX pairs them (per shape and dtype, the k-th result takes the
   k-th donated argument; or the function's ``tdf.donation_pairs``:
   :mod:`tdf.passes.analysis.donation`). A paired result that One-Shot
   Bufferize does not already compute in its argument is followed back
   through the ops that update their destination (a linalg op reading its
   init, ``insert_slice``/``insert``/``scatter``, a ``tdf.call_inplace``
   operand, both branches of an ``scf.if``) to the op that first writes its
   storage, which then writes the argument instead: a linalg op whose
   payload does not read its init takes the argument as init (Adam's
   ``outs(%g)`` → ``outs(%nu)``: the dead temporary step 4 chose is no
   longer preferred), a ``tdf.call`` becomes ``tdf.call_inplace @k(%in...,
   %arg) inplace [n]`` (the argument is the kernel's output parameter), a
   ``tensor.empty`` root is replaced by the argument. Only when the
   argument's old contents are dead there (no value that may share its
   storage is used after that op; loops, branches and results count), the
   op reads it only element by element (an element-wise linalg op, identity
   map) and it never reached an opaque call. A rank-0 result that cannot be
   followed (a scalar wrapped by ``tensor.from_elements``: a
   ``TrainState.step``, an optax ``count``) is stored into its argument
   right before ``func.return`` (``tensor.insert %v into %arg[]``) when no
   other result may share the argument. When the only obstacle is a later
   read of the argument and nothing needs the update before that read, the
   update moves after it first (as XLA schedules it). One-Shot Bufferize's
   analysis judges: a rewrite after which it does not find the result
   equivalent to its argument, or that adds a copy to the function, is
   undone; the pairs left are ``tdf-verify-inplace{donations}``'s to report.

**Options.** ``size-match`` (default off): for element-wise linalg ops, a
dead input whose type differs from the result's only by dynamic dimensions
(read with the identity map, which forces the sizes to agree at run time) is
reused through a ``tensor.cast`` (bufferized: a ``memref.cast``, no
allocation); off, it is rejected with ``fits``. A larger static input (reuse
of its leading corner through an ``extract_slice``) cannot occur in an
element-wise linalg op — the verifier requires an operand read with an
identity map to have exactly the loop sizes — so that branch is unreachable
today; ``size-match`` has no effect on calls (the ``tdf.call_inplace``
verifier requires the exact type). ``remarks`` (default off): one remark per
rejected candidate operand, ``in-place rejected (<rule>): operand #i (%v)
...`` naming the blocking value.

Statistics: ``rewrites``, ``inplace-results``, ``concats``,
``insert-slices``, ``rebased-reads``, ``paired-donations``, and
``rejected-<rule>`` for each rule.

Python API: :func:`insert_inplace` (one function), :func:`populate_inplace_rewrites`
(a module), :func:`rewrite_concats`, :func:`rewrite_insert_slices`,
:func:`rebase_disjoint_reads`, :func:`format_rejections`; the rules
themselves: ``InplaceAnalysis(func).check(op, operand, result_type)``.

Before::

    func.func private @addone(memref<4xf32>, memref<4xf32>)
        attributes {tdf.elementwise}
    func.func @step(%x: tensor<4xf32> {tdf.donate}) -> tensor<4xf32> {
      %y = tdf.call @addone(%x) : (tensor<4xf32>) -> tensor<4xf32>
      return %y : tensor<4xf32>
    }

After (the declaration needs ``tdf.inplace_ok = [[0, 0]]`` and
``tdf.inplace_variant = @addone_ip``; a kernel with an element-wise body
gets a generated ``@addone_inplace``)::

    %y = tdf.call_inplace @addone_ip(%x) inplace [0]
        : (tensor<4xf32>) -> tensor<4xf32>

A part computed for a donated cache row (before → after)::

    %z = tdf.call @log(%y) : (tensor<8xf32>) -> tensor<8xf32>
    %r = tensor.expand_shape %z [[0, 1]] output_shape [1, 8]
        : tensor<8xf32> into tensor<1x8xf32>
    %c = tensor.insert_slice %r into %cache[%i, 0] [1, 8] [1, 1]
        : tensor<1x8xf32> into tensor<4x8xf32>

    %s = tensor.extract_slice %cache[%i, 0] [1, 8] [1, 1]
        : tensor<4x8xf32> to tensor<8xf32>
    %z = tdf.call_inplace @log_strided(%y, %s) inplace [1]
        : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
    %c = tensor.insert_slice %z into %cache[%i, 0] [1, 8] [1, 1]
        : tensor<8xf32> into tensor<4x8xf32>
"""

from __future__ import annotations

from mlir import ir

from ..dialects import tdf as tdf_d
from ..vocabulary import INPLACE_OF_ATTR, STRIDED_OF_ATTR
from ._inplace_calls import InplaceRewriter
from ._inplace_slices import rewrite_concats, rewrite_insert_slices
from ._pair_donations import pair_donations
from ._rebase_reads import rebase_disjoint_reads
from .analysis.inplace import Rejection, format_rejections
from .analysis.one_shot import one_shot_copies
from .ir_utils import collect_ops, copy_attributes, function_bodies, lookup_symbol, op_key
from .registry import PassContext, PassOption, register_pass

__all__ = ["insert_inplace", "populate_inplace_rewrites", "keep_one_shot_agreement",
           "rebase_disjoint_reads", "rewrite_concats", "rewrite_insert_slices",
           "format_rejections"]


def insert_inplace(func, module_op=None, ctx: PassContext | None = None,
                   size_match: bool = False) -> tuple[int, list[Rejection]]:
    """Runs the in-place rewrites on ``func`` (a ``func.func``); kernel
    variants are looked up and created in ``module_op`` (default: the
    function's parent). Returns ``(rewrites, rejections)``; name the
    rejections' IR objects with :func:`format_rejections`."""
    func = func.operation
    if module_op is None:
        module_op = func.parent.operation
    rejections: list[Rejection] = []
    count = _rewrite_functions([func], module_op, ctx, size_match,
                               lambda _func, found, _analysis: rejections.extend(found))
    return count, rejections


def populate_inplace_rewrites(module_op, size_match: bool = False, ctx: PassContext | None = None,
                              remarks: bool = False) -> int:
    """Applies every rewrite of this pass to each function under
    ``module_op`` (the reusable entry point, e.g. for ``tdf.compile``);
    returns the number of ops rewritten."""

    def remark(func, rejections, analysis):
        if remarks and ctx is not None:
            for location, message in format_rejections(func, rejections, analysis):
                ctx.remark(location, message)

    return _rewrite_functions(function_bodies(module_op), module_op, ctx, size_match, remark,
                              remarks=remarks, whole_module=True)


def _rewrite_functions(funcs, module_op, ctx: PassContext | None, size_match: bool, rejected,
                       remarks: bool = False, whole_module: bool = False) -> int:
    """The one driver of the pass: steps 0-4 per function of ``funcs`` (its
    rejections go to ``rejected(func, rejections, analysis)``), then the
    agreement with One-Shot Bufferize (step 5) and the donation pairing
    (step 6) on ``module_op``, over every function (``whole_module``) or
    the one in ``funcs``. Kernel variants live in each function's parent,
    or in ``module_op`` for a single function."""
    total = 0
    warned: set = set()
    generated: list = []
    for func in funcs:
        parent = func.parent.operation if whole_module else module_op
        rejections: list[Rejection] = []
        rebase_disjoint_reads(func, ctx)
        rewrite_concats(func, ctx, parent, rejections)
        rewrite_insert_slices(func, ctx, parent, rejections)
        rewriter = InplaceRewriter(func, parent, ctx, size_match, warned)
        total += rewriter.run()
        generated += rewriter.generated
        rejected(func, rejections + rewriter.rejections, rewriter.analysis)
    total -= keep_one_shot_agreement(module_op, generated, ctx, remarks)
    if module_op.name == "builtin.module":
        total += pair_donations(module_op, ctx, only=None if whole_module else funcs[0])
    return total


def keep_one_shot_agreement(module_op, generated, ctx: PassContext | None = None,
                            remarks: bool = False) -> int:
    """One-Shot Bufferize is the judge of "a copy would be needed"
    (``tdf-verify-inplace``): every ``tdf.call_inplace`` in ``generated``
    (``(op, original callee)`` pairs) whose in-place operand One-Shot's
    analysis would still copy goes back to ``tdf.call`` of its original
    kernel, until none is left (so the pass's output passes
    ``tdf-verify-inplace{strict}``). Returns how many went back."""
    alive = list(generated)
    reverted = 0
    variants = set()
    for _ in range(4):
        if not alive:
            break
        copies = one_shot_copies(module_op)
        if not copies:
            break
        keep = []
        for call, callee in alive:
            bad = copies.get(op_key(call))
            if not bad:
                keep.append((call, callee))
                continue
            variants.add(ir.FlatSymbolRefAttr(call.attributes["callee"]).value)
            # a strided clone of an in-place variant (_slice_layout_variant)
            # and that variant itself
            strided = lookup_symbol(module_op, ir.FlatSymbolRefAttr(call.attributes["callee"]).value)
            if strided is not None and STRIDED_OF_ATTR in strided.attributes:
                variants.add(ir.FlatSymbolRefAttr(strided.attributes[STRIDED_OF_ATTR]).value)
            with ir.InsertionPoint(call), call.location:
                new = tdf_d.CallOp([r.type for r in call.results], callee,
                                   list(call.operands)).operation
            copy_attributes(call, new, skip=("callee", "inplace_indices"))
            for old, fresh in zip(call.results, new.results):
                old.replace_all_uses_with(fresh)
            call.erase()
            reverted += 1
            if ctx is not None:
                ctx.statistic("rejected-dead")
                ctx.statistic("rewrites", -1)
                if remarks:
                    ctx.remark(new, f"in-place rejected (dead): One-Shot Bufferize would copy "
                                    f"operand #{min(bad)} before the in-place call (it is still "
                                    f"read afterwards); the call stays out of place")
        alive = keep
    if variants:
        used = {ir.FlatSymbolRefAttr(c.attributes["callee"]).value
                for c in collect_ops(module_op, ("tdf.call", "tdf.call_inplace", "func.call"))}
        for func in collect_ops(module_op, "func.func"):
            name = ir.StringAttr(func.attributes["sym_name"]).value
            if name in variants and name not in used and (
                    INPLACE_OF_ATTR in func.attributes
                    or (STRIDED_OF_ATTR in func.attributes
                        and ir.FlatSymbolRefAttr(func.attributes[STRIDED_OF_ATTR]).value in variants)):
                func.erase()
    return reverted


@register_pass(
    "tdf-insert-inplace",
    "Rewrite tdf.call and element-wise linalg ops to run in the storage of dead, "
    "unaliased, owned operands of the right type",
    options=[
        PassOption("size-match", bool, False,
                   "Let an element-wise linalg op reuse a dead input whose type differs "
                   "from the result's only by dynamic dimensions"),
        PassOption("remarks", bool, False,
                   "Emit one remark per rejected candidate naming the rule and the blocking value"),
    ],
    statistics=[
        ("rewrites", "Ops rewritten to run in place"),
        ("inplace-results", "Results computed in the storage of an operand"),
        ("concats", "tensor.concat ops computed into their final storage"),
        ("insert-slices", "tensor.insert_slice parts computed straight into their destination"),
        ("rebased-reads", "Updates whose later reads of disjoint slices now read the new value"),
        ("paired-donations", "Paired results moved into their donated argument's buffer"),
        ("rejected-dead", "Candidates rejected: the operand is used later"),
        ("rejected-unaliased", "Candidates rejected: an alias is used later or escaped"),
        ("rejected-owned", "Candidates rejected: non-donated argument or constant"),
        ("rejected-fits", "Candidates rejected: type mismatch or broadcast"),
        ("rejected-kernel", "Candidates rejected: kernel not known element-wise"),
        ("rejected-depth", "Candidates left out of place: nested in more than 16 "
                           "scf.if/scf.index_switch ops (One-Shot's analysis cost)"),
    ],
)
def insert_inplace_pass(op, ctx: PassContext) -> None:
    """The pass (see the module docstring for rules, options, before/after)."""
    populate_inplace_rewrites(op, size_match=ctx.option("size-match"), ctx=ctx,
                              remarks=ctx.option("remarks"))
