"""The analyses tdf's passes share; they compute facts about the IR and
change nothing (the test passes ``test-tdf-liveness`` and ``test-tdf-alias``
annotate their results, for lit tests).

* :mod:`~tdf.passes.analysis.liveness`: program-order numbering and
  "is this tensor dead after that op" queries;
* :mod:`~tdf.passes.analysis.alias`: may-alias classes of tensors, escapes and
  ownership;
* :mod:`~tdf.passes.analysis.kernels`: which kernels may compute a result in
  the storage of an input;
* :mod:`~tdf.passes.analysis.shapes`: provably equal dynamic sizes and the
  memref layouts One-Shot Bufferize gives tensors and slices;
* :mod:`~tdf.passes.analysis.inplace`: the in-place safety rules (dead,
  unaliased, owned, fits) on top of liveness and aliasing;
* :mod:`~tdf.passes.analysis.one_shot`: what One-Shot Bufferize itself would
  copy (its analysis run once per IR state, :class:`OneShotAnalysis`);
* :mod:`~tdf.passes.analysis.manager`: analyses computed once and shared
  while the IR is unchanged (upstream's ``AnalysisManager``);
* :mod:`~tdf.passes.analysis.buffers`: live intervals of the heap buffers of
  bufferized functions (aliases followed through views, loops, branches);
* :mod:`~tdf.passes.analysis.placement`: offsets for buffers with live
  intervals in an arena and in result buffers (no IR).
"""

from . import (  # noqa: F401
    alias,
    buffers,
    inplace,
    kernels,
    liveness,
    manager,
    one_shot,
    placement,
    shapes,
)
