"""Runtime behaviour of ``tdf.compile`` on the CPU: donation without copies,
read-only inputs, owned results (no leak), argument errors, strict mode,
the report, shared libraries for declaration-only kernels, opaque calls."""

from __future__ import annotations

import gc
import sys
import types

import numpy as np
import pytest
from conftest import INPLACE_MODES, rss_bytes

import tdf
from tdf.compiler import CompileError, StrictModeError

KERNELS = """
func.func private @add(%a: memref<16xf32>, %b: memref<16xf32>, %out: memref<16xf32>)
    attributes {tdf.elementwise} {
  linalg.add ins(%a, %b : memref<16xf32>, memref<16xf32>) outs(%out : memref<16xf32>)
  return
}
func.func private @add_ip(%a: memref<16xf32>, %b: memref<16xf32>) attributes {tdf.elementwise} {
  linalg.add ins(%a, %b : memref<16xf32>, memref<16xf32>) outs(%a : memref<16xf32>)
  return
}
"""

STEP = """
func.func @step(%cache: tensor<8x4xf32> {tdf.donate}, %row: tensor<1x4xf32>, %pos: index)
    -> tensor<8x4xf32> {
  %new = tensor.insert_slice %row into %cache[%pos, 0] [1, 4] [1, 1]
      : tensor<1x4xf32> into tensor<8x4xf32>
  return %new : tensor<8x4xf32>
}
func.func @step_readonly(%cache: tensor<8x4xf32>, %row: tensor<1x4xf32>, %pos: index)
    -> tensor<8x4xf32> {
  %new = tensor.insert_slice %row into %cache[%pos, 0] [1, 4] [1, 1]
      : tensor<1x4xf32> into tensor<8x4xf32>
  return %new : tensor<8x4xf32>
}
"""

ADD = KERNELS + """
func.func @add2(%x: tensor<16xf32> {tdf.donate}, %y: tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>) {
  %r = tdf.call_inplace @add_ip(%x, %y) inplace [0] : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  %s = tdf.call @add(%r, %y) : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  return %r, %s : tensor<16xf32>, tensor<16xf32>
}
"""

# %x is still returned after the in-place call: One-Shot must copy it first.
LIVE_AFTER = KERNELS + """
func.func @negative_operand_live_after(%x: tensor<16xf32> {tdf.donate}, %y: tensor<16xf32>)
    -> (tensor<16xf32>, tensor<16xf32>) {
  %r = tdf.call_inplace @add_ip(%x, %y) inplace [0] : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  return %r, %x : tensor<16xf32>, tensor<16xf32>
}
"""

BIG = """
func.func private @double(%a: memref<128x128xf32>, %out: memref<128x128xf32>) {
  linalg.add ins(%a, %a : memref<128x128xf32>, memref<128x128xf32>) outs(%out : memref<128x128xf32>)
  return
}
func.func @fresh(%x: tensor<128x128xf32>) -> tensor<128x128xf32> {
  %r = tdf.call @double(%x) : (tensor<128x128xf32>) -> tensor<128x128xf32>
  return %r : tensor<128x128xf32>
}
"""


