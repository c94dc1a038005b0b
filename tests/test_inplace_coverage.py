"""In-place coverage cases of ``tdf-insert-inplace``, run by the JIT
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
    """A donated row updated by a kernel: with the rewrite off the row is copied out and the
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


# -- rows updated through chains of kernels, per shape -------------------------

def _rows_kernels(shapes) -> str:
    """``@inc_<shape>`` and ``@dbl_<shape>`` for each shape in ``shapes``."""
    out = []
    for shape in sorted(set(tuple(s) for s in shapes)):
        tag = _shape(shape)
        out.append(_kernel(f"inc_{tag}", list(shape), False, KERNELS["inc"][1]))
        out.append(_kernel(f"dbl_{tag}", list(shape), False, KERNELS["dbl"][1]))
    return "\n".join(out)


def _compare(text, xs, want, donated):
    on = tdf.compile(text, inplace=True, strict=True)
    off = tdf.compile(text, inplace=False)
    for prog in (on, off):
        args = [x.copy() for x in xs]
        got = prog.f(*args)
        got = got if isinstance(got, tuple) else (got,)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w, err_msg=text)
        for i, x in enumerate(xs):
            if i not in donated:
                np.testing.assert_array_equal(args[i], x, err_msg=text)
    return on.report(), off.report()


