"""tdf's pipelines: ``tdf-bufferize`` and ``tdf-lower-to-cpu``, plus the two
small helper passes they need around upstream bufferization and deallocation.

Pipelines (nameable in any textual pipeline, ``tdf-opt`` and Python):

``tdf-bufferize``
    ``tdf-donate`` → One-Shot Bufferize (function boundaries, identity-layout
    function signatures) → ``tdf-drop-donated-results`` → ownership-based
    deallocation with ``tdf-unown-opaque-results`` between the deallocation
    and its lowering. No leaks; the only copies left are the ones the safety
    rules force (a non-donated argument that is updated, an in-place operand
    that is still read later, an opaque call result, see below).

    Options: ``dealloc`` (bool, default true): insert deallocations;
    ``copy-before-write`` (bool, default false): the functional baseline --
    One-Shot Bufferize skips its analysis and copies before **every** write
    (nothing runs in place, donation buys nothing). Only for measuring what
    in place saves. Before (a donated row update)::

        %new = tensor.insert_slice %row into %cache[%pos, 0] [1, 4] [1, 1]
            : tensor<1x4xf32> into tensor<8x4xf32>

    After, with ``copy-before-write``::

        %alloc = memref.alloc() {alignment = 64 : i64} : memref<8x4xf32>
        memref.copy %cache, %alloc : memref<8x4xf32> to memref<8x4xf32>
        %slot = memref.subview %alloc[%pos, 0] [1, 4] [1, 1] : ...
        memref.copy %row, %slot : ...

``tdf-lower-to-cpu``
    [``tdf-insert-inplace``] → [``tdf-verify-inplace{strict}``] →
    ``tdf-bufferize`` → linalg to loops → affine/scf/cf/vector/memref/arith/
    math/index/func → LLVM → ``reconcile-unrealized-casts``. The result is an
    LLVM-dialect module for ``mlir.execution_engine.ExecutionEngine``.

    Options: ``inplace`` (bool, default true): run ``tdf-insert-inplace``
    first; ``strict`` (bool, default false): run
    ``tdf-verify-inplace{strict=true}`` before bufferizing;
    ``copy-before-write`` (bool, default false): the functional baseline,
    ``tdf-bufferize{copy-before-write=true}`` and no ``tdf-insert-inplace``
    (``inplace`` is ignored); ``count-allocations`` (bool, default false):
    lower ``memref.alloc``/``dealloc`` to the generic
    ``_mlir_memref_to_llvm_alloc``/``_aligned_alloc``/``_free`` functions
    (``finalize-memref-to-llvm{use-generic-functions use-aligned-alloc}``), which the runtime
    defines with counting allocators (``tdf.compile(count_allocations=True)``).

Helper passes:

``tdf-drop-donated-results``
    A public function's result that is (after bufferization) exactly one of
    its donated arguments is dropped from the signature, so that the caller
    keeps using its own (updated in place) buffer and deallocation does not
    clone it. The attribute ``tdf.returned_args`` records, per original
    result, the argument it was (or -1). Functions called inside the module
    are left alone. Before::

        func.func @step(%cache: memref<8x4xf32> {tdf.donate}, %row: memref<1x4xf32>)
            -> memref<8x4xf32> {
          ...
          return %cache : memref<8x4xf32>
        }

    After::

        func.func @step(%cache: memref<8x4xf32> {tdf.donate}, %row: memref<1x4xf32>)
            attributes {tdf.returned_args = array<i64: 0>} {
          ...
          return
        }

``tdf-unown-opaque-results``
    Ownership-based deallocation assumes the caller owns every memref a call
    returns, but an opaque callee (a declaration returning memrefs, what
    ``tdf.call_opaque`` bufferizes to) may return a buffer it keeps or one
    that aliases an argument. Option ``phase=snapshot`` (run before the
    deallocation pass) copies each opaque result into a fresh buffer right
    after the call and redirects every use to the copy; option
    ``phase=unown`` (run after it) sets the deallocation condition of the
    opaque result itself to false, so tdf never frees or writes the callee's
    buffer. Before (``phase=snapshot``)::

        %r = call @opaque(%a) : (memref<4xf32>) -> memref<4xf32>
        "use"(%r)

    After::

        %r = call @opaque(%a) : (memref<4xf32>) -> memref<4xf32>
        %owned = memref.alloc() : memref<4xf32>
        memref.copy %r, %owned : memref<4xf32> to memref<4xf32>
        "use"(%owned)
"""