def f32(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("inplace", INPLACE_MODES)
def test_donated_cache_updated_in_place(inplace):
    prog = tdf.compile(STEP, inplace=inplace)
    cache, row = f32(8, 4), f32(1, 4, seed=1)
    expected = cache.copy()
    expected[5] = row[0]
    row_before = row.copy()
    out = prog.step(cache, row, 5)
    assert out is cache, "the updated donated cache must be the caller's array"
    np.testing.assert_array_equal(cache, expected)
    np.testing.assert_array_equal(row, row_before)
    report = prog.report()
    assert report.bytes_allocated("step") == 0
    assert report.returned_args["step"] == [0]


@pytest.mark.parametrize("inplace", INPLACE_MODES)
def test_negative_readonly_argument_never_written(inplace):
    prog = tdf.compile(STEP, inplace=inplace)
    cache, row = f32(8, 4), f32(1, 4, seed=1)
    before = cache.tobytes()
    out = prog.step_readonly(cache, row, 2)
    assert cache.tobytes() == before, "a non-donated argument was written"
    assert not np.shares_memory(out, cache)
    expected = cache.copy()
    expected[2] = row[0]
    np.testing.assert_array_equal(out, expected)
    # The copy of the read-only cache is in the report, with its reason.
    copies = [d for d in prog.report().decisions if d.function == "step_readonly" and not d.inplace]
    assert copies and "non-donated argument #0" in copies[0].reason
    assert prog.report().bytes_allocated("step_readonly") == 8 * 4 * 4


@pytest.mark.parametrize("inplace", INPLACE_MODES)
def test_mixed_inplace_and_fresh_results(inplace):
    prog = tdf.compile(ADD, inplace=inplace)
    x, y = f32(16), f32(16, seed=2)
    x0, y0 = x.copy(), y.copy()
    r, s = prog.add2(x, y)
    assert r is x
    np.testing.assert_allclose(r, x0 + y0, rtol=1e-6)
    np.testing.assert_allclose(s, x0 + 2 * y0, rtol=1e-6)
    assert not np.shares_memory(s, x) and not np.shares_memory(s, y)
    assert y.tobytes() == y0.tobytes()
    assert s.flags.owndata or s.base is not None
    assert s.flags.writeable


def test_results_own_memory_no_leak():
    prog = tdf.compile(BIG, inplace=False)
    x = f32(128, 128)
    expected = 2 * x
    for _ in range(200):  # warm up allocator and caches
        prog.fresh(x)
    gc.collect()
    start = rss_bytes()
    for _ in range(10_000):
        out = prog.fresh(x)
    del out
    gc.collect()
    grown = rss_bytes() - start
    # 10,000 leaked 64 KiB results would be 640 MiB.
    assert grown < 16 * 2**20, f"RSS grew by {grown / 2**20:.1f} MiB over 10,000 calls"
    np.testing.assert_array_equal(prog.fresh(x), expected)


def test_result_survives_program_and_other_calls():
    prog = tdf.compile(BIG, inplace=False)
    x = f32(128, 128)
    first = prog.fresh(x)
    second = prog.fresh(x + 1)
    assert not np.shares_memory(first, second)
    np.testing.assert_array_equal(first, 2 * x)
    del prog
    gc.collect()
    np.testing.assert_array_equal(second, 2 * (x + 1))


def test_argument_errors():
    prog = tdf.compile(STEP, inplace=False)
    cache, row = f32(8, 4), f32(1, 4)
    with pytest.raises(TypeError, match=r"@step takes 3 argument\(s\), got 2"):
        prog.step(cache, row)
    with pytest.raises(TypeError, match=r"argument #0 .*expected dtype float32, got float64"):
        prog.step(cache.astype(np.float64), row, 0)
    with pytest.raises(ValueError, match=r"argument #1 .*expected shape \(1, 4\), got \(4,\)"):
        prog.step(cache, row[0], 0)
    with pytest.raises(TypeError, match=r"argument #0 .*expected a numpy array, got list"):
        prog.step(cache.tolist(), row, 0)
    with pytest.raises(TypeError, match=r"argument #2 .*expected an integer, got float"):
        prog.step(cache, row, 1.5)
    with pytest.raises(ValueError, match=r"argument #2 .*does not fit in index"):
        prog.step(cache, row, 2**70)
    with pytest.raises(ValueError, match="donated array must be C-contiguous"):
        prog.step(np.asfortranarray(cache), row, 0)
    frozen = cache.copy()
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="donated array must be writeable"):
        prog.step(frozen, row, 0)
    # A donated cache whose memory is also another argument would be read
    # after being written.
    with pytest.raises(ValueError, match="must not share memory with argument #1"):
        prog.step(cache, cache[:1], 0)
    # Nothing was written by the failed calls.
    np.testing.assert_array_equal(cache, f32(8, 4))


def test_strided_readonly_input_is_made_contiguous():
    prog = tdf.compile(STEP, inplace=False)
    big = f32(8, 8)
    cache = big[:, ::2]  # non-contiguous view, not donated
    row = f32(1, 4, seed=3)
    before = big.copy()
    out = prog.step_readonly(cache, row, 7)
    expected = np.ascontiguousarray(cache)
    expected[7] = row[0]
    np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(big, before)


def test_strict_rejects_copy_of_inplace_operand():
    with pytest.raises(StrictModeError, match=r"tdf.call_inplace operand #0 .*still read"):
        tdf.compile(LIVE_AFTER, inplace=False, strict=True)


