"""tdf's pipelines: ``tdf-bufferize``, ``tdf-lower-to-cpu`` and
``tdf-lower-to-nvvm``, each a named expansion to a pass list that any
textual pipeline (``tdf-opt``, :func:`tdf.run_pipeline`) can name.

The pass lists are assembled here once. ``tdf.compile`` runs the CPU
pipeline's stages one at a time (:func:`cpu_stages`, :func:`inplace_stage`,
:data:`STRICT_CHECK`, :func:`lower_to_llvm`) so that it can report what each
decided; ``tdf.gpu.compile_nvvm`` does the same with :func:`stage_pipelines`.
The shared pieces: the One-Shot Bufferize configuration (:func:`one_shot`),
the kernel fusion stage (:data:`FUSE_KERNELS`) and the math lowering
(:data:`APPROXIMATE_MATH`, :data:`MATH_TO_LLVM`).
"""

from __future__ import annotations

import re
from typing import Any

from . import contractions_to_cublas
from .contractions_to_blas import CODEGEN_FLOPS
from .registry import PassOption, register_pipeline

__all__ = [
    "ONE_SHOT_OPTIONS", "ONE_SHOT", "ONE_SHOT_ANALYSIS", "one_shot",
    "FUSE_KERNELS", "LIBM_OPS", "APPROXIMATED_OPS", "APPROXIMATE_MATH", "MATH_TO_LLVM",
    "LOWER_TO_LLVM", "lower_to_llvm", "STRICT_CHECK", "inplace_stage",
    "NEST_DEPTH", "CPU_OPTIONS", "cpu_stages",
    "PTX_VERSION", "FORMATS", "STAGES", "NVVM_OPTIONS", "ptx_feature", "validate_options",
    "stage_pipelines",
]

# ----------------------------------------------------------- shared pieces

#: The One-Shot Bufferize configuration of every tdf pipeline (CPU, GPU and
#: the compile-time analysis): function boundaries bufferized with identity
#: layouts (numpy arrays are contiguous), and loops may yield fresh buffers (a
#: loop body computing a new tensor from its iter_arg needs one each step).
ONE_SHOT_OPTIONS = ("bufferize-function-boundaries "
                    "function-boundary-type-conversion=identity-layout-map "
                    "allow-return-allocs-from-loops")


def one_shot(*extra: str) -> str:
    """The one-shot-bufferize pipeline element with tdf's options plus
    ``extra`` ones (e.g. ``copy-before-write``, ``test-analysis-only``)."""
    return "one-shot-bufferize{" + " ".join((ONE_SHOT_OPTIONS, *extra)) + "}"


ONE_SHOT = one_shot()
ONE_SHOT_COPY_BEFORE_WRITE = one_shot("copy-before-write")
#: One-Shot Bufferize's analysis alone (donation first, nothing rewritten):
#: it annotates ``__inplace_operands_attr__`` on every op it would bufferize,
#: the source of truth for which writes copy (``tdf.compile``'s report and
#: ``tdf-verify-inplace``; run on a copy of the module).
ONE_SHOT_ANALYSIS = ["tdf-donate", one_shot("test-analysis-only")]

#: The fusion stage of the CPU pipeline (before tdf-insert-inplace): chains of
#: kernel calls inlined as linalg ops, then fused into loops (upstream's
#: element-wise fusion with a bound on the fused body, ``tdf-fuse-elementwise``:
#: linear in the chain length where upstream's pass is quadratic), then an
#: addend of a contraction accumulated into it (``tdf-accumulate-contractions``;
#: the second fusion drops the addend it no longer reads). No cse here:
#: it would merge the tensor.empty inits, and One-Shot Bufferize then copies
#: where each op could have had its own buffer.
FUSE_KERNELS = ["tdf-inline-kernels", "tdf-fuse-elementwise", "tdf-accumulate-contractions",
                "tdf-fuse-elementwise"]

#: Math ops lowered to libm calls (by ``tdf-convert-math-to-libm``).
LIBM_OPS = ("acosh", "asinh", "atanh", "cbrt", "erf", "erfc", "expm1", "log1p")

#: f32 ops that ``tdf-math-approximation`` turns into upstream's polynomials
#: by default: the ones whose measured error stays within 4 ulp on the whole
#: f32 range, edge values included (docs/Codegen.md has the table). ``log``,
#: ``log2`` and ``exp`` qualify only after ``tdf-rescale-subnormal-math``. Not
#: here: ``sin``/``cos`` (inf for |x| >= ~1e30: no full range reduction),
#: ``atan`` (~40 ulp), ``atan2`` (wrong sign for -0), ``cbrt`` (NaN for inf),
#: ``erfc`` (0 instead of subnormal results).
APPROXIMATED_OPS = ("acos", "erf", "exp", "expm1", "log", "log1p", "log2", "tanh")