from __future__ import annotations

from mlir import ir

from ._ir import arg_dicts, collect_ops, function_type, has_body, is_public, sym_name
from .fuse_kernels import FUSE_KERNELS
from .math_lowering import APPROXIMATE_MATH, MATH_TO_LLVM
from .registry import PassContext, PassOption, register_pass, register_pipeline

# The One-Shot Bufferize configuration of every tdf pipeline (CPU, GPU and
# the compile-time analysis): function boundaries bufferized with identity
# layouts (numpy arrays are contiguous), and loops may yield fresh buffers (a
# loop body computing a new tensor from its iter_arg needs one each step).
ONE_SHOT_OPTIONS = ("bufferize-function-boundaries "
                    "function-boundary-type-conversion=identity-layout-map "
                    "allow-return-allocs-from-loops")


def one_shot(*extra: str) -> str:
    """The one-shot-bufferize pipeline element with tdf's options plus
    ``extra`` ones (e.g. ``copy-before-write``, ``test-analysis-only``)."""
    return "one-shot-bufferize{" + " ".join((ONE_SHOT_OPTIONS, *extra)) + "}"


ONE_SHOT = one_shot()
ONE_SHOT_COPY_BEFORE_WRITE = one_shot("copy-before-write")
RETURNED_ARGS_ATTR = "tdf.returned_args"

_VIEW_LIKE = {
    "memref.cast", "memref.subview", "memref.reinterpret_cast",
    "memref.expand_shape", "memref.collapse_shape", "memref.view",
    "memref.transpose", "memref.extract_strided_metadata",
}


# ----------------------------------------------------------------- helpers


def _called_symbols(op) -> set:
    calls = collect_ops(op, ("func.call", "tdf.call", "tdf.call_inplace", "tdf.call_opaque"))
    return {ir.FlatSymbolRefAttr(call.attributes["callee"]).value for call in calls}


def _strip_casts(value):
    while not isinstance(value.owner, ir.Block) and value.owner.operation.name == "memref.cast":
        value = value.owner.operands[0]
    return value


def _root(value):
    """The value a memref view chain starts from."""
    while not isinstance(value.owner, ir.Block) and value.owner.operation.name in _VIEW_LIKE:
        value = value.owner.operands[0]
    return value


def opaque_callees(module_op) -> set:
    """Names of declarations (no body) that return memrefs: what
    ``tdf.call_opaque`` bufferizes to."""
    names = set()
    for func in collect_ops(module_op, "func.func"):
        if has_body(func):
            continue
        ftype = function_type(func)
        if any(isinstance(t, ir.MemRefType) for t in ftype.results):
            names.add(sym_name(func))
    return names


def _opaque_calls(op):
    names = opaque_callees(op)
    return collect_ops(op, "func.call",
                       lambda call: ir.FlatSymbolRefAttr(call.attributes["callee"]).value in names)


# ------------------------------------------------------------ helper passes


@register_pass(
    "tdf-drop-donated-results",
    "Drop public-function results that are a donated argument (updated in place) "
    "and record them in tdf.returned_args",
    statistics=[("dropped", "Results dropped because they are a donated argument")],
)
def drop_donated_results(op, ctx: PassContext) -> None:
    """See the module docstring: runs after One-Shot Bufferize, before
    deallocation; only public functions with a body that nothing in the
    module calls."""
    called = _called_symbols(op)
    for func in collect_ops(op, "func.func"):
        if has_body(func) and is_public(func) and sym_name(func) not in called:
            _drop_donated_results(func, ctx)
        _strip_donate(func)


def _strip_donate(func) -> None:
    """``tdf.donate`` is consumed: the LLVM lowering must not see it."""
    if "arg_attrs" not in func.attributes:
        return
    dicts = arg_dicts(func)
    if not any("tdf.donate" in d for d in dicts):
        return
    for d in dicts:
        d.pop("tdf.donate", None)
    func.attributes["arg_attrs"] = ir.ArrayAttr.get([ir.DictAttr.get(d) for d in dicts])