def test_non_strict_copies_live_inplace_operand_and_reports_it():
    prog = tdf.compile(LIVE_AFTER, inplace=False, strict=False)
    x, y = f32(16), f32(16, seed=4)
    x0 = x.copy()
    r, x_out = prog.negative_operand_live_after(x, y)
    np.testing.assert_allclose(r, x0 + y, rtol=1e-6)
    np.testing.assert_array_equal(x_out, x0)
    assert not np.shares_memory(r, x_out)
    text = str(prog.report())
    assert "COPY" in text and "tdf.call_inplace" in text


def test_strict_accepts_program_without_forced_copies():
    prog = tdf.compile(ADD, inplace=False, strict=True)
    decisions = [d for d in prog.report().decisions if d.op == "tdf.call_inplace"]
    assert decisions and all(d.inplace for d in decisions)


def test_report_counts_bytes():
    prog = tdf.compile(ADD, inplace=False)
    report = prog.report()
    assert report.bytes_allocated("add2") == 16 * 4  # only the fresh result
    text = str(report)
    assert "@add2: 64 B in 1 allocation(s)" in text
    assert "in-place decisions:" in text and "copies that remain:" in text


def test_bad_target_and_options():
    with pytest.raises(ValueError, match="unknown target 'tpu'"):
        tdf.compile(ADD, target="tpu")
    with pytest.raises(ValueError, match="opt_level"):
        tdf.compile(ADD, opt_level=7)
    with pytest.raises(tdf.ParseError, match=r"prog.mlir:1:"):
        tdf.compile("func.func @f(", filename="prog.mlir")
    with pytest.raises(FileNotFoundError):
        tdf.compile(ADD, shared_libs=["/nonexistent/libk.so"])


def test_nvvm_target_dispatches_to_gpu_module(monkeypatch):
    calls = []
    fake = types.ModuleType("tdf.gpu")
    fake.compile_nvvm = lambda m, chip, inplace, strict: calls.append((chip, inplace, strict)) or "gpu"
    monkeypatch.setitem(sys.modules, "tdf.gpu", fake)
    monkeypatch.setattr(tdf, "gpu", fake, raising=False)
    assert tdf.compile(ADD, target="nvvm", chip="sm_90", inplace=False) == "gpu"
    assert calls == [("sm_90", False, False)]


def test_module_input_is_not_modified():
    ctx = tdf.Context()
    module = tdf.parse(STEP, ctx)
    before = str(module)
    prog = tdf.compile(module, inplace=False)
    assert str(module) == before
    cache = f32(8, 4)
    assert prog.step(cache, f32(1, 4), 0) is cache


C_KERNELS = r"""
#include <stdint.h>
typedef struct { float *allocated, *aligned; int64_t offset, sizes[1], strides[1]; } M1;

void _mlir_ciface_scale2(M1 *x, M1 *out) {
  for (int64_t i = 0; i < x->sizes[0]; ++i)
    out->aligned[out->offset + i * out->strides[0]] = 2.0f * x->aligned[x->offset + i * x->strides[0]];
}

/* Opaque: returns its argument (the result aliases the operand). */
void _mlir_ciface_ident(M1 *result, M1 *x) { *result = *x; }

/* Opaque: returns a buffer it keeps (static storage, never to be freed). */
static float kept[16];
static int64_t calls;
void _mlir_ciface_retained(M1 *result, M1 *x) {
  ++calls;
  for (int i = 0; i < 16; ++i) kept[i] = x->aligned[x->offset + i] + (float)calls;
  result->allocated = kept; result->aligned = kept; result->offset = 0;
  result->sizes[0] = 16; result->strides[0] = 1;
}
"""

EXTERNAL = """
func.func private @scale2(memref<16xf32>, memref<16xf32>)
func.func @f(%x: tensor<16xf32>) -> tensor<16xf32> {
  %r = tdf.call @scale2(%x) : (tensor<16xf32>) -> tensor<16xf32>
  return %r : tensor<16xf32>
}
"""


def test_declaration_kernel_from_shared_lib(shared_lib):
    lib = shared_lib("kernels", C_KERNELS)
    prog = tdf.compile(EXTERNAL, inplace=False, shared_libs=[lib])
    x = f32(16)
    np.testing.assert_array_equal(prog.f(x), 2 * x)


def test_negative_declaration_kernel_without_library():
    missing = EXTERNAL.replace("scale2", "scale_nowhere")
    with pytest.raises(CompileError, match=r"kernel @scale_nowhere has no body .*_mlir_ciface_scale_nowhere"):
        tdf.compile(missing, inplace=False)


