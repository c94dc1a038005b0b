"""Run-time bounds checks: every dynamic index, offset,
size and stride is checked; a violation raises IndexError naming the
function, the op's file:line:col and the value, before anything is written;
``bounds_checks=False`` turns the checks off."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tdf

KV = """\
func.func @step(%cache: tensor<8x4xf32> {tdf.donate}, %row: tensor<1x4xf32>, %pos: index) -> tensor<8x4xf32> {
  %new = tensor.insert_slice %row into %cache[%pos, 0] [1, 4] [1, 1] : tensor<1x4xf32> into tensor<8x4xf32>
  return %new : tensor<8x4xf32>
}
func.func @step_copy(%cache: tensor<8x4xf32>, %row: tensor<1x4xf32>, %pos: index) -> tensor<8x4xf32> {
  %new = tensor.insert_slice %row into %cache[%pos, 0] [1, 4] [1, 1] : tensor<1x4xf32> into tensor<8x4xf32>
  return %new : tensor<8x4xf32>
}
func.func @two_rows(%cache: tensor<8x4xf32> {tdf.donate}, %row: tensor<1x4xf32>, %p: index, %q: index) -> tensor<8x4xf32> {
  %a = tensor.insert_slice %row into %cache[%p, 0] [1, 4] [1, 1] : tensor<1x4xf32> into tensor<8x4xf32>
  %b = tensor.insert_slice %row into %a[%q, 0] [1, 4] [1, 1] : tensor<1x4xf32> into tensor<8x4xf32>
  return %b : tensor<8x4xf32>
}
"""

ELEMENTS = """\
func.func @get(%t: tensor<8xf32>, %i: index) -> tensor<1xf32> {
  %v = tensor.extract %t[%i] : tensor<8xf32>
  %r = tensor.from_elements %v : tensor<1xf32>
  return %r : tensor<1xf32>
}
func.func @put(%t: tensor<8xf32> {tdf.donate}, %i: index, %x: f32) -> tensor<8xf32> {
  %r = tensor.insert %x into %t[%i] : tensor<8xf32>
  return %r : tensor<8xf32>
}
func.func @window(%t: tensor<16xf32>, %o: index, %s: index, %st: index) -> tensor<4xf32> {
  %w = tensor.extract_slice %t[%o] [%s] [%st] : tensor<16xf32> to tensor<?xf32>
  %c = tensor.cast %w : tensor<?xf32> to tensor<4xf32>
  return %c : tensor<4xf32>
}
func.func @guarded(%t: tensor<8xf32>, %i: index, %use: i1) -> tensor<1xf32> {
  %r = scf.if %use -> tensor<1xf32> {
    %v = tensor.extract %t[%i] : tensor<8xf32>
    %e = tensor.from_elements %v : tensor<1xf32>
    scf.yield %e : tensor<1xf32>
  } else {
    %z = arith.constant dense<0.0> : tensor<1xf32>
    scf.yield %z : tensor<1xf32>
  }
  return %r : tensor<1xf32>
}
"""

KERNEL = """\
func.func private @pick(%t: tensor<8xf32>, %i: index) -> tensor<1xf32> {
  %v = tensor.extract %t[%i] : tensor<8xf32>
  %r = tensor.from_elements %v : tensor<1xf32>
  return %r : tensor<1xf32>
}
func.func @outer(%t: tensor<8xf32>, %i: index) -> tensor<1xf32> {
  %r = func.call @pick(%t, %i) : (tensor<8xf32>, index) -> tensor<1xf32>
  return %r : tensor<1xf32>
}
func.func @memref_load(%t: memref<8xf32>, %out: memref<1xf32>, %i: index) {
  %c0 = arith.constant 0 : index
  %v = memref.load %t[%i] : memref<8xf32>
  memref.store %v, %out[%c0] : memref<1xf32>
  return
}
"""


@pytest.fixture(scope="module")
def kv():
    return tdf.compile(KV, filename="kv.mlir")


@pytest.fixture(scope="module")
def elements():
    return tdf.compile(ELEMENTS, filename="elements.mlir")


def _rows():
    return np.zeros((8, 4), np.float32), np.full((1, 4), 7.0, np.float32)


@pytest.mark.parametrize("pos", [8, 9, -1, -8, 100000, 2**62, -(2**63)])
def test_donated_row_out_of_range_raises_and_cache_unchanged(kv, pos):
    cache, row = _rows()
    cache[:] = np.arange(32, dtype=np.float32).reshape(8, 4)
    before = cache.copy()
    with pytest.raises(IndexError) as info:
        kv.step(cache, row, pos)
    message = str(info.value)
    assert message.startswith("@step: tensor.insert_slice at kv.mlir:2:")
    assert f"slice offset {pos}, size 1, stride 1" in message
    assert "dimension 0 of size 8" in message
    np.testing.assert_array_equal(cache, before)


def test_non_donated_cache_out_of_range(kv):
    cache, row = _rows()
    before = cache.copy()
    with pytest.raises(IndexError, match=r"@step_copy: tensor.insert_slice at kv.mlir:6:.*offset 8"):
        kv.step_copy(cache, row, 8)
    np.testing.assert_array_equal(cache, before)


@pytest.mark.parametrize("pos", [0, 3, 7])
def test_in_range_rows_match_numpy(kv, pos):
    cache, row = _rows()
    expected = cache.copy()
    expected[pos] = row[0]
    out = kv.step(cache, row, pos)
    assert out is cache
    np.testing.assert_array_equal(out, expected)


def test_check_runs_before_the_first_write(kv):
    """@two_rows writes row %p, then row %q: a bad %q must leave row %p
    unwritten (the checks of argument indices run at function entry)."""
    cache, row = _rows()
    with pytest.raises(IndexError, match="offset 11"):
        kv.two_rows(cache, row, 2, 11)
    assert not cache.any()
    out = kv.two_rows(cache, row, 2, 5)
    assert out[2].tolist() == [7.0] * 4 and out[5].tolist() == [7.0] * 4


def test_function_usable_after_failure(kv):
    cache, row = _rows()
    for _ in range(50):
        with pytest.raises(IndexError):
            kv.step(cache, row, 8)
        assert kv.step(cache, row, 1) is cache
    assert cache[1].tolist() == [7.0] * 4


def test_extract_past_end(elements):
    t = np.arange(8, dtype=np.float32)
    assert elements.get(t, 7).tolist() == [7.0]
    for i in (8, -1, 1 << 40):
        with pytest.raises(IndexError, match=rf"@get: tensor.extract at elements.mlir:2:\d+: "
                                             rf"index {i} is out of bounds for dimension 0 of size 8"):
            elements.get(t, i)


def test_insert_out_of_range_leaves_donated_unchanged(elements):
    t = np.arange(8, dtype=np.float32)
    with pytest.raises(IndexError, match="@put: tensor.insert at elements.mlir:7:.*index 8"):
        elements.put(t, 8, 1.5)
    np.testing.assert_array_equal(t, np.arange(8, dtype=np.float32))
    assert elements.put(t, 3, 1.5)[3] == 1.5


@pytest.mark.parametrize("offset,size,stride,ok", [
    (0, 4, 1, True), (12, 4, 1, True), (13, 4, 1, False), (0, 4, 5, True), (0, 4, 6, False),
    (3, 4, 4, True), (4, 4, 4, False), (-1, 4, 1, False), (0, 17, 1, False), (0, 4, -1, False),
])
def test_extract_slice_offset_size_stride(elements, offset, size, stride, ok):
    t = np.arange(16, dtype=np.float32)
    if ok:
        np.testing.assert_array_equal(elements.window(t, offset, size, stride),
                                      t[offset:offset + (size - 1) * stride + 1:stride])
    else:
        with pytest.raises(IndexError, match=rf"@window: tensor.extract_slice at elements.mlir:11:\d+: "
                                             rf"slice offset {offset}, size {size}, stride {stride}"):
            elements.window(t, offset, size, stride)


def test_branch_not_taken_is_not_checked(elements):
    t = np.arange(8, dtype=np.float32)
    assert elements.guarded(t, 100, False).tolist() == [0.0]
    with pytest.raises(IndexError, match="index 100"):
        elements.guarded(t, 100, True)


def test_error_names_the_callee_and_memref_loads_are_checked():
    prog = tdf.compile(KERNEL, filename="kernel.mlir")
    t = np.arange(8, dtype=np.float32)
    assert prog.outer(t, 2).tolist() == [2.0]
    with pytest.raises(IndexError, match=r"@outer: .*kernel.mlir:2:\d+.*index 9"):
        prog.outer(t, 9)


def test_property_random_offsets_against_numpy(kv):
    rng = np.random.default_rng(0)
    cache, row = _rows()
    reference = cache.copy()
    for _ in range(200):
        pos = int(rng.integers(-4, 13))
        row[:] = rng.standard_normal((1, 4)).astype(np.float32)
        if 0 <= pos < 8:
            reference[pos] = row[0]
            kv.step(cache, row, pos)
        else:
            with pytest.raises(IndexError):
                kv.step(cache, row, pos)
        np.testing.assert_array_equal(cache, reference)


def test_bounds_checks_off():
    prog = tdf.compile(KV, filename="kv.mlir", bounds_checks=False)
    assert "tdf_rt_bounds_error" not in prog.llvm_ir
    cache, row = _rows()
    assert prog.step(cache, row, 4) is cache
    assert cache[4].tolist() == [7.0] * 4
    on = tdf.compile(KV, filename="kv.mlir")
    assert "tdf_rt_bounds_error" in on.llvm_ir


def test_bounds_checks_option_is_checked():
    with pytest.raises(TypeError, match="bounds_checks must be a bool"):
        tdf.compile(KV, bounds_checks="yes")


def test_out_of_range_writes_never_crash_in_a_subprocess(tmp_path):
    """Out-of-range row writes (an 8-row cache written at 8, -1 and 100000,
    donated and not) in a fresh process: each raises, no abort, no heap
    damage."""
    script = tmp_path / "oob.py"
    script.write_text(textwrap.dedent(f"""
        import numpy as np, tdf
        prog = tdf.compile({KV!r})
        for fn in (prog.step, prog.step_copy):
            for pos in (8, -1, 100000, 8, -1):
                cache = np.arange(32, dtype=np.float32).reshape(8, 4)
                try:
                    fn(cache, np.ones((1, 4), np.float32), pos)
                except IndexError:
                    pass
                else:
                    raise SystemExit("no IndexError")
                assert (cache == np.arange(32, dtype=np.float32).reshape(8, 4)).all()
        print("ok")
    """))
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "ok"


GATHER = """\
func.func @gather(%table: tensor<16x4xf32>, %ids: tensor<3xindex>) -> tensor<3x4xf32> {
  %e = tensor.empty() : tensor<3x4xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]} ins(%ids : tensor<3xindex>) outs(%e : tensor<3x4xf32>) {
  ^bb0(%id: index, %o: f32):
    %j = linalg.index 1 : index
    %v = tensor.extract %table[%id, %j] : tensor<16x4xf32>
    linalg.yield %v : f32
  } -> tensor<3x4xf32>
  return %r : tensor<3x4xf32>
}
"""


def test_gather_in_a_linalg_body():
    prog = tdf.compile(GATHER, filename="gather.mlir")
    table = np.arange(64, dtype=np.float32).reshape(16, 4)
    ids = np.array([1, 15, 0])
    np.testing.assert_array_equal(prog.gather(table, ids), table[ids])
    with pytest.raises(IndexError, match=r"@gather: tensor.extract at gather.mlir:7:\d+: index 16 "
                                         r"is out of bounds for dimension 0 of size 16"):
        prog.gather(table, np.array([1, 16, 0]))
    off = tdf.compile(GATHER, bounds_checks=False)
    np.testing.assert_array_equal(off.gather(table, ids), table[ids])
