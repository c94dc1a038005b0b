"""tdf's passes and pipelines, written in Python on the MLIR bindings.

Importing this package registers every pass and pipeline with MLIR's pass
registry (see :mod:`tdf.passes.registry`), so that they can be named in
textual pipelines from Python and on the ``tdf-opt`` command line.

Each pass lives in the module named after it (``tdf-widen-i1-memrefs`` in
:mod:`tdf.passes.widen_i1_memrefs`); the pipelines, which only assemble pass
lists, live in :mod:`tdf.passes.pipelines`; the analyses the passes share
(liveness, aliasing, kernel classification, shapes, the in-place rules) in
:mod:`tdf.passes.analysis`. Modules starting with ``_`` hold rewrite helpers
shared by passes.
"""

# Registers tdf's op classes for ``op.opview``: without it every opview of a
# tdf op retries a failing ``import mlir.dialects.tdf`` (~0.15 ms each, 3/4 of
# tdf-insert-inplace's time on a 8k-call chain).
from .. import dialects as _dialects  # noqa: F401

# Each module registers its pass (or, for pipelines, its pipelines) on import.
from . import (  # noqa: F401
    accumulate_contractions,
    alloc_checks,
    analysis,
    arena_alias_scopes,
    bounds_checks,
    check_copy_before_write,
    check_sizes,
    contractions_to_blas,
    contractions_to_cublas,
    convolutions_to_dnnl,
    donate,
    drop_donated_results,
    expand_math,
    fuse_multiply_add,
    gpu_check_host_access,
    gpu_coalesce,
    gpu_device_memory,
    gpu_host_scalars,
    gpu_pooled_alloc,
    guard_bf16_narrowing,
    inline_kernels,
    insert_inplace,
    launch_parallel,
    outline_deep_nests,
    outline_parallel,
    parallelize,
    pipelines,
    plan_memory,
    rescale_subnormal_math,
    scalarize_loop_carried,
    schedule_for_memory,
    share_loop_nests,
    specialize_contractions,
    split_reductions,
    split_scf_blocks,
    stack_small_buffers,
    strided_copies_to_loops,
    unown_opaque_results,
    unroll_innermost_loops,
    vectorize_contractions,
    verify_inplace,
    widen_i1_memrefs,
)
from .registry import (
    PassContext,
    PassOption,
    PassSpec,
    PipelineSpec,
    get_all_passes,
    get_all_pipelines,
    register_pass,
    register_pipeline,
)

__all__ = [
    "PassOption",
    "PassContext",
    "PassSpec",
    "PipelineSpec",
    "get_all_passes",
    "get_all_pipelines",
    "register_pass",
    "register_pipeline",
]
