"""Offsets for buffers with known live intervals: the arithmetic of
``tdf-plan-memory``, free of IR.

A :class:`Block` is one buffer: ``size`` bytes live over the closed interval
``[start, end]`` of a function's schedule (top-level op numbers). Blocks are
placed in **bins**: the arena (one allocation, as large as needed) and the
*hosts*, fresh result buffers of fixed size that may hold temporaries while
they are not live themselves (XLA places temporaries inside an output
allocation the same way). Two blocks of one bin whose intervals overlap never
share a byte.

:func:`place` is greedy: blocks in one order, each at the lowest-waste gap
that fits among the blocks already placed in a bin and live with it (best
fit), at an offset aligned to 64 bytes (16 to 32 for smaller buffers). Like XLA's heap simulator, it tries several orders (by size, then by
start, by end or by lifetime length; by lifetime, then size; by size times
lifetime; by end, latest first) and keeps the one with the smallest arena. :func:`lower_bound` is the largest sum of live
bytes at any point of the schedule (no placement does better);
:func:`check` verifies a placement from scratch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = ["ALIGNMENT", "MIN_ALIGNMENT", "alignment", "Block", "Host", "Placement", "align", "place", "lower_bound", "check"]

#: Every offset of a buffer of at least this many bytes is a multiple of it
#: (a cache line; AVX-512 loads); smaller buffers align to their size rounded
#: up to a power of two, at least 16 bytes (what malloc gives), so that a
#: 32-byte temporary does not take 64.
ALIGNMENT = 64
MIN_ALIGNMENT = 16


def alignment(size: int) -> int:
    """The alignment of a buffer of ``size`` bytes."""
    a = MIN_ALIGNMENT
    while a < size and a < ALIGNMENT:
        a *= 2
    return a


def align(n: int, to: int = ALIGNMENT) -> int:
    return (n + to - 1) // to * to


@dataclass
class Block:
    """One buffer to place: ``size`` bytes live over ``[start, end]``."""

    size: int
    start: int
    end: int
    name: str = ""

    def overlaps(self, other: Block) -> bool:
        return self.start <= other.end and other.start <= self.end


@dataclass
class Host:
    """A fresh result buffer of ``size`` bytes, itself live over ``[start,
    end]`` at offset 0 of its own bin: a temporary can use its bytes while it
    is not live."""

    size: int
    start: int
    end: int
    name: str = ""


@dataclass
class Placement:
    """Where each block went: ``where[i] = (bin, offset)`` with bin ``-1``
    for the arena and ``h`` for host ``h``; ``arena`` is the arena's size."""

    where: list[tuple[int, int]] = field(default_factory=list)
    arena: int = 0


def _gaps(busy: list[tuple[int, int]], limit: int | None):
    """Free ``(offset, length)`` gaps between the sorted byte ranges
    ``busy``; the last one is unbounded when ``limit`` is None."""
    cursor = 0
    for lo, hi in sorted(busy):
        if lo > cursor:
            yield cursor, lo - cursor
        cursor = max(cursor, hi)
    yield cursor, (None if limit is None else max(0, limit - cursor))


def _best_gap(busy, size: int, limit: int | None):
    """The aligned offset of the tightest gap holding ``size`` bytes (the
    unbounded tail last), or None."""
    best = None
    to = alignment(size)
    for offset, length in _gaps(busy, limit):
        start = align(offset, to)
        room = None if length is None else length - (start - offset)
        if room is not None and room < size:
            continue
        waste = float("inf") if room is None else room - size
        if best is None or waste < best[0]:
            best = (waste, start)
    return None if best is None else best[1]


