"""Explicit mutation with JAX refs under ``tdf.jax.jit`` (python/tdf/jax/_refs.py).

Every program runs under ``tdf.jax.jit`` and ``jax.jit`` (the oracle) and the
results are compared (integers bit for bit, floats tightly); inputs that are
not donated are checked unchanged; the reports show each update in place
at the user's line, and loops of ``r[i] += y`` allocate nothing per step.
"""

from __future__ import annotations

import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import tdf
import tdf.jax

RNG = np.random.default_rng(7)


def _line(fun, text):
    """The source line of ``fun`` that contains ``text``."""
    lines, first = inspect.getsourcelines(fun)
    for k, line in enumerate(lines):
        if text in line:
            return first + k
    raise AssertionError(f"{text!r} not in {fun.__name__}")


def _same(got, want):
    got_leaves, want_leaves = jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)
    assert len(got_leaves) == len(want_leaves)
    for g, w in zip(got_leaves, want_leaves):
        w = np.asarray(w)
        g = np.asarray(g)
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, w.dtype, g.shape, w.shape)
        if w.dtype.kind == "f":
            np.testing.assert_allclose(g, w, rtol=2e-6, atol=1e-6)
        else:
            np.testing.assert_array_equal(g, w)


def check(fun, *args, static=(), donate=()):
    """Runs ``fun`` under tdf.jax.jit and jax.jit; compares the results and
    checks that the arguments that are not donated are unchanged."""
    before = [np.array(a) for a in args]
    ours = tdf.jax.jit(fun, static_argnums=static, donate_argnums=donate)
    got = ours(*args)
    want = jax.jit(fun, static_argnums=static)(*before)
    _same(got, want)
    for i, (a, b) in enumerate(zip(args, before)):
        if i not in donate and isinstance(a, np.ndarray):
            np.testing.assert_array_equal(a, b)
    return ours


def f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


# ------------------------------------------------------------ the primitives


def test_new_ref_get_swap_static_indices():
    def fun(x, y):
        r = jax.new_ref(x)
        r[...] = r[...] * 2
        r[1] = y[0]
        r[2] += y[1]
        old = r[3]
        r[3] = old + 10
        return r[...], old

    check(fun, f32(6), f32(4))


def test_dynamic_indices_including_negative_and_out_of_range():
    def fun(x, i, j, v):
        r = jax.new_ref(x)
        r[i] = v
        r[j] += 2 * v
        r[-1] -= 1.0
        return r[...], r[i], r[j]

    x = f32(5)
    for i, j in ((0, 4), (3, 3), (-2, 1), (7, -9)):
        check(fun, x, np.int32(i), np.int32(j), np.float32(1.5))


def test_slices_and_rows_of_a_matrix():
    def fun(x, row, col, i):
        r = jax.new_ref(x)
        r[1:3] = jnp.zeros((2, 4), x.dtype)
        r[i] += row
        r[:, 2] = col
        r[0, 1:3] *= 3.0
        r[i, ::2] = jnp.full(2, -1.0, x.dtype)  # strided: a scatter
        return r[...], r[::2, i], r[1:4:2]  # strided reads: gathers

    check(fun, f32(5, 4), f32(4), f32(5), np.int32(3))


def test_forms_jax_cannot_discharge_are_a_clear_error():
    # a static integer index next to a strided slice: JAX's own discharge
    # (and so jax.jit) fails on it
    def fun(x):
        r = jax.new_ref(x)
        return r[::2, 1]

    with pytest.raises(tdf.jax.UnsupportedPrimitiveError,
                       match="cannot functionalize this program's refs") as info:
        tdf.jax.jit(fun)(f32(5, 4))
    assert f"{__file__}:" in str(info.value)
    with pytest.raises(ValueError, match="Invalid type of idxer"):
        jax.jit(fun)(f32(5, 4))


def test_integer_array_indices_accumulate_like_jax():
    def fun(x, idx, v):
        r = jax.new_ref(x)
        r[idx] += v  # a gather, an add and a scatter: repeated indices keep the last
        r.addupdate(v, idx)  # addupdate: repeated indices accumulate
        return r[...]

    check(fun, np.arange(8, dtype=np.int32), np.array([1, 3, 3, 6], np.int32),
          np.array([10, 20, 30, 40], np.int32))


def test_addupdate_set_get_swap_functions_and_views():
    def fun(x, v):
        r = jax.new_ref(x)
        jax.ref.addupdate(r, (slice(1, 3),), v[:2])
        old = jax.ref.swap(r, (0,), v[2])
        jax.ref.set(r, (4,), old)
        view = r.at[2:5]
        view[1] = 7.0  # x[3]
        return jax.ref.get(r, ()), old

    check(fun, f32(6), f32(3))


