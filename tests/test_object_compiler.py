"""tdf's CPU code generator (``tdf.objects``, ``python/src/ObjectCompiler.cpp``):
functions of many loops cut into parts and modules split over threads must
compute what the uncut one-thread build computes and what ``jax.jit``
computes; small programs are neither cut nor split; a program that needs the
MLIR ExecutionEngine (a library with its init hooks) still compiles and runs.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tdf
import tdf.jax
from tdf import _tdf, jit_symbols
from tdf import objects as tdf_objects
from tdf.passes import pipelines

N = 48

STAGES = {
    "cumsum0": lambda x: jnp.cumsum(x, axis=0) * 0.01,
    "cumsum1": lambda x: jnp.cumsum(x, axis=1) * 0.01,
    "center0": lambda x: x - x.mean(axis=0, keepdims=True),
    "center1": lambda x: x - x.max(axis=1, keepdims=True),
    "tanh_t": lambda x: jnp.tanh(x.T),
    "softmax": lambda x: jax.nn.softmax(x, axis=-1),
    "ramp": lambda x: x * jnp.linspace(-1.0, 1.0, N, dtype=jnp.float32) + 0.5,
    "reverse": lambda x: x[::-1] * 0.5 + x,
}


def program(names):
    def f(x):
        for name in names:
            x = STAGES[name](x)
        return x
    return f


@pytest.fixture
def recorded(monkeypatch):
    """The stats of every compile_prepared call."""
    stats = []
    compile_prepared = tdf_objects.compile_prepared

    def record(*args, **kwargs):
        objects, found = compile_prepared(*args, **kwargs)
        stats.append(found)
        return objects, found

    monkeypatch.setattr(tdf_objects, "compile_prepared", record)
    return stats


def unshared(monkeypatch):
    """Repeated stages stay copies (no tdf-share-loop-nests): a program as
    large as the tests below need, with every loop nest in its function."""
    lower = pipelines.lower_to_llvm
    monkeypatch.setattr(pipelines, "lower_to_llvm", lambda *a, **k: [
        p for p in lower(*a, **k) if p != "tdf-share-loop-nests"])


def run(names, x, **options):
    x_before = x.copy()
    out = np.asarray(tdf.jax.jit(program(names), **options)(x))
    np.testing.assert_array_equal(x, x_before)  # not donated: unchanged
    return out


def check_against_uncut(names, x, recorded, monkeypatch):
    cut = run(names, x, num_threads=2)
    stats = recorded[-1]
    monkeypatch.setattr(tdf_objects, "PART_LOOPS", 0)
    whole = run(names, x, num_threads=1)
    assert recorded[-1]["parts"] == 0 and recorded[-1]["partitions"] == 1
    expected = np.asarray(jax.jit(program(names))(x))
    np.testing.assert_allclose(cut, whole, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(cut, expected, rtol=1e-4, atol=1e-5)
    return stats


def test_large_program_is_cut_and_split_and_computes_the_same(recorded, monkeypatch):
    unshared(monkeypatch)
    names = [name for _ in range(10) for name in STAGES]
    x = np.random.default_rng(0).standard_normal((N, N)).astype(np.float32)
    stats = check_against_uncut(names, x, recorded, monkeypatch)
    assert stats["parts"] > 0
    assert stats["partitions"] == 2


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(names=st.lists(st.sampled_from(sorted(STAGES)), min_size=30, max_size=60),
       seed=st.integers(0, 2**16))
def test_random_programs_cut_or_not_agree(names, seed, recorded, monkeypatch):
    monkeypatch.setattr(tdf_objects, "PART_LOOPS", tdf_objects.PART_LOOPS)
    x = np.random.default_rng(seed).standard_normal((N, N)).astype(np.float32)
    check_against_uncut(names, x, recorded, monkeypatch)


def test_negative_small_program_is_neither_cut_nor_split(recorded):
    x = np.random.default_rng(1).standard_normal((N, N)).astype(np.float32)
    out = run(["ramp"], x, num_threads=2)
    assert recorded[-1]["parts"] == 0 and recorded[-1]["partitions"] == 1
    f = program(["ramp"])
    np.testing.assert_allclose(out, np.asarray(jax.jit(f)(x)), rtol=1e-5, atol=1e-6)


def test_split_program_round_trips_through_the_cache(tmp_path, monkeypatch, recorded):
    monkeypatch.setenv("TDF_CACHE_DIR", str(tmp_path))
    unshared(monkeypatch)
    names = [name for _ in range(10) for name in STAGES]
    x = np.random.default_rng(2).standard_normal((N, N)).astype(np.float32)
    f = program(names)

    def compiled():  # one call site: the same program text (locations) each time
        return tdf.jax.jit(f, num_threads=2).lower(x).compile()

    first = compiled()
    assert recorded[-1]["partitions"] == 2
    assert first.report().cache == "miss: compiled, stored"
    again = compiled()
    assert again.report().from_cache and len(recorded) == 1
    np.testing.assert_array_equal(np.asarray(again.main(x)), np.asarray(first.main(x)))
    np.testing.assert_allclose(np.asarray(again.main(x)), np.asarray(jax.jit(f)(x)),
                               rtol=1e-4, atol=1e-5)


ADD = """
func.func @main(%x: tensor<8xf32>) -> tensor<8xf32> {
  %e = tensor.empty() : tensor<8xf32>
  %y = linalg.add ins(%x, %x : tensor<8xf32>, tensor<8xf32>) outs(%e : tensor<8xf32>) -> tensor<8xf32>
  return %y : tensor<8xf32>
}
"""


def test_library_with_engine_init_hooks_gives_its_symbols(tmp_path, monkeypatch):
    """libmlir_async_runtime.so registers its functions through
    ``__mlir_execution_engine_init``; passed as a shared library (it once
    aborted the process: the engine defined them twice), the program links,
    runs, is cached and loads from the cache."""
    library = jit_symbols.mlir_lib("libmlir_async_runtime.so")
    if library is None:
        pytest.skip("the MLIR wheel has no libmlir_async_runtime.so")
    monkeypatch.setenv("TDF_CACHE_DIR", str(tmp_path))
    x = np.arange(8, dtype=np.float32)
    for threads, cache in ((2, "miss: compiled, stored"), (2, "hit: loaded, not compiled"),
                           (1, "miss: compiled, stored")):
        prog = tdf.compile(ADD, shared_libs=[library], num_threads=threads)
        np.testing.assert_array_equal(prog.main(x), x + x)
        assert prog.report().cache == cache


def test_compile_object_rejects_a_bad_level():
    from mlir import ir

    from tdf.context import Context
    with Context():
        module = ir.Module.parse("llvm.func @f() { llvm.return }")
        prepared = _tdf.prepare_module(module.operation, 16, 1)
        with pytest.raises(ValueError, match="opt_level"):
            _tdf.compile_prepared(prepared, 4)
        objects, stats = _tdf.compile_prepared(prepared, 2)
        assert len(objects) == 1 and objects[0][:4] == b"\x7fELF"
        assert stats["parts"] == 0 and stats["partitions"] == 1


def test_negative_link_names_a_symbol_nothing_defines():
    """A symbol nobody defines (what a backend libcall can introduce, past
    jit_symbols.unresolved_functions) fails the link with its name in the
    error, never a NULL entry point."""
    from mlir import ir

    from tdf.context import Context
    with Context():
        module = ir.Module.parse("""