def _drop_donated_results(func, ctx: PassContext) -> None:
    """Drops the results of ``func`` that are one of its donated arguments."""
    ftype = function_type(func)
    if not any(isinstance(t, ir.MemRefType) for t in ftype.results):
        return
    block = func.regions[0].blocks[0]
    dicts = arg_dicts(func)
    returns = collect_ops(func, "func.return")
    if len(returns) != 1:
        return  # several exits (unstructured control flow): leave alone
    ret = returns[0]
    mapping = []
    for value in ret.operands:
        source = _strip_casts(value)
        index = -1
        if isinstance(source.owner, ir.Block) and source.owner == block:
            arg_index = ir.BlockArgument(source).arg_number
            if "tdf.donate" in dicts[arg_index] and source.type == value.type:
                index = arg_index
        mapping.append(index)
    if all(i < 0 for i in mapping):
        return
    kept = [v for v, i in zip(ret.operands, mapping) if i < 0]
    with ir.InsertionPoint(ret), ret.location:
        ir.Operation.create("func.return", operands=kept)
    ret.erase()
    new_results = [t for t, i in zip(ftype.results, mapping) if i < 0]
    func.attributes["function_type"] = ir.TypeAttr.get(
        ir.FunctionType.get(list(ftype.inputs), new_results))
    if "res_attrs" in func.attributes:
        res = [a for a, i in zip(ir.ArrayAttr(func.attributes["res_attrs"]), mapping) if i < 0]
        if res:
            func.attributes["res_attrs"] = ir.ArrayAttr.get(res)
        else:
            del func.attributes["res_attrs"]
    func.attributes[RETURNED_ARGS_ATTR] = ir.DenseI64ArrayAttr.get(mapping)
    ctx.statistic("dropped", sum(1 for i in mapping if i >= 0))


def _snapshot_opaque_results(op, ctx: PassContext) -> None:
    for call in _opaque_calls(op):
        for result in call.results:
            if not isinstance(result.type, ir.MemRefType):
                continue
            uses = [(u.owner, u.operand_number) for u in result.uses]
            mtype = ir.MemRefType(result.type)
            owned_type = ir.MemRefType.get(mtype.shape, mtype.element_type,
                                           memory_space=mtype.memory_space)
            with ir.InsertionPoint.after(call), call.location:
                index = ir.IndexType.get()
                dynamic = []
                for dim, size in enumerate(mtype.shape):
                    if size == ir.ShapedType.get_dynamic_size():
                        c = ir.Operation.create(
                            "arith.constant", results=[index],
                            attributes={"value": ir.IntegerAttr.get(index, dim)})
                        d = ir.Operation.create("memref.dim", results=[index],
                                                operands=[result, c.result])
                        dynamic.append(d.result)
                alloc = ir.Operation.create(
                    "memref.alloc", results=[owned_type], operands=dynamic,
                    attributes={"operandSegmentSizes": ir.DenseI32ArrayAttr.get([len(dynamic), 0])})
                owned = alloc.result
                if owned_type != mtype:
                    owned = ir.Operation.create("memref.cast", results=[mtype], operands=[owned]).result
                ir.Operation.create("memref.copy", operands=[result, alloc.result])
            for owner, number in uses:
                owner.operands[number] = owned
            ctx.statistic("snapshots")


def _unown_opaque_results(op, ctx: PassContext) -> None:
    results = set()
    for call in _opaque_calls(op):
        for result in call.results:
            results.add(result)
    if not results:
        return
    for dealloc in collect_ops(op, "bufferization.dealloc"):
        count = ir.DenseI32ArrayAttr(dealloc.attributes["operandSegmentSizes"])[0]
        for i in range(count):
            if _root(dealloc.operands[i]) in results:
                with ir.InsertionPoint(dealloc), dealloc.location:
                    false = ir.Operation.create(
                        "arith.constant", results=[ir.IntegerType.get_signless(1)],
                        attributes={"value": ir.IntegerAttr.get(ir.IntegerType.get_signless(1), 0)})
                dealloc.operands[count + i] = false.result
                ctx.statistic("unowned")


@register_pass(
    "tdf-unown-opaque-results",
    "Keep deallocation away from buffers returned by opaque calls",
    options=[PassOption("phase", str, "snapshot",
                        "snapshot: copy opaque results into owned buffers (before deallocation); "
                        "unown: never free the callee's buffer (after deallocation)")],
    statistics=[("snapshots", "Opaque results copied into owned buffers"),
                ("unowned", "Deallocations of opaque results removed")],
)
def unown_opaque_results(op, ctx: PassContext) -> None:
    """See the module docstring."""
    phase = ctx.option("phase")
    if phase == "snapshot":
        _snapshot_opaque_results(op, ctx)
    elif phase == "unown":
        _unown_opaque_results(op, ctx)
    else:
        ctx.error(op, f"unknown phase '{phase}' (expected 'snapshot' or 'unown')")


