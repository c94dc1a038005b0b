"""Kernel fuzzer: random kernels (``tests/kernel_fuzz.py``) called
through ``tdf.call`` with random donation, compiled with the in-place
rewrite on and off, compared bit for bit with each other and with a numpy
reference; every non-donated argument must be byte-identical afterwards, and
the output of ``tdf-insert-inplace`` must pass ``tdf-verify-inplace{strict}``.

CI runs a short seeded slice (``TDF_KERNEL_FUZZ_PROGRAMS``, default 48
programs). ``TDF_LONG=1`` runs 10,000 programs (or
``TDF_KERNEL_FUZZ_PROGRAMS``) from ``TDF_KERNEL_FUZZ_SEED`` (default 0) and
prints the counts. Programs are compiled in batches (one module holds
``BATCH`` programs) to keep the JIT cost down.

Also here: kernels the fuzzer found wrong, as JIT-vs-numpy regression tests, and the
check that ``tdf.compile(strict=True)`` and ``tdf-lower-to-cpu{strict=true}``
agree.
"""

from __future__ import annotations

import os
import time

import kernel_fuzz
import numpy as np
import pytest
from mlir import ir

import tdf

LONG = os.environ.get("TDF_LONG") == "1"
PROGRAMS = int(os.environ.get("TDF_KERNEL_FUZZ_PROGRAMS", "10000" if LONG else "48"))
SEED = int(os.environ.get("TDF_KERNEL_FUZZ_SEED", "0"))
BATCH = 16 if LONG else 8


def _inplace_calls(module, name: str) -> int:
    count = 0
    for op in module.body.operations:
        if "sym_name" in op.attributes and ir.StringAttr(op.attributes["sym_name"]).value == name:
            def visit(inner):
                nonlocal count
                if inner.name == "tdf.call_inplace":
                    count += 1
                return ir.WalkResult.ADVANCE
            op.operation.walk(visit)
    return count


def check_invariant(text: str, names) -> dict:
    """Runs ``tdf-insert-inplace`` then ``tdf-verify-inplace{strict}`` (which
    must pass) on ``text``; returns ``{name: in-place calls}``."""
    ctx = tdf.Context()
    module = tdf.parse(text, ctx)
    tdf.run_pipeline(module, "builtin.module(tdf-insert-inplace)")
    try:
        tdf.run_pipeline(module, "builtin.module(tdf-verify-inplace{strict=true})")
    except tdf.TDFError as err:
        raise AssertionError(f"tdf-insert-inplace output fails tdf-verify-inplace{{strict}}:\n"
                             f"{err}\n--- input ---\n{text}\n--- rewritten ---\n{module}") from None
    with ctx:
        return {name: _inplace_calls(module, name) for name in names}


def run_batch(rng, programs) -> dict:
    """Compiles ``programs`` as one module in place on and off, runs each
    program once with the same inputs, compares; returns counts."""
    text = "".join(p.text for p in programs)
    rewritten = check_invariant(text, [p.name for p in programs])
    builds = {flag: tdf.compile(text, inplace=flag, opt_level=0, filename="kernel_fuzz.mlir")
              for flag in (False, True)}
    for program in programs:
        inputs = kernel_fuzz.random_inputs(rng, program)
        want = program.reference(inputs)
        got = {}
        for flag, build in builds.items():
            args = [x.copy() for x in inputs]
            out = getattr(build, program.name)(*args)
            out = list(out) if isinstance(out, tuple) else [out]
            got[flag] = [np.array(o, copy=True) for o in out]
            for i, (arg, orig) in enumerate(zip(args, inputs)):
                if not program.donated[i]:
                    assert arg.tobytes() == orig.tobytes(), (
                        f"non-donated argument #{i} written (inplace={flag})\n{program.text}")
            for i, (g, w) in enumerate(zip(got[flag], want)):
                # float32 in loop order on both sides; the CPU lowering may
                # contract a matmul's multiply-add into an FMA (one rounding).
                np.testing.assert_allclose(
                    g, w, rtol=1e-5, atol=0, equal_nan=True,
                    err_msg=f"result #{i} (inplace={flag}) differs from numpy\n"
                            f"{program.text}\ninputs: {inputs}")
        for i, (a, b) in enumerate(zip(got[False], got[True])):
            assert a.tobytes() == b.tobytes(), (
                f"result #{i}: in place on and off differ\n{program.text}\ninputs: {inputs}")
    return {"programs": len(programs),
            "rewritten": sum(1 for p in programs if rewritten[p.name] > 0),
            "inplace_calls": sum(rewritten.values())}