OPAQUE = KERNELS + """
func.func private @ident(memref<16xf32>) -> memref<16xf32>
func.func private @retained(memref<16xf32>) -> memref<16xf32>
func.func @through_ident(%x: tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>) {
  %a = tdf.call_opaque @ident(%x) : (tensor<16xf32>) -> tensor<16xf32>
  %r = tdf.call @add(%a, %a) : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  return %r, %a : tensor<16xf32>, tensor<16xf32>
}
func.func @through_retained(%x: tensor<16xf32> {tdf.donate}, %y: tensor<16xf32>)
    -> (tensor<16xf32>, tensor<16xf32>) {
  %a = tdf.call_opaque @retained(%y) : (tensor<16xf32>) -> tensor<16xf32>
  %r = tdf.call_inplace @add_ip(%a, %x) inplace [0] : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  return %r, %a : tensor<16xf32>, tensor<16xf32>
}
"""


@pytest.mark.parametrize("inplace", INPLACE_MODES)
def test_opaque_results_never_freed_or_written(shared_lib, inplace):
    lib = shared_lib("opaque", C_KERNELS)
    prog = tdf.compile(OPAQUE, inplace=inplace, shared_libs=[lib])
    x = f32(16)
    x0 = x.copy()
    r, a = prog.through_ident(x)
    np.testing.assert_array_equal(r, 2 * x0)
    np.testing.assert_array_equal(a, x0)
    np.testing.assert_array_equal(x, x0)
    assert not np.shares_memory(a, x)
    # @retained returns static storage: freeing it would crash; writing the
    # in-place add into it would change the second result.
    # (The JIT resolves @retained in the first library loaded into the
    # process, so its call counter may already be past 0.)
    y = f32(16, seed=5)
    outs = []
    first = None
    for n in range(3):
        donated = f32(16, seed=6)
        r, a = prog.through_retained(donated, y)
        if first is None:
            first = round(float(a[0] - y[0]))
            assert first >= 1
        np.testing.assert_allclose(a, y + first + n, rtol=1e-5)
        np.testing.assert_allclose(r, y + first + n + f32(16, seed=6), rtol=1e-5)
        outs.append(a)
    # Earlier results are snapshots, not the callee's buffer.
    np.testing.assert_allclose(outs[0], y + first, rtol=1e-5)
    assert prog.report().bytes_allocated("through_retained") >= 16 * 4


def test_compile_releases_memory():
    """A compiled program's context and JIT code go away with it (a leak of
    the MLIR context costs ~2 MiB per compile)."""
    for _ in range(5):
        tdf.compile(ADD, inplace=False)
    gc.collect()
    start = rss_bytes()
    for _ in range(40):
        prog = tdf.compile(ADD, inplace=False)
        prog.add2(f32(16), f32(16))
    del prog
    gc.collect()
    grown = rss_bytes() - start
    assert grown < 30 * 2**20, f"RSS grew by {grown / 2**20:.1f} MiB over 40 compiles"


# ------------------------------------------- copy-before-write and counting

CHAIN = KERNELS + """
func.func @chain(%x: tensor<16xf32>, %y: tensor<16xf32>) -> tensor<16xf32> {
  %t = tdf.call @add(%x, %y) : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  %r = tdf.call @add(%t, %y) : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  return %r : tensor<16xf32>
}
"""


def _whole_copies(report, function):
    """Bytes of copies that are not the update itself (a copy into a slice)."""
    return sum(c.nbytes or 0 for c in report.copies if c.function == function and not c.into_view)


def test_copy_before_write_copies_where_inplace_does_not():
    normal = tdf.compile(STEP)
    base = tdf.compile(STEP, copy_before_write=True)
    cache, row = f32(8, 4), f32(1, 4, seed=1)
    want = cache.copy()
    want[5:6] = row
    # The normal build updates the donated cache in place: no allocation, no
    # copy besides the row itself.
    assert normal.report().bytes_allocated("step") == 0
    assert _whole_copies(normal.report(), "step") == 0
    # The baseline copies the whole cache first and never writes the argument.
    rep = base.report()
    assert rep.copy_before_write and not rep.inplace
    assert rep.bytes_allocated("step") == 8 * 4 * 4
    assert _whole_copies(rep, "step") == 8 * 4 * 4
    assert "copy-before-write baseline" in str(rep)
    assert all(not d.inplace and "copy_before_write" in d.reason for d in rep.decisions)
    kept = cache.copy()
    out = base.step(cache, row, 5)
    assert out is not cache
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(cache, kept)
    assert normal.step(cache, row, 5) is cache
    np.testing.assert_array_equal(cache, want)


