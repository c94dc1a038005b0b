"""In-place coverage cases of ``tdf-insert-inplace`` (issue 13), run by the JIT
with the rewrite on and off and compared with numpy.

*Read-modify-write of a slice*: ``%r = extract_slice %A[...]``, ``%z = tdf.call
@k(%r)`` (a lone call: it stays a call), ``%c = insert_slice %z into %A[...]``
at the same place. With ``%A`` donated the call runs in place on the slice
and its in-place variant takes the slice's strided layout
(``_slice_layout_variant``), so nothing is allocated or copied. Random shapes,
slice kinds (rank-reduced or not, stepped, a block of columns, one column,
dynamic offsets), kernels of one or two inputs, donated or not: the answers
agree with numpy with the rewrite on and off, a non-donated input is left
unchanged, and ``strict=True`` (One-Shot agreement) holds.
"""

from __future__ import annotations

import numpy as np
import pytest

import tdf

F = "f32"


def _shape(dims) -> str:
    return "x".join(str(d) for d in dims)


def _kernel(name: str, dims, binary: bool, payload: str) -> str:
    """A destination-passing kernel over memrefs of shape ``dims``."""
    rank = len(dims)
    memref = f"memref<{_shape(dims)}x{F}>"
    index = ", ".join(f"d{k}" for k in range(rank))
    ident = f"affine_map<({index}) -> ({index})>"
    ins = [f"%a: {memref}"] + ([f"%b: {memref}"] if binary else [])
    args = ", ".join(ins + [f"%out: {memref}"])
    maps = ", ".join([ident] * (3 if binary else 2))
    ins_ops = "%a, %b" if binary else "%a"
    ins_types = ", ".join([memref] * (2 if binary else 1))
    block = "%x: f32, %y: f32, %o: f32" if binary else "%x: f32, %o: f32"
    iters = ", ".join(['"parallel"'] * rank)
    return f"""
func.func private @{name}({args}) {{
  linalg.generic {{indexing_maps = [{maps}], iterator_types = [{iters}]}}
      ins({ins_ops} : {ins_types}) outs(%out : {memref}) {{
  ^bb0({block}):
    {payload}
    linalg.yield %r : f32
  }}
  return
}}"""


KERNELS = {
    "inc": (False, "%c = arith.constant 1.5 : f32\n    %r = arith.addf %x, %c : f32",
            lambda x, y: x + np.float32(1.5)),
    "dbl": (False, "%r = arith.addf %x, %x : f32", lambda x, y: x + x),
    "addb": (True, "%r = arith.addf %x, %y : f32", lambda x, y: x + y),
    "mulb": (True, "%r = arith.mulf %x, %y : f32", lambda x, y: x * y),
}


