"""pytest for the in-place analyses and rewrites: the Python API of
tdf.passes.analysis.liveness / alias, insert_inplace, verify_inplace. Their time
against function size is measured in benchmarks/ (inplace_scaling.py,
run.py's compile_scaling)."""

import importlib.util
import os

import pytest
from inplace_invariant import corpus_package
from mlir import ir

import tdf
from tdf.passes import insert_inplace, verify_inplace
from tdf.passes.analysis import alias as alias_mod
from tdf.passes.analysis import inplace, liveness

kv_row_kernel = corpus_package().kv_row_kernel

# benchmarks/inplace_scaling.py, loaded by path (benchmarks/ is not a package).
_SPEC = importlib.util.spec_from_file_location(
    "inplace_scaling",
    os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                 "benchmarks", "inplace_scaling.py"))
inplace_scaling = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(inplace_scaling)

KERNELS = """
func.func private @addone(%x: memref<4xf32>, %out: memref<4xf32>) {
  linalg.add ins(%x, %x : memref<4xf32>, memref<4xf32>) outs(%out : memref<4xf32>)
  return
}
func.func private @add(%x: memref<4xf32>, %y: memref<4xf32>, %out: memref<4xf32>) {
  linalg.add ins(%x, %y : memref<4xf32>, memref<4xf32>) outs(%out : memref<4xf32>)
  return
}
func.func private @keep(memref<4xf32>) -> memref<4xf32>
"""


def _module(body: str):
    ctx = tdf.Context()
    return ctx, tdf.parse(KERNELS + body, ctx)


def _func(module, name):
    for op in module.body.operations:
        if ir.StringAttr(op.attributes["sym_name"]).value == name:
            return op.operation
    raise KeyError(name)


def _ops(func):
    return [op.operation for op in func.regions[0].blocks[0].operations]


def test_liveness_dead_after_and_loop():
    ctx, m = _module("""
    func.func @f(%x: tensor<4xf32>, %init: tensor<4xf32>) -> tensor<4xf32> {
      %y = tdf.call @addone(%x) : (tensor<4xf32>) -> tensor<4xf32>
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %r = scf.for %i = %c0 to %c1 step %c1 iter_args(%acc = %init) -> tensor<4xf32> {
        %n = tdf.call @add(%y, %acc) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
        scf.yield %n : tensor<4xf32>
      }
      return %r : tensor<4xf32>
    }""")
    with ctx:
        f = _func(m, "f")
        lv = liveness.Liveness(f)
        ops = _ops(f)
        call, loop = ops[0], ops[3]
        x = f.regions[0].blocks[0].arguments[0]
        assert lv.dead_after(x, call) is None
        body_call = loop.regions[0].blocks[0].operations[0].operation
        y = call.results[0]
        live = lv.dead_after(y, body_call)
        assert live is not None and live.reason == "loop"
        acc = loop.regions[0].blocks[0].arguments[1]
        assert lv.dead_after(acc, body_call) is None
        assert lv.last_use_operands(body_call) == [1]
        # the loop result is defined after everything inside the loop
        assert lv.defined_after(loop.results[0], body_call)


def _random_nest(rng, depth: int) -> str:
    """Ops nested ``depth`` deep in a random mix of scf.for, scf.while-free
    scf.if and scf.execute_region, each level defining a value."""
    lines = ["func.func @f(%x: tensor<4xf32>, %c: i1, %n: index) {",
             "%c0 = arith.constant 0 : index", "%c1 = arith.constant 1 : index"]
    closers = []
    for i in range(depth):
        lines.append(f"%v{i} = tdf.call @addone(%x) : (tensor<4xf32>) -> tensor<4xf32>")
        kind = rng.choice(["for", "for", "if", "region"])
        if kind == "for":
            lines.append(f"scf.for %i{i} = %c0 to %n step %c1 {{")
            closers.append("}")
        elif kind == "if":
            lines.append("scf.if %c {")
            closers.append("}")
        else:
            lines.append("scf.execute_region {")
            closers.append("scf.yield\n}")
    lines.append("%last = tdf.call @addone(%x) : (tensor<4xf32>) -> tensor<4xf32>")
    lines += reversed(closers)
    return "\n".join(lines + ["return", "}"])


