"""Entry functions returning scalars (index, i1-i64, f32, f64), alone or mixed
with tensors: JIT results against numpy, returned as numpy scalars of the
result's dtype through the native call path (single scalar by value, several
results in one C struct), and unsupported types named in the error."""

import threading

import numpy as np
import pytest

import tdf
from tdf.compiler import CompileError

RNG = np.random.default_rng(7)

# One function per scalar type: the element at %i of a tensor, converted.
_EXTRACT = """
func.func @{name}(%x: tensor<8x{elem}>, %i: index) -> {elem} {{
  %e = tensor.extract %x[%i] : tensor<8x{elem}>
  return %e : {elem}
}}
"""
_TYPES = {"f64": np.float64, "f32": np.float32, "i64": np.int64, "i32": np.int32,
          "i16": np.int16, "i8": np.int8, "i1": np.bool_, "index": np.int64}


def _data(dtype, shape=(8,)):
    if dtype == np.bool_:
        return RNG.random(shape) < 0.5
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return RNG.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
    return (RNG.standard_normal(shape) * 100).astype(dtype)


@pytest.fixture(scope="module")
def extract():
    src = "".join(_EXTRACT.format(name=f"get_{t}", elem=t) for t in _TYPES)
    return tdf.compile(src)


@pytest.mark.parametrize("mlir_type", list(_TYPES))
def test_single_scalar_result_is_numpy_scalar_of_its_dtype(extract, mlir_type):
    dtype = _TYPES[mlir_type]
    x = _data(dtype)
    for i in range(8):
        got = extract[f"get_{mlir_type}"](x, i)
        assert type(got) is np.dtype(dtype).type, (mlir_type, type(got))
        assert got == x[i]
    # The argument is never written.
    before = x.copy()
    extract[f"get_{mlir_type}"](x, 3)
    np.testing.assert_array_equal(x, before)


SRC = """
func.func @sum_max(%x: tensor<16xf32>) -> (f32, f32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %z = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %r:2 = scf.for %i = %c0 to %c16 step %c1 iter_args(%s = %z, %m = %ninf) -> (f32, f32) {
    %e = tensor.extract %x[%i] : tensor<16xf32>
    %s2 = arith.addf %s, %e : f32
    %m2 = arith.maximumf %m, %e : f32
    scf.yield %s2, %m2 : f32, f32
  }
  return %r#0, %r#1 : f32, f32
}

// Alignment of the result struct: i8, f64, i1, i32, index, i16 in one struct.
func.func @mixed_scalars(%x: tensor<4xi32>, %f: f64) -> (i8, f64, i1, i32, index, i16) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %a = tensor.extract %x[%c0] : tensor<4xi32>
  %b = tensor.extract %x[%c1] : tensor<4xi32>
  %a8 = arith.trunci %a : i32 to i8
  %a16 = arith.trunci %b : i32 to i16
  %lt = arith.cmpi slt, %a, %b : i32
  %sum = arith.addi %a, %b : i32
  %n = tensor.dim %x, %c0 : tensor<4xi32>
  %f2 = arith.mulf %f, %f : f64
  return %a8, %f2, %lt, %sum, %n, %a16 : i8, f64, i1, i32, index, i16
}

// Tensors and scalars interleaved.
func.func @tensor_and_scalars(%x: tensor<3x4xf32>, %k: f32) -> (i1, tensor<3x4xf32>, f32, tensor<4xf32>) {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %e0 = tensor.empty() : tensor<3x4xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<3x4xf32>) outs(%e0 : tensor<3x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.mulf %a, %k : f32
    linalg.yield %m : f32
  } -> tensor<3x4xf32>
  %row = tensor.extract_slice %y[2, 0] [1, 4] [1, 1] : tensor<3x4xf32> to tensor<4xf32>
  %corner = tensor.extract %y[%c2, %c0] : tensor<3x4xf32>
  %z = arith.constant 0.0 : f32
  %pos = arith.cmpf ogt, %corner, %z : f32
  return %pos, %y, %corner, %row : i1, tensor<3x4xf32>, f32, tensor<4xf32>
}

// A donated tensor updated in place plus a scalar: only the scalar is a JIT
// result (returned by value), the tensor is the caller's array.
func.func @update_and_old(%cache: tensor<8xi64> {tdf.donate}, %i: index, %v: i64) -> (tensor<8xi64>, i64) {
  %old = tensor.extract %cache[%i] : tensor<8xi64>
  %new = tensor.insert %v into %cache[%i] : tensor<8xi64>
  return %new, %old : tensor<8xi64>, i64
}

// Two scalars and a donated tensor: a struct of two scalars.
func.func @update_two(%cache: tensor<8xf32> {tdf.donate}, %i: index) -> (index, tensor<8xf32>, f32) {
  %old = tensor.extract %cache[%i] : tensor<8xf32>
  %one = arith.constant 1.0 : f32
  %v = arith.addf %old, %one : f32
  %new = tensor.insert %v into %cache[%i] : tensor<8xf32>
  return %i, %new, %v : index, tensor<8xf32>, f32
}
"""