#: Math ops to vectorizable polynomials (f32), before loops are lowered.
APPROXIMATE_MATH = [
    "tdf-rescale-subnormal-math",
    "tdf-math-approximation{ops=" + ",".join(APPROXIMATED_OPS) + "}",
]

#: The math part of the LLVM lowering, in order. Upstream has no single pass
#: that lowers the whole math dialect for a JIT (``convert-math-to-libm`` marks
#: the whole dialect illegal and lowers ``math.rsqrt`` to ``rsqrtf``, which
#: libm does not define; ``convert-math-to-llvm`` leaves ``acosh``, ``erf``,
#: ``ipowi``, ``isinf``, ``clampf``, ... alone):
#:
#: 1. ``tdf-expand-math``: ``math.isinf``/``isnormal`` to ``absf`` + ``cmpf``;
#: 2. ``math-expand-ops{ops=clampf}``: ``clampf`` to ``minimumf``/``maximumf``;
#: 3. ``convert-math-to-funcs``: ``ipowi`` (and ``fpowi`` with a non-i32/i64
#:    exponent) to outlined software loops;
#: 4. ``tdf-convert-math-to-libm``: :data:`LIBM_OPS` to libm calls;
#: 5. ``convert-math-to-llvm``: everything with an LLVM intrinsic, ``rsqrt``
#:    as ``1 / sqrt`` (correctly rounded square root and division, <= 1 ulp).
MATH_TO_LLVM = [
    "tdf-expand-math",
    "math-expand-ops{ops=clampf}",
    "convert-math-to-funcs",
    "tdf-convert-math-to-libm{ops=" + ",".join(LIBM_OPS) + "}",
    "convert-math-to-llvm",
]

# ------------------------------------------------------------ tdf-bufferize


@register_pipeline(
    "tdf-bufferize",
    "tdf-donate, One-Shot Bufferize with function boundaries, ownership-based deallocation",
    options=[PassOption("dealloc", bool, True, "Insert buffer deallocations (no leaks)"),
             PassOption("copy-before-write", bool, False,
                        "Functional baseline: copy before every write (nothing in place)"),
             PassOption("check-sizes", bool, True,
                        "Run tdf-check-sizes first (off when an earlier stage ran it)"),
             PassOption("plan-memory", bool, True,
                        "One arena per call for the temporaries (tdf-plan-memory)")],
)
def bufferize_pipeline(options: dict) -> str:
    """``tdf-check-sizes`` → ``tdf-donate`` → One-Shot Bufferize (function
    boundaries, identity-layout function signatures) → ``canonicalize, cse``
    → ``tdf-drop-donated-results`` → ``tdf-plan-memory`` → ownership-based
    deallocation with ``tdf-unown-opaque-results`` around it →
    ``tdf-stack-small-buffers``. No leaks; the only copies left
    are the ones the safety rules force (a non-donated argument that is
    updated, an in-place operand that is still read later, an opaque call
    result).

    Options: ``dealloc`` (bool, default true): insert deallocations;
    ``check-sizes`` (bool, default true): run ``tdf-check-sizes`` first
    (``tdf-lower-to-cpu`` turns it off: its first stage ran it);
    ``plan-memory`` (bool, default true): place the temporaries of each
    function in one arena per call and inside fresh results
    (``tdf-plan-memory``), and the deallocation's bookkeeping buffers on
    the stack (``tdf-stack-small-buffers``); off, every buffer is its own
    allocation;
    ``copy-before-write`` (bool, default false): the functional baseline --
    One-Shot Bufferize skips its analysis and copies before **every** write
    (nothing runs in place, donation buys nothing). Only for measuring what
    in place saves; a ``func.call`` with tensors is an error in this mode
    (``tdf-check-copy-before-write``: One-Shot would crash on it). Before (a
    donated row update)::

        %new = tensor.insert_slice %row into %cache[%pos, 0] [1, 4] [1, 1]
            : tensor<1x4xf32> into tensor<8x4xf32>

    After, with copy-before-write::

        %alloc = memref.alloc() {alignment = 64 : i64} : memref<8x4xf32>
        memref.copy %cache, %alloc : memref<8x4xf32> to memref<8x4xf32>
        %slot = memref.subview %alloc[%pos, 0] [1, 4] [1, 1] : ...
        memref.copy %row, %slot : ...
    """
    one_shot_pass = ONE_SHOT_COPY_BEFORE_WRITE if options["copy-before-write"] else ONE_SHOT
    passes = ["tdf-check-sizes"] if options["check-sizes"] else []
    if options["copy-before-write"]:
        passes.append("tdf-check-copy-before-write")  # One-Shot would crash on calls
    passes += ["tdf-donate", one_shot_pass, "canonicalize", "cse", "tdf-drop-donated-results"]
    if options["plan-memory"]:
        # canonicalize: a loop that now yields its own iter_arg drops it
        # (ownership-based deallocation would clone the loop's result).
        passes += ["tdf-plan-memory", "canonicalize"]
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
        if options["plan-memory"]:
            passes.append("tdf-stack-small-buffers")
    return ", ".join(passes)


