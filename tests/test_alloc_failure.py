"""A failed allocation raises MemoryError instead of
writing through the NULL malloc returned."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tdf

HUGE_RESULT = """\
func.func @huge(%x: tensor<4xf32>) -> tensor<1000000000000xf32> {
  %e = tensor.empty() : tensor<1000000000000xf32>
  %c = arith.constant 1.0 : f32
  %f = linalg.fill ins(%c : f32) outs(%e : tensor<1000000000000xf32>) -> tensor<1000000000000xf32>
  return %f : tensor<1000000000000xf32>
}
"""

DYNAMIC = """\
func.func @scratch(%n: index) -> tensor<1xf32> {
  %e = tensor.empty(%n) : tensor<?xf32>
  %c = arith.constant 2.5 : f32
  %f = linalg.fill ins(%c : f32) outs(%e : tensor<?xf32>) -> tensor<?xf32>
  %c0 = arith.constant 0 : index
  %v = tensor.extract %f[%c0] : tensor<?xf32>
  %r = tensor.from_elements %v : tensor<1xf32>
  return %r : tensor<1xf32>
}
"""


@pytest.mark.parametrize("count_allocations", [False, True])
def test_static_huge_result_raises_memory_error(count_allocations):
    prog = tdf.compile(HUGE_RESULT, filename="huge.mlir", count_allocations=count_allocations)
    with pytest.raises(MemoryError, match=r"@huge: memref.alloc at huge.mlir:2:\d+: "
                                          r"cannot allocate 4000000000000 bytes"):
        prog.huge(np.zeros(4, np.float32))


def test_dynamic_allocation_checked_at_run_time():
    prog = tdf.compile(DYNAMIC, filename="dyn.mlir")
    assert prog.scratch(10).tolist() == [2.5]
    with pytest.raises(MemoryError, match=r"cannot allocate 8000000000000 bytes"):
        prog.scratch(2 * 10**12)
    assert prog.scratch(3).tolist() == [2.5]


TWO_DYNAMIC = """\
func.func @grid(%m: index, %n: index) -> tensor<1xf32> {
  %e = tensor.empty(%m, %n) : tensor<?x?xf32>
  %c = arith.constant 1.5 : f32
  %f = linalg.fill ins(%c : f32) outs(%e : tensor<?x?xf32>) -> tensor<?x?xf32>
  %c0 = arith.constant 0 : index
  %v = tensor.extract %f[%c0, %c0] : tensor<?x?xf32>
  %r = tensor.from_elements %v : tensor<1xf32>
  return %r : tensor<1xf32>
}
"""


@pytest.mark.parametrize("n", [2**62 + 1, 2**62, 2**61, 2**63 - 1])
def test_dynamic_size_whose_bytes_overflow_is_memory_error(n):
    """4 * n bytes wrapped around int64 (2^62 + 1 f32 elements allocated 4
    bytes, then the fill wrote past them): checked before the allocation."""
    prog = tdf.compile(DYNAMIC, filename="dyn.mlir")
    with pytest.raises(MemoryError, match=rf"@scratch: memref.alloc at dyn.mlir:2:\d+: dimension 0 "
                                          rf"has size {n}: the buffer's byte size overflows int64"):
        prog.scratch(n)
    assert prog.scratch(3).tolist() == [2.5]


@pytest.mark.parametrize("n", [-1, -5, -(2**63)])
def test_negative_dynamic_size_is_value_error(n):
    """A negative size used to allocate a wrapped count and read garbage."""
    prog = tdf.compile(DYNAMIC, filename="dyn.mlir")
    with pytest.raises(ValueError, match=rf"@scratch: memref.alloc at dyn.mlir:2:\d+: dimension 0 "
                                         rf"has size {n}: a buffer size cannot be negative"):
        prog.scratch(n)
    assert prog.scratch(4).tolist() == [2.5]


@pytest.mark.parametrize("m, n, dim, exc", [
    (2**31, 2**31, 1, MemoryError),    # 2^62 elements * 4 bytes = 2^64
    (2**40, 2**21, 1, MemoryError),    # 2^61 * 4 = 2^63
    (-3, 4, 0, ValueError),
    (4, -3, 1, ValueError),
    (2**62, 0, 0, MemoryError),        # the first size alone overflows
])
def test_two_dynamic_sizes_checked_in_order(m, n, dim, exc):
    prog = tdf.compile(TWO_DYNAMIC, filename="grid.mlir")
    with pytest.raises(exc, match=rf"@grid: memref.alloc at grid.mlir:2:\d+: dimension {dim} "):
        prog.grid(m, n)
    assert prog.grid(3, 5).tolist() == [1.5]


def test_large_but_representable_size_is_still_a_failed_allocation():
    """Sizes whose byte count fits in int64 reach malloc: its NULL is the
    usual MemoryError with the byte count."""
    prog = tdf.compile(DYNAMIC, filename="dyn.mlir")
    with pytest.raises(MemoryError, match=r"cannot allocate 9223372036854775804 bytes"):
        prog.scratch(2**61 - 1)


def test_huge_allocation_in_a_subprocess(tmp_path):
    """A result too large to allocate, in a fresh process: MemoryError and a
    clean exit (it used to segfault)."""
    script = tmp_path / "huge.py"
    script.write_text(textwrap.dedent(f"""
        import numpy as np, tdf
        prog = tdf.compile({HUGE_RESULT!r})
        for _ in range(3):
            try:
                prog.huge(np.zeros(4, np.float32))
            except MemoryError as e:
                print("MemoryError", e)
    """))
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.count("MemoryError") == 3


def test_alloc_checks_in_the_lowered_ir():
    prog = tdf.compile(DYNAMIC)
    assert "tdf_rt_alloc_error" in prog.llvm_ir