@pytest.fixture(scope="module")
def prog():
    return tdf.compile(SRC)


def test_reduction_to_two_f32_scalars_matches_numpy(prog):
    for _ in range(5):
        x = _data(np.float32, (16,))
        s, m = prog.sum_max(x)
        assert type(s) is np.float32 and type(m) is np.float32
        np.testing.assert_allclose(s, x.sum(dtype=np.float32), rtol=1e-5, atol=1e-3)
        assert m == x.max()


def test_result_struct_alignment_with_six_scalar_types(prog):
    for _ in range(10):
        x = RNG.integers(-1000, 1000, 4, dtype=np.int32)
        f = float(RNG.standard_normal())
        got = prog.mixed_scalars(x, f)
        want = (np.int32(x[0]).astype(np.int8), np.float64(f) * np.float64(f), x[0] < x[1],
                np.int32(x[0] + x[1]), np.int64(4), np.int32(x[1]).astype(np.int16))
        assert [type(g) for g in got] == [np.int8, np.float64, np.bool_, np.int32, np.int64,
                                          np.int16]
        assert got == want


def test_tensors_and_scalars_interleaved(prog):
    for k in (2.5, -1.0, 0.0):
        x = _data(np.float32, (3, 4))
        pos, y, corner, row = prog.tensor_and_scalars(x, k)
        want = x * np.float32(k)
        np.testing.assert_array_equal(y, want)
        np.testing.assert_array_equal(row, want[2])
        assert type(corner) is np.float32 and corner == want[2, 0]
        assert type(pos) is np.bool_ and pos == (want[2, 0] > 0)


def test_donated_tensor_and_scalar_result(prog):
    cache = np.arange(8, dtype=np.int64) * 10
    ref = cache.copy()
    for i, v in ((3, -5), (0, 99), (7, 2**40)):
        new, old = prog.update_and_old(cache, i, v)
        assert new is cache
        assert type(old) is np.int64 and old == ref[i]
        ref[i] = v
        np.testing.assert_array_equal(cache, ref)


def test_donated_tensor_between_two_scalar_results(prog):
    cache = _data(np.float32)
    ref = cache.copy()
    i, new, v = prog.update_two(cache, 5)
    assert new is cache and type(i) is np.int64 and i == 5
    assert type(v) is np.float32 and v == ref[5] + np.float32(1)
    ref[5] += np.float32(1)
    np.testing.assert_array_equal(cache, ref)