# --------------------------------------------------------- tdf-lower-to-cpu

#: The LLVM lowering after ``tdf-bufferize`` (see :func:`lower_to_llvm`).
LOWER_TO_LLVM = [
    "convert-bufferization-to-memref",
    "tdf-strided-copies-to-loops",
    *APPROXIMATE_MATH,
    "tdf-vectorize-contractions",
    "convert-linalg-to-loops",
    "lower-affine",
    "tdf-widen-i1-memrefs",
    "convert-vector-to-scf",
    "tdf-unroll-innermost-loops",  # LLVM's full unroller copied whole nests
    "tdf-split-scf-blocks",  # convert-scf-to-cf is quadratic in scf ops per block without it
    "convert-scf-to-cf",
    "expand-strided-metadata",
    "lower-affine",
    "convert-vector-to-llvm",
    "finalize-memref-to-llvm",
    *MATH_TO_LLVM,
    "tdf-guard-bf16-narrowing",  # LLVM's x86 back end aborts on what it would narrow
    "convert-arith-to-llvm",
    "convert-ub-to-llvm",
    "convert-index-to-llvm",
    "convert-func-to-llvm",
    "convert-cf-to-llvm",
    "reconcile-unrealized-casts",
    "tdf-fuse-multiply-add",
    "tdf-arena-alias-scopes",
]


def lower_to_llvm(count_allocations: bool = False, approximate_math: bool = True,
                  blas: bool = False, threads: int = 0, parallel: bool = False,
                  share_loop_nests: bool = True,
                  codegen_flops: int = CODEGEN_FLOPS) -> list[str]:
    """The LLVM lowering after ``tdf-bufferize`` (:data:`LOWER_TO_LLVM`);
    ``count_allocations`` lowers allocations to the generic
    ``_mlir_memref_to_llvm_*`` functions so that a runtime can count them
    (``use-aligned-alloc``: an aligned allocation asks for its exact size
    instead of size + alignment padding, so counted bytes are memref bytes).
    ``approximate_math=False`` leaves out :data:`APPROXIMATE_MATH` (every
    math op through libm / LLVM intrinsics: the reference the approximations
    are tested against). ``blas`` sends contractions to the runtime's BLAS
    route (``tdf-contractions-to-blas{threads}``, before the loops) and named
    float32 convolutions to oneDNN (``tdf-convolutions-to-dnnl{threads}``),
    except GEMMs ``tdf-vectorize-contractions`` (last before
    ``convert-linalg-to-loops``) compiles of at most ``codegen_flops``
    flops (0: none).
    ``parallel`` cuts large loop nests into ``threads`` chunks run as tasks
    of tdf's thread pool (``tdf-parallelize`` and ``tdf-outline-parallel``
    before ``convert-linalg-to-loops``, ``tdf-launch-parallel`` last;
    ``threads`` must then be at least 2).
    ``share_loop_nests`` gives identical linalg ops one function each
    (``tdf-share-loop-nests``, last before ``convert-linalg-to-loops``).
    ``canonicalize`` runs last, on the LLVM dialect: it folds the memref
    descriptors' ``insertvalue`` / ``extractvalue`` glue (a Llama decode
    step's module: 434 -> 242 KB of text, LLVM 169 -> 130 ms) after
    ``tdf-arena-alias-scopes`` has followed it and tagged the accesses."""
    passes = list(LOWER_TO_LLVM)
    if parallel:
        at = passes.index("tdf-vectorize-contractions")
        passes[at:at] = [f"tdf-parallelize{{threads={threads}}}", "tdf-outline-parallel"]
        passes.append("tdf-launch-parallel")
    passes.append("canonicalize")
    if share_loop_nests:
        at = passes.index("tdf-vectorize-contractions")
        passes[at:at] = ["tdf-share-loop-nests"]
    if blas:
        at = passes.index("tdf-strided-copies-to-loops") + 1
        suffix = f"{{threads={threads}}}" if threads else ""
        blas_options = ([f"threads={threads}"] if threads else []) + (
            [f"codegen-flops={codegen_flops}"] if codegen_flops != CODEGEN_FLOPS else [])
        blas_suffix = "{" + " ".join(blas_options) + "}" if blas_options else ""
        passes[at:at] = [f"tdf-contractions-to-blas{blas_suffix}",
                         f"tdf-convolutions-to-dnnl{suffix}"]
    if not approximate_math:
        passes = [p for p in passes if p not in APPROXIMATE_MATH]
    if not count_allocations:
        return passes
    return [p + "{use-generic-functions use-aligned-alloc}" if p == "finalize-memref-to-llvm" else p
            for p in passes]


