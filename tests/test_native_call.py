"""The native call path: every check the runtime had
(count, dtype, shape, contiguity, overlaps of donated arguments, non-donated
never written), the donated result returned as the same array, and result
ownership — on the C++ fast path and its Python slow path."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import tdf
from tdf.runtime import EntryFunction

PROGRAM = """\
func.func @step(%cache: tensor<8x4xf32> {tdf.donate}, %row: tensor<1x4xf32>, %pos: index) -> tensor<8x4xf32> {
  %new = tensor.insert_slice %row into %cache[%pos, 0] [1, 4] [1, 1] : tensor<1x4xf32> into tensor<8x4xf32>
  return %new : tensor<8x4xf32>
}
func.func @update_copy(%cache: tensor<8x4xf32>, %row: tensor<1x4xf32>, %pos: index) -> tensor<8x4xf32> {
  %new = tensor.insert_slice %row into %cache[%pos, 0] [1, 4] [1, 1] : tensor<1x4xf32> into tensor<8x4xf32>
  return %new : tensor<8x4xf32>
}
func.func @pair(%x: tensor<4xf64>, %s: f64, %k: i32, %b: i1) -> (tensor<4xf64>, tensor<4xf64>) {
  %e = tensor.empty() : tensor<4xf64>
  %y = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>],
                       iterator_types = ["parallel"]} ins(%x : tensor<4xf64>) outs(%e : tensor<4xf64>) {
  ^bb0(%a: f64, %o: f64):
    %kf = arith.sitofp %k : i32 to f64
    %m = arith.mulf %a, %s : f64
    %p = arith.addf %m, %kf : f64
    %r = arith.select %b, %p, %a : f64
    linalg.yield %r : f64
  } -> tensor<4xf64>
  return %y, %y : tensor<4xf64>, tensor<4xf64>
}
func.func @empty_result(%x: tensor<4xf32>) -> tensor<0x3xf32> {
  %e = tensor.empty() : tensor<0x3xf32>
  return %e : tensor<0x3xf32>
}
"""


@pytest.fixture(scope="module")
def prog():
    return tdf.compile(PROGRAM, filename="native.mlir")


def _kv():
    return np.zeros((8, 4), np.float32), np.ones((1, 4), np.float32)


def test_entry_function_is_native(prog):
    assert isinstance(prog.step, EntryFunction)
    assert isinstance(prog.step, tdf._tdf.NativeEntry)


def test_donated_result_is_the_argument(prog):
    cache, row = _kv()
    assert prog.step(cache, row, 2) is cache
    assert cache[2].tolist() == [1.0] * 4


def test_non_donated_never_written(prog):
    cache, row = _kv()
    out = prog.update_copy(cache, row, 2)
    assert out is not cache and not cache.any()
    assert out[2].tolist() == [1.0] * 4


def test_argument_count_and_keywords(prog):
    cache, row = _kv()
    with pytest.raises(TypeError, match=r"@step takes 3 argument\(s\), got 2"):
        prog.step(cache, row)
    with pytest.raises(TypeError, match="positional arguments only"):
        prog.step(cache, row, pos=1)


@pytest.mark.parametrize("bad,kind,pattern", [
    (np.zeros((8, 4), np.float64), TypeError, r"argument #0 \(tensor<8x4xf32>, donated\): expected dtype float32, got float64"),
    (np.zeros((4, 8), np.float32), ValueError, r"expected shape \(8, 4\), got \(4, 8\)"),
    (np.zeros((4, 8), np.float32).T, ValueError, "must be C-contiguous"),
    ([[0.0] * 4] * 8, TypeError, "expected a numpy array, got list"),
])
def test_donated_argument_checks(prog, bad, kind, pattern):
    with pytest.raises(kind, match=pattern):
        prog.step(bad, np.ones((1, 4), np.float32), 0)


def test_readonly_donated_rejected(prog):
    cache, row = _kv()
    cache.flags.writeable = False
    with pytest.raises(ValueError, match="must be writeable"):
        prog.step(cache, row, 0)


def test_overlap_with_donated_rejected(prog):
    cache, _ = _kv()
    with pytest.raises(ValueError, match="must not share memory with argument #1"):
        prog.step(cache, cache[3:4], 0)


def test_non_contiguous_non_donated_is_copied(prog):
    big = np.arange(64, dtype=np.float32).reshape(8, 8)
    view = big[:, ::2]
    out = prog.update_copy(view, np.full((1, 4), -1.0, np.float32), 1)
    expected = view.copy()
    expected[1] = -1.0
    np.testing.assert_array_equal(out, expected)
    assert big.min() == 0.0  # the caller's array untouched


def test_subclass_and_equal_dtype_take_the_slow_path(prog):
    class Sub(np.ndarray):
        pass

    cache = np.zeros((8, 4), np.float32).view(Sub)
    out = prog.step(cache, np.ones((1, 4), np.dtype("<f4")), 3)
    assert out is cache and cache[3].tolist() == [1.0] * 4


def test_scalars_fast_and_slow(prog):
    x = np.arange(4, dtype=np.float64)
    for s, k, b in [(2.0, 3, True), (np.float32(2.0), np.int64(3), np.bool_(True)), (2, 3, True)]:
        y, z = prog.pair(x, s, k, b)
        np.testing.assert_array_equal(y, x * 2 + 3)
    y, _ = prog.pair(x, 2.0, 3, False)
    np.testing.assert_array_equal(y, x)
    with pytest.raises(ValueError, match=r"argument #2 \(i32\): 2147483648 does not fit in i32"):
        prog.pair(x, 1.0, 2**31, True)
    with pytest.raises(TypeError, match=r"argument #1 \(f64\): expected a number, got str"):
        prog.pair(x, "1", 1, True)
    with pytest.raises(TypeError, match=r"argument #3 \(i1\): expected a bool, got int"):
        prog.pair(x, 1.0, 1, 1)
    with pytest.raises(TypeError, match=r"argument #2 \(i32\): expected an integer, got float"):
        prog.pair(x, 1.0, 1.5, True)


def test_two_results_share_one_owned_buffer():
    counted = tdf.compile(PROGRAM, count_allocations=True)
    counted.reset_allocation_stats()
    x = np.arange(4, dtype=np.float64)
    y, z = counted.pair(x, 1.0, 0, True)
    assert y.base is not None and z.base is y.base  # one capsule owns the buffer
    stats = counted.allocation_stats()
    assert stats.calls == 1 and stats.live_bytes == stats.bytes >= 32
    del y
    gc.collect()
    assert counted.allocation_stats().live_bytes == stats.bytes  # z still holds it
    np.testing.assert_array_equal(z, x)
    del z
    gc.collect()
    assert counted.allocation_stats().live_bytes == 0


def test_results_are_freed_over_many_calls():
    counted = tdf.compile(PROGRAM, count_allocations=True)
    x = np.arange(4, dtype=np.float64)
    for _ in range(200):
        counted.pair(x, 1.0, 0, True)
    gc.collect()
    stats = counted.allocation_stats()
    assert stats.live_bytes == 0 and stats.frees == stats.calls >= 200


def test_empty_result(prog):
    out = prog.empty_result(np.zeros(4, np.float32))
    assert out.shape == (0, 3) and out.dtype == np.float32


def test_many_arguments_use_the_heap_frame():
    n = 70
    params = ", ".join(f"%a{i}: tensor<2xf32>" for i in range(n))
    add = ("  %s{i} = linalg.add ins(%{x}, %a{i} : tensor<2xf32>, tensor<2xf32>) "
           "outs(%e : tensor<2xf32>) -> tensor<2xf32>")
    body = "\n".join(add.format(i=i, x=f"s{i - 1}") for i in range(1, n))
    text = (f"func.func @many({params}) -> tensor<2xf32> {{\n"
            f"  %e = tensor.empty() : tensor<2xf32>\n{add.format(i=0, x='a0')}\n"
            f"{body}\n  return %s{n - 1} : tensor<2xf32>\n}}\n")
    prog = tdf.compile(text)
    args = [np.full(2, i, np.float32) for i in range(n)]
    np.testing.assert_array_equal(prog.many(*args), np.full(2, sum(range(n)), np.float32))


def test_bare_floor_helpers(prog):
    cache, row = _kv()
    packed = prog.step.packed_arguments(cache, row, 6)
    prog.step._cfunc(packed)
    assert cache[6].tolist() == [1.0] * 4
