"""The persistent compilation cache (tdf.cache): hits give the same Program
as a compile (results, report, IR texts, memory analyses, entry signatures),
every option, toolchain or host change is a miss, damaged entries are
recompiled and never loaded, concurrent processes share one directory, the
size bound evicts the least recently used entries and an empty
TDF_CACHE_DIR turns the cache off. The programs run from the cache are
checked against jax.jit: BLAS contractions, parallel loop nests (thread
runtime), allocation counting, bounds-check errors, shared-library kernels
and calls from several threads."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import pickle
import subprocess
import sys
import textwrap
import threading
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from mlir import ir

import tdf
import tdf.jax
from tdf import cache

N = 1 << 18  # tdf-parallelize's threshold: loop nests this large run on threads


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    """A cache directory of the test's own (conftest turns the cache off)."""
    path = tmp_path / "cache"
    monkeypatch.setenv("TDF_CACHE_DIR", str(path))
    monkeypatch.delenv("TDF_CACHE_MAX_BYTES", raising=False)
    return path


def stored(path) -> list:
    return sorted((path / "v1").glob("*.tdfc"))


def lower(fn, *args, donate=()):
    """A fresh Lowered (tdf.jax caches compiled programs per Lowered; a new
    one goes to tdf.compile, hence to the cache). Always called from this
    line: the program text, locations included, is the same every time."""
    return tdf.jax.jit(fn, donate_argnums=donate).lower(*args)


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def mlp(x, w1, w2):
    return jnp.sum(jax.nn.relu(x @ w1) @ w2, axis=-1)


def update(cache_, row, pos):
    return lax.dynamic_update_slice(cache_, row, (pos, 0)) * 0.5


def vars_of(spec):
    return {k: getattr(spec, k) for k in spec.__slots__}


def assert_same_program(hit, miss):
    """Everything a Program exposes is the same on a hit as on a miss."""
    assert set(vars(hit)) == set(vars(miss))  # a new Program field must be cached too
    assert hit.functions.keys() == miss.functions.keys()
    for name, fn in miss.functions.items():
        other = hit.functions[name]
        assert repr(other.params) == repr(fn.params) and repr(other.results) == repr(fn.results)
        for a, b in zip(other.params + other.results, fn.params + fn.results):
            assert vars_of(a) == vars_of(b)
        assert other.returned_args == fn.returned_args
        assert other.flush_denormals == fn.flush_denormals
        assert hit.memory_analysis(name) == miss.memory_analysis(name)
        assert getattr(hit, name) is other
    assert hit.llvm_ir == miss.llvm_ir and hit.buffer_ir == miss.buffer_ir
    assert hit.counts_allocations == miss.counts_allocations
    report, want = hit.report(), miss.report()
    assert report.from_cache and not want.from_cache
    assert dataclasses.replace(report, cache="") == dataclasses.replace(want, cache="")
    assert str(report).splitlines()[:-1] == str(want).splitlines()[:-1]
    assert str(report).splitlines()[-1] == "compilation cache: hit: loaded, not compiled"


# ------------------------------------------------------------- hit and miss