llvm.func @tdf_no_such_symbol(f32) -> f32
llvm.func @_mlir_ciface_f(%x: f32) -> f32 {
  %y = llvm.call @tdf_no_such_symbol(%x) : (f32) -> f32
  llvm.return %y : f32
}""")
        objects, _ = tdf_objects.compile_module(module, 2)
    with pytest.raises(RuntimeError, match=r"Symbols not found: \[ tdf_no_such_symbol \]"):
        tdf_objects.link(objects, ["f"], [])


def test_only_entries_stay_visible():
    """With the entries named, every other function is internal to the
    program (no packed wrapper of its own, dropped once inlined); a parallel
    program so compiled still runs and matches jax.jit."""
    from mlir import ir

    from tdf.context import Context

    def f(p, g, m):
        m = 0.9 * m + 0.1 * g
        return p - 1e-3 * m / (jnp.sqrt(m * m) + 1e-8), m

    args = [np.random.default_rng(i).standard_normal(1 << 18).astype(np.float32)
            for i in range(3)]
    prog = tdf.jax.jit(f, num_threads=2).lower(*args).compile()
    assert "llvm.call @tdf_rt_parallel_for" in prog.llvm_ir  # the loops run on the pool
    for out, ref in zip(prog.main(*args), jax.jit(f)(*args)):
        np.testing.assert_allclose(np.asarray(out), np.asarray(ref), rtol=1e-5, atol=1e-6)
    with Context():
        module = ir.Module.parse("""