def _slice(rng, rows, cols):
    """A random slice of a ``rows x cols`` tensor: ``(offsets, sizes, steps,
    result shape, numpy index)``."""
    kind = str(rng.choice(["row", "row2d", "stepped", "block", "column"]))
    if kind in ("row", "row2d"):
        i = int(rng.integers(0, rows))
        shape = [cols] if kind == "row" else [1, cols]
        return [i, 0], [1, cols], [1, 1], shape, (slice(i, i + 1), slice(0, cols))
    if kind == "stepped":
        step = int(rng.integers(2, 4))
        width = int(rng.integers(1, (cols - 1) // step + 2))
        c0 = int(rng.integers(0, cols - (width - 1) * step))
        i = int(rng.integers(0, rows))
        return ([i, c0], [1, width], [1, step], [width],
                (slice(i, i + 1), slice(c0, c0 + (width - 1) * step + 1, step)))
    if kind == "block":
        h, w = int(rng.integers(1, rows + 1)), int(rng.integers(1, cols + 1))
        i, j = int(rng.integers(0, rows - h + 1)), int(rng.integers(0, cols - w + 1))
        return [i, j], [h, w], [1, 1], [h, w], (slice(i, i + h), slice(j, j + w))
    j = int(rng.integers(0, cols))
    return [0, j], [rows, 1], [1, 1], [rows], (slice(0, rows), slice(j, j + 1))


def _rmw_program(rng):
    rows, cols = int(rng.integers(2, 7)), int(rng.integers(3, 10))
    offsets, sizes, steps, shape, where = _slice(rng, rows, cols)
    name = str(rng.choice(list(KERNELS)))
    binary, payload, fn = KERNELS[name]
    donate = bool(rng.integers(0, 3))  # donated two times in three
    dynamic = bool(rng.integers(0, 3) == 0)
    A = f"tensor<{rows}x{cols}x{F}>"
    S = f"tensor<{_shape(shape)}x{F}>"
    args = [f"%A: {A}" + (" {tdf.donate}" if donate else "")]
    if binary:
        args.append(f"%B: {S}")
    if dynamic:
        args.append("%i: index")
        offs = f"[%i, {offsets[1]}]"
    else:
        offs = f"[{offsets[0]}, {offsets[1]}]"
    geometry = f"{offs} [{sizes[0]}, {sizes[1]}] [{steps[0]}, {steps[1]}]"
    call_args = "%r, %B" if binary else "%r"
    call_types = f"{S}, {S}" if binary else S
    text = _kernel(name, shape, binary, payload) + f"""
func.func @f({", ".join(args)}) -> {A} {{
  %r = tensor.extract_slice %A{geometry} : {A} to {S}
  %z = tdf.call @{name}({call_args}) : ({call_types}) -> {S}
  %c = tensor.insert_slice %z into %A{geometry} : {S} into {A}
  return %c : {A}
}}
"""

    def reference(a, b=None):
        out = a.copy()
        region = out[where]
        value = fn(region.reshape(shape), None if b is None else b)
        out[where] = value.reshape(region.shape)
        return out

    return text, reference, (rows, cols), shape, binary, donate, dynamic, offsets[0]


def _run(prog, xs):
    args = [x.copy() if isinstance(x, np.ndarray) else x for x in xs]
    return prog.f(*args), args


@pytest.mark.parametrize("seed", range(24))
def test_read_modify_write_matches_numpy_on_and_off(seed):
    rng = np.random.default_rng(1000 + seed)
    text, reference, dims, shape, binary, donate, dynamic, row = _rmw_program(rng)
    a = rng.uniform(-2, 2, dims).astype(np.float32)
    xs = [a]
    b = None
    if binary:
        b = rng.uniform(-2, 2, shape).astype(np.float32)
        xs.append(b)
    if dynamic:
        xs.append(row)
    want = reference(a, b)
    on = tdf.compile(text, inplace=True, strict=True)
    off = tdf.compile(text, inplace=False)
    got_on, args_on = _run(on, xs)
    got_off, args_off = _run(off, xs)
    np.testing.assert_array_equal(got_on, want, err_msg=text)
    np.testing.assert_array_equal(got_off, want, err_msg=text)
    if not donate:
        np.testing.assert_array_equal(args_on[0], a)
        np.testing.assert_array_equal(args_off[0], a)
    if binary:
        np.testing.assert_array_equal(args_on[1], b)
    report_on, report_off = on.report(), off.report()
    assert report_on.bytes_allocated("f") <= report_off.bytes_allocated("f"), text
    if donate:
        # the slice is updated where it lies: no allocation, no copy
        assert report_on.calls_made_inplace == 1, (text, str(report_on))
        assert report_on.bytes_allocated("f") == 0, (text, str(report_on))
        assert report_on.bytes_copied("f") == 0, (text, str(report_on))
        assert "_strided" in on.buffer_ir or "memref.subview" in on.buffer_ir


RMW_ROW = _kernel("inc", [8], False, KERNELS["inc"][1]) + """
func.func @f(%A: tensor<4x8xf32> {tdf.donate}) -> tensor<4x8xf32> {
  %r = tensor.extract_slice %A[1, 0] [1, 8] [1, 1] : tensor<4x8xf32> to tensor<8xf32>
  %z = tdf.call @inc(%r) : (tensor<8xf32>) -> tensor<8xf32>
  %c = tensor.insert_slice %z into %A[1, 0] [1, 8] [1, 1] : tensor<8xf32> into tensor<4x8xf32>
  return %c : tensor<4x8xf32>
}
"""


def test_read_modify_write_of_a_donated_row_allocates_nothing():
    """The issue's case: with the rewrite off the row is copied out and the
    result copied back (2 allocations, 2 copies); on, nothing is allocated
    or copied and the result shares the donated argument's memory."""
    on = tdf.compile(RMW_ROW, strict=True)
    off = tdf.compile(RMW_ROW, inplace=False)
    r_on, r_off = on.report(), off.report()
    assert (r_on.bytes_allocated("f"), r_on.bytes_copied("f")) == (0, 0), str(r_on)
    assert r_off.bytes_allocated("f") == 64 and r_off.bytes_copied("f") == 64, str(r_off)
    a = np.arange(32, dtype=np.float32).reshape(4, 8)
    want = a.copy()
    want[1] += np.float32(1.5)
    out = on.f(a)
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(a, want)  # donated: updated in place
    assert np.shares_memory(out, a)


def test_slice_of_an_in_place_block_keeps_its_layout():
    """A block of columns updated in place (its call result stays strided only
    when inserted back) and then a row of the *call result* updated: the
    second kernel's slice has the first buffer's layout or a copy, never a
    wrong one (this used to fail in bufferization: a strided allocation)."""
    k44 = _kernel("inc", [4, 4], False, KERNELS["inc"][1])
    k24 = _kernel("dbl", [2, 4], False, KERNELS["dbl"][1])
    text = k44 + k24 + """
func.func @f(%A: tensor<4x8xf32> {tdf.donate}, %B: tensor<2x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %r = tensor.extract_slice %A[0, 0] [4, 4] [1, 1] : tensor<4x8xf32> to tensor<4x4xf32>
  %z = tdf.call @inc(%r) : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %w = tensor.extract_slice %z[1, 0] [2, 4] [1, 1] : tensor<4x4xf32> to tensor<2x4xf32>
  %y = tdf.call @dbl(%w) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %o = tensor.insert_slice %y into %z[1, 0] [2, 4] [1, 1] : tensor<2x4xf32> into tensor<4x4xf32>
  %q = tdf.call @dbl(%B) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %s = tensor.extract_slice %A[0, 4] [4, 4] [1, 1] : tensor<4x8xf32> to tensor<4x4xf32>
  %p = tensor.insert_slice %q into %s[2, 0] [2, 4] [1, 1] : tensor<2x4xf32> into tensor<4x4xf32>
  return %o, %p : tensor<4x4xf32>, tensor<4x4xf32>
}
"""
    a = np.arange(32, dtype=np.float32).reshape(4, 8) / 4
    b = np.arange(8, dtype=np.float32).reshape(2, 4) - 3
    z = a[:, :4] + np.float32(1.5)
    z[1:3] = z[1:3] + z[1:3]
    p = a[:, 4:].copy()
    p[2:4] = b + b
    for inplace in (True, False):
        prog = tdf.compile(text, inplace=inplace, strict=inplace)
        o, q = prog.f(a.copy(), b.copy())
        np.testing.assert_array_equal(o, z)
        np.testing.assert_array_equal(q, p)


def test_read_modify_write_not_donated_leaves_the_input():
    text = RMW_ROW.replace(" {tdf.donate}", "")
    prog = tdf.compile(text, strict=True)
    assert prog.report().calls_made_inplace == 0
    a = np.arange(32, dtype=np.float32).reshape(4, 8)
    keep = a.copy()
    out = prog.f(a)
    np.testing.assert_array_equal(a, keep)
    want = keep.copy()
    want[1] += np.float32(1.5)
    np.testing.assert_array_equal(out, want)