def test_hit_is_the_same_program(cache_dir):
    x, w1, w2 = rand(16, 32), rand(32, 64, seed=1), rand(64, 8, seed=2)
    miss = lower(mlp, x, w1, w2).compile()
    assert miss.report().cache == "miss: compiled, stored" and len(stored(cache_dir)) == 1
    hit = lower(mlp, x, w1, w2).compile()
    assert_same_program(hit, miss)
    want = np.asarray(jax.jit(mlp)(x, w1, w2))
    np.testing.assert_allclose(hit.main(x, w1, w2), want, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(hit.main(x, w1, w2), miss.main(x, w1, w2))
    assert len(stored(cache_dir)) == 1


def test_texts_printed_late_without_the_cache_are_the_texts(cache_dir, monkeypatch):
    """With the cache, ``llvm_ir`` / ``buffer_ir`` are printed during the
    compile (the entry holds them); without it, when first read, from a copy
    of the bufferized module and from the LLVM-dialect module after the JIT
    compiled it: the same texts (the JIT leaves the module as it was)."""
    x, w1, w2 = rand(16, 32), rand(32, 64, seed=1), rand(64, 8, seed=2)
    text = lower(mlp, x, w1, w2).as_text()
    stored_program = tdf.compile(text)
    assert stored_program.report().cache.startswith("miss")
    monkeypatch.setenv("TDF_CACHE_DIR", "")
    late = tdf.compile(text)
    assert late.report().cache == "off"
    assert isinstance(late._texts["llvm_ir"], ir.Module)  # not printed yet
    assert late.llvm_ir == stored_program.llvm_ir and late.buffer_ir == stored_program.buffer_ir
    assert "llvm.func" in late.llvm_ir and "memref" in late.buffer_ir


def test_donation_and_report_on_a_hit(cache_dir):
    c, row = rand(8, 4), rand(1, 4, seed=1)
    miss = lower(update, c, row, np.int32(3), donate=0).compile()
    hit = lower(update, c, row, np.int32(3), donate=0).compile()
    assert_same_program(hit, miss)
    want = np.asarray(jax.jit(update)(c, row, np.int32(3)))
    out = hit.main(c, row, np.int32(3))
    assert out is c  # the donated array, updated in place
    np.testing.assert_allclose(out, want, rtol=1e-6)


def test_a_new_process_loads_the_program(cache_dir):
    script = textwrap.dedent("""
        import numpy as np, tdf.jax, jax.numpy as jnp
        def f(x):
            return jnp.tanh(x) * 3.0 + jnp.cumsum(x)
        x = np.linspace(-2, 2, 64, dtype=np.float32)
        prog = tdf.jax.jit(f).lower(x).compile()
        np.save({out!r}, prog.main(x))
        print(prog.report().cache)
    """)
    runs = []
    for i in range(2):
        out = str(cache_dir.parent / f"out{i}.npy")
        runs.append(subprocess.run([sys.executable, "-c", script.format(out=out)],
                                   capture_output=True, text=True, check=True))
    assert runs[0].stdout.strip() == "miss: compiled, stored"
    assert runs[1].stdout.strip() == "hit: loaded, not compiled"
    x = np.linspace(-2, 2, 64, dtype=np.float32)
    want = np.asarray(jax.jit(lambda x: jnp.tanh(x) * 3.0 + jnp.cumsum(x))(x))
    for i in range(2):
        np.testing.assert_allclose(np.load(cache_dir.parent / f"out{i}.npy"), want, rtol=1e-5,
                                   atol=1e-5)


def test_module_input_is_cached(cache_dir):
    x = rand(32)
    text = lower(jnp.sin, x).as_text(debug_info=True)
    module = tdf.parse(text, tdf.Context())
    first, second = tdf.compile(module), tdf.compile(module)
    assert not first.report().from_cache and second.report().from_cache
    np.testing.assert_allclose(second.main(x), np.asarray(jax.jit(jnp.sin)(x)), rtol=1e-6)


def update_here(cache_, row, pos):
    return lax.dynamic_update_slice(cache_, row, (pos, 0)) * 0.5


def update_there(cache_, row, pos):
    return lax.dynamic_update_slice(cache_, row, (pos, 0)) * 0.5


def call(fn, *args):
    """A fresh tdf.jax.jit function and its first call's result (called
    from this line: the same call site every time)."""
    f = tdf.jax.jit(fn)
    return f, f(*args)


def test_jit_hit_skips_the_translation(cache_dir):
    """tdf.jax.jit programs are keyed by their jaxpr: a hit neither
    translates the jaxpr to MLIR nor prints it."""
    x = rand(64)
    want = np.asarray(jax.jit(jnp.sin)(x))
    results = []
    for hit in (False, True):
        f, out = call(jnp.sin, x)
        (lowered,) = f._cache.values()
        assert lowered._default.report().from_cache == hit
        assert (not lowered.translated) == hit
        np.testing.assert_allclose(out, want, rtol=1e-6)
        results.append(lowered)
    assert results[1].as_text() == results[0].as_text()  # translated on demand: the same
    assert lower(jnp.sin, x).translated  # lower() translates (and raises its errors)


def test_jit_key_follows_literals_donation_and_locations(cache_dir):
    x = rand(64)
    two = np.float32(2.0)
    fns = [(lambda v, c=c: v * c) for c in (two, np.nextafter(two, np.float32(3.0)))]
    for fn in fns:  # the same line, literals one ulp apart
        assert not lower(fn, x).compile().report().from_cache
    for fn in fns:
        prog = lower(fn, x).compile()
        assert prog.report().from_cache
        np.testing.assert_array_equal(prog.main(x), np.asarray(jax.jit(fn)(x)))
    c, row = rand(8, 4), rand(1, 4, seed=1)
    pos = np.int32(2)
    for fn in (update_here, update_there):  # the same code on other lines
        for donate in ((), 0):
            assert not lower(fn, c, row, pos, donate=donate).compile().report().from_cache
    for fn in (update_here, update_there):
        line = fn.__code__.co_firstlineno + 1
        for donate in ((), 0):
            prog = lower(fn, c, row, pos, donate=donate).compile()
            report = prog.report()
            assert report.from_cache
            assert {d.location.split(":")[1] for d in report.decisions} == {str(line)}, report
            want = np.asarray(jax.jit(fn)(c, row, pos))
            arg = c.copy()
            out = prog.main(arg, row, pos)
            assert (out is arg) == (donate == 0)
            np.testing.assert_allclose(out, want, rtol=1e-6)
    assert len(stored(cache_dir)) == 6


def test_jit_constants_are_in_the_key(cache_dir):
    x = rand(16)
    fns = [(lambda v, t=t: v + jnp.asarray(t)) for t in (rand(16, seed=5), rand(16, seed=6))]
    for k, fn in enumerate(fns + fns):
        f, out = call(fn, x)  # the closed-over arrays are the jaxpr's constants
        (lowered,) = f._cache.values()
        assert lowered._default.report().from_cache == (k >= 2)
        np.testing.assert_allclose(out, np.asarray(jax.jit(fn)(x)), rtol=1e-6)
    assert len(stored(cache_dir)) == 2


def test_jit_key_of_prng_programs(cache_dir):
    """Typed PRNG keys closed over (constants) are keyed by their key data;
    the threefry flag, part of the JAX configuration, is in the key."""
    x = np.ones(3, np.float32)
    fns = [(lambda v, k=k: jax.random.normal(k, (3,)) + v) for k in
           (jax.random.key(7), jax.random.key(8))]
    for k, fn in enumerate(fns + fns):
        f, out = call(fn, x)
        (lowered,) = f._cache.values()
        assert lowered._default.report().from_cache == (k >= 2)
        np.testing.assert_allclose(out, np.asarray(jax.jit(fn)(x)), rtol=1e-6)
    bits = lambda v: jax.random.bits(jax.random.key(3), (4,)) + v  # noqa: E731
    u = np.zeros(4, np.uint32)
    with jax.threefry_partitionable(False):
        f, out = call(bits, u)
        np.testing.assert_array_equal(out, np.asarray(jax.jit(bits)(u)))
    f, out = call(bits, u)  # the other flag: another program, not a hit
    (lowered,) = f._cache.values()
    assert not lowered._default.report().from_cache
    np.testing.assert_array_equal(out, np.asarray(jax.jit(bits)(u)))


_KEYS = """
import numpy as np, jax, jax.numpy as jnp, tdf.jax
from tdf import cache
from tdf.jax._cache_key import program_key
def f(p, x):
    h = jax.nn.relu(x @ p["w"] + p["b"])
    return {"y": jnp.sum(h * 2.0, axis=-1), "s": jax.lax.cumsum(h, axis=0)}
p = {"w": np.ones((4, 3), np.float32), "b": np.zeros(3, np.float32)}
sig = tdf.jax.jit(f)._signature((p, np.ones((2, 4), np.float32)))
cache._files_under = lambda root, suffixes: []  # tdf's sources: edited by others meanwhile
print(program_key(sig, "f", ("a.py", 1, 1)), cache.toolchain_fingerprint())
"""


def test_keys_do_not_depend_on_the_process():
    """The jaxpr key and the toolchain fingerprint are the same in processes
    with different string hashing (no set or dict order leaks into them)."""
    keys = {subprocess.run([sys.executable, "-c", _KEYS], capture_output=True, text=True,
                           check=True, env=dict(os.environ, PYTHONHASHSEED=seed)).stdout
            for seed in ("1", "2", "3")}
    assert len(keys) == 1 and "None" not in next(iter(keys))


def test_unkeyable_jaxpr_is_keyed_by_its_text(cache_dir, monkeypatch):
    from tdf.jax import _cache_key
    monkeypatch.setattr(_cache_key, "program_key", lambda *a: None)
    x = rand(8)
    assert not lower(jnp.tanh, x).compile().report().from_cache
    prog = lower(jnp.tanh, x).compile()
    assert prog.report().from_cache
    np.testing.assert_allclose(prog.main(x), np.asarray(jax.jit(jnp.tanh)(x)), rtol=1e-6)
    with pytest.raises(_cache_key.Unkeyable):
        _cache_key._Writer().value(object())  # printed with its address: no faithful key


# ------------------------------------------------------------------ the key


@pytest.mark.parametrize("options", [
    {"opt_level": 1}, {"inplace": False}, {"bounds_checks": False}, {"count_allocations": True},
    {"flush_denormals": False}, {"num_threads": 1}, {"copy_before_write": True}, {"blas": False},
], ids=lambda o: next(iter(o)))
def test_every_option_is_in_the_key(cache_dir, options):
    x, w1, w2 = rand(16, 32), rand(32, 64, seed=1), rand(64, 8, seed=2)
    lower(mlp, x, w1, w2).compile()
    changed = lower(mlp, x, w1, w2).compile(**options)
    assert not changed.report().from_cache and len(stored(cache_dir)) == 2
    again = lower(mlp, x, w1, w2).compile(**options)
    assert_same_program(again, changed)
    assert again.counts_allocations == bool(options.get("count_allocations"))
    want = np.asarray(jax.jit(mlp)(x, w1, w2))
    np.testing.assert_allclose(again.main(x, w1, w2), want, rtol=1e-4, atol=1e-4)


def test_filename_and_text_are_in_the_key(cache_dir):
    text = lower(jnp.cos, rand(8)).as_text(debug_info=True)
    tdf.compile(text, filename="a.mlir")
    assert not tdf.compile(text, filename="b.mlir").report().from_cache
    assert not tdf.compile(text + "\n").report().from_cache
    assert tdf.compile(text, filename="a.mlir").report().from_cache
    assert len(stored(cache_dir)) == 3


def test_toolchain_or_host_change_is_a_miss(cache_dir, monkeypatch):
    x = rand(8)
    lower(jnp.exp, x).compile()
    with monkeypatch.context() as m:
        m.setitem(cache._TOOLCHAIN, "digest", "another tdf/MLIR/LLVM")
        assert not lower(jnp.exp, x).compile().report().from_cache
    with monkeypatch.context() as m:
        m.setitem(cache._HOST, "host", "x86_64-unknown-linux-gnu otherchip +avx2")
        prog = lower(jnp.exp, x).compile()
        assert not prog.report().from_cache
    assert len(stored(cache_dir)) == 3
    assert lower(jnp.exp, x).compile().report().from_cache
    np.testing.assert_allclose(prog.main(x), np.asarray(jax.jit(jnp.exp)(x)), rtol=1e-6)


def test_toolchain_fingerprint_follows_sources(tmp_path, monkeypatch):
    source = tmp_path / "module.py"
    source.write_text("A = 1\n")
    files_under = cache._files_under
    monkeypatch.setattr(cache, "_files_under",
                        lambda root, suffixes: files_under(root, suffixes) + [str(source)])
    before = cache._compute_toolchain()
    assert cache._compute_toolchain() == before
    source.write_text("A = 2\n")
    os.utime(source, ns=(time.time_ns(), time.time_ns() + 10**9))
    assert cache._compute_toolchain() != before
    host = cache.host_fingerprint()
    assert host.startswith("x86_64") and ("+avx" in host or "-avx" in host)


# ------------------------------------------------------------- damaged entries


def _damage(kind: str, data: bytes, other: bytes) -> bytes:
    middle = len(data) // 2
    return {
        "flipped byte": data[:middle] + bytes([data[middle] ^ 0x40]) + data[middle + 1:],
        "truncated": data[:middle],
        "header only": data[:20],
        "empty": b"",
        "garbage": os.urandom(len(data)),
        "another program's entry": other,
        "extra bytes": data + b"\0",
    }[kind]


@pytest.mark.parametrize("kind", ["flipped byte", "truncated", "header only", "empty", "garbage",
                                  "another program's entry", "extra bytes"])
def test_damaged_entry_is_recompiled_never_loaded(cache_dir, kind):
    x = rand(64)
    lower(jnp.cos, x).compile()
    (path_cos,) = stored(cache_dir)
    lower(jnp.sin, x).compile()
    (path_sin,) = set(stored(cache_dir)) - {path_cos}
    path_cos.write_bytes(_damage(kind, path_cos.read_bytes(), path_sin.read_bytes()))
    prog = lower(jnp.cos, x).compile()
    assert prog.report().cache == "miss: compiled, stored (a damaged entry was deleted)"
    np.testing.assert_allclose(prog.main(x), np.asarray(jax.jit(jnp.cos)(x)), rtol=1e-6)
    again = lower(jnp.cos, x).compile()
    assert again.report().from_cache  # the entry was written again
    assert_same_program(again, prog)


def test_an_object_the_loader_refuses_is_recompiled(cache_dir):
    """An intact entry whose object cannot be linked (here: an object for
    another architecture) is compiled again; nothing of it runs."""
    x = rand(64)
    lower(jnp.cos, x).compile()
    (path,) = stored(cache_dir)
    record = cache._unpack(path.read_bytes(), path.stem)
    obj = bytearray(record["objects"][0])
    obj[18:20] = (183).to_bytes(2, "little")  # ELF e_machine: AArch64
    record["objects"][0] = bytes(obj)
    path.write_bytes(cache._pack(record))
    prog = lower(jnp.cos, x).compile()
    assert prog.report().cache.startswith(
        "miss: compiled, stored (the entry could not be loaded: cannot link the object: ")
    np.testing.assert_allclose(prog.main(x), np.asarray(jax.jit(jnp.cos)(x)), rtol=1e-6)
    assert lower(jnp.cos, x).compile().report().from_cache


def test_entries_hold_plain_data_only(cache_dir):
    lower(jnp.cos, rand(4)).compile()
    (path,) = stored(cache_dir)
    assert cache._unpack(path.read_bytes(), path.stem)["key"] == path.stem
    payload = pickle.dumps({"key": path.stem, "x": os.system}, protocol=5)
    data = cache._MAGIC + len(payload).to_bytes(8, "little") + \
        hashlib.sha256(payload).digest() + payload
    assert cache._unpack(data, path.stem) is None  # intact, but names a global: refused
    with pytest.raises(TypeError, match="cannot cache"):
        cache._encode(np.float32(1.0))


# ---------------------------------------------------------------- processes

_WRITER = """
import sys, time, numpy as np, tdf
start, out, first = float(sys.argv[1]), sys.argv[2], int(sys.argv[3])
while time.time() < start:
    time.sleep(0.005)
texts = {texts!r}
x = np.linspace(-1, 1, 4096, dtype=np.float32)
statuses = []
for k in [(first + i) % len(texts) for i in range(len(texts))]:
    prog = tdf.compile(texts[k])
    np.save(out + f"-{{k}}.npy", prog.main(x))
    statuses.append(prog.report().cache.split(":")[0])
print(" ".join(statuses))
"""


def test_concurrent_writers(cache_dir, tmp_path):
    """Four processes compile the same three programs at the same time into
    one directory (each in another order); every entry left is whole, and
    a fifth process loads all three."""
    x = np.linspace(-1, 1, 4096, dtype=np.float32)
    fns = [jnp.sin, lambda v: jnp.exp(v) - v, lambda v: jnp.tanh(v) * jnp.cos(v)]
    texts = [lower(fn, x).as_text(debug_info=True) for fn in fns]
    script = _WRITER.format(texts=texts)
    start = time.time() + 3.0
    procs = [subprocess.Popen([sys.executable, "-c", script, str(start),
                               str(tmp_path / f"p{i}"), str(i % 3)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(4)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err for _, err in outs]
    assert len(stored(cache_dir)) == 3
    assert not [p for p in (cache_dir / "v1").iterdir() if p.name.startswith(".tmp-")]
    for path in stored(cache_dir):
        assert cache._unpack(path.read_bytes(), path.stem) is not None
    last = subprocess.run([sys.executable, "-c", script, "0", str(tmp_path / "p4"), "0"],
                          capture_output=True, text=True, check=True)
    assert last.stdout.split() == ["hit"] * 3
    for k, fn in enumerate(fns):
        want = np.asarray(jax.jit(fn)(x))
        for i in range(5):
            np.testing.assert_allclose(np.load(tmp_path / f"p{i}-{k}.npy"), want, rtol=1e-5,
                                       atol=1e-6)


def test_threads_compile_and_call_at_once(cache_dir):
    x = rand(256, 64)
    fn = lambda v: jax.nn.softmax(v, axis=-1)  # noqa: E731
    want = np.asarray(jax.jit(fn)(x))
    text = lower(fn, x).as_text(debug_info=True)
    results, errors = [None] * 6, []

    def work(i):
        try:
            prog = tdf.compile(text)
            for _ in range(3):
                results[i] = prog.main(x)
        except Exception as err:  # noqa: BLE001 - reported below
            errors.append(err)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for r in results:
        np.testing.assert_allclose(r, want, rtol=1e-5, atol=1e-6)
    assert len(stored(cache_dir)) == 1


# --------------------------------------------------------------------- size


def test_least_recently_used_entries_are_evicted(cache_dir, monkeypatch):
    x = rand(64)
    a_fn, b_fn, c_fn = jnp.sin, lambda v: v * 3.0 + 1.0, lambda v: v * 5.0 - 2.0
    lower(a_fn, x).compile()
    (path_a,) = stored(cache_dir)
    lower(b_fn, x).compile()
    (path_b,) = set(stored(cache_dir)) - {path_a}
    now = time.time()
    os.utime(path_a, (now - 100, now - 100))
    os.utime(path_b, (now - 50, now - 50))
    assert lower(a_fn, x).compile().report().from_cache  # a hit: A is the most recent
    bound = path_a.stat().st_size + path_b.stat().st_size * 3 // 2
    monkeypatch.setenv("TDF_CACHE_MAX_BYTES", str(bound))
    prog = lower(c_fn, x).compile()
    assert prog.report().cache == "miss: compiled, stored"
    left = stored(cache_dir)
    assert path_a in left and path_b not in left and len(left) == 2
    assert cache.info()["bytes"] <= bound
    assert not lower(b_fn, x).compile().report().from_cache  # B was evicted
    np.testing.assert_allclose(prog.main(x), np.asarray(jax.jit(c_fn)(x)), rtol=1e-6)


def test_size_bound(cache_dir, monkeypatch):
    monkeypatch.setenv("TDF_CACHE_MAX_BYTES", "1K")
    assert cache.max_bytes() == 1024
    x = rand(8)
    prog = lower(jnp.sin, x).compile()
    assert prog.report().cache == "miss: compiled, not stored: larger than the cache's size bound"
    assert stored(cache_dir) == []
    np.testing.assert_allclose(prog.main(x), np.asarray(jax.jit(jnp.sin)(x)), rtol=1e-6)
    monkeypatch.setenv("TDF_CACHE_MAX_BYTES", "2G")
    assert cache.max_bytes() == 2 << 30
    monkeypatch.setenv("TDF_CACHE_MAX_BYTES", "lots")
    with pytest.raises(ValueError, match="TDF_CACHE_MAX_BYTES"):
        lower(jnp.sin, x).compile()


# ------------------------------------------------------------ on, off, where


def test_empty_cache_dir_turns_the_cache_off(tmp_path, monkeypatch):
    monkeypatch.setenv("TDF_CACHE_DIR", "")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache.cache_dir() is None and cache.info()["dir"] is None
    x = rand(8)
    for _ in range(2):
        prog = lower(jnp.sin, x).compile()
        assert prog.report().cache == "off" and not prog.report().from_cache
    assert str(prog.report()).splitlines()[-1] == "compilation cache: off"
    assert list(tmp_path.iterdir()) == []
    np.testing.assert_allclose(prog.main(x), np.asarray(jax.jit(jnp.sin)(x)), rtol=1e-6)


def test_on_by_default_in_the_user_cache_dir(tmp_path, monkeypatch):
    monkeypatch.delenv("TDF_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache.cache_dir() == str(tmp_path / "tdf")
    x = rand(8)
    prog = lower(jnp.sin, x).compile()
    assert len(stored(tmp_path / "tdf")) == 1 and cache.info()["entries"] == 1
    np.testing.assert_allclose(prog.main(x), np.asarray(jax.jit(jnp.sin)(x)), rtol=1e-6)
    assert cache.clear() == 1 and stored(tmp_path / "tdf") == []
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert cache.cache_dir() == str(tmp_path / ".cache" / "tdf")


def test_unwritable_cache_dir_only_stores_nothing(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("TDF_CACHE_DIR", str(blocker))
    x = rand(8)
    prog = lower(jnp.sin, x).compile()
    assert prog.report().cache.startswith("miss: compiled, not stored: ")
    np.testing.assert_allclose(prog.main(x), np.asarray(jax.jit(jnp.sin)(x)), rtol=1e-6)


# ----------------------------------------------------- what runs from the cache


def test_parallel_program_from_the_cache(cache_dir):
    fn = lambda v: jnp.log(jnp.abs(v) + 1.0) * 2.0 - v  # noqa: E731
    x = rand(4, N // 4)
    miss = lower(fn, x).compile(num_threads=2)
    hit = lower(fn, x).compile(num_threads=2)
    assert_same_program(hit, miss)
    assert "llvm.call @tdf_rt_parallel_for" in hit.llvm_ir
    want = np.asarray(jax.jit(fn)(x))
    got = [None] * 4

    def work(i):
        for _ in range(3):
            got[i] = hit.main(x)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for g in got:
        np.testing.assert_allclose(g, want, rtol=2e-5, atol=2e-5)


def test_blas_program_from_the_cache(cache_dir):
    assert tdf.blas.available(), "the BLAS (scipy-openblas32) is a pinned requirement"
    a, b = rand(64, 96), rand(96, 32, seed=1)
    fn = lambda p, q: p @ q  # noqa: E731
    # Every GEMM through the library (this one is small enough to be compiled).
    miss = lower(fn, a, b).compile(codegen_flops=0)
    hit = lower(fn, a, b).compile(codegen_flops=0)
    assert_same_program(hit, miss)
    assert "tdf_rt_contract" in hit.llvm_ir
    np.testing.assert_allclose(hit.main(a, b), np.asarray(jax.jit(fn)(a, b)), rtol=1e-4,
                               atol=1e-4)


def test_allocation_counting_from_the_cache(cache_dir):
    fn = lambda v: jnp.sin(v) * 2.0 + v  # noqa: E731
    x = rand(1000)
    miss = lower(fn, x).compile(count_allocations=True)
    hit = lower(fn, x).compile(count_allocations=True)
    assert_same_program(hit, miss)
    want = np.asarray(jax.jit(fn)(x))
    results = [prog.main(x) for prog in (miss, hit)]
    for r in results:
        np.testing.assert_allclose(r, want, rtol=1e-6)
    assert hit.allocation_stats() == miss.allocation_stats()
    assert hit.allocation_stats().calls == 1
    del results, r
    assert hit.allocation_stats().live_bytes == 0  # results free through this program's counter


BOUNDS = """\
func.func @step(%cache: tensor<8x4xf32> {tdf.donate}, %row: tensor<1x4xf32>, %pos: index) -> tensor<8x4xf32> {
  %new = tensor.insert_slice %row into %cache[%pos, 0] [1, 4] [1, 1] : tensor<1x4xf32> into tensor<8x4xf32>
  return %new : tensor<8x4xf32>
}
"""


def test_bounds_check_errors_from_the_cache(cache_dir):
    miss = tdf.compile(BOUNDS, filename="kv.mlir")
    hit = tdf.compile(BOUNDS, filename="kv.mlir")
    assert_same_program(hit, miss)
    messages = []
    for prog in (miss, hit):
        c = np.zeros((8, 4), np.float32)
        with pytest.raises(IndexError) as err:
            prog.step(c, np.ones((1, 4), np.float32), 8)
        messages.append(str(err.value))
        assert not c.any()  # nothing written
    assert messages[0] == messages[1] and "kv.mlir:2:" in messages[1]
    c, row = rand(8, 4), rand(1, 4, seed=1)
    want = np.asarray(jax.jit(lambda a, r: lax.dynamic_update_slice(a, r, (5, 0)))(c, row))
    np.testing.assert_array_equal(hit.step(c, row, 5), want)


KERNEL_PROGRAM = """
func.func private @scale2(memref<16xf32>, memref<16xf32>)
func.func @f(%x: tensor<16xf32>) -> tensor<16xf32> {
  %r = tdf.call @scale2(%x) : (tensor<16xf32>) -> tensor<16xf32>
  return %r : tensor<16xf32>
}
"""

KERNEL_C = """
#include <stdint.h>
typedef struct { float *allocated, *aligned; int64_t offset, sizes[1], strides[1]; } M1;
void _mlir_ciface_scale2(M1 *x, M1 *out) {
  for (int i = 0; i < 16; ++i) out->aligned[out->offset + i] = FACTOR * x->aligned[x->offset + i];
}
"""

_KERNEL_RUN = """
import numpy as np, tdf
prog = tdf.compile({text!r}, inplace=False, shared_libs=[{lib!r}])
np.save({out!r}, prog.f(np.arange(16, dtype=np.float32)))
print(prog.report().cache)
"""


def test_shared_library_kernels_are_linked_not_cached(cache_dir, tmp_path, shared_lib):
    """A cached program calls its kernel library's current code: rebuilding
    the library (same path) changes what a new process's hit computes."""
    x = np.arange(16, dtype=np.float32)
    lib = shared_lib("kernels", KERNEL_C.replace("FACTOR", "2.0f"))
    miss = tdf.compile(KERNEL_PROGRAM, inplace=False, shared_libs=[lib])
    hit = tdf.compile(KERNEL_PROGRAM, inplace=False, shared_libs=[lib])
    assert_same_program(hit, miss)
    np.testing.assert_array_equal(hit.f(x), np.asarray(jax.jit(lambda v: 2.0 * v)(x)))
    runs = []
    for factor in (2.0, 3.0):
        shared_lib("kernels", KERNEL_C.replace("FACTOR", f"{factor}f"))  # rebuilt in place
        out = str(tmp_path / f"k{factor}.npy")
        runs.append(subprocess.run([sys.executable, "-c",
                                    _KERNEL_RUN.format(text=KERNEL_PROGRAM, lib=lib, out=out)],
                                   capture_output=True, text=True, check=True))
        want = np.asarray(jax.jit(lambda v, c=factor: c * v)(x))
        np.testing.assert_array_equal(np.load(out), want)
    # (the first process may have compiled: this one's fingerprint of tdf's
    # sources is the one to compare with)
    assert runs[1].stdout.strip() == "hit: loaded, not compiled"


def test_errors_are_never_cached(cache_dir):
    bad = KERNEL_PROGRAM.replace("scale2", "scale_nowhere")
    for _ in range(2):
        with pytest.raises(tdf.compiler.CompileError, match="scale_nowhere"):
            tdf.compile(bad, inplace=False)
    assert stored(cache_dir) == []


def test_cache_benchmark_smoke(tmp_path):
    """benchmarks/cache.py at toy size: every variant runs in a fresh
    process, the warm one from the cache without translating (the script
    asserts it) and every tdf result matches jax.jit's."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.run([sys.executable, os.path.join(root, "benchmarks", "cache.py"), "--tiny",
                           "--only", "adam", "--reps", "1", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=600, cwd=root)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (row,) = json.loads((tmp_path / "cache.json").read_text())["rows"]
    assert row["workload"] == "adam"
    assert all(0 < s < 600 for s in row["seconds"].values())
    assert row["warm_stages"]["tdf.compile"] > 0 and "translate" not in row["warm_stages"]