llvm.func @helper(%x: i64) -> i64 {
  %y = llvm.mul %x, %x : i64
  llvm.return %y : i64
}
llvm.func @_mlir_ciface_main(%x: i64) -> i64 {
  %y = llvm.call @helper(%x) : (i64) -> i64
  llvm.return %y : i64
}""")
        every, _ = tdf_objects.compile_module(module, 2)
        entries, _ = tdf_objects.compile_module(module, 2, entries=["main"])
    assert b"_mlir_helper" in every[0] and b"helper" not in entries[0]
    tdf_objects.link(entries, ["main"], [])


SCALAR_STAGES = {
    "affine": lambda x, y: x * 1.25 + y,
    "tanh": lambda x, y: jnp.tanh(x) - 0.5 * y,
    "max": lambda x, y: jnp.maximum(x, y * 0.75),
    "select": lambda x, y: jnp.where(x > y, x - y, y - x),
    "divide": lambda x, y: x / (1.0 + y * y),
    "exp": lambda x, y: jnp.exp(-x * x) + y,
}


def scalar_program(names):
    """Straight-line code: every op on 0-d values, one function, no loop."""
    def f(x, y):
        for name in names:
            x, y = SCALAR_STAGES[name](x, y), x
        return x, y
    return f


def build(names, fast, recorded, monkeypatch, *args):
    monkeypatch.setattr(tdf_objects, "FAST_CODEGEN_INSTRUCTIONS", fast)
    prog = tdf.jax.jit(scalar_program(names)).lower(*args).compile()
    return [np.asarray(out) for out in prog.main(*args)], recorded[-1]


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(names=st.lists(st.sampled_from(sorted(SCALAR_STAGES)), min_size=24, max_size=48),
       seed=st.integers(0, 2**16))
def test_straight_line_functions_on_the_fast_selector_agree(names, seed, recorded, monkeypatch):
    """A loop-free function goes to LLVM's fast instruction selector
    (objects.FAST_CODEGEN_INSTRUCTIONS, lowered to 16 here: these functions
    have 30-200 instructions); it computes what the same program
    code-generated through SelectionDAG computes, and what jax.jit does."""
    monkeypatch.setenv("TDF_CACHE_DIR", "")
    rng = np.random.default_rng(seed)
    args = (np.float32(rng.standard_normal()), np.float32(rng.standard_normal()))
    fast, stats = build(names, 16, recorded, monkeypatch, *args)
    assert stats["fast_functions"] >= 1
    dag, stats = build(names, 0, recorded, monkeypatch, *args)
    assert stats["fast_functions"] == 0
    expected = jax.jit(scalar_program(names))(*args)
    for a, b, ref in zip(fast, dag, expected):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(a, np.asarray(ref), rtol=1e-4, atol=1e-5)


def _llvm_function(name: str, loop: bool, ops: int = 80) -> str:
    """An LLVM-dialect function of ``ops`` dependent multiply-adds, inside a
    loop of %n trips or straight-line."""
    body, cur = [], "%x"
    for i in range(ops):
        body.append(f"%v{i} = llvm.fmul {cur}, %x : f64")
        body.append(f"%w{i} = llvm.fadd %v{i}, %c : f64")
        cur = f"%w{i}"
    head = "%c = llvm.mlir.constant(0.5 : f64) : f64"
    if not loop:
        return (f"llvm.func @{name}(%x: f64, %n: i64) -> f64 attributes {{no_inline}} {{\n{head}\n"
                + "\n".join(body)
                + f"\nllvm.return {cur} : f64\n}}\n")
    return (f"llvm.func @{name}(%x0: f64, %n: i64) -> f64 attributes {{no_inline}} {{\n{head}\n"
            "%z = llvm.mlir.constant(0 : i64) : i64\n%one = llvm.mlir.constant(1 : i64) : i64\n"
            "llvm.br ^loop(%z, %x0 : i64, f64)\n"
            "^loop(%i: i64, %x: f64):\n" + "\n".join(body)
            + "\n%next = llvm.add %i, %one : i64\n"
            "%more = llvm.icmp \"slt\" %next, %n : i64\n"
            f"llvm.cond_br %more, ^loop(%next, {cur} : i64, f64), ^exit({cur} : f64)\n"
            "^exit(%r: f64):\nllvm.return %r : f64\n}\n")


def test_negative_loop_functions_and_unoptimized_builds_keep_their_selector():
    """Only functions without a loop go to the fast selector (loops are
    where the code generator's time pays); at opt_level 0 nothing is marked:
    LLVM's -O0 code generator already selects fast. The marked build runs
    the same numbers."""
    import ctypes

    from mlir import ir

    from tdf.context import Context
    text = ("llvm.func @_mlir_ciface_glue(%x: f64, %n: i64) -> f64 {\n"
            "%a = llvm.call @straight(%x, %n) : (f64, i64) -> f64\n"
            "%b = llvm.call @looped(%a, %n) : (f64, i64) -> f64\n"
            "llvm.return %b : f64\n}\n"
            + _llvm_function("straight", loop=False) + _llvm_function("looped", loop=True))
    results = {}
    with Context():
        module = ir.Module.parse(text)
        for level, fast, marked in ((2, 16, 1), (2, 0, 0), (0, 16, 0)):
            prepared = _tdf.prepare_module(module.operation, 0, 1, ["_mlir_ciface_glue"])
            objects, stats = _tdf.compile_prepared(prepared, level, fast)
            assert stats["fast_functions"] == marked, (level, fast)
            code, (address,) = tdf_objects.link(objects, ["glue"], [])
            # _mlir__mlir_ciface_glue(void **args): the packed wrapper.
            x, n, out = ctypes.c_double(0.25), ctypes.c_int64(3), ctypes.c_double()
            packed = (ctypes.c_void_p * 3)(*(ctypes.cast(ctypes.pointer(v), ctypes.c_void_p)
                                             for v in (x, n, out)))
            ctypes.CFUNCTYPE(None, ctypes.c_void_p)(address)(packed)
            results[(level, fast)] = out.value
            del code
    expected = 0.25
    for _ in range(80):
        expected = expected * 0.25 + 0.5
    for _ in range(3):
        x = expected
        for _ in range(80):
            expected = expected * x + 0.5
    assert len(set(results.values())) == 1, results
    np.testing.assert_allclose(results[(2, 16)], expected, rtol=1e-12)


def _glue_then_loop(name: str, glue_ops: int, loop_ops: int) -> str:
    """An LLVM-dialect function: ``glue_ops`` straight-line multiply-adds,
    then a loop of ``%n`` trips of ``loop_ops`` more."""
    body, cur = [], "%x"
    for i in range(glue_ops):
        body.append(f"%g{i} = llvm.fmul {cur}, %x : f64")
        body.append(f"%h{i} = llvm.fadd %g{i}, %c : f64")
        cur = f"%h{i}"
    inner, acc = [], "%y"
    for i in range(loop_ops):
        inner.append(f"%l{i} = llvm.fmul {acc}, %c : f64")
        inner.append(f"%m{i} = llvm.fadd %l{i}, %x : f64")
        acc = f"%m{i}"
    return (f"llvm.func @{name}(%x: f64, %n: i64) -> f64 attributes {{no_inline}} {{\n"
            "%c = llvm.mlir.constant(0.5 : f64) : f64\n"
            "%z = llvm.mlir.constant(0 : i64) : i64\n%one = llvm.mlir.constant(1 : i64) : i64\n"
            + "\n".join(body) + f"\nllvm.br ^loop(%z, {cur} : i64, f64)\n"
            "^loop(%i: i64, %y: f64):\n" + "\n".join(inner)
            + "\n%next = llvm.add %i, %one : i64\n"
            "%more = llvm.icmp \"slt\" %next, %n : i64\n"
            f"llvm.cond_br %more, ^loop(%next, {acc} : i64, f64), ^exit({acc} : f64)\n"
            "^exit(%r: f64):\nllvm.return %r : f64\n}\n")


def test_loops_of_glue_heavy_functions_get_functions_of_their_own():
    """A function of much straight-line code and one small loop gives the
    loop to a function of its own (a part), and then goes to the fast
    selector; a function whose loop is most of it (negative_) keeps its
    loop. Every build computes the same number."""
    import ctypes

    from mlir import ir

    from tdf.context import Context
    text = ("llvm.func @_mlir_ciface_glue(%x: f64, %n: i64) -> f64 {\n"
            "%a = llvm.call @heavy(%x, %n) : (f64, i64) -> f64\n"
            "%b = llvm.call @looped(%a, %n) : (f64, i64) -> f64\n"
            "llvm.return %b : f64\n}\n"
            + _glue_then_loop("heavy", glue_ops=200, loop_ops=4)
            + _glue_then_loop("looped", glue_ops=4, loop_ops=200))
    results = {}
    with Context():
        module = ir.Module.parse(text)
        for glue, parts, fast in ((256, 1, 1), (0, 0, 0), (1000, 0, 0)):
            prepared = _tdf.prepare_module(module.operation, 0, 1, ["_mlir_ciface_glue"], glue)
            assert prepared.parts == parts, glue
            objects, stats = _tdf.compile_prepared(prepared, 2, 64)
            assert stats["fast_functions"] == fast, glue
            code, (address,) = tdf_objects.link(objects, ["glue"], [])
            x, n, out = ctypes.c_double(0.25), ctypes.c_int64(3), ctypes.c_double()
            packed = (ctypes.c_void_p * 3)(*(ctypes.cast(ctypes.pointer(v), ctypes.c_void_p)
                                             for v in (x, n, out)))
            ctypes.CFUNCTYPE(None, ctypes.c_void_p)(address)(packed)
            results[glue] = out.value
            del code
    x = 0.25
    y = x
    for _ in range(200):
        y = y * x + 0.5
    for _ in range(3 * 4):
        y = y * 0.5 + x
    x2 = y
    y = x2
    for _ in range(4):
        y = y * x2 + 0.5
    for _ in range(3 * 200):
        y = y * 0.5 + x2
    assert len(set(results.values())) == 1, results
    np.testing.assert_allclose(results[0], y, rtol=1e-12)
