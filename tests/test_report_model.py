"""tdf.report's records and reports as plain data: sums and the text
``print(prog.report())`` shows, for the CPU Report and the GPUReport."""

from tdf.report import Allocation, Copy, FusedCall, GPUReport, InplaceDecision, Report


def _report():
    return Report(
        inplace=True, calls_made_inplace=1,
        decisions=[InplaceDecision("step", "tdf.call_inplace", "a.mlir:3:5", 0, True),
                   InplaceDecision("step", "tensor.insert", "a.mlir:4:5", 1, False,
                                   "it is the non-donated argument #1 (read-only)")],
        copies=[Copy("step", "a.mlir:4:5", 64, False),
                Copy("step", "a.mlir:6:5", None, True, into_view=True)],
        allocations=[Allocation("step", "a.mlir:4:5", 64, False),
                     Allocation("step", "a.mlir:6:5", None, True),
                     Allocation("other", "a.mlir:9:5", 8, True)],
        returned_args={"step": [0, -1], "other": [-1]},
        fused_calls=[FusedCall("step", "scale", "a.mlir:2:5")])


def test_sums_per_function_and_overall():
    report = _report()
    assert report.bytes_allocated() == 72
    assert report.bytes_allocated("step") == 64  # a dynamic size counts 0
    assert report.bytes_copied("step") == 64
    assert report.bytes_copied("nothing") == 0


def test_text_lists_every_record():
    lines = str(_report()).splitlines()
    assert lines == [
        "tdf report (in-place rewrite on; 1 call(s) rewritten to tdf.call_inplace)",
        "in-place decisions:",
        "  @step: tdf.call_inplace operand #0 at a.mlir:3:5: in place",
        "  @step: tensor.insert operand #1 at a.mlir:4:5: "
        "COPY (it is the non-donated argument #1 (read-only))",
        "kernel calls fused:",
        "  @step: tdf.call @scale at a.mlir:2:5: fused into one loop (inlined by tdf-inline-kernels)",
        "copies that remain:",
        "  @step: memref.copy of 64 B at a.mlir:4:5",
        "  @step: memref.copy of dynamic size into a slice of its destination "
        "(the update itself) at a.mlir:6:5 (in a loop)",
        "bytes allocated per call (static count of the final IR):",
        "  @other: 8 B in 1 allocation(s) (1 inside loops (counted once))",
        "  @step: 64 B in 2 allocation(s) (1 of dynamic size, 1 inside loops (counted once))",
        "    results returned in the donated argument(s) [0]: 0 B",
    ]


def test_empty_and_baseline_reports():
    text = str(Report(inplace=False, calls_made_inplace=0, copy_before_write=True))
    assert text.splitlines() == [
        "tdf report (copy-before-write baseline; 0 call(s) rewritten to tdf.call_inplace)",
        "in-place decisions:", "  (no writes)", "copies that remain:", "  none",
        "bytes allocated per call (static count of the final IR):"]


def test_gpu_report_text():
    report = GPUReport(inplace=[("scale", [0], "a.mlir:3:5")], out_of_place_calls=1,
                       device_copies=[(256, "a.mlir:4:5"), (-1, "a.mlir:5:5")],
                       device_alloc_bytes=1024, h2d=(2, 512), d2h=(1, 256), kernels=3,
                       ptxas="not run (ptxas=False)", compile_seconds={"donate": 0.0015})
    assert str(report).splitlines() == [
        "in-place calls: 1",
        "  @scale inplace [0] at a.mlir:3:5",
        "out-of-place calls: 1",
        "device copies: 2 (256 bytes)",  # a dynamic size (-1) adds nothing
        "  256 bytes at a.mlir:4:5",
        "  -1 bytes at a.mlir:5:5",
        "device buffers: 1024 bytes per call",
        "host->device transfers: 2 (512 bytes)",
        "device->host transfers: 1 (256 bytes)",
        "kernel launches: 3",
        "cuBLAS calls: 0",
        "ptxas: not run (ptxas=False)",
        "compile: donate 1.5 ms",
    ]