@pytest.mark.parametrize("seed", range(4))
def test_outer_loop_without_matches_a_walk_up_the_loops(seed):
    """outer_loop_without (binary lifting over the enclosing loops) gives
    what walking every enclosing loop gives, for every value and every op
    of random nests of loops and branches."""
    import random
    rng = random.Random(seed)
    ctx, m = _module(_random_nest(rng, 24))
    with ctx:
        f = _func(m, "f")
        lv = liveness.Liveness(f)
        values = [r for op in lv.ops for r in op.results] + list(f.regions[0].blocks[0].arguments)
        for op in lv.ops:
            for value in values:
                dpos = lv.def_pos(value)
                want, loop = None, lv.record(op).loop
                while loop is not None:
                    rec = lv.record(loop)
                    if 2 * rec.pre < dpos <= 2 * rec.end:
                        break
                    want, loop = loop, rec.loop
                got = lv.outer_loop_without(op, value)
                assert (got is None and want is None) or got == want
            assert lv.branch_depth(op) == inplace.branch_depth(op)


def test_liveness_negative_later_use_names_user():
    ctx, m = _module("""
    func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
      %y = tdf.call @addone(%x) : (tensor<4xf32>) -> tensor<4xf32>
      %z = tdf.call @add(%x, %y) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
      return %z : tensor<4xf32>
    }""")
    with ctx:
        f = _func(m, "f")
        lv = liveness.Liveness(f)
        first, second = _ops(f)[:2]
        live = lv.dead_after(first.operands[0], first)
        assert live is not None and live.reason == "later-use"
        assert live.user == second


def test_alias_classes_views_and_black_hole():
    ctx, m = _module("""
    func.func @f(%x: tensor<4xf32> {tdf.donate}, %y: tensor<4xf32>) -> (tensor<2x2xf32>, tensor<4xf32>, tensor<4xf32>) {
      %v = tensor.expand_shape %x [[0, 1]] output_shape [2, 2] : tensor<4xf32> into tensor<2x2xf32>
      %k = tdf.call_opaque @keep(%y) : (tensor<4xf32>) -> tensor<4xf32>
      %u = tdf.assume_unaliased %k : tensor<4xf32>
      return %v, %k, %u : tensor<2x2xf32>, tensor<4xf32>, tensor<4xf32>
    }""")
    with ctx:
        f = _func(m, "f")
        a = alias_mod.AliasAnalysis(f)
        x, y = f.regions[0].blocks[0].arguments
        view, opaque, assumed = (op.results[0] for op in _ops(f)[:3])
        assert a.same_class(x, view)
        assert not a.escaped(x) and a.not_owned(x) is None
        assert a.escaped(y) and a.escaped(opaque) and a.same_class(y, opaque)
        assert a.not_owned(y)[1] == "argument"
        assert not a.escaped(assumed) and not a.same_class(assumed, opaque)
        assert a.assumed[assumed] == opaque


def test_insert_inplace_api_and_rejections():
    ctx, m = _module("""
    func.func @f(%x: tensor<4xf32> {tdf.donate}, %w: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
      %a = tdf.call @addone(%w) : (tensor<4xf32>) -> tensor<4xf32>
      %b = tdf.call @add(%x, %a) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
      return %a, %b : tensor<4xf32>, tensor<4xf32>
    }""")
    with ctx:
        f = _func(m, "f")
        count, rejections = insert_inplace.insert_inplace(f)
        assert count == 1
        rules = sorted(r.rule for r in rejections)
        assert rules == ["owned"]  # %w is not donated; %a is returned but %x wins
        text = str(f)
        assert "tdf.call @addone(%arg1)" in text
        assert "tdf.call_inplace @add_inplace(%arg0, %0) inplace [0]" in text
        messages = [msg for _, msg in insert_inplace.format_rejections(f, rejections)]
        assert messages == ["in-place rejected (owned): operand #0 (%arg1) is a function "
                            "argument that is not donated"]
    m.operation.verify()