def test_several_refs_and_read_after_write():
    def fun(x, y):
        a, b = jax.new_ref(x), jax.new_ref(y)
        a[0] = b[1]
        first = a[0]
        b[1] = a[0] + a[2]
        a[0] = 0.0
        b[0] += first
        return a[...], b[...], first

    check(fun, f32(4), f32(3))


def test_empty_ref_and_freeze():
    def fun(x):
        r = jax.empty_ref(jax.ShapeDtypeStruct((3,), jnp.float32))
        r[...] = x
        r[1] += 1.0
        return jax.ref.freeze(r)

    check(fun, f32(3))


def test_integer_bool_and_unsigned_refs():
    def fun(x, m, u):
        r, s, t = jax.new_ref(x), jax.new_ref(m), jax.new_ref(u)
        r[1] += 5
        s[0] = ~s[0]
        t[2] -= jnp.uint8(3)  # wraps
        return r[...], s[...], t[...]

    check(fun, np.arange(4, dtype=np.int64), np.array([True, False]),
          np.array([1, 2, 1], np.uint8))


# ------------------------------------------------------------ control flow


def test_refs_in_fori_loop_scan_and_while_bodies():
    def fun(x, ys, n):
        r = jax.new_ref(x)

        def fori_body(i, c):
            r[i % 4] += ys[i]
            return c + 1

        count = lax.fori_loop(0, 6, fori_body, 0)

        def scan_body(c, y):
            r[0] = r[0] * 0.5 + y
            return c + r[0, 0], r[1]

        total, rows = lax.scan(scan_body, jnp.float32(0), ys)

        def while_body(i):
            r[3] -= ys[i]
            return i + 1

        lax.while_loop(lambda i: i < n, while_body, 0)
        return r[...], count, total, rows

    check(fun, f32(4, 3), f32(6, 3), np.int32(4))


def test_ref_created_inside_a_loop_body():
    def fun(xs):
        def body(c, x):
            r = jax.new_ref(x)
            r[0] = c
            r[1] += r[0]
            return c + 1.0, r[...]
        return lax.scan(body, jnp.float32(0), xs)

    check(fun, f32(5, 3))


def test_refs_in_cond_and_switch_branches():
    def fun(x, p, k):
        r = jax.new_ref(x)

        def yes():
            r[0] = 100.0

        def no():
            r[1] += r[2]

        lax.cond(p > 0, yes, no)
        lax.switch(k, [lambda: r.__setitem__(2, -1.0), lambda: None,
                       lambda: r.addupdate(jnp.ones(2, x.dtype), (slice(2, 4),))])
        return r[...]

    for p in (1, -1):
        for k in (0, 1, 2, 5):
            check(fun, f32(4), np.int32(p), np.int32(k))


def test_ref_passed_to_a_nested_jit_and_remat():
    @jax.jit
    def bump(ref, v):
        ref[2] += v

    def fun(x):
        r = jax.new_ref(x)
        bump(r, 5.0)

        @jax.checkpoint
        def twice(v):
            r[0] = v[1]
            return v * 2

        return twice(x), r[...]

    check(fun, f32(4))


def test_while_condition_reading_a_written_ref_is_refused():
    def fun(x):
        r = jax.new_ref(x)
        lax.while_loop(lambda c: r[0] < 10, lambda c: (r.__setitem__(0, r[0] + 1.0), c)[1], 0)
        return r[...]

    with pytest.raises(tdf.jax.UnsupportedPrimitiveError,
                       match=r"'while' \(a while_loop whose condition reads a ref") as info:
        tdf.jax.jit(fun)(np.zeros(3, np.float32))
    assert f"{__file__}:{_line(fun, 'lax.while_loop')}:" in str(info.value)


# ------------------------------------------------------------ in place


def _mutation_lines_in_place(report, lines):
    """Every update at one of ``lines`` runs in place, and each line has one."""
    seen = set()
    for d in report.decisions:
        for line in lines:
            if f"{__file__}:{line}:" in d.location:
                assert d.inplace, (d, report)
                seen.add(line)
    assert seen == set(lines), (lines, report)


def test_updates_run_in_place_and_the_report_names_the_user_lines():
    def fun(x, i, row):
        r = jax.new_ref(x)
        r[i] += row
        r[0] = row
        r[2, 1:3] = jnp.zeros(2, x.dtype)
        return r[...]

    f = check(fun, f32(6, 8), np.int32(4), f32(8), donate=(0,))
    report = f.program(f32(6, 8), np.int32(4), f32(8)).report()
    lines = [_line(fun, "r[i] += row"), _line(fun, "r[0] = row"), _line(fun, "r[2, 1:3]")]
    _mutation_lines_in_place(report, lines)
    # what remains copied is the written values themselves (into_view)
    assert not [c for c in report.copies if not c.into_view], report
    assert all(p.inplace for p in report.pairings), report