#: What ``strict`` means, for ``tdf-lower-to-cpu{strict=true}`` and
#: ``tdf.compile(strict=True)`` alike: tdf-verify-inplace's definition of "an
#: in-place call would need a copy" (One-Shot Bufferize's analysis, plus the
#: safety rules it cannot see), and a donated argument that does not hold its
#: paired result (``donations``), run on the output of :func:`inplace_stage`.
STRICT_CHECK = "tdf-verify-inplace{strict=true donations=true}"


#: Most levels of scf control flow the CPU pipeline leaves in one function
#: (``tdf-outline-deep-nests``, option ``nest-depth``).
NEST_DEPTH = 16


def inplace_stage(inplace: bool = True, copy_before_write: bool = False,
                  fuse_kernels: bool = True, blas: bool = False,
                  split_reductions: bool = True, schedule: bool = True,
                  nest_depth: int = NEST_DEPTH) -> list[str]:
    """The first stage of the CPU pipeline: ``tdf-check-sizes`` (before
    anything that could abort on an overflowing shape),
    ``tdf-outline-deep-nests{depth=nest_depth}`` (no function nests control
    flow more than ``nest_depth`` deep: One-Shot Bufferize's analysis, and
    even the verifier, grow with the square of the depth; 0: no limit),
    ``tdf-scalarize-loop-carried``, then
    (``fuse_kernels``) :data:`FUSE_KERNELS`, with
    ``tdf-specialize-contractions`` before the fusion when ``blas`` (so
    that contractions stay BLAS contractions), then
    ``tdf-split-reductions`` (``split_reductions``), then
    ``tdf-schedule-for-memory`` (``schedule``), then
    ``tdf-insert-inplace`` unless ``inplace`` is off or
    ``copy_before_write`` is on."""
    passes = ["tdf-check-sizes",  # before tdf-insert-inplace too
              # first: even verifying a deep nest is quadratic in its depth
              f"tdf-outline-deep-nests{{depth={nest_depth}}}",
              "tdf-scalarize-loop-carried"]
    if fuse_kernels:
        passes += FUSE_KERNELS
    if blas:
        at = passes.index("tdf-fuse-elementwise") if fuse_kernels else len(passes)
        passes.insert(at, "tdf-specialize-contractions")
    if split_reductions:
        passes.append("tdf-split-reductions")
    if schedule:
        passes.append("tdf-schedule-for-memory")
    if inplace and not copy_before_write:
        passes.append("tdf-insert-inplace")
    return passes


CPU_OPTIONS = [
    PassOption("inplace", bool, True, "Run tdf-insert-inplace first"),
    PassOption("strict", bool, False,
               "Run tdf-verify-inplace{strict=true}: a copy forced by a tdf.call_inplace is an error"),
    PassOption("copy-before-write", bool, False,
               "Functional baseline: no in-place rewrite, copy before every write"),
    PassOption("count-allocations", bool, False,
               "Lower allocations to the generic _mlir_memref_to_llvm_* functions (for counting)"),
    PassOption("approximate-math", bool, True,
               "f32 exp/log/tanh/... as vectorizable polynomials (tdf-math-approximation)"),
    PassOption("blas", bool, False,
               "Contractions through the runtime's BLAS route (tdf-specialize-contractions, "
               "tdf-contractions-to-blas; calls tdf_rt_contract, which tdf.compile provides)"),
    PassOption("threads", int, 0,
               "Threads of BLAS calls and of parallel loops (0: the library's default)"),
    PassOption("codegen-flops", int, CODEGEN_FLOPS,
               "With blas: GEMMs tdf-vectorize-contractions compiles, of up to this many "
               "flops, stay compiled code (0: every contraction to the libraries)"),
    PassOption("parallel", bool, False,
               "Large loop nests on `threads` threads (tdf-parallelize, tdf-outline-parallel, "
               "tdf-launch-parallel: tdf's thread pool, which tdf.compile provides)"),
    PassOption("plan-memory", bool, True,
               "Ops that free a large temporary run as early as they can "
               "(tdf-schedule-for-memory); one arena per call for the temporaries of each "
               "function (tdf-plan-memory)"),
    PassOption("split-reductions", bool, True,
               "Long float reductions as a vectorizable tree (tdf-split-reductions)"),
    PassOption("share-loop-nests", bool, True,
               "Identical linalg ops compiled once, as calls of one function (tdf-share-loop-nests)"),
    PassOption("nest-depth", int, NEST_DEPTH,
               "Control flow nested deeper than this moves into functions of its own "
               "(tdf-outline-deep-nests; 0: no limit; not with copy-before-write)"),
    PassOption("fuse-kernels", bool, True,
               "Inline chains of kernel calls and fuse them (tdf-inline-kernels, "
               "tdf-fuse-elementwise)"),
    PassOption("bounds-checks", bool, False,
               "Check dynamic indices, offsets and sizes at run time (tdf-bounds-checks; "
               "a failure calls the tdf runtime, which tdf.compile provides)"),
    PassOption("alloc-checks", bool, False,
               "Check every heap allocation at run time (tdf-alloc-checks; a failure calls "
               "the tdf runtime, which tdf.compile provides)"),
]