def test_copy_before_write_chain_allocates_more_and_matches():
    x, y = f32(16), f32(16, seed=1)
    on = tdf.compile(CHAIN, inplace=True)
    base = tdf.compile(CHAIN, inplace=True, copy_before_write=True)
    assert base.report().calls_made_inplace == 0  # the rewrite does not run
    assert base.report().bytes_allocated("chain") > on.report().bytes_allocated("chain")
    np.testing.assert_allclose(base.chain(x, y), x + 2 * y, rtol=1e-6)
    np.testing.assert_allclose(on.chain(x, y), x + 2 * y, rtol=1e-6)


def test_count_allocations_donated_row_update_allocates_nothing():
    prog = tdf.compile(STEP, count_allocations=True)
    assert prog.counts_allocations
    cache = f32(8, 4)
    for pos in range(4):
        assert prog.step(cache, f32(1, 4, seed=pos), pos) is cache
    stats = prog.allocation_stats()
    assert (stats.calls, stats.bytes, stats.live_bytes, stats.peak_bytes) == (0, 0, 0, 0)


def test_negative_count_allocations_copies_when_not_donated_or_baseline():
    cache_bytes = 8 * 4 * 4
    prog = tdf.compile(STEP, count_allocations=True)
    cache = f32(8, 4)
    out = prog.step_readonly(cache, f32(1, 4), 2)
    stats = prog.allocation_stats()
    assert stats.calls >= 1 and stats.bytes >= cache_bytes
    assert stats.live_bytes >= cache_bytes  # owned by `out`
    del out
    gc.collect()
    assert prog.allocation_stats().live_bytes == 0
    assert prog.allocation_stats().frees == stats.calls

    base = tdf.compile(STEP, copy_before_write=True, count_allocations=True)
    _out = base.step(cache, f32(1, 4), 2)  # held: its bytes stay allocated
    assert base.allocation_stats().bytes >= cache_bytes
    assert base.allocation_stats().peak_bytes >= cache_bytes


def test_count_allocations_reset_and_intermediates():
    prog = tdf.compile(CHAIN, inplace=False, count_allocations=True)
    x, y = f32(16), f32(16, seed=1)
    r = prog.chain(x, y)
    np.testing.assert_allclose(r, x + 2 * y, rtol=1e-6)
    stats = prog.allocation_stats()
    assert stats.calls == 2 and stats.bytes == 2 * 16 * 4  # %t and %r
    assert stats.frees == 1 and stats.live_bytes == 16 * 4  # %t freed, %r is `r`
    assert stats.peak_bytes == 2 * 16 * 4
    prog.reset_allocation_stats()
    stats = prog.allocation_stats()
    assert (stats.calls, stats.frees, stats.bytes) == (0, 0, 0)
    assert stats.live_bytes == stats.peak_bytes == 16 * 4  # `r` still alive
    del r
    gc.collect()
    assert prog.allocation_stats().live_bytes == 0
    prog.chain(x, y)
    assert prog.allocation_stats().bytes == 2 * 16 * 4


def test_negative_no_counting_unless_asked():
    prog = tdf.compile(STEP)
    assert not prog.counts_allocations
    with pytest.raises(RuntimeError, match="count_allocations=True"):
        prog.allocation_stats()
    with pytest.raises(RuntimeError, match="count_allocations=True"):
        prog.reset_allocation_stats()
    # The normal build calls malloc/free directly: no counting hooks.
    assert "_mlir_memref_to_llvm_" not in prog.llvm_ir
    assert "_mlir_memref_to_llvm_" in tdf.compile(STEP, count_allocations=True).llvm_ir


def test_copy_before_write_and_counting_option_errors():
    with pytest.raises(ValueError, match="strict=True cannot be combined"):
        tdf.compile(STEP, strict=True, copy_before_write=True)
    with pytest.raises(TypeError, match="copy_before_write must be a bool"):
        tdf.compile(STEP, copy_before_write="yes")
    with pytest.raises(TypeError, match="count_allocations must be a bool"):
        tdf.compile(STEP, count_allocations=1)
    with pytest.raises(ValueError, match="CPU-only"):
        tdf.compile(STEP, target="nvvm", count_allocations=True)
