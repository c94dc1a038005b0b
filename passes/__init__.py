"""tdf's passes and pipelines, written in Python on the MLIR bindings.

Importing this package registers every pass and pipeline with MLIR's pass
registry (see :mod:`tdf.passes.registry`), so that they can be named in
textual pipelines from Python and on the ``tdf-opt`` command line.
"""

from .registry import (
    PassOption,
    PassContext,
    PassSpec,
    PipelineSpec,
    get_all_passes,
    get_all_pipelines,
    register_pass,
    register_pipeline,
)

# Registers tdf's op classes for ``op.opview``: without it every opview of a
# tdf op retries a failing ``import mlir.dialects.tdf`` (~0.15 ms each, 3/4 of
# tdf-insert-inplace's time on a 8k-call chain).
from .. import dialects as _dialects  # noqa: F401

# Each module registers its passes on import.
from . import check_sizes  # noqa: F401
from . import donate  # noqa: F401
from . import fuse_kernels  # noqa: F401
from . import math_lowering  # noqa: F401
from . import vectorize  # noqa: F401
from . import split_blocks  # noqa: F401  (issue 11: linear convert-scf-to-cf)
from . import pipelines  # noqa: F401
from . import bounds_checks, alloc_checks  # noqa: F401  (issue 11: run-time checks)
from . import lower_to_nvvm  # noqa: F401
from . import liveness, alias, insert_inplace, verify_inplace  # noqa: F401  (issue 3)

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