def cpu_stages(options: dict) -> list[tuple[str, list[str]]]:
    """``tdf-lower-to-cpu`` as ``[(stage, passes)]``: ``inplace``
    (:func:`inplace_stage`), ``strict`` (:data:`STRICT_CHECK`, only with
    option ``strict``), ``bufferize`` (``tdf-bufferize``, after
    ``tdf-bounds-checks`` with option ``bounds-checks``) and ``llvm``
    (:func:`lower_to_llvm`, after ``tdf-alloc-checks`` with option
    ``alloc-checks``). ``options`` maps option names of
    :data:`CPU_OPTIONS` to values; missing ones take their default, an
    unknown one is a ValueError."""
    unknown = sorted(set(options) - {o.name for o in CPU_OPTIONS})
    if unknown:
        raise ValueError(f"'tdf-lower-to-cpu' has no option '{unknown[0]}'")
    values: dict[str, Any] = {o.name: o.default for o in CPU_OPTIONS}
    values.update(options)
    copy_before_write = values["copy-before-write"]
    # The baseline outlines no nest: its calls would stop copy-before-write
    # bufferization (tdf-check-copy-before-write).
    stages = [("inplace", inplace_stage(values["inplace"], copy_before_write,
                                        values["fuse-kernels"], values["blas"],
                                        values["split-reductions"], values["plan-memory"],
                                        0 if copy_before_write else values["nest-depth"]))]
    if values["strict"]:
        stages.append(("strict", [STRICT_CHECK]))
    # tdf-check-sizes ran first in the inplace stage.
    plan = "true" if values["plan-memory"] else "false"
    stages.append(("bufferize", (["tdf-bounds-checks"] if values["bounds-checks"] else [])
                   + [f"tdf-bufferize{{check-sizes=false copy-before-write="
                      f"{'true' if copy_before_write else 'false'} plan-memory={plan}}}"]))
    stages.append(("llvm", (["tdf-alloc-checks"] if values["alloc-checks"] else [])
                   + lower_to_llvm(values["count-allocations"], values["approximate-math"],
                                   values["blas"], values["threads"], values["parallel"],
                                   values["share-loop-nests"], values["codegen-flops"])))
    return stages


@register_pipeline(
    "tdf-lower-to-cpu",
    "In-place rewrite, bufferization and lowering to the LLVM dialect for the CPU JIT",
    options=CPU_OPTIONS,
)
def lower_to_cpu_pipeline(options: dict) -> str:
    """[``tdf-check-sizes``, ``tdf-outline-deep-nests``,
    ``tdf-inline-kernels``, ``tdf-fuse-elementwise``,
    ``tdf-insert-inplace``] →
    [``tdf-verify-inplace{strict}``] → ``tdf-bufferize`` → linalg to loops
    (matmuls tiled and vectorized, math approximated) →
    affine/scf/cf/vector/memref/arith/math/index/func → LLVM →
    ``reconcile-unrealized-casts``. The result is an LLVM-dialect module for
    tdf's code generator (``tdf.objects``).

    Options: ``inplace`` (default true): run ``tdf-insert-inplace`` first;
    ``strict`` (default false): run ``tdf-verify-inplace{strict=true}``
    before bufferizing; ``copy-before-write`` (default false): the
    functional baseline, ``tdf-bufferize{copy-before-write=true}`` and no
    ``tdf-insert-inplace`` (``inplace`` is ignored); ``count-allocations``
    (default false): lower ``memref.alloc``/``dealloc`` to the generic
    ``_mlir_memref_to_llvm_alloc``/``_aligned_alloc``/``_free`` functions
    (``finalize-memref-to-llvm{use-generic-functions use-aligned-alloc}``),
    which the runtime defines with counting allocators
    (``tdf.compile(count_allocations=True)``); ``approximate-math`` (default
    true): f32 ``exp``/``log``/``tanh``/... as polynomials
    (``tdf-rescale-subnormal-math``, ``tdf-math-approximation``);
    ``fuse-kernels`` (default true): inline and fuse chains of kernel calls;
    ``blas`` (default false): contractions as calls of ``tdf_rt_contract``
    (the runtime's BLAS route, which ``tdf.compile`` provides and turns on
    by default), on ``threads`` threads (0: the library's default);
    ``parallel`` (default false): loop nests of at least 256K iterations cut
    into ``threads`` chunks run by tdf's thread pool (``tdf-parallelize``,
    ``tdf-outline-parallel``, ``tdf-launch-parallel``; ``tdf.compile`` turns
    it on with more than one thread);
    ``split-reductions`` (default true): long float reductions as a 16-ary
    tree (``tdf-split-reductions``);
    ``share-loop-nests`` (default true): identical linalg ops become calls
    of one function each, compiled once (``tdf-share-loop-nests``);
    ``nest-depth`` (default 16): control flow nested deeper moves into
    private functions (``tdf-outline-deep-nests``; 0: no limit);
    ``bounds-checks``, ``alloc-checks`` (default false): the run-time checks
    ``tdf.compile`` inserts (``tdf-bounds-checks`` before bufferizing,
    ``tdf-alloc-checks`` before the LLVM lowering); their failures call
    ``tdf_rt_bounds_error``/``tdf_rt_alloc_error``, which the tdf runtime
    defines.
    """
    return ", ".join(p for _, passes in cpu_stages(options) for p in passes)


