"""The runtime's caching allocator for large buffers (``python/src/Runtime.cpp``;
``docs/Runtime.md``, "Caching allocator").

The heap memory of every CPU program goes through it: the compiled code's
``malloc``/``calloc``/``aligned_alloc``/``free`` (what ``memref.alloc`` and
``memref.dealloc`` lower to) are defined in each engine as the runtime's
functions (``tdf.runtime.register_runtime_symbols``), and result arrays free
their buffers through the same ``free``. Freed blocks of at least
``min_block_bytes`` (256 KiB) are kept, up to ``limit_bytes`` in all, and
handed out again to the next request of their size (or up to a quarter
smaller), so that a call in a steady state does not page-fault a fresh
result. The cache is process-wide and thread-safe; it is emptied when the
last compiled function is garbage collected, and a block freed while no
compiled function is alive goes straight back to the system.

The limit is ``TDF_ALLOC_CACHE_BYTES`` (a byte count, optionally with a
``K``/``M``/``G`` suffix; ``0`` turns caching off) or, without it, the smaller
of 1 GiB and an eighth of physical memory; :func:`set_allocator_cache_limit`
changes it at run time. ``count_allocations`` builds allocate through their
counter instead (nothing cached).
"""

from __future__ import annotations

__all__ = ["allocator_stats", "reset_allocator_stats", "set_allocator_cache_limit",
           "release_cached_memory"]


def _native():
    from . import _tdf
    return _tdf


def allocator_stats() -> dict:
    """Counters of the process-wide caching allocator: ``hits`` (large
    allocations served from the cache), ``misses`` (large allocations that
    went to the system allocator), ``stores`` (large blocks kept on free),
    ``evictions`` (cached blocks freed to make room under the limit),
    ``uncached_frees`` (large blocks freed straight away: over the limit,
    cache off, or no compiled function alive), ``cached_bytes`` /
    ``cached_blocks`` (held now), ``peak_cached_bytes``, ``live_blocks``
    (large blocks handed out and not freed yet), ``limit_bytes``,
    ``min_block_bytes`` (smaller allocations are never cached) and ``users``
    (compiled functions alive)."""
    return dict(_native().allocator_stats())


def reset_allocator_stats() -> None:
    """Zeroes the counters of :func:`allocator_stats` (the peak restarts at
    what is cached now)."""
    _native().allocator_reset_stats()


def set_allocator_cache_limit(nbytes: int) -> int:
    """Sets the most bytes the cache may hold (``0`` turns caching off) and
    returns the previous limit; cached blocks over the new limit are freed
    at once (least recently freed first)."""
    if isinstance(nbytes, bool) or not isinstance(nbytes, int):
        raise TypeError(f"the allocator cache limit must be an int (bytes), got {nbytes!r}")
    if nbytes < 0:
        raise ValueError(f"the allocator cache limit must be >= 0 bytes, got {nbytes}")
    return int(_native().allocator_set_limit(nbytes))


def release_cached_memory() -> int:
    """Frees every block the cache holds; returns how many bytes that was."""
    return int(_native().allocator_release())
