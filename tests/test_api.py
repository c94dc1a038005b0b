"""The Python API of the foundation: Context, parse, run_pipeline, op classes,
the pass registry (Python passes nameable in textual pipelines) and errors."""

import pytest
from mlir import ir

import tdf
from tdf.dialects import tdf as tdf_ops
from tdf.passes import PassOption, get_all_passes, register_pass

KERNELS = """
func.func private @add(memref<4xf32>, memref<4xf32>, memref<4xf32>)
func.func private @add_inplace(memref<4xf32>, memref<4xf32>)
"""

PROGRAM = KERNELS + """
func.func @step(%x: tensor<4xf32> {tdf.donate}, %y: tensor<4xf32>) -> tensor<4xf32> {
  %t = tdf.call @add(%x, %y) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %r = tdf.call_inplace @add_inplace(%t, %y) inplace [0] : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}
"""

BUFFERIZE = ("builtin.module(tdf-donate, one-shot-bufferize{bufferize-function-boundaries "
             "function-boundary-type-conversion=identity-layout-map}, canonicalize)")


def ops_of(module, name):
    found = []
    module.operation.walk(lambda op: (found.append(op) if op.name == name else None,
                                      ir.WalkResult.ADVANCE)[1])
    return found


def test_context_loads_tdf_and_upstream_dialects():
    ctx = tdf.Context()
    for name in ("tdf", "func", "tensor", "linalg", "scf", "bufferization", "gpu", "llvm"):
        assert ctx.dialects[name] is not None


def test_parse_round_trips_and_gives_op_classes():
    ctx = tdf.Context()
    module = tdf.parse(PROGRAM, ctx)
    again = tdf.parse(str(module), ctx)
    assert str(again) == str(module)
    step = module.body.operations[2]
    ops = list(step.regions[0].blocks[0].operations)
    assert isinstance(ops[0], tdf_ops.CallOp)
    assert isinstance(ops[1], tdf_ops.CallInplaceOp)
    assert list(ops[1].inplace_indices) == [0]
    assert ir.FlatSymbolRefAttr(ops[0].callee).value == "add"


def test_parse_error_is_located():
    with pytest.raises(tdf.ParseError) as info:
        tdf.parse("func.func @f(%x: tensor<4xf32>) {\n  return %y : tensor<4xf32>\n}\n",
                  filename="prog.mlir")
    assert "prog.mlir:2:10: error: use of undeclared SSA value name" in str(info.value)
    assert info.value.diagnostics[0].location == "prog.mlir:2:10"


def test_parse_missing_callee_names_it():
    text = "func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n" \
           "  %r = tdf.call @nope(%x) : (tensor<4xf32>) -> tensor<4xf32>\n" \
           "  return %r : tensor<4xf32>\n}\n"
    with pytest.raises(tdf.ParseError) as info:
        tdf.parse(text, filename="k.mlir")
    assert "k.mlir:2:8: error: 'tdf.call' op references an undefined function @nope" in str(info.value)


def test_parse_rejects_non_text():
    with pytest.raises(TypeError, match="expects the IR as str"):
        tdf.parse(b"module {}")


def test_donation_pipeline_mixes_python_and_upstream_passes():
    module = tdf.parse(PROGRAM)
    tdf.run_pipeline(module, BUFFERIZE)
    text = str(module)
    assert "memref.copy" not in text
    # The fresh result of @add is the buffer @add_inplace updates in place.
    calls = [str(op) for op in ops_of(module, "func.call")]
    assert len(calls) == 2 and "@add_inplace(%alloc, %arg1)" in calls[1]


def test_non_donated_argument_is_copied_before_update():
    text = KERNELS + """
func.func @f(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  %r = tdf.call_inplace @add_inplace(%x, %y) inplace [0] : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}
"""
    module = tdf.parse(text)
    tdf.run_pipeline(module, BUFFERIZE)
    assert len(ops_of(module, "memref.copy")) == 1