def test_i1_results_against_numpy_comparisons():
    src = """
    func.func @cmp(%a: tensor<6xi32>, %b: tensor<6xi32>, %i: index) -> (i1, i1, i1) {
      %x = tensor.extract %a[%i] : tensor<6xi32>
      %y = tensor.extract %b[%i] : tensor<6xi32>
      %lt = arith.cmpi slt, %x, %y : i32
      %eq = arith.cmpi eq, %x, %y : i32
      %ult = arith.cmpi ult, %x, %y : i32
      return %lt, %eq, %ult : i1, i1, i1
    }
    func.func @any(%m: tensor<6xi1>) -> i1 {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c6 = arith.constant 6 : index
      %f = arith.constant false
      %r = scf.for %i = %c0 to %c6 step %c1 iter_args(%acc = %f) -> (i1) {
        %e = tensor.extract %m[%i] : tensor<6xi1>
        %o = arith.ori %acc, %e : i1
        scf.yield %o : i1
      }
      return %r : i1
    }
    """
    p = tdf.compile(src)
    a = np.array([1, 5, -3, 7, 0, -8], np.int32)
    b = np.array([2, 5, 4, -7, 0, -9], np.int32)
    for i in range(6):
        lt, eq, ult = p.cmp(a, b, i)
        assert all(type(v) is np.bool_ for v in (lt, eq, ult))
        assert (lt, eq, ult) == (a[i] < b[i], a[i] == b[i], a.view(np.uint32)[i] < b.view(np.uint32)[i])
    for m in (np.zeros(6, bool), np.eye(1, 6, 4, dtype=bool)[0], np.ones(6, bool)):
        got = p.any(m)
        assert type(got) is np.bool_ and got == m.any()


def test_scalar_results_with_counting_bounds_checks_and_threads():
    p = tdf.compile(_EXTRACT.format(name="get", elem="f32"), count_allocations=True)
    x = _data(np.float32)
    assert p.get(x, 2) == x[2]
    assert p.allocation_stats().live_bytes == 0
    with pytest.raises(IndexError, match="out of bounds"):
        p.get(x, 8)
    results = {}

    def work(t):
        results[t] = [p.get(x, (t + k) % 8) for k in range(200)]

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for t in range(4):
        assert results[t] == [x[(t + k) % 8] for k in range(200)]


def test_packed_arguments_bare_call_with_scalar_result(prog, extract):
    fn = extract["get_i32"]
    x = _data(np.int32)
    packed = fn.packed_arguments(x, 6)
    fn._cfunc(packed)
    slots, result, _ = packed._tdf_keep
    assert result.value == x[6]
    g = prog.mixed_scalars
    xs = np.array([3, 4, 0, 0], np.int32)
    packed = g.packed_arguments(xs, 1.5)
    g._cfunc(packed)
    result = packed._tdf_keep[1]
    assert (result.r0, result.r1, result.r2, result.r3, result.r4, result.r5) == \
        (3, 2.25, True, 7, 4, 4)


@pytest.mark.parametrize("signature, where, type_text", [
    ("(%x: tensor<4xf32>) -> f16", "@f result #0", "f16"),
    ("(%x: tensor<4xf32>) -> (tensor<4xf32>, vector<4xf32>)", "@f result #1", "vector<4xf32>"),
    ("(%x: tensor<4xf32>, %y: bf16) -> tensor<4xf32>", "@f argument #1", "bf16"),
    ("(%x: tensor<4xf32>) -> (i32, tensor<*xf32>)", "@f result #1", "tensor<*xf32>"),
    ("(%x: tensor<4xf32>) -> complex<f32>", "@f result #0", "complex<f32>"),
])
def test_unsupported_types_name_function_position_and_type(signature, where, type_text):
    src = f"func.func @f{signature} {{\n  \"test.unreachable\"() : () -> ()\n}}"
    src = src.replace('"test.unreachable"() : () -> ()', "llvm.unreachable")
    with pytest.raises(CompileError) as info:
        tdf.compile(src)
    message = str(info.value)
    assert message.startswith(f"{where}: unsupported type {type_text} ")
    assert "expected a ranked tensor, an index" not in message


def test_unsupported_element_type_names_the_tensor_type():
    src = """
    func.func @f(%x: tensor<4xf32>) -> tensor<4xcomplex<f32>> {
      llvm.unreachable
    }
    """
    with pytest.raises(CompileError, match=r"@f result #0: unsupported element type "
                                           r"complex<f32> in tensor<4xcomplex<f32>>"):
        tdf.compile(src)