def fuzz(count: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    totals = {"programs": 0, "rewritten": 0, "inplace_calls": 0}
    done = 0
    while done < count:
        size = min(BATCH, count - done)
        programs = [kernel_fuzz.random_program(rng, f"p{done + k}") for k in range(size)]
        stats = run_batch(rng, programs)
        for key in totals:
            totals[key] += stats[key]
        done += size
        if LONG:  # progress of the long run (a mismatch fails with the program)
            print(f"kernel fuzz progress: {totals}", flush=True)
    return totals


def test_kernel_fuzz():
    start = time.perf_counter()
    totals = fuzz(PROGRAMS, SEED)
    elapsed = time.perf_counter() - start
    print(f"kernel fuzz: {totals['programs']} programs, {totals['rewritten']} rewritten in place "
          f"({totals['inplace_calls']} tdf.call_inplace), seed {SEED}, {elapsed:.1f} s, 0 mismatches")
    assert totals["programs"] == PROGRAMS
    # A generator producing only what the pass rejects would test nothing.
    assert totals["rewritten"] >= PROGRAMS // 5, totals


def test_generator_covers_kernel_features():
    """The generator reaches every feature the fuzzer is meant to cover."""
    rng = np.random.default_rng(1)
    text = "".join(kernel_fuzz.random_program(rng, f"g{k}").text for k in range(300))
    for needle in ("linalg.generic", '"reduction"', "-> ()>", "-d", "linalg.transpose",
                   "linalg.matmul", "linalg.fill", "linalg.add", "linalg.negf", "linalg.copy",
                   "memref<f32>", "tdf.elementwise", "tdf.donate", "outs(%p", ": f32)"):
        assert needle in text, needle
    # Ops reading an output written by an earlier op, and several outputs.
    assert any(len(p.kernels[0].out_shapes) == 2 for p in
               (kernel_fuzz.random_program(rng, f"h{k}") for k in range(50)))


# -- regressions the fuzzer found, JIT against numpy --------------------------

TRANSPOSED_NEXT_TO_SCALAR = """
#id = affine_map<(d0, d1) -> (d0, d1)>
#tr = affine_map<(d0, d1) -> (d1, d0)>
#sc = affine_map<(d0, d1) -> ()>
func.func private @k(%a: memref<4x4xf32>, %x: memref<4x4xf32>, %b: memref<4x4xf32>, %out: memref<4x4xf32>) {
  %s = arith.constant 1.0 : f32
  linalg.generic {indexing_maps = [#sc, #id, #tr, #id, #id], iterator_types = ["parallel", "parallel"]}
     ins(%s, %a, %x, %b : f32, memref<4x4xf32>, memref<4x4xf32>, memref<4x4xf32>) outs(%out : memref<4x4xf32>) {
  ^bb0(%vs: f32, %va: f32, %vx: f32, %vb: f32, %o: f32):
    %u = arith.addf %va, %vx : f32
    %w = arith.addf %u, %vb : f32
    linalg.yield %w : f32
  }
  return
}
func.func @main(%a: tensor<4x4xf32>, %x: tensor<4x4xf32> {tdf.donate}, %b: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %r = tdf.call @k(%a, %x, %b) : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %r : tensor<4x4xf32>
}
"""

ADD_THEN_MUL = """
func.func private @k(%a: memref<8xf32>, %b: memref<8xf32>, %out: memref<8xf32>) attributes {tdf.elementwise} {
  linalg.add ins(%a, %b : memref<8xf32>, memref<8xf32>) outs(%out : memref<8xf32>)
  linalg.mul ins(%out, %a : memref<8xf32>, memref<8xf32>) outs(%out : memref<8xf32>)
  return
}
func.func @main(%a: tensor<8xf32> {tdf.donate}, %b: tensor<8xf32>) -> tensor<8xf32> {
  %r = tdf.call @k(%a, %b) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %r : tensor<8xf32>
}
"""

SHIFTED_PART = """
func.func private @exp(%x: memref<4xf32>, %out: memref<4xf32>) {
  linalg.exp ins(%x : memref<4xf32>) outs(%out : memref<4xf32>)
  return
}
func.func @main(%A: tensor<8xf32> {tdf.donate}, %i: index, %j: index) -> tensor<8xf32> {
  %r0 = tensor.extract_slice %A[%i] [4] [1] : tensor<8xf32> to tensor<4xf32>
  %z = tdf.call @exp(%r0) : (tensor<4xf32>) -> tensor<4xf32>
  %e = tensor.empty() : tensor<4xf32>
  %n = linalg.negf ins(%z : tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %c = tensor.insert_slice %n into %A[%j] [4] [1] : tensor<4xf32> into tensor<8xf32>
  return %c : tensor<8xf32>
}
"""


@pytest.mark.parametrize("inplace", [False, True], ids=["inplace-off", "inplace-on"])
def test_transposed_input_next_to_scalar_operand(inplace):
    prog = tdf.compile(TRANSPOSED_NEXT_TO_SCALAR, inplace=inplace)
    x = np.arange(16, dtype=np.float32).reshape(4, 4)
    zeros = np.zeros((4, 4), np.float32)
    out = prog.main(zeros.copy(), x.copy(), zeros.copy())
    np.testing.assert_array_equal(out, x.T)
    # %x is the only donated argument and is read transposed: never in place.
    assert prog.report().calls_made_inplace == 0


@pytest.mark.parametrize("inplace", [False, True], ids=["inplace-off", "inplace-on"])
def test_elementwise_attribute_contradicted_by_body(inplace):
    prog = tdf.compile(ADD_THEN_MUL, inplace=inplace)
    a, b = np.full(8, 2, np.float32), np.ones(8, np.float32)
    np.testing.assert_array_equal(prog.main(a.copy(), b.copy()), np.full(8, 6, np.float32))
    assert prog.report().calls_made_inplace == 0


@pytest.mark.parametrize("inplace", [False, True], ids=["inplace-off", "inplace-on"])
@pytest.mark.parametrize("offsets", [(0, 1), (1, 0), (2, 2), (4, 0)])
def test_part_computed_from_overlapping_slice(inplace, offsets):
    prog = tdf.compile(SHIFTED_PART, inplace=inplace)
    a = np.arange(8, dtype=np.float32) / 8
    i, j = offsets
    want = a.copy()
    want[j:j + 4] = -np.exp(a[i:i + 4])
    np.testing.assert_allclose(prog.main(a.copy(), i, j), want, rtol=1e-6)


def test_regressions_keep_the_invariant():
    for text in (TRANSPOSED_NEXT_TO_SCALAR, ADD_THEN_MUL, SHIFTED_PART):
        check_invariant(text, ["main"])


# -- one meaning of strict ---------------------------------------------------------

OTHER_BRANCH = """
func.func private @add(%a: memref<8xf32>, %b: memref<8xf32>, %out: memref<8xf32>) {
  linalg.add ins(%a, %b : memref<8xf32>, memref<8xf32>) outs(%out : memref<8xf32>)
  return
}
func.func private @add_ip(%a: memref<8xf32>, %b: memref<8xf32>) attributes {tdf.elementwise} {
  linalg.add ins(%a, %b : memref<8xf32>, memref<8xf32>) outs(%a : memref<8xf32>)
  return
}
func.func @main(%x: tensor<8xf32> {tdf.donate}, %y: tensor<8xf32>, %p: i1) -> tensor<8xf32> {
  %r = scf.if %p -> tensor<8xf32> {
    %v = tdf.call_inplace @add_ip(%x, %y) inplace [0] : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
    scf.yield %v : tensor<8xf32>
  } else {
    %w = tdf.call @add(%x, %x) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
    scf.yield %w : tensor<8xf32>
  }
  return %r : tensor<8xf32>
}
"""

OVERLAPPING_CALL = """
func.func private @exp_into(%x: memref<4xf32>, %out: memref<4xf32, strided<[1], offset: ?>>) {
  linalg.exp ins(%x : memref<4xf32>) outs(%out : memref<4xf32, strided<[1], offset: ?>>)
  return
}
func.func @main(%A: tensor<8xf32> {tdf.donate}) -> tensor<8xf32> {
  %r0 = tensor.extract_slice %A[0] [4] [1] : tensor<8xf32> to tensor<4xf32>
  %s = tensor.extract_slice %A[1] [4] [1] : tensor<8xf32> to tensor<4xf32>
  %z = tdf.call_inplace @exp_into(%r0, %s) inplace [1] : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %c = tensor.insert_slice %z into %A[1] [4] [1] : tensor<4xf32> into tensor<8xf32>
  return %c : tensor<8xf32>
}
"""

LIVE_AFTER = """
func.func private @add_ip(%a: memref<8xf32>, %b: memref<8xf32>) attributes {tdf.elementwise} {
  linalg.add ins(%a, %b : memref<8xf32>, memref<8xf32>) outs(%a : memref<8xf32>)
  return
}
func.func @main(%x: tensor<8xf32> {tdf.donate}, %y: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %v = tdf.call_inplace @add_ip(%x, %y) inplace [0] : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %v, %x : tensor<8xf32>, tensor<8xf32>
}
"""


@pytest.mark.parametrize("text,rejected", [(OTHER_BRANCH, False), (OVERLAPPING_CALL, True),
                                           (LIVE_AFTER, True)],
                         ids=["use-in-other-branch", "overlapping-read", "live-after"])
def test_strict_compile_and_pipeline_agree(text, rejected):
    """tdf.compile(strict=True) and tdf-lower-to-cpu{strict=true} accept and
    reject the same programs."""
    try:
        tdf.compile(text, strict=True)
        compile_rejects = False
    except tdf.compiler.StrictModeError:
        compile_rejects = True
    ctx = tdf.Context()
    module = tdf.parse(text, ctx)
    try:
        tdf.run_pipeline(module, "builtin.module(tdf-lower-to-cpu{strict=true})")
        pipeline_rejects = False
    except tdf.PipelineError:
        pipeline_rejects = True
    assert compile_rejects == pipeline_rejects == rejected


def test_use_in_other_branch_runs_in_place_without_copy():
    prog = tdf.compile(OTHER_BRANCH, strict=True)
    x, y = np.arange(8, dtype=np.float32), np.ones(8, np.float32)
    np.testing.assert_array_equal(prog.main(x.copy(), y, True), x + y)
    np.testing.assert_array_equal(prog.main(x.copy(), y, False), x + x)
    calls = [d for d in prog.report().decisions if d.op == "tdf.call_inplace"]
    assert calls and all(d.inplace for d in calls)
