"""Dynamic shapes in hand-written programs: ``tensor<?x...>`` arguments and
results through ``tdf.compile`` (sizes taken from the arrays at call time),
``tdf.call``/``tdf.call_inplace`` kernels with dynamic memref parameters
(with bodies and declaration-only), the in-place rules, bounds checks, and
the GPU path's refusal. Every result is compared with numpy (and JAX for a
row-wise program); every non-donated input must be unchanged."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tdf

ID1 = "affine_map<(d0) -> (d0)>"
ID2 = "affine_map<(d0, d1) -> (d0, d1)>"

SOURCE = f"""
func.func private @scale(%x: memref<?x?xf32>, %s: f32, %out: memref<?x?xf32>) {{
  linalg.generic {{indexing_maps = [{ID2}, {ID2}], iterator_types = ["parallel", "parallel"]}}
     ins(%x : memref<?x?xf32>) outs(%out : memref<?x?xf32>) {{
  ^bb0(%a: f32, %o: f32):
    %m = arith.mulf %a, %s : f32
    linalg.yield %m : f32
  }}
  return
}}

// x += y (x donated, dynamic): the result is x, updated in place.
func.func @axpy(%x: tensor<?xf32> {{tdf.donate}}, %y: tensor<?xf32>, %a: f32) -> tensor<?xf32> {{
  %r = linalg.generic {{indexing_maps = [{ID1}, {ID1}], iterator_types = ["parallel"]}}
      ins(%y : tensor<?xf32>) outs(%x : tensor<?xf32>) {{
  ^bb0(%vy: f32, %vx: f32):
    %t = arith.mulf %a, %vy : f32
    %s = arith.addf %vx, %t : f32
    linalg.yield %s : f32
  }} -> tensor<?xf32>
  return %r : tensor<?xf32>
}}

// A fresh dynamic result sized with tensor.dim, and a reduction to a static
// result over a dynamic dimension.
func.func @square_rowsum(%x: tensor<?x8xf32>) -> (tensor<?x8xf32>, tensor<8xf32>) {{
  %c0 = arith.constant 0 : index
  %n = tensor.dim %x, %c0 : tensor<?x8xf32>
  %e = tensor.empty(%n) : tensor<?x8xf32>
  %sq = linalg.generic {{indexing_maps = [{ID2}, {ID2}], iterator_types = ["parallel", "parallel"]}}
      ins(%x : tensor<?x8xf32>) outs(%e : tensor<?x8xf32>) {{
  ^bb0(%a: f32, %o: f32):
    %m = arith.mulf %a, %a : f32
    linalg.yield %m : f32
  }} -> tensor<?x8xf32>
  %zero = arith.constant 0.0 : f32
  %z0 = tensor.empty() : tensor<8xf32>
  %z = linalg.fill ins(%zero : f32) outs(%z0 : tensor<8xf32>) -> tensor<8xf32>
  %sum = linalg.generic {{indexing_maps = [{ID2}, affine_map<(d0, d1) -> (d1)>],
                          iterator_types = ["reduction", "parallel"]}}
      ins(%x : tensor<?x8xf32>) outs(%z : tensor<8xf32>) {{
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %a, %acc : f32
    linalg.yield %s : f32
  }} -> tensor<8xf32>
  return %sq, %sum : tensor<?x8xf32>, tensor<8xf32>
}}

// A kernel call with a fresh result of dynamic shape (sizes of %x).
func.func @scaled(%x: tensor<?x?xf32>, %s: f32) -> tensor<?x?xf32> {{
  %y = tdf.call @scale(%x, %s) : (tensor<?x?xf32>, f32) -> tensor<?x?xf32>
  return %y : tensor<?x?xf32>
}}

// The same call on a donated argument: rewritten to run in place.
func.func @scaled_donated(%x: tensor<?x?xf32> {{tdf.donate}}, %s: f32) -> tensor<?x?xf32> {{
  %y = tdf.call @scale(%x, %s) : (tensor<?x?xf32>, f32) -> tensor<?x?xf32>
  return %y : tensor<?x?xf32>
}}

// A generic (dynamic) kernel called on static tensors.
func.func @scaled_static(%x: tensor<3x5xf32> {{tdf.donate}}, %s: f32) -> tensor<3x5xf32> {{
  %y = tdf.call @scale(%x, %s) : (tensor<3x5xf32>, f32) -> tensor<3x5xf32>
  return %y : tensor<3x5xf32>
}}