def test_new_ref_of_an_argument_that_is_not_donated_copies_it_once():
    def fun(x, row):
        r = jax.new_ref(x)
        r[1] = row
        r[3] += row
        return r[...]

    x = f32(4, 16)
    f = check(fun, x, f32(16))  # x unchanged (checked by check)
    report = f.program(x, f32(16)).report()
    big = [c for c in report.copies if (c.nbytes or 0) >= x.nbytes]
    assert len(big) <= 1, report  # the copy new_ref makes, then updates in place


@pytest.mark.parametrize("kind", ["fori_row", "fori_scalar", "scan_row"])
def test_loop_of_ref_updates_allocates_nothing_per_step(kind):
    def fori_row(x, ys, n):
        r = jax.new_ref(x)

        def body(i, c):
            r[i % 8] += ys[i]
            return c
        lax.fori_loop(0, n, body, 0)
        return r[...]

    def fori_scalar(x, ys, n):
        r = jax.new_ref(x)

        def body(i, c):
            r[i % 8, i % 16] += ys[i, 0]
            return c
        lax.fori_loop(0, n, body, 0)
        return r[...]

    def scan_row(x, ys, n):
        r = jax.new_ref(x)

        def body(c, y):
            r[c % 8] = r[c % 8] * 0.5 + y
            return c + 1, None
        lax.scan(body, 0, ys[:n])
        return r[...]

    fun = {"fori_row": fori_row, "fori_scalar": fori_scalar, "scan_row": scan_row}[kind]
    ys = f32(64, 16)
    f = tdf.jax.jit(fun, donate_argnums=0, static_argnums=2, count_allocations=True)
    counts = {}
    for n in (4, 64):
        x = f32(8, 16)
        want = jax.jit(fun, static_argnums=2)(x.copy(), ys, n)
        program = f.program(x, ys, n)
        program.reset_allocation_stats()
        _same(f(x, ys, n), want)
        counts[n] = program.allocation_stats().calls
    # nothing per step, nothing per call: each row is updated in the
    # donated buffer (no temporary row, not even one hoisted into an arena)
    assert counts == {4: 0, 64: 0}, counts
    report = program.report()
    assert not [c for c in report.copies if c.in_loop or not c.into_view], report
    assert not report.allocations or all(not a.nbytes for a in report.allocations), report


def test_dynamic_trip_count_loop_matches_jax():
    # A while loop (dynamic trip count): correct; its rank-0 counter is a
    # loop-carried tensor (tdf-scalarize-loop-carried handles scf.for only).
    def fun(x, ys, n):
        r = jax.new_ref(x)

        def body(i, c):
            r[i % 8] += ys[i]
            return c
        lax.fori_loop(0, n, body, 0)
        return r[...]

    for n in (0, 1, 37):
        check(fun, f32(8, 16), f32(40, 16), np.int32(n), donate=(0,))


def test_strict_mode_accepts_ref_updates():
    def fun(x, i, row):
        r = jax.new_ref(x)
        r[i] = row
        r[i] += row
        return r[...]

    f = tdf.jax.jit(fun, donate_argnums=0)
    f.lower(f32(4, 8), np.int32(1), f32(8)).compile(strict=True)


# ------------------------------------------------------------ jax.Ref arguments


def _twins(value):
    return jax.new_ref(jnp.asarray(value)), jax.new_ref(jnp.asarray(value))


def test_ref_argument_is_updated_in_its_own_buffer(monkeypatch):
    from jax._src import core

    writes = []  # the fallback path stores with ref[...] = value: never taken here
    setitem = core.Ref.__setitem__
    monkeypatch.setattr(core.Ref, "__setitem__",
                        lambda self, idx, x: (writes.append(idx), setitem(self, idx, x))[1])

    def step(r, y, i):
        r[i] += y
        r[0, 0] = 7.0
        return jnp.sum(y)

    value = f32(4, 8)
    ours, theirs = _twins(value)
    pointer = ours.unsafe_buffer_pointer()
    f = tdf.jax.jit(step)
    g = jax.jit(step)
    for k in range(3):
        y, i = f32(8), np.int32(k)
        _same(f(ours, y, i), g(theirs, y, i))
        _same(ours[...], theirs[...])
    assert ours.unsafe_buffer_pointer() == pointer  # the same buffer, updated in place
    assert writes == []
    from tdf.jax import _refs
    buffer, in_place = _refs.ref_buffer(ours, np.float32, (4, 8))
    assert in_place and buffer.ctypes.data == pointer and buffer.flags.writeable
    report = f.program(ours, f32(8), np.int32(0)).report()
    assert report.pairings and all(p.inplace for p in report.pairings), report
    _mutation_lines_in_place(report, [_line(step, "r[i] += y"), _line(step, "r[0, 0] = 7.0")])