def _widen(t):
    """memref<...xi1> → memref<...xi8> (same layout and memory space); other
    types unchanged (None)."""
    if not isinstance(t, ir.MemRefType):
        return None
    m = ir.MemRefType(t)
    if str(m.element_type) != "i1":
        return None
    return ir.MemRefType.get(m.shape, ir.IntegerType.get_signless(8), m.layout, m.memory_space)


@register_pass(
    "tdf-widen-i1-memrefs",
    "Store i1 memref elements as i8 (finalize-memref-to-llvm asserts on i1 stores)",
    statistics=[("widened", "Values whose memref<..xi1> type became memref<..xi8>")],
)
def widen_i1_memrefs(op, ctx: PassContext) -> None:
    """The 22.x ``finalize-memref-to-llvm`` aborts the process on a
    ``memref.store`` of ``i1`` (e.g. the conditions array of the generic
    ``bufferization.dealloc`` lowering). This pass, run after the loops are
    explicit and before that conversion, retypes every ``memref<...xi1>``
    value (op results, block arguments, function signatures) to
    ``memref<...xi8>``, extends stored values (``arith.extui``) and truncates
    loaded ones (``arith.trunci``). ``memref.global`` ops of ``i1`` are widened
    with their initial values (``dense<[true, false]>`` → ``dense<[1, 0]>``),
    so non-splat bool constants lower too. numpy's bool is one byte, so the
    layout is what the runtime passes. Before::

        %m = memref.alloc() : memref<2xi1>
        memref.store %true, %m[%c0] : memref<2xi1>
        %b = memref.load %m[%c1] : memref<2xi1>

    After::

        %m = memref.alloc() : memref<2xi8>
        %e = arith.extui %true : i1 to i8
        memref.store %e, %m[%c0] : memref<2xi8>
        %w = memref.load %m[%c1] : memref<2xi8>
        %b = arith.trunci %w : i8 to i1
    """
    i1 = ir.IntegerType.get_signless(1)
    i8 = ir.IntegerType.get_signless(8)
    ops = collect_ops(op)
    for inner in ops:
        if inner.name == "memref.global":
            _widen_global(inner, ctx)
        if inner.name in ("func.func", "gpu.func"):
            ftype = function_type(inner)
            ins = [_widen(t) or t for t in ftype.inputs]
            outs = [_widen(t) or t for t in ftype.results]
            if ins != list(ftype.inputs) or outs != list(ftype.results):
                inner.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(ins, outs))
        for region in inner.regions:
            for block in region.blocks:
                for arg in block.arguments:
                    wide = _widen(arg.type)
                    if wide is not None:
                        arg.set_type(wide)
                        ctx.statistic("widened")
        for result in inner.results:
            wide = _widen(result.type)
            if wide is not None:
                result.set_type(wide)
                ctx.statistic("widened")
    for inner in ops:
        if inner.name == "memref.store" and inner.operands[0].type == i1:
            with ir.InsertionPoint(inner), inner.location:
                ext = ir.Operation.create("arith.extui", results=[i8], operands=[inner.operands[0]])
            inner.operands[0] = ext.result
        elif inner.name == "memref.load" and str(ir.MemRefType(inner.operands[0].type).element_type) == "i8" \
                and inner.results[0].type == i1:
            result = inner.results[0]
            uses = [(u.owner, u.operand_number) for u in result.uses]
            result.set_type(i8)
            with ir.InsertionPoint.after(inner), inner.location:
                trunc = ir.Operation.create("arith.trunci", results=[i1], operands=[result])
            for owner, number in uses:
                owner.operands[number] = trunc.result


