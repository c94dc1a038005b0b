"""``tdf-outline-deep-nests``: control flow nested deeper than ``nest-depth``
runs in private functions of its own; what the programs compute does not
change, inputs not donated stay unchanged, and the compile time grows with
the program, not with the square of its depth.

Random JAX programs nest ``lax.cond`` / ``lax.switch`` / ``lax.fori_loop`` /
``lax.while_loop`` 17-30 levels deep (past the default depth of 16), some
levels reading their input again after the nest (a donation the outlined
function must not get). Each runs through ``tdf.jax.jit`` with the pass (its
IR has the outlined functions), without it (``nest-depth=0``), and through
``jax.jit``. MLIR programs cover the ops JAX does not emit
(``scf.index_switch``, ``scf.execute_region``) at ``depth=2``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import tdf
import tdf.jax
from tdf.passes import pipelines
from tdf.passes.outline_deep_nests import PREFIX

N = 8


def _no_outlining(monkeypatch):
    real = pipelines.inplace_stage

    def stage(*args):
        return real(*args[:6], nest_depth=0)

    monkeypatch.setattr(pipelines, "inplace_stage", stage)


def _spec(seed: int):
    rng = np.random.default_rng(seed)
    depth = int(rng.integers(17, 41))
    kinds = rng.choice(["cond", "switch", "fori", "while"], size=depth, p=[0.4, 0.2, 0.2, 0.2])
    spec = [(str(kind), int(rng.integers(0, 4)), bool(rng.random() < 0.3)) for kind in kinds]
    # Odd seeds: the value passed into the first outlined function (level
    # 16) is read after the call (not donated); even seeds: no level up to
    # there reads its input again (donated).
    for i in range(14 if seed % 2 else 0, 17):
        spec[i] = (spec[i][0], spec[i][1], seed % 2 == 1)
    return spec


_OPS = [lambda v: v * 1.25, lambda v: v + 0.5, lambda v: jnp.tanh(v), lambda v: v - v * v * 0.125]


def _program(spec):
    def fun(x, y, k):
        def level(i, v):
            if i == len(spec):
                return v * 0.5 + y
            kind, op, reuse = spec[i]
            w = _OPS[op](v)
            sel = k[i % 4]
            if kind == "cond":
                out = lax.cond(sel > 0, lambda u: level(i + 1, u), lambda u: u - 1.0, w)
            elif kind == "switch":
                out = lax.switch(sel, [lambda u: level(i + 1, u), lambda u: u * 2.0,
                                       lambda u: u + y], w)
            elif kind == "fori":
                out = lax.fori_loop(0, 1, lambda j, u: level(i + 1, u), w)
            else:
                out = lax.while_loop(lambda c: c[0] < 1,
                                     lambda c: (c[0] + 1, level(i + 1, c[1])), (0, w))[1]
            return out + w if reuse else out
        return level(0, x)
    return fun


def _arguments(seed, k):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(N).astype(np.float32)
    y = rng.standard_normal(N).astype(np.float32)
    return x, y, np.array(k, dtype=np.int32)


@pytest.mark.parametrize("seed", range(8))
def test_random_deep_jax_nests_match_jax_jit(seed, monkeypatch):
    fun = _program(_spec(seed))
    # The deep path (every selector picks the nesting branch), a shallow
    # exit, and a mix.
    ks = ([1, 0, 1, 0], [0, 0, 0, 0], [1, 1, 2, 1])
    with monkeypatch.context() as m:
        _no_outlining(m)
        whole = tdf.jax.jit(fun, donate_argnums=(0,))
        unoutlined = [whole(*_arguments(seed, k)) for k in ks]
        assert PREFIX not in whole.program(*_arguments(seed, ks[0])).buffer_ir
    # Even seeds: the value passed into the first outlined function is not
    # read after the call, and its parameter is donated; odd seeds: it is.
    module = tdf.parse(tdf.jax.jit(fun, donate_argnums=(0,)).lower(
        *_arguments(seed, ks[0])).as_text(), tdf.Context())
    tdf.run_pipeline(module, "builtin.module(tdf-outline-deep-nests)")
    text = str(module)
    main, functions = text.split(f"func.func private @{PREFIX}", 1)
    called = main.split(f"call @{PREFIX}", 1)[1].split("(", 1)[0]  # the one @main calls
    first = text.split(f"func.func private @{PREFIX}{called}(", 1)[1].split("\n", 1)[0]
    assert ("tensor<8xf32> {tdf.donate}" in first) == (seed % 2 == 0), first
    for k, same in zip(ks, unoutlined):
        ref = np.asarray(jax.jit(fun)(*_arguments(seed, k)))
        for donate in ((), (0,)):
            jitted = tdf.jax.jit(fun, donate_argnums=donate)
            args = _arguments(seed, k)
            kept = [a.copy() for a in args]
            ours = jitted(*args)
            assert PREFIX in jitted.program(*_arguments(seed, k)).buffer_ir
            for i, (a, b) in enumerate(zip(args, kept)):
                if i not in donate:
                    np.testing.assert_array_equal(a, b, err_msg="non-donated input changed")
            np.testing.assert_array_equal(ours, same, err_msg=f"seed={seed} k={k}: "
                                          "outlined and whole builds differ")
            np.testing.assert_allclose(ours, ref, rtol=1e-5, atol=1e-5,
                                       err_msg=f"seed={seed} k={k} donate={donate}")


_KERNEL = """func.func private @scale(%in: memref<8xf32>, %out: memref<8xf32>) {
  %c = arith.constant 1.5 : f32
  linalg.map ins(%in : memref<8xf32>) outs(%out : memref<8xf32>)
    (%a: f32, %o: f32) {
      %r = arith.mulf %a, %c : f32
      linalg.yield %r : f32
    }
  return
}
"""


def _mlir_nest(kinds: str) -> str:
    """``tdf.call @scale`` at each level of a nest of ``kinds`` (``s``:
    scf.index_switch on %k, ``e``: scf.execute_region, ``w``: scf.while
    running once, ``i``: scf.if on %c); the value before each level is read
    again after it (added in)."""
    t = "tensor<8xf32>"
    lines, cur = [], "%x"
    for i, kind in enumerate(kinds):
        lines.append(f"%a{i} = tdf.call @scale({cur}) : ({t}) -> {t}")
        cur = f"%a{i}"
        if kind == "s":
            lines.append(f"%r{i} = scf.index_switch %k -> {t}\ncase 1 {{")
        elif kind == "e":
            lines.append(f"%r{i} = scf.execute_region -> {t} {{")
        elif kind == "w":
            lines.append(f"%r{i}:2 = scf.while (%n{i} = %c0, %v{i} = {cur}) : (index, {t}) -> "
                         f"(index, {t}) {{\n%go{i} = arith.cmpi slt, %n{i}, %c1 : index\n"
                         f"scf.condition(%go{i}) %n{i}, %v{i} : index, {t}\n}} do {{\n"
                         f"^bb0(%m{i}: index, %u{i}: {t}):\n%m{i}n = arith.addi %m{i}, %c1 : index")
            cur = f"%u{i}"
        else:
            lines.append(f"%r{i} = scf.if %c -> ({t}) {{")
    lines.append(f"%z = tdf.call @scale({cur}) : ({t}) -> {t}")
    last = "%z"
    for i in reversed(range(len(kinds))):
        kind = kinds[i]
        if kind == "s":
            lines.append(f"scf.yield {last} : {t}\n}}\ndefault {{\nscf.yield %a{i} : {t}\n}}")
            res = f"%r{i}"
        elif kind == "e":
            lines.append(f"scf.yield {last} : {t}\n}}")
            res = f"%r{i}"
        elif kind == "w":
            lines.append(f"scf.yield %m{i}n, {last} : index, {t}\n}}")
            res = f"%r{i}#1"
        else:
            lines.append(f"scf.yield {last} : {t}\n}} else {{\nscf.yield %a{i} : {t}\n}}")
            res = f"%r{i}"
        lines.append(f"%e{i} = tensor.empty() : {t}\n%s{i} = linalg.add ins({res}, %a{i} : "
                     f"{t}, {t}) outs(%e{i} : {t}) -> {t}")
        last = f"%s{i}"
    return (_KERNEL + f"func.func @main(%x: {t} {{tdf.donate}}, %c: i1, %k: index) -> {t} {{\n"
            "%c0 = arith.constant 0 : index\n%c1 = arith.constant 1 : index\n"
            + "\n".join(lines) + f"\nreturn {last} : {t}\n}}\n")


def _reference(kinds: str, x, c: bool, k: int):
    def level(i, v):
        a = v * np.float32(1.5)
        if i == len(kinds):
            return a
        kind = kinds[i]
        inner = (kind == "s" and k == 1) or kind in "ew" or (kind == "i" and c)
        return (level(i + 1, a) if inner else a) + a
    return level(0, x)


@pytest.mark.parametrize("kinds", ["sesws", "iewsi", "wwwww", "eieie"])
def test_index_switch_execute_region_while_outlined(kinds):
    """depth=2 on a five-level nest: two functions made, the results equal
    the whole program's, inplace=False's and a numpy reference's."""
    text = _mlir_nest(kinds)
    ctx = tdf.Context()
    module = tdf.parse(text, ctx)
    tdf.run_pipeline(module, "builtin.module(tdf-outline-deep-nests{depth=2})")
    outlined = str(module)
    assert outlined.count(f"func.func private @{PREFIX}") == 2, outlined
    progs = [tdf.compile(outlined), tdf.compile(text), tdf.compile(text, inplace=False)]
    x = np.linspace(-1, 1, N, dtype=np.float32)
    for c in (True, False):
        for k in (0, 1):
            want = _reference(kinds, x, c, k)
            for prog in progs:
                np.testing.assert_allclose(prog.main(x.copy(), c, k), want, rtol=1e-5)


def test_compile_time_linear_in_depth():
    """Work, not time: One-Shot Bufferize's analysis after the pass sees no
    function nested deeper than 16, so the number of functions grows
    linearly with the depth and each holds at most 16 levels."""
    import sys
    sys.path.insert(0, __file__.rsplit("/tests/", 1)[0] + "/benchmarks")
    import compile_scaling
    for n in (300, 1200):
        module = tdf.parse(compile_scaling.nested_for(n), tdf.Context())
        tdf.run_pipeline(module, "builtin.module(tdf-outline-deep-nests)")
        from tdf.passes.outline_deep_nests import _levels
        functions = [f for f in module.body.operations if f.operation.name == "func.func"]
        made = [f for f in functions if PREFIX in str(f.attributes["sym_name"])]
        assert len(made) == (n // 3 - 1) // 16
        for f in functions:
            assert max((level for level, _ in _levels(f)), default=0) < 16