def test_ref_arguments_with_other_leaves_and_pytrees():
    def step(state, x):
        refs, scale = state
        refs["a"][...] = refs["a"][...] * scale + x
        refs["b"][1] += jnp.int32(1)
        return refs["a"][0] * 2

    a0, b0 = f32(3), np.arange(3, dtype=np.int32)
    ours = {"a": jax.new_ref(jnp.asarray(a0)), "b": jax.new_ref(jnp.asarray(b0))}
    theirs = {"a": jax.new_ref(jnp.asarray(a0)), "b": jax.new_ref(jnp.asarray(b0))}
    x = f32(3)
    f = tdf.jax.jit(step)
    out = f((ours, np.float32(0.5)), x)
    _same(out, jax.jit(step)((theirs, np.float32(0.5)), x))
    _same((ours["a"][...], ours["b"][...]), (theirs["a"][...], theirs["b"][...]))
    out2 = f((ours, np.float32(2.0)), x)  # the same signature: the cached program
    _same(out2, jax.jit(step)((theirs, np.float32(2.0)), x))
    _same(ours["a"][...], theirs["a"][...])


def test_returned_ref_value_is_a_snapshot():
    def fun(r, v):
        r[...] += v
        return r[...], r[...] * 2

    ours, theirs = _twins(f32(4))
    v = f32(4)
    snapshot, doubled = tdf.jax.jit(fun)(ours, v)
    want = jax.jit(fun)(theirs, v)
    _same((snapshot, doubled), want)
    ours[...] = jnp.zeros(4)  # a later write to the ref leaves the result alone
    _same(snapshot, want[0])
    assert not np.shares_memory(snapshot, np.asarray(ours[...]))


def test_ref_argument_only_read_keeps_its_value_and_unsigned_refs():
    def fun(r, u):
        u[1] += jnp.uint16(65535)  # wraps
        return r[...] + 1

    r_ours, r_theirs = _twins(f32(3))
    u_ours, u_theirs = _twins(np.array([1, 2, 3], np.uint16))
    _same(tdf.jax.jit(fun)(r_ours, u_ours), jax.jit(fun)(r_theirs, u_theirs))
    _same((r_ours[...], u_ours[...]), (r_theirs[...], u_theirs[...]))


def test_closed_over_ref_is_updated_like_jax():
    ours, theirs = _twins(np.zeros(3, np.float32))

    def make(counter):
        def fun(x):
            counter[...] += x
            return counter[...] * 2
        return fun

    f, g = tdf.jax.jit(make(ours)), jax.jit(make(theirs))
    for _ in range(2):
        x = f32(3)
        _same(f(x), g(x))
        _same(ours[...], theirs[...])


def test_same_ref_passed_twice_is_an_argument_error():
    r = jax.new_ref(jnp.zeros(3))
    f = tdf.jax.jit(lambda a, b: a[...] + b[...])
    with pytest.raises(tdf.TDFError, match="the same jax.Ref is passed twice") as info:
        f(r, r)
    assert isinstance(info.value, TypeError)
    assert f"{__file__}:" in str(info.value)


def test_ref_of_an_unsupported_dtype_names_the_primitive_and_line():
    def fun(x):
        r = jax.new_ref(x.astype(jnp.complex64))
        r[0] = 1j
        return r[...].real

    with pytest.raises(tdf.jax.UnsupportedPrimitiveError, match="complex64") as info:
        tdf.jax.jit(fun)(f32(3))
    assert f"{__file__}:{_line(fun, 'jax.new_ref')}:" in str(info.value)

    def keys(x):
        r = jax.new_ref(jax.random.key(0))
        return jax.random.normal(r[...], (2,)) + x

    with pytest.raises(tdf.jax.UnsupportedPrimitiveError, match=r"'new_ref' \(dtype key<fry>"):
        tdf.jax.jit(keys)(f32(2))


def test_ref_as_result_is_refused_by_jax_tracing():
    # jax.jit refuses it with the same error: a ref cannot be returned
    with pytest.raises(ValueError, match="mutable array references cannot be returned"):
        tdf.jax.jit(lambda x: jax.new_ref(x))(f32(2))