class _Bins:
    """The blocks placed so far, per bin, indexed by schedule position so
    that finding what a new block overlaps looks at the positions it spans
    only (planning time grows with the buffers and their lifetimes, not with
    the square of the buffers)."""

    def __init__(self, hosts: list[Host]):
        self.hosts = hosts
        self.by_size = sorted(range(len(hosts)), key=lambda h: hosts[h].size)
        self.placed: list[list[tuple[Block, int]]] = [[] for _ in range(len(hosts) + 1)]
        self.slots: list[dict[int, list[int]]] = [{} for _ in range(len(hosts) + 1)]
        self.arena = 0

    def busy(self, bin_: int, block: Block) -> list[tuple[int, int]]:
        slots, placed = self.slots[bin_], self.placed[bin_]
        seen: set[int] = set()
        for t in range(block.start, block.end + 1):
            seen.update(slots.get(t, ()))
        ranges = [(placed[i][1], placed[i][1] + placed[i][0].size) for i in seen]
        if bin_ < len(self.hosts):
            host = self.hosts[bin_]
            if host.start <= block.end and block.start <= host.end:
                ranges.append((0, host.size))
        return ranges

    def choose(self, block: Block) -> tuple[int, int]:
        """The bin and offset for ``block``: a host where it fits (the
        smallest such), else the arena at its best gap."""
        for h in self.by_size:
            host = self.hosts[h]
            if host.size < block.size or (host.start <= block.end and block.start <= host.end):
                continue
            offset = _best_gap(self.busy(h, block), block.size, host.size)
            if offset is not None:
                return h, offset
        arena_bin = len(self.hosts)
        offset = _best_gap(self.busy(arena_bin, block), block.size, None)
        assert offset is not None
        return arena_bin, offset

    def put(self, block: Block, bin_: int, offset: int) -> None:
        index = len(self.placed[bin_])
        self.placed[bin_].append((block, offset))
        slots = self.slots[bin_]
        for t in range(block.start, block.end + 1):
            slots.setdefault(t, []).append(index)
        if bin_ == len(self.hosts):
            self.arena = max(self.arena, align(offset + block.size, MIN_ALIGNMENT))


_ORDERS = (
    lambda b: (-b.size, b.start),
    lambda b: (-b.size, -b.end),
    lambda b: (-b.size, b.start - b.end),
    lambda b: (b.start - b.end, -b.size),
    lambda b: (-b.size * (b.end - b.start + 1), b.start),
    lambda b: (-b.end, -b.size),
)


def _place_in_order(blocks: list[Block], hosts: list[Host], order) -> Placement:
    bins = _Bins(hosts)
    where: list[tuple[int, int]] = [(-1, 0)] * len(blocks)
    for i in sorted(range(len(blocks)), key=lambda i: order(blocks[i])):
        if blocks[i].size == 0:
            continue
        bin_, offset = bins.choose(blocks[i])
        bins.put(blocks[i], bin_, offset)
        where[i] = (-1 if bin_ == len(hosts) else bin_, offset)
    return Placement(where, bins.arena)


def place(blocks: list[Block], hosts: Sequence[Host] = ()) -> Placement:
    """The placement of ``blocks`` (arena or hosts) with the smallest arena
    over the greedy orders tried."""
    hosts = list(hosts)
    best = None
    for order in _ORDERS:
        placement = _place_in_order(blocks, hosts, order)
        if best is None or placement.arena < best.arena:
            best = placement
    return best if best is not None else Placement()


def lower_bound(blocks: Sequence[Block], hosts: Sequence[Host] = ()) -> int:
    """The most bytes live at once (blocks and hosts, each rounded up to
    :data:`MIN_ALIGNMENT`, as every offset is): no placement needs less."""
    events: list[tuple[int, int]] = []
    for size, start, end in [(b.size, b.start, b.end) for b in blocks] + \
            [(h.size, h.start, h.end) for h in hosts]:
        if size:
            events.append((start, align(size, MIN_ALIGNMENT)))
            events.append((end + 1, -align(size, MIN_ALIGNMENT)))
    live = peak = 0
    for _, delta in sorted(events):
        live += delta
        peak = max(peak, live)
    return peak


def check(blocks: list[Block], hosts: list[Host], placement: Placement) -> list[str]:
    """What is wrong with ``placement`` (empty when nothing): two blocks of
    one bin live at once sharing bytes, a block overlapping its live host, a
    block outside its bin, a misaligned offset."""
    errors = []
    by_bin: dict[int, list[tuple[Block, int]]] = {}
    for block, (bin_, offset) in zip(blocks, placement.where):
        if block.size == 0:
            continue
        limit = placement.arena if bin_ == -1 else hosts[bin_].size
        if offset % alignment(block.size) or offset < 0 or offset + block.size > limit:
            errors.append(f"{block.name}: bytes [{offset}, {offset + block.size}) "
                          f"outside its bin of {limit} bytes or misaligned")
        if bin_ >= 0:
            host = hosts[bin_]
            if host.start <= block.end and block.start <= host.end:
                errors.append(f"{block.name} is placed in {host.name} while it is live")
        by_bin.setdefault(bin_, []).append((block, offset))
    for members in by_bin.values():
        members.sort(key=lambda m: m[0].start)
        for i, (a, off_a) in enumerate(members):
            for b, off_b in members[i + 1:]:
                if b.start > a.end:
                    break
                if off_a < off_b + b.size and off_b < off_a + a.size:
                    errors.append(f"{a.name} [{a.start}, {a.end}] and {b.name} "
                                  f"[{b.start}, {b.end}] are live at once and share bytes")
    return errors