def _widen_global(glob, ctx: PassContext) -> None:
    """``memref.global`` of ``memref<...xi1>`` → ``memref<...xi8>`` with its
    initial value (splat or not) converted to 0/1 bytes, so that the
    widened ``memref.get_global`` results still match their global."""
    wide = _widen(ir.TypeAttr(glob.attributes["type"]).value)
    if wide is None:
        return
    glob.attributes["type"] = ir.TypeAttr.get(wide)
    ctx.statistic("widened")
    if "initial_value" not in glob.attributes:
        return
    init = glob.attributes["initial_value"]
    if not isinstance(init, ir.DenseElementsAttr):
        return  # `uninitialized` (a unit attribute): nothing to convert
    init = ir.DenseIntElementsAttr(init)
    shape = list(wide.shape)
    i8 = ir.IntegerType.get_signless(8)
    tensor_type = ir.RankedTensorType.get(shape, i8)
    if init.is_splat:
        value = bool(ir.IntegerAttr(init.get_splat_value()).value)
        attr = ir.DenseElementsAttr.get_splat(tensor_type, ir.IntegerAttr.get(i8, int(value)))
    else:
        import numpy as np
        values = np.array(init).astype(np.int8).reshape(shape)
        attr = ir.DenseElementsAttr.get(np.ascontiguousarray(values), type=tensor_type)
    glob.attributes["initial_value"] = attr


def _has_identity_layout(t) -> bool:
    m = ir.MemRefType(t)
    identity = ir.MemRefType.get(m.shape, m.element_type, memory_space=m.memory_space)
    return m == identity


@register_pass(
    "tdf-strided-copies-to-loops",
    "Turn memref.copy between non-contiguous views into linalg.copy (loops, vectorizable)",
    statistics=[("rewritten", "memref.copy ops turned into linalg.copy")],
)
def strided_copies_to_loops(op, ctx: PassContext) -> None:
    """``finalize-memref-to-llvm`` lowers a ``memref.copy`` whose operands are
    not both contiguous to a call of the generic ``memrefCopy`` runtime
    function (element by element, through descriptors): slow for the row
    writes of a KV-cache update. This pass, run before
    ``convert-linalg-to-loops``, rewrites those copies to ``linalg.copy``,
    which becomes plain loops LLVM can vectorize. Before::

        memref.copy %row, %slot : memref<1x4xf32> to memref<1x4xf32, strided<[4, 1], offset: ?>>

    After::

        linalg.copy ins(%row : memref<1x4xf32>) outs(%slot : memref<1x4xf32, strided<[4, 1], offset: ?>>)
    """
    from mlir.dialects import linalg

    for copy in collect_ops(op, "memref.copy"):
        src, dst = copy.operands[0], copy.operands[1]
        if _has_identity_layout(src.type) and _has_identity_layout(dst.type):
            continue
        with ir.InsertionPoint(copy), copy.location:
            linalg.copy(src, outs=[dst])
        copy.erase()
        ctx.statistic("rewritten")


# --------------------------------------------------------------- pipelines


def _flag(value: bool) -> str:
    return "true" if value else "false"


@register_pipeline(
    "tdf-bufferize",
    "tdf-donate, One-Shot Bufferize with function boundaries, ownership-based deallocation",
    options=[PassOption("dealloc", bool, True, "Insert buffer deallocations (no leaks)"),
             PassOption("copy-before-write", bool, False,
                        "Functional baseline: copy before every write (nothing in place)")],
)
def bufferize_pipeline(options: dict) -> str:
    """Expands to the bufferization pass list (see the module docstring)."""
    one_shot = ONE_SHOT_COPY_BEFORE_WRITE if options["copy-before-write"] else ONE_SHOT
    passes = ["tdf-check-sizes", "tdf-donate", one_shot, "canonicalize", "cse",
              "tdf-drop-donated-results"]
    if options["dealloc"]:
        passes += [
            "tdf-unown-opaque-results{phase=snapshot}",
            "expand-realloc",
            "ownership-based-buffer-deallocation",
            "tdf-unown-opaque-results{phase=unown}",
            "canonicalize",
            "buffer-deallocation-simplification",
            "bufferization-lower-deallocations",
            "cse",
            "canonicalize",
        ]
    return ", ".join(passes)