def _disjoint_program(rng):
    """Rows ``[a, a+h)`` of ``%A`` updated by a call on their slice, rows
    ``[b, b+g)`` read by another call: before the write, between the write
    and the insert, or after the insert (of the old ``%A`` or of the new
    value); disjoint or (sometimes) overlapping."""
    rows, cols = int(rng.integers(4, 9)), int(rng.integers(2, 7))
    h = int(rng.integers(1, rows // 2 + 1))
    a = int(rng.integers(0, rows - h + 1))
    g = int(rng.integers(1, rows // 2 + 1))
    free = [b for b in range(rows - g + 1) if b + g <= a or b >= a + h]
    overlap = not free or rng.integers(0, 5) == 0
    b = int(rng.integers(0, rows - g + 1)) if overlap else int(rng.choice(free))
    where = str(rng.choice(["before", "between", "after_old", "after_new"]))
    donate = bool(rng.integers(0, 4))
    A, W, R = (f"tensor<{rows}x{cols}xf32>", f"tensor<{h}x{cols}xf32>",
               f"tensor<{g}x{cols}xf32>")
    write = f"[{a}, 0] [{h}, {cols}] [1, 1]"
    read = f"[{b}, 0] [{g}, {cols}] [1, 1]"
    src = "%c" if where == "after_new" else "%A"
    lines = {
        "w": f"  %w = tensor.extract_slice %A{write} : {A} to {W}",
        "z": f"  %z = tdf.call @inc_{h}x{cols}(%w) : ({W}) -> {W}",
        "c": f"  %c = tensor.insert_slice %z into %A{write} : {W} into {A}",
        "r": f"  %r = tensor.extract_slice {src}{read} : {A} to {R}",
        "s": f"  %s = tdf.call @dbl_{g}x{cols}(%r) : ({R}) -> {R}",
    }
    order = {"before": "rwzcs", "between": "wzrsc", "after_old": "wzcrs",
             "after_new": "wzcrs"}[where]
    text = _rows_kernels([(h, cols), (g, cols)]) + f"""
func.func @f(%A: {A}{" {tdf.donate}" if donate else ""}) -> ({A}, {R}) {{
{chr(10).join(lines[k] for k in order)}
  return %c, %s : {A}, {R}
}}
"""
    x = rng.uniform(-2, 2, (rows, cols)).astype(np.float32)
    c = x.copy()
    c[a:a + h] = x[a:a + h] + np.float32(1.5)
    r = (c if where == "after_new" else x)[b:b + g]
    return text, [x], (c, r + r), {0} if donate else set(), overlap


@pytest.mark.parametrize("seed", range(16))
def test_disjoint_write_and_read_match_numpy_on_and_off(seed):
    rng = np.random.default_rng(2000 + seed)
    text, xs, want, donated, overlap = _disjoint_program(rng)
    on, off = _compare(text, xs, want, donated)
    assert on.bytes_copied("f") <= off.bytes_copied("f"), (text, str(on), str(off))
    if donated and not overlap:
        assert on.calls_made_inplace >= 1, (text, str(on))


def test_disjoint_rows_read_after_the_write_cost_no_copy_of_the_update():
    """Rows 0..3 updated in place while rows 4..7 of the old value are read
    after the insert: with the rewrite off the update is computed in a fresh
    buffer and copied in (and One-Shot copies all of %A for the old read);
    on, the call writes the rows where they lie."""
    rng = np.random.default_rng(7)
    text = _rows_kernels([(4, 8)]) + """
func.func @f(%A: tensor<8x8xf32> {tdf.donate}) -> (tensor<8x8xf32>, tensor<4x8xf32>) {
  %w = tensor.extract_slice %A[0, 0] [4, 8] [1, 1] : tensor<8x8xf32> to tensor<4x8xf32>
  %z = tdf.call @inc_4x8(%w) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %c = tensor.insert_slice %z into %A[0, 0] [4, 8] [1, 1] : tensor<4x8xf32> into tensor<8x8xf32>
  %r = tensor.extract_slice %A[4, 0] [4, 8] [1, 1] : tensor<8x8xf32> to tensor<4x8xf32>
  %s = tdf.call @dbl_4x8(%r) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %c, %s : tensor<8x8xf32>, tensor<4x8xf32>
}
"""
    x = rng.uniform(-2, 2, (8, 8)).astype(np.float32)
    c = x.copy()
    c[:4] += np.float32(1.5)
    on, off = _compare(text, [x], (c, x[4:] + x[4:]), {0})
    assert on.calls_made_inplace == 1, str(on)
    assert on.bytes_copied("f") < off.bytes_copied("f"), (str(on), str(off))
    assert on.bytes_allocated("f") < off.bytes_allocated("f"), (str(on), str(off))


def _slice_of_slice_program(rng):
    rows, cols = int(rng.integers(3, 9)), int(rng.integers(3, 9))
    h1, w1 = int(rng.integers(1, rows + 1)), int(rng.integers(1, cols + 1))
    r0, c0 = int(rng.integers(0, rows - h1 + 1)), int(rng.integers(0, cols - w1 + 1))
    h2, w2 = int(rng.integers(1, h1 + 1)), int(rng.integers(1, w1 + 1))
    r1, c1 = int(rng.integers(0, h1 - h2 + 1)), int(rng.integers(0, w1 - w2 + 1))
    moved = rng.integers(0, 4) == 0  # the block goes back elsewhere
    r2 = int(rng.integers(0, rows - h1 + 1)) if moved else r0
    c2 = int(rng.integers(0, cols - w1 + 1)) if moved else c0
    donate = bool(rng.integers(0, 4))
    A, O, P = (f"tensor<{rows}x{cols}xf32>", f"tensor<{h1}x{w1}xf32>",
               f"tensor<{h2}x{w2}xf32>")
    text = _rows_kernels([(h2, w2)]) + f"""
func.func @f(%A: {A}{" {tdf.donate}" if donate else ""}) -> {A} {{
  %o = tensor.extract_slice %A[{r0}, {c0}] [{h1}, {w1}] [1, 1] : {A} to {O}
  %r = tensor.extract_slice %o[{r1}, {c1}] [{h2}, {w2}] [1, 1] : {O} to {P}
  %z = tdf.call @inc_{h2}x{w2}(%r) : ({P}) -> {P}
  %o2 = tensor.insert_slice %z into %o[{r1}, {c1}] [{h2}, {w2}] [1, 1] : {P} into {O}
  %c = tensor.insert_slice %o2 into %A[{r2}, {c2}] [{h1}, {w1}] [1, 1] : {O} into {A}
  return %c : {A}
}}
"""
    x = rng.uniform(-2, 2, (rows, cols)).astype(np.float32)
    block = x[r0:r0 + h1, c0:c0 + w1].copy()
    block[r1:r1 + h2, c1:c1 + w2] += np.float32(1.5)
    c = x.copy()
    c[r2:r2 + h1, c2:c2 + w1] = block
    return text, [x], (c,), {0} if donate else set(), (r2, c2) != (r0, c0)


@pytest.mark.parametrize("seed", range(16))
def test_slice_of_a_slice_matches_numpy_on_and_off(seed):
    rng = np.random.default_rng(3000 + seed)
    text, xs, want, donated, moved = _slice_of_slice_program(rng)
    on, off = _compare(text, xs, want, donated)
    if donated and not moved:
        # updated where it lies: nothing allocated, nothing copied
        assert on.calls_made_inplace == 1, (text, str(on))
        assert (on.bytes_allocated("f"), on.bytes_copied("f")) == (0, 0), (text, str(on))


def _part_program(rng):
    """A part computed by a chain of two kernels (fused by the pipeline),
    inserted into row ``i`` of ``%d`` and read again afterwards by another
    kernel; sometimes the row is overwritten by a second insert before that
    read, or the read comes before the insert."""
    rows, n = int(rng.integers(2, 6)), int(rng.integers(2, 12))
    i = int(rng.integers(0, rows))
    case = str(rng.choice(["after", "after", "overwritten", "before"]))
    donate = bool(rng.integers(0, 4))
    D, T = f"tensor<{rows}x{n}xf32>", f"tensor<{n}xf32>"
    row = f"[{i}, 0] [1, {n}] [1, 1]"
    insert = f"  %c = tensor.insert_slice %z into %d{row} : {T} into {D}"
    read = f"  %w = tdf.call @dbl_{n}(%z) : ({T}) -> {T}"
    lines = [f"  %p = tdf.call @inc_{n}(%y) : ({T}) -> {T}",
             f"  %z = tdf.call @dbl_{n}(%p) : ({T}) -> {T}"]
    result = "%c"
    if case == "before":
        lines += [read, insert]
    elif case == "after":
        lines += [insert, read]
    else:
        lines += [insert, f"  %c2 = tensor.insert_slice %q into %c{row} : {T} into {D}", read]
        result = "%c2"
    text = _rows_kernels([(n,)]) + f"""
func.func @f(%d: {D}{" {tdf.donate}" if donate else ""}, %y: {T}, %q: {T}) -> ({D}, {T}) {{
{chr(10).join(lines)}
  return {result}, %w : {D}, {T}
}}
"""
    d = rng.uniform(-2, 2, (rows, n)).astype(np.float32)
    y = rng.uniform(-2, 2, n).astype(np.float32)
    q = rng.uniform(-2, 2, n).astype(np.float32)
    p = y + np.float32(1.5)
    z = p + p
    c = d.copy()
    c[i] = q if case == "overwritten" else z
    return text, [d, y, q], (c, z + z), {0} if donate else set(), case


@pytest.mark.parametrize("seed", range(16))
def test_part_read_again_after_insert_matches_numpy_on_and_off(seed):
    rng = np.random.default_rng(4000 + seed)
    text, xs, want, donated, case = _part_program(rng)
    on, off = _compare(text, xs, want, donated)
    assert on.bytes_copied("f") <= off.bytes_copied("f"), (text, str(on), str(off))


def test_part_read_again_is_computed_in_its_row():
    """The part (a fused chain) is written into the donated row and read
    from there by the next kernel: the copy into the row is gone."""
    text = _rows_kernels([(8,)]) + """
func.func @f(%d: tensor<4x8xf32> {tdf.donate}, %y: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>) {
  %p = tdf.call @inc_8(%y) : (tensor<8xf32>) -> tensor<8xf32>
  %z = tdf.call @dbl_8(%p) : (tensor<8xf32>) -> tensor<8xf32>
  %c = tensor.insert_slice %z into %d[2, 0] [1, 8] [1, 1] : tensor<8xf32> into tensor<4x8xf32>
  %w = tdf.call @dbl_8(%z) : (tensor<8xf32>) -> tensor<8xf32>
  return %c, %w : tensor<4x8xf32>, tensor<8xf32>
}
"""
    d = np.arange(32, dtype=np.float32).reshape(4, 8) / 8
    y = np.linspace(-1, 1, 8, dtype=np.float32)
    z = (y + np.float32(1.5)) * 2
    c = d.copy()
    c[2] = z
    on, off = _compare(text, [d, y], (c, z + z), {0})
    assert on.bytes_copied("f") == 0 and off.bytes_copied("f") == 32, (str(on), str(off))


@pytest.mark.parametrize("flag, copied", [("false", True), ("true", False)])
def test_out_of_place_view_of_an_in_place_operand_counts_as_a_copy(flag, copied):
    """``tdf-verify-inplace`` (and the pass's One-Shot agreement) reads
    One-Shot's decisions: an ``extract_slice`` it makes out of place (through
    a reshape view too) is a copy of the storage the in-place call writes."""
    from tdf.passes.analysis.one_shot import view_copied
    text = f"""
func.func @f(%A: tensor<4x8xf32>) -> tensor<1x8xf32> {{
  %r = tensor.extract_slice %A[1, 0] [1, 8] [1, 1] {{__inplace_operands_attr__ = ["{flag}"]}} : tensor<4x8xf32> to tensor<8xf32>
  %e = tensor.expand_shape %r [[0, 1]] output_shape [1, 8] {{__inplace_operands_attr__ = ["true"]}} : tensor<8xf32> into tensor<1x8xf32>
  return %e : tensor<1x8xf32>
}}
"""
    ctx = tdf.Context()
    module = tdf.parse(text, ctx)
    with ctx:
        func = module.body.operations[0]
        ret = func.regions[0].blocks[0].operations[2]
        assert view_copied(ret.operands[0]) is copied
        assert view_copied(func.regions[0].blocks[0].arguments[0]) is False
