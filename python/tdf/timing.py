"""Compile-time profile of ``tdf.compile`` (``timing=True`` or
``TDF_TIMING=1``), printed like ``--mlir-timing``: wall time of each stage
(parse, each pass group, the report's analyses, LLVM translation and JIT),
its share of the total, on ``sys.stderr`` when the compile ends::

    ===-------------------------------------------------------------------===
                           tdf.compile timing report
    ===-------------------------------------------------------------------===
      Total Execution Time: 0.4120 seconds

      ----Wall Time----  ----Name----
        0.0031 (  0.8%)  parse
        0.0923 ( 22.4%)  inplace
      ...
"""

from __future__ import annotations

import os
import sys
import time
from contextlib import contextmanager

__all__ = ["CompileTimer", "enabled"]

ENV = "TDF_TIMING"


def enabled(timing: bool | None) -> bool:
    """``timing`` when given, else whether ``TDF_TIMING`` is set to a
    non-empty value other than ``0``."""
    if timing is not None:
        if not isinstance(timing, bool):
            raise TypeError(f"timing must be a bool or None, got {timing!r}")
        return timing
    return os.environ.get(ENV, "") not in ("", "0")


class CompileTimer:
    """Records ``(stage, seconds)`` in order; a disabled timer records
    nothing and prints nothing."""

    def __init__(self, on: bool, title: str = "tdf.compile timing report"):
        self.on = on
        self.title = title
        self.stages: list[tuple[str, float]] = []
        self._start = time.perf_counter()

    @contextmanager
    def stage(self, name: str):
        """Times the ``with`` body as stage ``name``."""
        if not self.on:
            yield
            return
        start = time.perf_counter()
        try:
            yield
        finally:
            self.stages.append((name, time.perf_counter() - start))

    def format(self) -> str:
        """The report, ``--mlir-timing`` style."""
        total = time.perf_counter() - self._start
        rule = "===" + "-" * 67 + "==="
        lines = [rule, self.title.center(73).rstrip(), rule,
                 f"  Total Execution Time: {total:.4f} seconds", "",
                 "  ----Wall Time----  ----Name----"]
        for name, seconds in self.stages:
            share = 100.0 * seconds / total if total > 0 else 0.0
            lines.append(f"  {seconds:8.4f} ({share:5.1f}%)  {name}")
        rest = total - sum(seconds for _, seconds in self.stages)
        lines.append(f"  {rest:8.4f} ({100.0 * rest / total if total > 0 else 0.0:5.1f}%)  rest")
        lines.append(f"  {total:8.4f} (100.0%)  Total")
        return "\n".join(lines) + "\n"

    def print(self, stream=None) -> None:
        """Prints the report (to ``sys.stderr``) when the timer is on."""
        if self.on:
            (stream or sys.stderr).write(self.format())