LOWER_TO_LLVM = [
    "convert-bufferization-to-memref",
    "tdf-strided-copies-to-loops",
    "tdf-vectorize-contractions",
    *APPROXIMATE_MATH,
    "convert-linalg-to-loops",
    "lower-affine",
    "tdf-widen-i1-memrefs",
    "convert-vector-to-scf",
    "tdf-split-scf-blocks",  # convert-scf-to-cf is quadratic in scf ops per block without it
    "convert-scf-to-cf",
    "expand-strided-metadata",
    "lower-affine",
    "convert-vector-to-llvm",
    "finalize-memref-to-llvm",
    *MATH_TO_LLVM,
    "convert-arith-to-llvm",
    "convert-ub-to-llvm",
    "convert-index-to-llvm",
    "convert-func-to-llvm",
    "convert-cf-to-llvm",
    "reconcile-unrealized-casts",
]


def lower_to_llvm(count_allocations: bool = False, approximate_math: bool = True) -> list[str]:
    """The LLVM lowering after ``tdf-bufferize`` (:data:`LOWER_TO_LLVM`);
    ``count_allocations`` lowers allocations to the generic
    ``_mlir_memref_to_llvm_*`` functions so that a runtime can count them
    (``use-aligned-alloc``: an aligned allocation asks for its exact size
    instead of size + alignment padding, so counted bytes are memref bytes).
    ``approximate_math=False`` leaves out :data:`APPROXIMATE_MATH` (every
    math op through libm / LLVM intrinsics: the reference the approximations
    are tested against)."""
    passes = list(LOWER_TO_LLVM)
    if not approximate_math:
        passes = [p for p in passes if p not in APPROXIMATE_MATH]
    if not count_allocations:
        return passes
    return [p + "{use-generic-functions use-aligned-alloc}" if p == "finalize-memref-to-llvm" else p
            for p in passes]


# What ``strict`` means, for ``tdf-lower-to-cpu{strict=true}`` and
# ``tdf.compile(strict=True)`` alike: tdf-verify-inplace's definition of "an
# in-place call would need a copy" (One-Shot Bufferize's analysis, plus the
# safety rules it cannot see), run on the output of :func:`inplace_stage`.
STRICT_CHECK = "tdf-verify-inplace{strict=true}"


def inplace_stage(inplace: bool = True, copy_before_write: bool = False,
                  fuse_kernels: bool = True) -> list[str]:
    """The first stage of the CPU pipeline, shared by ``tdf-lower-to-cpu`` and
    ``tdf.compile``: ``tdf-check-sizes`` (before anything that could abort on
    an overflowing shape), then (``fuse_kernels``) :data:`FUSE_KERNELS`
    (chains of kernel calls inlined and fused into one linalg op), then
    ``tdf-insert-inplace`` unless ``inplace`` is off or ``copy_before_write``
    is on. ``strict`` appends :data:`STRICT_CHECK` after it."""
    passes = ["tdf-check-sizes"]  # before tdf-insert-inplace too
    if fuse_kernels:
        passes += FUSE_KERNELS
    if inplace and not copy_before_write:
        passes.append("tdf-insert-inplace")
    return passes


@register_pipeline(
    "tdf-lower-to-cpu",
    "In-place rewrite, bufferization and lowering to the LLVM dialect for the CPU JIT",
    options=[
        PassOption("inplace", bool, True, "Run tdf-insert-inplace first"),
        PassOption("strict", bool, False,
                   "Run tdf-verify-inplace{strict=true}: a copy forced by a tdf.call_inplace is an error"),
        PassOption("copy-before-write", bool, False,
                   "Functional baseline: no in-place rewrite, copy before every write"),
        PassOption("count-allocations", bool, False,
                   "Lower allocations to the generic _mlir_memref_to_llvm_* functions (for counting)"),
        PassOption("approximate-math", bool, True,
                   "f32 exp/log/tanh/... as vectorizable polynomials (tdf-math-approximation)"),
        PassOption("fuse-kernels", bool, True,
                   "Inline chains of kernel calls and fuse them (tdf-inline-kernels, "
                   "linalg-fuse-elementwise-ops)"),
    ],
)
def lower_to_cpu_pipeline(options: dict) -> str:
    """Expands to the CPU lowering pass list (see the module docstring)."""
    copy_before_write = options["copy-before-write"]
    passes = inplace_stage(options["inplace"], copy_before_write, options["fuse-kernels"])
    if options["strict"]:
        passes.append(STRICT_CHECK)
    passes.append("tdf-bufferize{copy-before-write=true}" if copy_before_write else "tdf-bufferize")
    passes += lower_to_llvm(options["count-allocations"], options["approximate-math"])
    return ", ".join(passes)
