"""Property-based differential tests: random straight-line tdf programs over
element-wise kernel calls, views (extract_slice), insert_slice, concat and
opaque calls, with random donation flags, run three ways — tdf with the
in-place rewrite on, off, and ``jax.jit`` — plus the check that non-donated
inputs are byte-identical after the call, and that the output of
``tdf-insert-inplace`` passes ``tdf-verify-inplace{strict}``.

Default: a short run for CI (``TDF_PROPERTY_EXAMPLES``, default 40 programs).
``TDF_LONG=1`` runs 2,000 programs (or ``TDF_PROPERTY_EXAMPLES``).
"""

from __future__ import annotations

import os

import jax.numpy as jnp
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from inplace_invariant import added_violations

import tdf
from tdf.oracle import compare

LONG = os.environ.get("TDF_LONG") == "1"
EXAMPLES = int(os.environ.get("TDF_PROPERTY_EXAMPLES", "2000" if LONG else "40"))

# Two shapes: A (half) and B (whole = two halves).
SHAPES = {"A": 8, "B": 16}
TYPES = {k: f"tensor<{n}xf32>" for k, n in SHAPES.items()}
BINARY = {"add": ("linalg.add", jnp.add), "sub": ("linalg.sub", jnp.subtract),
          "mul": ("linalg.mul", jnp.multiply)}


def _kernels() -> str:
    text = []
    for shape, n in SHAPES.items():
        m = f"memref<{n}xf32>"
        for name, (op, _) in BINARY.items():
            text.append(f"func.func private @{name}_{shape}(%a: {m}, %b: {m}, %out: {m}) "
                        f"attributes {{tdf.elementwise}} {{\n  {op} ins(%a, %b : {m}, {m}) "
                        f"outs(%out : {m})\n  return\n}}")
        text.append(f"func.func private @neg_{shape}(%a: {m}, %out: {m}) attributes {{tdf.elementwise}} {{\n"
                    f"  linalg.negf ins(%a : {m}) outs(%out : {m})\n  return\n}}")
        # Opaque callees: one returns a fresh buffer, one returns its operand.
        text.append(f"func.func private @opq_double_{shape}(%a: {m}) -> {m} {{\n"
                    f"  %out = memref.alloc() : {m}\n"
                    f"  linalg.add ins(%a, %a : {m}, {m}) outs(%out : {m})\n  return %out : {m}\n}}")
        text.append(f"func.func private @opq_same_{shape}(%a: {m}) -> {m} {{\n  return %a : {m}\n}}")
    return "\n".join(text) + "\n"


KERNELS = _kernels()


def _draw_call(draw, kind, name, values):
    """``(line, op, value)`` of a random ``binary``, ``neg`` or ``opaque``
    call of the values drawn so far."""
    if kind == "binary":
        op = draw(st.sampled_from(sorted(BINARY)))
        a = draw(st.sampled_from(values))
        same = [v for v in values if v[1] == a[1]]
        b = draw(st.sampled_from(same))
        t = TYPES[a[1]]
        return (f"{name} = tdf.call @{op}_{a[1]}({a[0]}, {b[0]}) : ({t}, {t}) -> {t}",
                ("binary", op, a[0], b[0]), (name, a[1]))
    if kind == "neg":
        a = draw(st.sampled_from(values))
        t = TYPES[a[1]]
        return (f"{name} = tdf.call @neg_{a[1]}({a[0]}) : ({t}) -> {t}", ("neg", a[0]),
                (name, a[1]))
    a = draw(st.sampled_from(values))
    which = draw(st.sampled_from(["double", "same"]))
    t = TYPES[a[1]]
    return (f"{name} = tdf.call_opaque @opq_{which}_{a[1]}({a[0]}) : ({t}) -> {t}",
            ("opaque", which, a[0]), (name, a[1]))


def _draw_slice_op(draw, kind, name, values):
    """``(line, op, value)`` of a random ``view``, ``insert`` or ``concat``
    of the values drawn so far; None when none of the right shape exist."""
    whole = [v for v in values if v[1] == "B"]
    half = [v for v in values if v[1] == "A"]
    if kind == "view":
        if not whole:
            return None
        a = draw(st.sampled_from(whole))
        off = draw(st.sampled_from([0, 4, 8]))
        return (f"{name} = tensor.extract_slice {a[0]}[{off}] [8] [1] : {TYPES['B']} to {TYPES['A']}",
                ("view", a[0], off), (name, "A"))
    if kind == "insert":
        if not whole or not half:
            return None
        dest, src = draw(st.sampled_from(whole)), draw(st.sampled_from(half))
        off = draw(st.sampled_from([0, 4, 8]))
        return (f"{name} = tensor.insert_slice {src[0]} into {dest[0]}[{off}] [8] [1] "
                f": {TYPES['A']} into {TYPES['B']}", ("insert", src[0], dest[0], off), (name, "B"))
    if not half:
        return None
    a, b = draw(st.sampled_from(half)), draw(st.sampled_from(half))
    return (f"{name} = tensor.concat dim(0) {a[0]}, {b[0]} "
            f": ({TYPES['A']}, {TYPES['A']}) -> {TYPES['B']}", ("concat", a[0], b[0]), (name, "B"))