# -------------------------------------------------------- tdf-lower-to-nvvm

#: Minimum PTX ISA version for each chip LLVM 22's NVPTX backend knows (PTX
#: ISA release notes); the pipeline asks for exactly this version.
PTX_VERSION = {
    "sm_70": 60, "sm_72": 61, "sm_75": 63,
    "sm_80": 70, "sm_86": 71, "sm_87": 74, "sm_89": 78,
    "sm_90": 78, "sm_90a": 80,
    "sm_100": 86, "sm_100a": 86, "sm_101": 86, "sm_101a": 86,
    "sm_120": 87, "sm_120a": 87,
}
# sm_90 itself is accepted by PTX 7.8, but the default feature check of
# upstream's NVVM target asks for PTX 8.0 there: keep 8.0 for sm_90.
PTX_VERSION["sm_90"] = 80

FORMATS = ("isa", "bin", "fatbin")
BLAS_CHOICES = ("auto", "true", "false")
STAGES = ("bufferize", "gpu", "nvvm")
_CHIP = re.compile(r"^sm_[0-9]{2,3}a?$")
_TILES = re.compile(r"^[1-9][0-9]{0,3}(,[1-9][0-9]{0,3}){0,2}$")


def ptx_feature(chip: str) -> str:
    """The ``cubin-features`` string for ``chip``, e.g. ``+ptx80`` for sm_90."""
    return f"+ptx{PTX_VERSION[chip]}"


def use_blas(choice: str) -> bool:
    """Whether the ``blas`` option ``choice`` runs ``tdf-contractions-to-cublas``:
    ``auto`` when cuBLAS loads here (:func:`~tdf.passes.contractions_to_cublas.cublas_available`)."""
    if choice == "auto":
        return contractions_to_cublas.cublas_available()[0]
    return choice == "true"


def validate_options(options: dict) -> None:
    """Raises ValueError naming the bad ``tdf-lower-to-nvvm`` option, before
    anything reaches MLIR (a bad chip/PTX pair aborts the process inside
    MLIR)."""
    chip = options["chip"]
    if not _CHIP.match(chip) or chip not in PTX_VERSION:
        known = ", ".join(sorted(PTX_VERSION, key=lambda c: (int(re.sub(r"\D", "", c)), c)))
        raise ValueError(f"unsupported chip '{chip}' for tdf-lower-to-nvvm (supported: {known})")
    if options["format"] not in FORMATS:
        raise ValueError(f"unknown format '{options['format']}' for tdf-lower-to-nvvm "
                         f"(expected one of: {', '.join(FORMATS)})")
    if not 0 <= options["opt-level"] <= 3:
        raise ValueError(f"opt-level {options['opt-level']} of tdf-lower-to-nvvm is not in [0, 3]")
    if options["stop-at"] not in STAGES:
        raise ValueError(f"unknown stop-at '{options['stop-at']}' for tdf-lower-to-nvvm "
                         f"(expected one of: {', '.join(STAGES)})")
    if options["blas"] not in BLAS_CHOICES:
        raise ValueError(f"unknown blas '{options['blas']}' for tdf-lower-to-nvvm "
                         f"(expected one of: {', '.join(BLAS_CHOICES)})")
    if not _TILES.match(options["tile-sizes"]):
        raise ValueError(f"bad tile-sizes '{options['tile-sizes']}' for tdf-lower-to-nvvm "
                         f"(expected 1 to 3 positive integers separated by commas)")
    threads = 1
    for size in options["tile-sizes"].split(","):
        threads *= int(size)
    if threads > 1024:
        raise ValueError(f"tile-sizes '{options['tile-sizes']}' make {threads} threads per "
                         f"block (at most 1024)")


