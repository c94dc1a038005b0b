"""Each analysis once (issue 21): ``tdf.compile`` runs One-Shot Bufferize's
analysis once for its report and ``tdf-verify-inplace`` together, the pass
run alone asks One-Shot once for both its questions, and ``tdf.jax`` hands
``tdf.compile`` a copy of its module instead of text to parse."""

import threading

import jax.numpy as jnp
import numpy as np
import pytest

import tdf
import tdf.jax
from tdf.compiler import OwnedModule, StrictModeError
from tdf.passes.analysis import manager, one_shot
from tdf.passes.analysis.manager import AnalysisCache, analyses, preserved
from tdf.passes.analysis.one_shot import OneShotAnalysis

N = 8
T = f"tensor<{N}xf32>"
M = f"memref<{N}xf32>"

# A hand-written in-place call One-Shot keeps (operand #0 is dead) and a
# donated argument that does not hold its paired result (%y is read after
# the update): the strict stage asks One-Shot both questions.
PROGRAM = f"""
func.func private @addone(%io: {M}) attributes {{tdf.elementwise}} {{
  %c = arith.constant 1.0 : f32
  linalg.generic {{indexing_maps = [affine_map<(i) -> (i)>],
                  iterator_types = ["parallel"]}} outs(%io : {M}) {{
  ^bb0(%o: f32):
    %r = arith.addf %o, %c : f32
    linalg.yield %r : f32
  }}
  return
}}
func.func @f(%x: {T} {{tdf.donate}}, %y: {T} {{tdf.donate}}) -> ({T}, {T}, {T}) {{
  %a = tdf.call_inplace @addone(%x) inplace [0] : ({T}) -> {T}
  %e = tensor.empty() : {T}
  %n = linalg.add ins(%y, %y : {T}, {T}) outs(%e : {T}) -> {T}
  %e2 = tensor.empty() : {T}
  %o = linalg.mul ins(%n, %y : {T}, {T}) outs(%e2 : {T}) -> {T}
  return %a, %n, %o : {T}, {T}, {T}
}}
"""


@pytest.fixture
def analysis_runs(monkeypatch):
    """How many times One-Shot's analysis pipeline runs."""
    runs = []
    original = one_shot.run_pipeline

    def counted(op, pipeline, *args, **kwargs):
        runs.append(pipeline)
        return original(op, pipeline, *args, **kwargs)

    monkeypatch.setattr(one_shot, "run_pipeline", counted)
    return runs


def test_strict_compile_runs_one_shot_analysis_once(analysis_runs):
    # inplace=False: no tdf-insert-inplace, whose own judge runs are apart.
    with pytest.raises(StrictModeError) as err:
        tdf.compile(PROGRAM, inplace=False, strict=True)
    assert "donated argument(s) would not hold their paired result" in str(err.value)
    assert analysis_runs == [one_shot.ANALYSIS_PIPELINE]
    # The report of the same program, and its decisions, come from that run.
    prog = tdf.compile(PROGRAM, inplace=False)
    assert [d.inplace for d in prog.report().decisions if d.op == "tdf.call_inplace"] == [True]
    assert len(analysis_runs) == 2


def test_verify_pass_alone_asks_one_shot_once(analysis_runs):
    module = tdf.parse(PROGRAM)
    diagnostics = []
    tdf.run_pipeline(module, "builtin.module(tdf-verify-inplace{donations=true})",
                     diagnostics=diagnostics)
    assert analysis_runs == [one_shot.ANALYSIS_PIPELINE]
    assert any("does not hold its paired result" in d.message for d in diagnostics), diagnostics


def test_no_call_inplace_no_copies_question(analysis_runs):
    module = tdf.parse(f"func.func @g(%x: {T}) -> {T} {{ return %x : {T} }}")
    assert one_shot.one_shot_copies(module.operation) == {}
    assert analysis_runs == []


