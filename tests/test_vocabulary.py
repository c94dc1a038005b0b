"""tdf.vocabulary: element byte sizes as the lowered code allocates them, the
dtype table, and the CPU and GPU reports agreeing on both (an ``i1`` element
takes one byte: the GPU report used to count ``memref<128xi1>`` as 16 B)."""

import numpy as np
import pytest
from mlir import ir

import tdf
import tdf.gpu
from tdf import vocabulary as vocab


@pytest.fixture
def ctx():
    context = tdf.Context()
    with context:
        yield context


@pytest.mark.parametrize("text, nbytes", [
    ("i1", 1), ("i8", 1), ("i16", 2), ("i24", 4), ("i32", 4), ("i33", 8), ("i64", 8),
    ("i128", 16), ("f80", 16), ("f16", 2), ("bf16", 2), ("f32", 4), ("f64", 8), ("index", 8),
    ("complex<f32>", 8), ("complex<f64>", 16), ("vector<4xf32>", 16), ("vector<3xf32>", 16),
])
def test_element_nbytes(ctx, text, nbytes):
    assert vocab.element_nbytes(ir.Type.parse(text)) == nbytes


@pytest.mark.parametrize("text, nbytes", [
    ("memref<8xi1>", 8), ("memref<1xi1>", 1), ("tensor<4x8xf32>", 128), ("memref<3xindex>", 24),
    ("memref<2x3xbf16>", 12), ("memref<0xf32>", 0), ("memref<?x4xf32>", None),
    ("tensor<*xf32>", None),
])
def test_static_nbytes(ctx, text, nbytes):
    assert vocab.static_nbytes(ir.Type.parse(text)) == nbytes


def test_dtypes_match_numpy_item_sizes(ctx):
    """Every array element type: its numpy dtype holds exactly the bytes the
    lowered code gives an element (the runtime passes arrays without copies)."""
    for name, dtype in vocab.DTYPES.items():
        assert vocab.element_nbytes(ir.Type.parse(name)) == dtype.itemsize, name
        if name != "index":
            assert vocab.element_type_name(dtype) == name
    assert vocab.element_type_name(np.complex64) is None


N = 128
COMPARE = f"""
func.func @positive(%x: tensor<{N}xf32>) -> tensor<{N}xi1> {{
  %e = tensor.empty() : tensor<{N}xi1>
  %r = linalg.generic {{indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],
                       iterator_types = ["parallel"]}}
      ins(%x : tensor<{N}xf32>) outs(%e : tensor<{N}xi1>) {{
  ^bb0(%a: f32, %o: i1):
    %z = arith.constant 0.0 : f32
    %c = arith.cmpf ogt, %a, %z : f32
    linalg.yield %c : i1
  }} -> tensor<{N}xi1>
  return %r : tensor<{N}xi1>
}}
"""


def test_cpu_report_counts_what_the_code_allocates_for_i1():
    prog = tdf.compile(COMPARE, count_allocations=True)
    assert prog.report().bytes_allocated("positive") == N
    x = np.linspace(-1, 1, N, dtype=np.float32)
    out = prog.positive(x)
    np.testing.assert_array_equal(out, x > 0)
    assert prog.allocation_stats().bytes == N  # one byte per bool, as the report says


def test_gpu_report_counts_i1_bytes_like_the_cpu_report():
    report = tdf.gpu.compile_nvvm(COMPARE, ptxas=False).report()
    assert report.d2h == (1, N)  # the bool result: one byte per element
    assert report.h2d == (1, 4 * N)
    assert report.device_alloc_bytes == 4 * N + N


@pytest.mark.parametrize("n, element, dtype", [(8, "f32", np.float32), (100, "f32", np.float32),
                                               (8, "i1", np.bool_), (16, "f64", np.float64)])
def test_counted_bytes_are_the_report_bytes_rounded_to_the_alignment(n, element, dtype):
    """The report counts the memref's bytes; the counting allocator sees
    what aligned_alloc is asked for: those bytes rounded up to 64."""
    t = f"tensor<{n}x{element}>"
    prog = tdf.compile(f"""
func.func @copy(%x: {t}) -> {t} {{
  %e = tensor.empty() : {t}
  %r = linalg.copy ins(%x : {t}) outs(%e : {t}) -> {t}
  return %r : {t}
}}""", count_allocations=True)
    static = prog.report().bytes_allocated("copy")
    assert static == n * np.dtype(dtype).itemsize
    prog.copy(np.zeros(n, dtype))
    assert prog.allocation_stats().bytes == -(-static // 64) * 64