def stage_pipelines(options: dict) -> list[tuple[str, str]]:
    """``tdf-lower-to-nvvm`` as ``[(stage, pass list)]`` up to ``stop-at``;
    validates ``options`` (every option of :data:`NVVM_OPTIONS`, by name)."""
    validate_options(options)
    # The CPU pipeline's tensor-level stage (fusion; contractions kept whole
    # for cuBLAS), after a canonicalize that folds JAX's scalar constants.
    blas = use_blas(options["blas"])
    tensor_passes = ["tdf-check-sizes", "canonicalize", "tdf-scalarize-loop-carried",
                     *FUSE_KERNELS]
    if blas:
        tensor_passes.insert(tensor_passes.index("tdf-fuse-elementwise"),
                             "tdf-specialize-contractions")
    donate = ", ".join(tensor_passes) + ", tdf-donate" + (", tdf-insert-inplace" if options["inplace"] else "")
    if options["strict"]:
        donate += ", " + STRICT_CHECK
    stages = [
        ("donate", donate),
        # tdf-plan-memory: one device arena per call (tdf-gpu-device-memory
        # turns the arena's memref.alloc into a gpu.alloc, its views stay views).
        ("bufferize", f"{ONE_SHOT}, canonicalize, cse, canonicalize, symbol-dce, "
                      "tdf-plan-memory, canonicalize"),
        ("gpu", ", ".join([
            "tdf-gpu-device-memory",
            *(["tdf-contractions-to-cublas"] if blas else []),
            "tdf-gpu-host-scalars",
            "func.func(convert-linalg-to-parallel-loops, canonicalize)",
            "tdf-gpu-coalesce",
            "func.func(scf-parallel-loop-tiling{parallel-loop-tile-sizes="
            f"{options['tile-sizes']} no-min-max-bounds=true}}, "
            "gpu-map-parallel-loops{mapping-policy=outermost-first}, "
            "convert-parallel-loops-to-gpu, canonicalize)",
            "gpu-kernel-outlining",
            "tdf-gpu-check-host-access",
            "tdf-widen-i1-memrefs",
            "func.func(gpu-async-region)",
            "canonicalize, cse",
        ])),
        ("nvvm", (f"gpu-lower-to-nvvm-pipeline{{cubin-chip={options['chip']} "
                  f"cubin-features={ptx_feature(options['chip'])} "
                  f"cubin-format={options['format']} opt-level={options['opt-level']}}}"
                  + (", tdf-gpu-pooled-alloc" if options["pool"] else ""))),
    ]
    last = {"bufferize": 2, "gpu": 3, "nvvm": 4}[options["stop-at"]]
    return stages[:last]


NVVM_OPTIONS = [
    PassOption("chip", str, "sm_90", "Target GPU, sm_<N>[a] (validated; picks the PTX version)"),
    PassOption("inplace", bool, True, "Run tdf-insert-inplace before bufferization"),
    PassOption("strict", bool, False,
               "Run tdf-verify-inplace{strict=true}: a copy forced by a tdf.call_inplace is an error"),
    PassOption("format", str, "isa", "gpu.binary format: isa (PTX), bin (cubin) or fatbin"),
    PassOption("opt-level", int, 3, "NVVM optimization level, 0 to 3"),
    PassOption("tile-sizes", str, "32,8", "Thread block shape, innermost (contiguous) dimension first"),
    PassOption("stop-at", str, "nvvm", "Last stage to run: bufferize, gpu or nvvm"),
    PassOption("pool", bool, True,
               "Device buffers from tdf's stream-ordered pool (tdf-gpu-pooled-alloc; the "
               "program then needs libtdf_gpu_runtime.so where it runs)"),
    PassOption("blas", str, "auto",
               "Contractions through cuBLAS (tdf-contractions-to-cublas): true, false, or auto "
               "(true when cuBLAS and the CUDA driver load on this machine)"),
]