def test_unknown_pass_raises_pipeline_error():
    module = tdf.parse(PROGRAM)
    with pytest.raises(tdf.PipelineError, match="'tdf-no-such-pass' does not refer to a registered pass"):
        tdf.run_pipeline(module, "builtin.module(tdf-no-such-pass)")


def test_bad_pass_option_raises_pipeline_error():
    module = tdf.parse(PROGRAM)
    with pytest.raises(tdf.PipelineError, match="no such option"):
        tdf.run_pipeline(module, "builtin.module(tdf-donate{strictly})")


def test_empty_pipeline_is_rejected():
    with pytest.raises(tdf.PipelineError, match="expected a textual pass pipeline"):
        tdf.run_pipeline(tdf.parse(PROGRAM), "  ")


def test_strict_donation_failure_is_located():
    text = "func.func @f(%x: tensor<4xf32> {tdf.donate}) -> tensor<8xf32> {\n" \
           "  %e = tensor.empty() : tensor<8xf32>\n  return %e : tensor<8xf32>\n}\n"
    module = tdf.parse(text)
    with pytest.raises(tdf.PipelineError) as info:
        tdf.run_pipeline(module, "builtin.module(tdf-donate{strict})", filename="d.mlir")
    assert "d.mlir:1:1: error: donated argument #0 of @f (type tensor<4xf32>) cannot be used" in str(info.value)


def test_warnings_are_returned_to_the_caller():
    text = "func.func @f(%x: tensor<4xf32> {tdf.donate}) -> tensor<8xf32> {\n" \
           "  %e = tensor.empty() : tensor<8xf32>\n  return %e : tensor<8xf32>\n}\n"
    module = tdf.parse(text)
    diagnostics = []
    tdf.run_pipeline(module, "builtin.module(tdf-donate)", diagnostics=diagnostics)
    assert [d.severity for d in diagnostics] == ["warning"]
    assert "its buffer will not be reused" in diagnostics[0].message


def test_registered_python_pass_runs_in_textual_pipeline_with_options():
    seen = []

    @register_pass("test-tdf-api-count-calls", "Count tdf.call ops (test)",
                   options=[PassOption("scale", int, 1, "multiplier"),
                            PassOption("tag", str, "none", "a label")],
                   statistics=[("calls", "tdf.call ops seen")])
    def count_calls(op, ctx):
        calls = []
        op.walk(lambda o: (calls.append(o) if o.name == "tdf.call" else None,
                           ir.WalkResult.ADVANCE)[1])
        seen.append((len(calls) * ctx.option("scale"), ctx.option("tag")))
        ctx.statistic("calls", len(calls))

    assert "test-tdf-api-count-calls" in get_all_passes()
    module = tdf.parse(PROGRAM)
    tdf.run_pipeline(module, "builtin.module(canonicalize, test-tdf-api-count-calls{scale=3 tag=kv}, cse)")
    assert seen == [(3, "kv")]
    with pytest.raises(ValueError, match="already registered"):
        register_pass("test-tdf-api-count-calls", "again")(count_calls)
    with pytest.raises(ValueError, match="already registered"):
        register_pass("canonicalize", "shadowing an upstream pass")(count_calls)


def test_python_pass_exception_becomes_located_error():
    @register_pass("test-tdf-api-raises", "Always raises (test)")
    def raises(op, ctx):
        raise RuntimeError("kernel table is corrupt")

    module = tdf.parse(PROGRAM)
    with pytest.raises(tdf.PipelineError, match="pass 'test-tdf-api-raises' failed: RuntimeError: kernel table is corrupt"):
        tdf.run_pipeline(module, "builtin.module(test-tdf-api-raises)")


def test_pass_option_declarations_are_validated():
    with pytest.raises(TypeError, match="type must be bool, int or str"):
        PassOption("ratio", float, 0.5, "not supported")
    with pytest.raises(TypeError, match="is not a int"):
        PassOption("count", int, "3", "wrong default")
    with pytest.raises(ValueError, match="kebab-case"):
        register_pass("Bad_Name", "x")(lambda op, ctx: None)
