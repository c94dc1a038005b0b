"""Every pass gives the same output on every run (program order decides).

The passes key Python dicts by IR values and ops, whose hashes are
addresses: an address that a rewrite frees and a later op reuses, or an
iteration over such a dict in hash order, makes the output depend on the
memory layout of the process (ASLR). These tests run each pipeline in
several fresh ``tdf-opt`` processes (different layouts) and in one process
on fresh parses, and require byte-identical output.

Regression: on the ``mix`` workload of ``benchmarks/compile_scaling.py``,
``tdf-insert-inplace`` gave a different output on almost every run (a
value created after an erasure took the erased value's union-find entry and
joined its alias class, so some calls were left out of place).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

import tdf

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUNS = 3

_MIX = """
import importlib.util, sys
sys.path.insert(0, {bench!r})
spec = importlib.util.spec_from_file_location("cs", {path!r})
cs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cs)
sys.stdout.write(cs.mix({n}))
"""


def _mix(n: int) -> str:
    """The ``mix`` workload of benchmarks/compile_scaling.py (generated in a
    subprocess: benchmarks/ on sys.path would shadow tests/programs)."""
    code = _MIX.format(bench=os.path.join(ROOT, "benchmarks"),
                       path=os.path.join(ROOT, "benchmarks", "compile_scaling.py"), n=n)
    return subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                          text=True, timeout=120).stdout


def _two_chains(n: int) -> str:
    """Two chains of ``tdf.call`` on donated inputs reading each other."""
    t = "tensor<16xf32>"
    lines = [
        "func.func private @k(%a: memref<16xf32>, %b: memref<16xf32>, %o: memref<16xf32>) "
        "attributes {tdf.elementwise}",
        "func.func private @u(%a: memref<16xf32>, %o: memref<16xf32>) attributes {tdf.elementwise}",
        f"func.func @main(%x: {t} {{tdf.donate}}, %y: {t} {{tdf.donate}}, %z: {t}) -> ({t}, {t}) {{",
    ]
    a, b = "%x", "%y"
    for i in range(n):
        if i % 3 == 2:
            lines.append(f"  %a{i} = tdf.call @u({a}) : ({t}) -> {t}")
        else:
            lines.append(f"  %a{i} = tdf.call @k({a}, {b if i % 2 else '%z'}) : ({t}, {t}) -> {t}")
        lines.append(f"  %b{i} = tdf.call @k({b}, %a{i}) : ({t}, {t}) -> {t}")
        a, b = f"%a{i}", f"%b{i}"
    lines += [f"  return {a}, {b} : {t}, {t}", "}"]
    return "\n".join(lines) + "\n"


def _programs() -> dict:
    with open(os.path.join(ROOT, "lit_tests", "passes",
                           "tdf-insert-inplace-erased-handles.mlir")) as f:
        erased = f.read()
    return {"mix": _mix(300), "two_chains": _two_chains(60), "erased_handles": erased}


PIPELINES = [
    ["--tdf-insert-inplace"],
    ["--tdf-insert-inplace=remarks"],
    ["--tdf-insert-inplace", "--tdf-verify-inplace"],
    ["--tdf-inline-kernels"],
]


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("determinism")
    paths = {}
    for name, text in _programs().items():
        path = folder / f"{name}.mlir"
        path.write_text(text)
        paths[name] = str(path)
    return paths


def _tdf_opt() -> str:
    found = os.path.join(os.path.dirname(sys.executable), "tdf-opt")
    return found if os.path.exists(found) else shutil.which("tdf-opt")


@pytest.mark.parametrize("pipeline", PIPELINES, ids=lambda p: " ".join(p))
def test_fresh_processes_agree(programs, pipeline):
    tool = _tdf_opt()
    assert tool, "tdf-opt not found"
    for name, path in programs.items():
        outputs = set()
        for _ in range(RUNS):
            done = subprocess.run([tool, path, *pipeline], capture_output=True, text=True,
                                  timeout=300)
            assert done.returncode == 0, (name, done.stderr[-2000:])
            outputs.add((done.stdout, done.stderr))
        assert len(outputs) == 1, f"{name}: {len(outputs)} different outputs in {RUNS} runs"


def test_fresh_parses_agree_in_one_process():
    """Fresh parses in one process (other addresses, some reused) agree."""
    text = _mix(300)
    outputs = set()
    keep = []  # keep earlier modules alive so that later ones get new addresses
    for _ in range(3):
        module = tdf.parse(text)
        tdf.run_pipeline(module, "builtin.module(tdf-insert-inplace)")
        outputs.add(str(module))
        keep.append(module)
    assert len(outputs) == 1


def test_mix_turns_every_safe_call_in_place(programs):
    """The regression's symptom: calls left out of place. The output passes
    tdf-verify-inplace{strict}, and no call whose in-place check succeeds on
    the final IR is left as tdf.call (checked by running the pass again:
    a second run finds nothing more to rewrite)."""
    tool = _tdf_opt()
    once = subprocess.run([tool, programs["mix"], "--tdf-insert-inplace",
                           "--tdf-verify-inplace=strict"], capture_output=True, text=True,
                          timeout=300)
    assert once.returncode == 0, once.stderr[-2000:]
    twice = subprocess.run([tool, "--tdf-insert-inplace"], input=once.stdout,
                           capture_output=True, text=True, timeout=300)
    assert twice.returncode == 0, twice.stderr[-2000:]
    assert once.stdout.count("tdf.call_inplace") == twice.stdout.count("tdf.call_inplace")