@register_pipeline(
    "tdf-lower-to-nvvm",
    "Lower a tdf program to the GPU dialect, NVVM and a GPU binary (PTX for sm_90 by default)",
    options=NVVM_OPTIONS,
)
def lower_to_nvvm_pipeline(options: dict) -> str:
    """The GPU path, from in-place tensor programs to NVVM/PTX. The pipeline
    runs, in order (``tdf.gpu`` runs each stage on its own, through
    ``stage_pipelines``, to report what each decided):

    1. ``donate``: ``tdf-check-sizes`` (a static shape whose size overflows
       int64 is refused: bufferization would abort), ``canonicalize``
       (scalar constants a JAX program builds as ``tensor.from_elements``
       and reads back fold into the ops that use them: on the GPU path
       host code cannot read device memory), ``tdf-scalarize-loop-carried``
       and the CPU pipeline's kernel fusion (:data:`FUSE_KERNELS`, with
       ``tdf-specialize-contractions`` first when ``blas``: element-wise
       chains become one kernel, a bias add is accumulated into its
       contraction), ``tdf-donate`` (and ``tdf-insert-inplace`` when
       ``inplace``, ``tdf-verify-inplace{strict}`` when ``strict``);
    2. ``bufferize``: One-Shot Bufferize with function boundaries and
       identity layouts, then ``canonicalize, cse`` (self-copies fold away)
       and ``symbol-dce`` (kernels nobody calls are not compiled). The
       in-place decisions are fixed here: an operand updated in place is the
       same buffer as the result;
    3. ``gpu``: ``tdf-gpu-device-memory`` makes every buffer a device buffer
       with explicit, counted host<->device transfers at the entry points;
       with ``blas``, ``tdf-contractions-to-cublas`` turns each contraction
       one cuBLAS call runs into a host call of ``tdf_gpu_contract``; other
       linalg ops on memrefs become ``scf.parallel`` loops (unit dimensions
       folded away), ``tdf-gpu-coalesce`` puts their dimensions innermost
       first, they are tiled (guards, no min/max bounds) and mapped
       outermost-first: the contiguous dimension lands on ``threadIdx.x``
       (coalesced accesses), turned into ``gpu.launch`` and outlined into
       ``gpu.func`` kernels; ``tdf-gpu-check-host-access`` then rejects host
       code that would still touch device memory, and
       ``tdf-widen-i1-memrefs`` stores ``i1`` buffers as ``i8`` (host
       signatures, device buffers and kernels; the memref to LLVM lowering
       asserts on ``i1`` loads and stores);
    4. ``nvvm``: ``gpu-lower-to-nvvm-pipeline`` for the chosen chip: NVVM, the
       host side through the GPU runtime ABI (``mgpu*`` calls) and
       ``gpu.binary`` holding PTX (``format=isa``), a cubin (``bin``) or a
       fatbin (``fatbin``; both need the CUDA toolkit); then, with ``pool``,
       ``tdf-gpu-pooled-alloc`` (device buffers from tdf's stream-ordered
       pool instead of a ``cuMemAlloc``/``cuMemFree`` per buffer and call).

    Options:

    * ``chip`` (default ``sm_90``): ``sm_<N>`` or ``sm_<N>a``, validated
      against a table of chips and the PTX ISA version each needs (MLIR
      aborts the process when the PTX version is too old for the chip);
    * ``inplace`` (default true): run ``tdf-insert-inplace``;
    * ``strict`` (default false): run ``tdf-verify-inplace{strict=true}`` (a
      copy forced by a ``tdf.call_inplace`` is an error);
    * ``format`` (default ``isa``): ``isa`` (PTX text), ``bin`` or ``fatbin``;
    * ``opt-level`` (default 3): 0 to 3;
    * ``tile-sizes`` (default ``32,8``): thread-block shape, innermost
      dimension first: the first size is the block width along the
      contiguous dimension (``threadIdx.x``), the second along the next
      dimension, and so on;
    * ``stop-at`` (default ``nvvm``): ``bufferize``, ``gpu`` or ``nvvm``, the
      last stage to run (``gpu`` leaves the GPU dialect for inspection);
    * ``blas`` (default ``auto``): ``true`` runs contractions (matmul,
      batch_matmul, transposed operands, bf16/f16 inputs of f32, ...)
      through cuBLAS (``tdf-contractions-to-cublas``; the program then needs
      cuBLAS where it runs), ``false`` makes them kernels, ``auto`` is
      ``true`` when cuBLAS and the CUDA driver load on the compiling machine;
    * ``pool`` (default true): run ``tdf-gpu-pooled-alloc``.

    Before (a donated element-wise chain, after ``tdf-insert-inplace``)::

        func.func @chain(%x: tensor<64x128xf32> {tdf.donate}, %y: tensor<64x128xf32>)
            -> tensor<64x128xf32> {
          %0 = tdf.call_inplace @add_inplace(%x, %y) inplace [0] : ...
          return %0 : tensor<64x128xf32>
        }

    After ``stop-at=gpu``::

        func.func @chain(%x: memref<64x128xf32>, %y: memref<64x128xf32>) -> memref<64x128xf32> {
          %dx = gpu.alloc () : memref<64x128xf32>
          gpu.memcpy %dx, %x {tdf.transfer = "h2d"} ...
          %dy = gpu.alloc () ...
          gpu.memcpy %dy, %y {tdf.transfer = "h2d"} ...
          call @add_inplace(%dx, %dy)          // writes %dx: no device copy
          gpu.memcpy %x, %dx {tdf.transfer = "d2h"} ...
          gpu.dealloc %dx ...
          return %x : memref<64x128xf32>
        }
        gpu.module @add_inplace_kernel { gpu.func @add_inplace_kernel(...) kernel { ... } }

    After the full pipeline: ``llvm.func``s calling ``mgpuMemAlloc``,
    ``mgpuMemcpy``, ``mgpuLaunchKernel`` and a ``gpu.binary`` whose object
    is PTX with ``.target sm_90``.
    """
    return ", ".join(passes for _, passes in stage_pipelines(options))