@st.composite
def programs(draw):
    """A random program: (mlir text, jax reference, arg shapes, donated flags)."""
    nargs = draw(st.integers(1, 3))
    shapes = [draw(st.sampled_from("AB")) for _ in range(nargs)]
    donated = [draw(st.booleans()) for _ in range(nargs)]
    values = [(f"%arg{i}", s) for i, s in enumerate(shapes)]
    lines, ops = [], []
    for k in range(draw(st.integers(1, 8))):
        kind = draw(st.sampled_from(["binary", "binary", "neg", "view", "insert", "concat", "opaque"]))
        name = f"%v{k}"
        drawn = (_draw_slice_op if kind in ("view", "insert", "concat") else _draw_call)(
            draw, kind, name, values)
        if drawn is None:
            continue
        line, op, value = drawn
        lines.append(line)
        ops.append(op)
        values.append(value)
    nres = draw(st.integers(1, 3))
    results = [values[-1]] + [draw(st.sampled_from(values)) for _ in range(nres - 1)]
    params = ", ".join(f"%arg{i}: {TYPES[s]}" + (" {tdf.donate}" if d else "")
                       for i, (s, d) in enumerate(zip(shapes, donated)))
    rtypes = ", ".join(TYPES[s] for _, s in results)
    body = "\n  ".join(lines)
    text = (KERNELS + f"func.func @main({params}) -> ({rtypes}) {{\n  {body}\n"
            f"  return {', '.join(v for v, _ in results)} : {rtypes}\n}}\n")

    def reference(*args):
        env = {f"%arg{i}": a for i, a in enumerate(args)}
        for (name, _), op in zip(values[nargs:], ops):
            if op[0] == "binary":
                env[name] = BINARY[op[1]][1](env[op[2]], env[op[3]])
            elif op[0] == "neg":
                env[name] = -env[op[1]]
            elif op[0] == "view":
                env[name] = env[op[1]][op[2]:op[2] + 8]
            elif op[0] == "insert":
                env[name] = env[op[2]].at[op[3]:op[3] + 8].set(env[op[1]])
            elif op[0] == "concat":
                env[name] = jnp.concatenate([env[op[1]], env[op[2]]])
            else:
                env[name] = 2 * env[op[2]] if op[1] == "double" else env[op[2]]
        return tuple(env[v] for v, _ in results)

    return text, reference, shapes, donated


RUN_COUNT = {"programs": 0}


@settings(max_examples=EXAMPLES, deadline=None, derandomize=not LONG,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(programs(), st.integers(0, 2**31 - 1))
def test_random_programs_three_ways(program, seed):
    import jax

    text, reference, shapes, donated = program
    # The in-place invariant: the rewrite's output passes tdf-verify-inplace{strict}.
    checked = added_violations(text, "random.mlir")
    assert checked is not None, f"tdf-insert-inplace failed on\n{text}"
    assert not checked[0], f"tdf-insert-inplace added copies {checked[0]}\n{checked[1]}"
    rng = np.random.default_rng(seed)
    inputs = [rng.standard_normal(SHAPES[s]).astype(np.float32) for s in shapes]
    want = [np.asarray(w) for w in jax.jit(reference)(*[x.copy() for x in inputs])]
    for inplace in (False, True):
        prog = tdf.compile(text, inplace=inplace, filename="random.mlir")
        args = [x.copy() for x in inputs]
        got = prog.main(*args)
        got = got if isinstance(got, tuple) else (got,)
        for i, (g, w) in enumerate(zip(got, want)):
            compare(f"result #{i} (inplace={inplace})\n{text}", g, w, 1e-6, 1e-6)
        for i, (arg, orig) in enumerate(zip(args, inputs)):
            if not donated[i]:
                assert arg.tobytes() == orig.tobytes(), \
                    f"non-donated argument #{i} written (inplace={inplace})\n{text}"
    RUN_COUNT["programs"] += 1


def test_generator_covers_every_op_kind():
    """The strategy can produce each op kind (a generator that never emits
    views or opaque calls would make the property test vacuous)."""
    from hypothesis import find

    for needle in ("tensor.extract_slice", "tensor.insert_slice", "tensor.concat",
                   "tdf.call_opaque", "tdf.call @", "tdf.donate"):
        found = find(programs(), lambda p, n=needle: n in p[0].split("func.func @main")[1],
                     settings=settings(max_examples=2000, deadline=None, database=None))
        assert needle in found[0]