def test_generated_variant_is_reused_and_verifies():
    ctx, m = _module("""
    func.func @f(%x: tensor<4xf32> {tdf.donate}) -> tensor<4xf32> {
      %a = tdf.call @addone(%x) : (tensor<4xf32>) -> tensor<4xf32>
      %b = tdf.call @addone(%a) : (tensor<4xf32>) -> tensor<4xf32>
      return %b : tensor<4xf32>
    }""")
    tdf.run_pipeline(m, "builtin.module(tdf-insert-inplace)")
    tdf.run_pipeline(m, "builtin.module(tdf-insert-inplace)")  # idempotent
    text = str(m)
    assert text.count("func.func private @addone_inplace") == 1
    assert text.count("tdf.call_inplace @addone_inplace") == 2
    assert not verify_inplace.verify_function(_func(m, "f"))
    assert m.operation.verify()


def test_verify_strict_raises_pipeline_error():
    ctx, m = _module("""
    func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
      %a = tdf.call_inplace @add(%x, %x) inplace [0] : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
      return %a : tensor<4xf32>
    }""".replace("@add(", "@addone2(") + """
    func.func private @addone2(memref<4xf32>, memref<4xf32>) attributes {tdf.elementwise}
    """)
    diags = []
    tdf.run_pipeline(m, "builtin.module(tdf-verify-inplace)", diagnostics=diags)
    assert any("a copy will be made" in str(d) for d in diags)
    with pytest.raises(tdf.PipelineError, match="not donated"):
        tdf.run_pipeline(m, "builtin.module(tdf-verify-inplace{strict})")


