"""Shared pytest fixtures and helpers of tdf's tests (JIT, oracle, properties)."""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import tempfile

import pytest

# The compilation cache (tdf.cache) is off for the suite, and for every
# process it starts, so that a developer's cache never changes a result and
# CI never depends on a previous run; tests/test_cache.py gives each test its
# own directory. TDF_TEST_CACHE=1 runs the suite through a fresh cache of its
# own instead (a program compiled twice is then loaded the second time).
if os.environ.get("TDF_TEST_CACHE", "") not in ("", "0"):
    _SESSION_CACHE = tempfile.mkdtemp(prefix="tdf-test-cache-")
    atexit.register(shutil.rmtree, _SESSION_CACHE, True)
    os.environ["TDF_CACHE_DIR"] = _SESSION_CACHE
else:
    os.environ["TDF_CACHE_DIR"] = ""

import tdf  # noqa: E402

# in-place rewrite off and on (tdf-insert-inplace).
INPLACE_MODES = [
    pytest.param(False, id="inplace-off"),
    pytest.param(True, id="inplace-on"),
]


def rss_bytes() -> int:
    """Resident set size of this process (Linux /proc)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def build_shared_lib(tmp_path, name: str, source: str) -> str:
    """Compiles C ``source`` into ``tmp_path/lib<name>.so`` with the system C
    compiler and returns its path."""
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.fail("no C compiler (gcc/cc) on PATH to build a test kernel library")
    src = tmp_path / f"{name}.c"
    src.write_text(source)
    lib = tmp_path / f"lib{name}.so"
    subprocess.run([cc, "-O2", "-shared", "-fPIC", str(src), "-o", str(lib)], check=True)
    return str(lib)


@pytest.fixture
def shared_lib(tmp_path):
    """``shared_lib(name, c_source) -> path`` building a C library in tmp_path."""
    return lambda name, source: build_shared_lib(tmp_path, name, source)


@pytest.fixture(scope="session")
def compile_program():
    """``compile_program(text, **kw)`` with a per-session cache (JIT compile
    costs tens of milliseconds)."""
    cache = {}

    def get(text, **kw):
        key = (text, tuple(sorted(kw.items())))
        if key not in cache:
            cache[key] = tdf.compile(text, **kw)
        return cache[key]

    return get
