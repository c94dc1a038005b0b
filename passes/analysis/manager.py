"""Analyses computed once per IR state and shared, after upstream's
``AnalysisManager::getAnalysis<>()``: an :class:`AnalysisCache` holds one
instance per (analysis class, op) -- built by ``kind(op)`` on first request
-- until it is closed. Nothing tracks IR changes: whoever holds a cache
vouches that the IR it was filled from is unchanged (a pass that rewrites
closes its cache, or never shares one).

A pass asks :func:`analyses` for a cache: the one a caller *preserved* for
this run (:func:`preserved`), else a cache of its own, closed when the pass
is done. ``tdf.compile`` preserves One-Shot Bufferize's analysis
(:class:`~tdf.passes.analysis.one_shot.OneShotAnalysis`), which its report
reads, across its ``strict`` stage: ``tdf-verify-inplace`` changes no IR, so
One-Shot runs once for both instead of once for the report and once for
each question of the pass.

A preserved cache is per thread (``tdf.compile`` may run in several threads
at once) and answers only for the op it was preserved for.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..ir_utils import op_key

__all__ = ["AnalysisCache", "analyses", "preserved"]


class AnalysisCache:
    """One instance per (analysis class, op), made by ``kind(op)`` on the
    first :meth:`get`; :meth:`close` calls each instance's ``close()`` (if
    it has one) and empties the cache."""

    def __init__(self):
        self._entries: dict[tuple[type, int], Any] = {}

    def get(self, kind: type, op) -> Any:
        key = (kind, op_key(op.operation))
        found = self._entries.get(key)
        if found is None:
            found = self._entries[key] = kind(op)
        return found

    def put(self, analysis: Any, op) -> None:
        """Stores an analysis made elsewhere (of ``op``, unchanged since)."""
        self._entries[(type(analysis), op_key(op.operation))] = analysis

    def close(self) -> None:
        entries, self._entries = self._entries, {}
        for analysis in entries.values():
            close = getattr(analysis, "close", None)
            if close is not None:
                close()


_local = threading.local()


@contextmanager
def preserved(op, cache: AnalysisCache) -> Iterator[AnalysisCache]:
    """Within the block, :func:`analyses` for ``op`` (on this thread) is
    ``cache``: the caller guarantees that ``op`` does not change inside it
    (only passes that change no IR run). The cache is not closed on exit."""
    outer = getattr(_local, "preserved", None)
    _local.preserved = (op_key(op.operation), cache)
    try:
        yield cache
    finally:
        _local.preserved = outer


@contextmanager
def analyses(op) -> Iterator[AnalysisCache]:
    """The cache of this run of a pass on ``op``: the one preserved for
    ``op`` by the caller, else a fresh one, closed on exit."""
    outer = getattr(_local, "preserved", None)
    if outer is not None and outer[0] == op_key(op.operation):
        yield outer[1]
        return
    cache = AnalysisCache()
    try:
        yield cache
    finally:
        cache.close()