def test_rewrite_on_a_long_chain():
    """The workload of ``benchmarks/inplace_scaling.py`` (where the time
    against function size is measured), small: most adds of the chain are
    rewritten in place, the ones whose operand is read again later are not."""
    for n_ops in (200, 2000):
        _, counts = inplace_scaling.run_once(n_ops)
        inplace_scaling.check(n_ops, counts)
        assert counts == {"ops": n_ops + 1, "rewritten": n_ops * 2 // 5, "kept": n_ops // 10}


CONCAT_OF_CALLS = """
func.func private @log(%x: memref<1x8xf32>, %out: memref<1x8xf32>) {
  linalg.log ins(%x : memref<1x8xf32>) outs(%out : memref<1x8xf32>)
  return
}
func.func @f(%y0: tensor<1x8xf32>, %y1: tensor<1x8xf32>, %y2: tensor<1x8xf32>) -> tensor<3x8xf32> {
  %z0 = tdf.call @log(%y0) : (tensor<1x8xf32>) -> tensor<1x8xf32>
  %z1 = tdf.call @log(%y1) : (tensor<1x8xf32>) -> tensor<1x8xf32>
  %z2 = tdf.call @log(%y2) : (tensor<1x8xf32>) -> tensor<1x8xf32>
  %r = tensor.concat dim(0) %z0, %z1, %z2 : (tensor<1x8xf32>, tensor<1x8xf32>, tensor<1x8xf32>) -> tensor<3x8xf32>
  return %r : tensor<3x8xf32>
}
"""


@pytest.mark.parametrize("inplace", [True, False])
def test_concat_of_calls_jit_matches_jax(inplace):
    """Concat of tdf.call parts computed into the final buffer (strided kernel
    variant): the JIT result equals JAX, and with inplace on nothing is copied
    and only the result is allocated."""
    import jax.numpy as jnp
    import numpy as np

    rng = np.random.default_rng(3)
    ys = [rng.uniform(0.5, 2.0, (1, 8)).astype(np.float32) for _ in range(3)]
    want = np.asarray(jnp.concatenate([jnp.log(y) for y in ys], axis=0))
    prog = tdf.compile(CONCAT_OF_CALLS, inplace=inplace)
    got = prog.f(*ys)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    report = prog.report()
    if inplace:
        assert report.copies == []
        assert report.bytes_allocated("f") == 3 * 8 * 4
        assert report.calls_made_inplace == 3
    else:
        assert len(report.copies) == 3
        assert report.bytes_allocated("f") == 2 * 3 * 8 * 4


def test_concat_of_calls_strided_variant_reused():
    """One strided variant per kernel and layout; a declaration stays a copy."""
    ctx = tdf.Context()
    module = tdf.parse(CONCAT_OF_CALLS, ctx)
    func = _func(module, "f")
    rejections = []
    with ctx, ir.Location.unknown():
        assert insert_inplace.rewrite_concats(func, rejections=rejections) == 1
    assert rejections == []
    names = [ir.StringAttr(op.attributes["sym_name"]).value for op in module.body.operations]
    assert names.count("log_strided") == 1 and len(names) == 3
    callees = {ir.FlatSymbolRefAttr(op.attributes["callee"]).value
               for op in _ops(func) if op.name == "tdf.call_inplace"}
    assert callees == {"log_strided"}
    module.operation.verify()

    decl = CONCAT_OF_CALLS.replace(
        """func.func private @log(%x: memref<1x8xf32>, %out: memref<1x8xf32>) {
  linalg.log ins(%x : memref<1x8xf32>) outs(%out : memref<1x8xf32>)
  return
}""", "func.func private @log(memref<1x8xf32>, memref<1x8xf32>)")
    module = tdf.parse(decl, ctx)
    rejections = []
    with ctx, ir.Location.unknown():
        assert insert_inplace.rewrite_concats(_func(module, "f"), rejections=rejections) == 0
    assert [r.rule for r in rejections] == ["kernel"] * 3


LOG_ROWS = """
func.func private @log(%x: memref<8xf32>, %out: memref<8xf32>) {
  linalg.log ins(%x : memref<8xf32>) outs(%out : memref<8xf32>)
  return
}
func.func @f(%y0: tensor<8xf32>, %y1: tensor<8xf32>, %y2: tensor<8xf32>) -> tensor<3x8xf32> {
  %e = tensor.empty() : tensor<3x8xf32>
  %z0 = tdf.call @log(%y0) : (tensor<8xf32>) -> tensor<8xf32>
  %r0 = tensor.expand_shape %z0 [[0, 1]] output_shape [1, 8] : tensor<8xf32> into tensor<1x8xf32>
  %c0 = tensor.insert_slice %r0 into %e[0, 0] [1, 8] [1, 1] : tensor<1x8xf32> into tensor<3x8xf32>
  %z1 = tdf.call @log(%y1) : (tensor<8xf32>) -> tensor<8xf32>
  %r1 = tensor.expand_shape %z1 [[0, 1]] output_shape [1, 8] : tensor<8xf32> into tensor<1x8xf32>
  %c1 = tensor.insert_slice %r1 into %c0[1, 0] [1, 8] [1, 1] : tensor<1x8xf32> into tensor<3x8xf32>
  %e2 = tensor.empty() : tensor<8xf32>
  %z2 = linalg.exp ins(%y2 : tensor<8xf32>) outs(%e2 : tensor<8xf32>) -> tensor<8xf32>
  %r2 = tensor.expand_shape %z2 [[0, 1]] output_shape [1, 8] : tensor<8xf32> into tensor<1x8xf32>
  %c2 = tensor.insert_slice %r2 into %c1[2, 0] [1, 8] [1, 1] : tensor<1x8xf32> into tensor<3x8xf32>
  return %c2 : tensor<3x8xf32>
}
"""


@pytest.mark.parametrize("inplace", [True, False])
def test_insert_slice_parts_jit_matches_jax(inplace):
    """log_concat-style rows inserted into a tensor.empty (calls and a linalg
    op, through expand_shape): JIT equals JAX, the inputs are unchanged, and
    with inplace on each row is computed in the result: no copy, only the
    result allocated."""
    import jax.numpy as jnp
    import numpy as np

    rng = np.random.default_rng(5)
    ys = [rng.uniform(0.5, 2.0, (8,)).astype(np.float32) for _ in range(3)]
    kept = [y.copy() for y in ys]
    want = np.asarray(jnp.stack([jnp.log(ys[0]), jnp.log(ys[1]), jnp.exp(ys[2])]))
    prog = tdf.compile(LOG_ROWS, inplace=inplace)
    got = prog.f(*ys)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    for y, k in zip(ys, kept):
        np.testing.assert_array_equal(y, k)
    report = prog.report()
    if inplace:
        assert report.copies == []
        assert report.bytes_allocated("f") == 3 * 8 * 4
        assert report.calls_made_inplace == 2
    else:
        assert len(report.copies) == 3
        # The result, plus one row-sized temporary: each part is dead once
        # copied into the result, so tdf-plan-memory gives them one slot.
        assert report.bytes_allocated("f") == 3 * 8 * 4 + 8 * 4


# The corpus program (tests/programs/kv_row_kernel.py), also run against JAX there.
KV_ROW_KERNEL = kv_row_kernel.SOURCE


@pytest.mark.parametrize("donate", [True, False])
@pytest.mark.parametrize("inplace", [True, False])
def test_kv_row_by_kernel_jit_matches_jax(inplace, donate):
    """A cache row computed by a kernel: with a donated cache and inplace on
    the kernel writes the cache row itself (no copy, nothing allocated);
    a non-donated cache is never written (it is copied) and stays unchanged."""
    import jax.numpy as jnp
    import numpy as np
    from jax import lax

    text = KV_ROW_KERNEL if donate else KV_ROW_KERNEL.replace(" {tdf.donate}", "")
    rng = np.random.default_rng(7)
    cache = rng.standard_normal((4, 8)).astype(np.float32)
    y = rng.uniform(0.5, 2.0, (8,)).astype(np.float32)
    pos = 2
    original, y_kept = cache.copy(), y.copy()
    want = np.asarray(lax.dynamic_update_slice(original, jnp.log(y)[None, :], (pos, 0)))
    prog = tdf.compile(text, inplace=inplace)
    got = prog.step(cache, y, pos)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    np.testing.assert_array_equal(y, y_kept)
    report = prog.report()
    if not donate:
        np.testing.assert_array_equal(cache, original)
        assert len(report.copies) >= 1
    if inplace and donate:
        assert report.copies == []
        assert report.bytes_allocated("step") == 0
        assert report.calls_made_inplace == 1


def test_insert_slice_rewrite_api_and_remarks():
    """rewrite_insert_slices: the rewritten count, and a rejection naming the
    rule and the destination for a non-donated cache."""
    ctx = tdf.Context()
    module = tdf.parse(KV_ROW_KERNEL, ctx)
    with ctx, ir.Location.unknown():
        rejections = []
        assert insert_inplace.rewrite_insert_slices(_func(module, "step"),
                                                    rejections=rejections) == 1
        assert rejections == []
        module.operation.verify()
        module = tdf.parse(KV_ROW_KERNEL.replace(" {tdf.donate}", ""), ctx)
        func = _func(module, "step")
        assert insert_inplace.rewrite_insert_slices(func, rejections=rejections) == 0
    assert [r.rule for r in rejections] == ["owned"]
    [(_, message)] = insert_inplace.format_rejections(func, rejections)
    assert "destination is a function argument that is not donated" in message