// A dynamic slice of a dynamic tensor (bounds-checked at run time).
func.func @window(%x: tensor<?xf32>, %o: index, %n: index) -> tensor<?xf32> {{
  %s = tensor.extract_slice %x[%o] [%n] [1] : tensor<?xf32> to tensor<?xf32>
  return %s : tensor<?xf32>
}}

func.func @at(%x: tensor<?x?xi32>, %i: index, %j: index) -> tensor<i32> {{
  %v = tensor.extract %x[%i, %j] : tensor<?x?xi32>
  %t = tensor.from_elements %v : tensor<i32>
  return %t : tensor<i32>
}}
"""


@pytest.fixture(scope="module")
def prog():
    # IEEE subnormals: the references are numpy's (the property test draws
    # scales down to 1e-39; the default build flushes like jax.jit).
    return tdf.compile(SOURCE, flush_denormals=False)


def rand(rng, *shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


def test_donated_dynamic_argument_updated_in_place(prog):
    rng = np.random.default_rng(0)
    for n in (0, 1, 7, 1000):
        x, y = rand(rng, n), rand(rng, n)
        want = x + np.float32(2.0) * y
        y0 = y.copy()
        r = prog.axpy(x, y, 2.0)
        assert r is x and r.shape == (n,)
        np.testing.assert_allclose(r, want, rtol=1e-6)
        np.testing.assert_array_equal(y, y0)


def test_fresh_dynamic_results_take_the_sizes_at_call_time(prog):
    rng = np.random.default_rng(1)
    for n in (0, 1, 5, 33):
        x = rand(rng, n, 8)
        x0 = x.copy()
        sq, total = prog.square_rowsum(x)
        assert sq.shape == (n, 8) and total.shape == (8,)
        assert sq.flags.c_contiguous
        np.testing.assert_allclose(sq, x * x, rtol=1e-6)
        np.testing.assert_allclose(total, x.sum(axis=0), rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(x, x0)


def test_kernel_with_dynamic_memref_parameters(prog):
    rng = np.random.default_rng(2)
    for shape in ((1, 1), (3, 4), (17, 2), (0, 5)):
        x = rand(rng, *shape)
        x0 = x.copy()
        y = prog.scaled(x, 3.0)
        assert y.shape == shape and not np.shares_memory(y, x)
        np.testing.assert_allclose(y, 3 * x0, rtol=1e-6)
        np.testing.assert_array_equal(x, x0)


def test_kernel_call_on_donated_dynamic_argument_runs_in_place(prog):
    decisions = [d for d in prog.report().decisions if d.function == "scaled_donated"]
    assert decisions and all(d.inplace for d in decisions), decisions
    assert prog.report().bytes_allocated("scaled_donated") == 0
    x = rand(np.random.default_rng(3), 6, 9)
    want = 0.5 * x
    y = prog.scaled_donated(x, 0.5)
    assert y is x
    np.testing.assert_allclose(y, want, rtol=1e-6)


def test_generic_kernel_called_on_static_tensors(prog):
    x = rand(np.random.default_rng(4), 3, 5)
    want = -2 * x
    y = prog.scaled_static(x, -2.0)
    assert y is x
    np.testing.assert_allclose(y, want, rtol=1e-6)


def test_wrong_rank_or_static_size_is_refused(prog):
    with pytest.raises(ValueError, match=r"@square_rowsum: argument #0 \(tensor<\?x8xf32>\): "
                                         r"expected shape \(\?, 8\), got \(4, 7\)"):
        prog.square_rowsum(np.zeros((4, 7), np.float32))
    with pytest.raises(ValueError, match=r"expected shape \(\?,\), got \(2, 2\)"):
        prog.axpy(np.zeros((2, 2), np.float32), np.zeros(4, np.float32), 1.0)
    with pytest.raises(TypeError, match="expected dtype float32"):
        prog.scaled(np.zeros((2, 2), np.float64), 1.0)


def test_non_contiguous_dynamic_input_is_copied(prog):
    x = rand(np.random.default_rng(5), 6, 8)
    view = x[::2, ::3]
    y = prog.scaled(view, 2.0)
    np.testing.assert_allclose(y, 2 * view, rtol=1e-6)
    with pytest.raises(ValueError, match="must be C-contiguous"):
        prog.axpy(np.zeros(8, np.float32)[::2], np.zeros(4, np.float32), 1.0)


def test_donated_dynamic_argument_must_not_overlap(prog):
    buf = np.zeros(10, np.float32)
    with pytest.raises(ValueError, match="must not share memory with argument #1"):
        prog.axpy(buf[:6], buf[4:], 1.0)
    # Disjoint pieces of one buffer are fine.
    r = prog.axpy(buf[:5], buf[5:] + 1, 1.0)
    np.testing.assert_array_equal(r, np.ones(5, np.float32))


def test_bounds_checks_use_the_dynamic_sizes(prog):
    x = np.arange(10, dtype=np.float32)
    np.testing.assert_array_equal(prog.window(x, 2, 5), x[2:7])
    np.testing.assert_array_equal(prog.window(x[:3].copy(), 0, 3), x[:3])
    with pytest.raises(IndexError, match=r"slice offset 8, size 5, stride 1 is out of bounds "
                                         r"for dimension 0 of size 10"):
        prog.window(x, 8, 5)
    with pytest.raises(IndexError, match="of size 4"):
        prog.window(x[:4].copy(), 1, 4)
    m = np.arange(12, dtype=np.int32).reshape(3, 4)
    assert prog.at(m, 2, 3) == 11
    with pytest.raises(IndexError, match="index 3 is out of bounds for dimension 0 of size 3"):
        prog.at(m, 3, 0)
    with pytest.raises(IndexError, match="index 4 is out of bounds for dimension 1 of size 4"):
        prog.at(m, 0, 4)


@settings(max_examples=40, deadline=None)
@given(rows=st.integers(0, 40), cols=st.integers(0, 40), seed=st.integers(0, 2**31 - 1),
       scale=st.floats(-4, 4, width=32))
def test_property_random_dynamic_sizes(prog, rows, cols, seed, scale):
    rng = np.random.default_rng(seed)
    x = rand(rng, rows, cols)
    x0 = x.copy()
    np.testing.assert_allclose(prog.scaled(x, scale), np.float32(scale) * x0, rtol=1e-6)
    np.testing.assert_array_equal(x, x0)
    donated = x.copy()
    out = prog.scaled_donated(donated, scale)
    assert out is donated
    np.testing.assert_allclose(out, np.float32(scale) * x0, rtol=1e-6)
    v, w = rand(rng, rows * cols), rand(rng, rows * cols)
    v0, w0 = v.copy(), w.copy()
    r = prog.axpy(v, w, scale)
    assert r is v
    np.testing.assert_allclose(r, v0 + np.float32(scale) * w0, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(w, w0)
    xr = rand(rng, rows, 8)
    sq, total = prog.square_rowsum(xr)
    np.testing.assert_allclose(sq, xr * xr, rtol=1e-6)
    np.testing.assert_allclose(total, xr.sum(axis=0), rtol=1e-4, atol=1e-4)


def test_inplace_off_gives_the_same_answers():
    off = tdf.compile(SOURCE, inplace=False)
    on = tdf.compile(SOURCE)
    rng = np.random.default_rng(6)
    for shape in ((2, 3), (9, 1)):
        x = rand(rng, *shape)
        np.testing.assert_array_equal(off.scaled_donated(x.copy(), 1.5),
                                      on.scaled_donated(x.copy(), 1.5))


ROWS = f"""
// Row-wise softmax over a dynamic number of rows and columns.
func.func @softmax(%x: tensor<?x?xf32>) -> tensor<?x?xf32> {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = tensor.dim %x, %c0 : tensor<?x?xf32>
  %m = tensor.dim %x, %c1 : tensor<?x?xf32>
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  %r0 = tensor.empty(%n) : tensor<?xf32>
  %rmax0 = linalg.fill ins(%ninf : f32) outs(%r0 : tensor<?xf32>) -> tensor<?xf32>
  %rmax = linalg.generic {{indexing_maps = [{ID2}, affine_map<(d0, d1) -> (d0)>],
                           iterator_types = ["parallel", "reduction"]}}
      ins(%x : tensor<?x?xf32>) outs(%rmax0 : tensor<?xf32>) {{
  ^bb0(%a: f32, %acc: f32):
    %v = arith.maximumf %a, %acc : f32
    linalg.yield %v : f32
  }} -> tensor<?xf32>
  %e0 = tensor.empty(%n, %m) : tensor<?x?xf32>
  %e = linalg.generic {{indexing_maps = [{ID2}, affine_map<(d0, d1) -> (d0)>, {ID2}],
                        iterator_types = ["parallel", "parallel"]}}
      ins(%x, %rmax : tensor<?x?xf32>, tensor<?xf32>) outs(%e0 : tensor<?x?xf32>) {{
  ^bb0(%a: f32, %mx: f32, %o: f32):
    %d = arith.subf %a, %mx : f32
    %v = math.exp %d : f32
    linalg.yield %v : f32
  }} -> tensor<?x?xf32>
  %s1 = tensor.empty(%n) : tensor<?xf32>
  %s0 = linalg.fill ins(%zero : f32) outs(%s1 : tensor<?xf32>) -> tensor<?xf32>
  %s = linalg.generic {{indexing_maps = [{ID2}, affine_map<(d0, d1) -> (d0)>],
                        iterator_types = ["parallel", "reduction"]}}
      ins(%e : tensor<?x?xf32>) outs(%s0 : tensor<?xf32>) {{
  ^bb0(%a: f32, %acc: f32):
    %v = arith.addf %a, %acc : f32
    linalg.yield %v : f32
  }} -> tensor<?xf32>
  %y = linalg.generic {{indexing_maps = [affine_map<(d0, d1) -> (d0)>, {ID2}],
                        iterator_types = ["parallel", "parallel"]}}
      ins(%s : tensor<?xf32>) outs(%e : tensor<?x?xf32>) {{
  ^bb0(%t: f32, %a: f32):
    %v = arith.divf %a, %t : f32
    linalg.yield %v : f32
  }} -> tensor<?x?xf32>
  return %y : tensor<?x?xf32>
}}
"""


def test_dynamic_softmax_matches_jax():
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    prog = tdf.compile(ROWS)
    ref = jax.jit(lambda x: jax.nn.softmax(x, axis=1))
    rng = np.random.default_rng(7)
    for shape in ((1, 1), (4, 7), (13, 64), (3, 1)):
        x = rand(rng, *shape) * 4
        x0 = x.copy()
        got = prog.softmax(x)
        assert got.shape == shape
        np.testing.assert_allclose(got, np.asarray(ref(jnp.asarray(x))), rtol=2e-6, atol=1e-7)
        np.testing.assert_array_equal(x, x0)
    # The exp result is reused in place by the division (a fresh, dead
    # temporary of provably the same sizes).
    assert prog.report().bytes_copied("softmax") == 0


C_KERNEL = r"""
#include <stdint.h>
typedef struct { float *allocated, *aligned; int64_t offset, sizes[1], strides[1]; } M1;
/* out[i] = a[i] + b[i] over the sizes of a (dynamic memrefs). */
void _mlir_ciface_vadd(M1 *a, M1 *b, M1 *out) {
  for (int64_t i = 0; i < a->sizes[0]; ++i)
    out->aligned[out->offset + i * out->strides[0]] =
        a->aligned[a->offset + i * a->strides[0]] + b->aligned[b->offset + i * b->strides[0]];
}
/* In place: x[i] *= 2 (x's own size). */
void _mlir_ciface_vdouble(M1 *x) {
  for (int64_t i = 0; i < x->sizes[0]; ++i)
    x->aligned[x->offset + i * x->strides[0]] *= 2;
}
"""

DECLARED = """
func.func private @vadd(memref<?xf32>, memref<?xf32>, memref<?xf32>) attributes {llvm.emit_c_interface}
func.func private @vdouble(memref<?xf32>) attributes {llvm.emit_c_interface}
func.func @f(%x: tensor<?xf32>, %y: tensor<?xf32>) -> tensor<?xf32> {
  %s = tdf.call @vadd(%x, %y) : (tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32>
  %d = tdf.call_inplace @vdouble(%s) inplace [0] : (tensor<?xf32>) -> tensor<?xf32>
  return %d : tensor<?xf32>
}
func.func @g(%x: tensor<5xf32> {tdf.donate}) -> tensor<5xf32> {
  %d = tdf.call_inplace @vdouble(%x) inplace [0] : (tensor<5xf32>) -> tensor<5xf32>
  return %d : tensor<5xf32>
}
"""


def test_declaration_only_kernels_with_dynamic_memrefs(shared_lib):
    lib = shared_lib("dynkernels", C_KERNEL)
    prog = tdf.compile(DECLARED, shared_libs=[lib])
    rng = np.random.default_rng(8)
    for n in (0, 1, 9, 100):
        x, y = rand(rng, n), rand(rng, n)
        x0, y0 = x.copy(), y.copy()
        np.testing.assert_allclose(prog.f(x, y), 2 * (x0 + y0), rtol=1e-6)
        np.testing.assert_array_equal(x, x0)
        np.testing.assert_array_equal(y, y0)
    z = np.arange(5, dtype=np.float32)
    assert prog.g(z) is z
    np.testing.assert_array_equal(z, 2 * np.arange(5, dtype=np.float32))
    assert prog.report().bytes_copied() == 0


def test_gpu_path_refuses_dynamic_shapes():
    from tdf.gpu import GPUCompileError

    with pytest.raises(GPUCompileError, match=r"<input>:\d+:\d+: @axpy argument #0 has the dynamic "
                                              r"shape tensor<\?xf32>: the GPU path supports static "
                                              r"shapes only"):
        tdf.compile(SOURCE, target="nvvm")


def test_verifier_names_missing_shape_operand():
    bad = """
func.func private @k(index, memref<?xf32>)
func.func @f(%n: index) -> tensor<?xf32> {
  %r = tdf.call @k(%n) : (index) -> tensor<?xf32>
  return %r : tensor<?xf32>
}
"""
    with pytest.raises(tdf.TDFError, match=r"<input>:4:8: .*result #0 gets fresh storage of dynamic "
                                           r"shape 'tensor<\?xf32>', but no tensor operand has rank 1"):
        tdf.compile(bad)


MISMATCH = f"""
func.func private @vadd(%a: memref<?xf32>, %b: memref<?xf32>, %out: memref<?xf32>) {{
  linalg.add ins(%a, %b : memref<?xf32>, memref<?xf32>) outs(%out : memref<?xf32>)
  return
}}
func.func @add_into(%x: tensor<?xf32> {{tdf.donate}}, %y: tensor<?xf32>) -> tensor<?xf32> {{
  %r = linalg.generic {{indexing_maps = [{ID1}, {ID1}], iterator_types = ["parallel"]}}
      ins(%y : tensor<?xf32>) outs(%x : tensor<?xf32>) {{
  ^bb0(%a: f32, %b: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  }} -> tensor<?xf32>
  return %r : tensor<?xf32>
}}
func.func @call_add(%x: tensor<?xf32>, %y: tensor<?xf32>) -> tensor<?xf32> {{
  %r = tdf.call @vadd(%x, %y) : (tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32>
  return %r : tensor<?xf32>
}}
"""


def test_mismatched_dynamic_sizes_of_one_loop_are_refused():
    """Two dynamic operands of one element-wise op with different sizes at
    run time: a ValueError before anything is read or written out of bounds
    (without the check the loop ran over one size and read past the other)."""
    prog = tdf.compile(MISMATCH)
    x, y = np.ones(8, np.float32), np.arange(3, dtype=np.float32)
    x0, y0 = x.copy(), y.copy()
    with pytest.raises(ValueError, match=r"@add_into: linalg.generic at <input>:\d+:\d+: dimension 0 "
                                         r"of operand #1 has size 8, but the loop over it has size 3 "
                                         r"\(from operand #0\)"):
        prog.add_into(x, y)
    np.testing.assert_array_equal(x, x0)
    np.testing.assert_array_equal(y, y0)
    # Inside a kernel body on dynamic memrefs.
    with pytest.raises(ValueError, match=r"@call_add: linalg.add at <input>:\d+:\d+ \(in @vadd\): "
                                         r"dimension 0 of operand #1 has size 3, but the loop over it "
                                         r"has size 8"):
        prog.call_add(x, y)
    # Equal sizes: the right answers.
    np.testing.assert_array_equal(prog.call_add(x, x), 2 * x0)
    r = prog.add_into(x, np.full(8, 2, np.float32))
    assert r is x
    np.testing.assert_array_equal(r, np.full(8, 3, np.float32))


def test_cast_to_a_static_size_is_checked():
    prog = tdf.compile("""
func.func @f(%y: tensor<?xf32>) -> tensor<4xf32> {
  %c = tensor.cast %y : tensor<?xf32> to tensor<4xf32>
  %e = tensor.empty() : tensor<4xf32>
  %r = linalg.add ins(%c, %c : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}
""")
    np.testing.assert_array_equal(prog.f(np.arange(4, dtype=np.float32)), [0, 2, 4, 6])
    with pytest.raises(ValueError, match=r"@f: tensor.cast at <input>:3:8: dimension 0 has size 3, "
                                         r"but the cast's result type needs 4"):
        prog.f(np.arange(3, dtype=np.float32))