def test_cache_is_per_op_and_closed():
    a = tdf.parse(PROGRAM)
    b = tdf.parse(PROGRAM)
    cache = AnalysisCache()
    first = cache.get(OneShotAnalysis, a.operation)
    assert cache.get(OneShotAnalysis, a.operation) is first
    assert first.copies() == {}  # the call's operand is in place
    with preserved(a.operation, cache):
        with analyses(a.operation) as inside:
            assert inside is cache
        with analyses(b.operation) as other:  # another op: a cache of its own
            assert other is not cache
    with analyses(a.operation) as outside:  # not preserved any more
        assert outside is not cache
    cache.close()
    assert first._analysed is None
    assert manager.AnalysisCache().get(OneShotAnalysis, a.operation) is not first


def test_failed_analysis_is_reported_by_the_report():
    # tdf-donate refuses pairs of another type.
    bad = tdf.parse("""
func.func @p(%x: tensor<8xf32> {tdf.donate}, %y: tensor<4xf32>) -> tensor<4xf32>
    attributes {tdf.donation_pairs = array<i64: 0>} {
  return %y : tensor<4xf32>
}""")
    analysis = OneShotAnalysis(bad.operation)
    assert not analysis.ok
    assert analysis.copies() == {} and analysis.verdicts() is None
    with pytest.raises(tdf.PipelineError):
        analysis.analysed  # noqa: B018


def test_owned_module_compiles_once():
    module = tdf.parse(PROGRAM)
    owned = OwnedModule(module)
    prog = tdf.compile(owned, inplace=False)
    x = np.arange(N, dtype=np.float32)
    y = np.arange(N, dtype=np.float32)
    a, n, o = prog.f(x.copy(), y.copy())
    np.testing.assert_array_equal(a, x + 1)
    np.testing.assert_array_equal(n, y + y)
    np.testing.assert_array_equal(o, (y + y) * y)
    with pytest.raises(ValueError, match="compiled once"):
        tdf.compile(owned)
    with pytest.raises(TypeError):
        OwnedModule(PROGRAM)


def _step(x, y):
    return jnp.sin(x) * y + 1.0, (x * 2.0).sum()


def test_jax_compile_does_not_print_or_parse(monkeypatch):
    f = tdf.jax.jit(_step)
    x = np.linspace(-1, 1, 16, dtype=np.float32)
    y = np.linspace(2, 3, 16, dtype=np.float32)
    low = f.lower(x, y)
    text = low.as_text(debug_info=True)
    by_text = tdf.compile(text, filename=low.name)

    from tdf import compiler

    def no_parse(*args, **kwargs):
        raise AssertionError("tdf.compile parsed text on the tdf.jax path")

    monkeypatch.setattr(compiler, "parse_program", no_parse)
    prog = low.compile()
    assert str(prog.report()).replace("compilation cache: off", "") == \
        str(by_text.report()).replace("compilation cache: off", "")
    assert prog.buffer_ir == by_text.buffer_ir
    # The imported module is not the one compiled: it is unchanged.
    assert low.as_text(debug_info=True) == text
    ref = _step(x, y)
    for ours, theirs in zip(prog.main(x, y), ref):
        np.testing.assert_allclose(ours, np.asarray(theirs), rtol=1e-6, atol=1e-6)


def test_jax_compiles_of_one_signature_in_threads():
    f = tdf.jax.jit(_step)
    x = np.linspace(-1, 1, 16, dtype=np.float32)
    low = f.lower(x, x)
    results, errors = {}, []

    def compile_one(k, options):
        try:
            results[k] = low.compile(**options)
        except Exception as err:  # pragma: no cover - reported below
            errors.append(err)

    threads = [threading.Thread(target=compile_one, args=(k, options)) for k, options in
               enumerate(({}, {"bounds_checks": False}, {"plan_memory": False}, {}))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    assert len(results) == 4 and results[0] is results[3] is low.compile()
    ref = _step(x, x)
    for prog in results.values():
        for ours, theirs in zip(prog.main(x, x), ref):
            np.testing.assert_allclose(ours, np.asarray(theirs), rtol=1e-6, atol=1e-6)
