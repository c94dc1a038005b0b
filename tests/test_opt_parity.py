"""``tdf-opt`` is ``mlir-opt``: the RUN lines of ``tests/opt_parity/*.mlir``
(upstream dialects and passes only) run through the wheel's ``mlir-opt`` and
through ``tdf-opt``, and the two must agree byte for byte on stdout, stderr
(modulo the program's name and the timing figures), the exit code and every
file the run writes (``%t``, the working directory).

RUN lines: ``// RUN: %opt <arguments>``, split like a shell would; ``%s`` is
the file, ``%S`` its directory, ``%t`` a path in the run's own scratch
directory (which is also its working directory).
"""

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
CASES = HERE / "opt_parity"
REPO = HERE.parent
TDF_OPT = os.path.join(os.path.dirname(sys.executable), "tdf-opt")


def _mlir_package() -> Path:
    import importlib.util

    return Path(list(importlib.util.find_spec("mlir").submodule_search_locations)[0])


MLIR_OPT = str(_mlir_package() / "bin" / "mlir-opt")


def _run_lines():
    for path in sorted(CASES.glob("*.mlir")):
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            match = re.match(r"\s*//\s*RUN:\s*%opt\s+(.*)$", line)
            if match:
                yield pytest.param(path, match.group(1), id=f"{path.name}:{number}")


def _run(tool: str, argv0: str, path: Path, arguments: str, scratch: Path):
    scratch.mkdir()
    args = []
    for word in shlex.split(arguments):
        word = word.replace("%s", str(path)).replace("%S", str(path.parent))
        args.append(word.replace("%t", str(scratch / "t")))
    proc = subprocess.run([argv0, *args], executable=tool, cwd=scratch,
                          capture_output=True, timeout=120, stdin=subprocess.DEVNULL)
    return proc


_TIMING = re.compile(rb"\d+\.\d+( \(\s*\d+\.\d+%\))?")


def _normalize(data: bytes, scratch: Path, arguments: str = "") -> bytes:
    data = data.replace(str(scratch).encode(), b"<scratch>")
    data = re.sub(rb"\b(mlir-opt|tdf-opt)\b", b"<opt>", data)
    if b"Execution time report" in data:
        data = _TIMING.sub(b"<time>", data)
        if "-mlir-timing-display=list" in arguments:
            # Rows are sorted by time: compare them as a set.
            data = b"\n".join(sorted(data.split(b"\n")))
    return data


def _tree(root: Path) -> dict:
    files = {}
    for dirpath, _, names in os.walk(root):
        for name in names:
            full = Path(dirpath) / name
            files[str(full.relative_to(root))] = _normalize(full.read_bytes(), root)
    return files


@pytest.mark.parametrize("path, arguments", list(_run_lines()))
def test_tdf_opt_matches_mlir_opt(path, arguments, tmp_path):
    upstream = _run(MLIR_OPT, "mlir-opt", path, arguments, tmp_path / "mlir-opt")
    ours = _run(TDF_OPT, "tdf-opt", path, arguments, tmp_path / "tdf-opt")
    assert ours.returncode == upstream.returncode, (
        f"tdf-opt exit {ours.returncode}, mlir-opt exit {upstream.returncode}\n"
        f"tdf-opt stderr:\n{ours.stderr.decode(errors='replace')}\n"
        f"mlir-opt stderr:\n{upstream.stderr.decode(errors='replace')}")
    assert _normalize(ours.stderr, tmp_path / "tdf-opt", arguments).decode(errors="replace") == \
        _normalize(upstream.stderr, tmp_path / "mlir-opt", arguments).decode(errors="replace")
    assert _normalize(ours.stdout, tmp_path / "tdf-opt") == \
        _normalize(upstream.stdout, tmp_path / "mlir-opt")
    assert _tree(tmp_path / "tdf-opt") == _tree(tmp_path / "mlir-opt")


def test_every_fixed_driver_flag_has_a_parity_case():
    """The flags tdf-opt used to reject or get wrong each appear in a RUN line."""
    text = "\n".join(p.read_text() for p in CASES.glob("*.mlir"))
    runs = "\n".join(line for line in text.splitlines() if "RUN:" in line)
    for flag in ["-mlir-disable-threading", "-mlir-print-ir-before=", "-mlir-print-ir-after=",
                 "-mlir-print-ir-after-change", "-mlir-print-ir-after-failure",
                 "-mlir-print-ir-module-scope", "-mlir-print-ir-tree-dir", "-dump-pass-pipeline",
                 "-mlir-print-op-on-diagnostic", "-verify-roundtrip", "-emit-bytecode",
                 "-output-split-marker", "-mlir-pass-statistics-display",
                 "-mlir-timing-display", "-run-reproducer",
                 "-mlir-pass-pipeline-crash-reproducer",
                 "-mlir-very-unsafe-disable-verifier-on-parsing", "-mlir-debug-counter",
                 "--verify-diagnostics=only-expected", "-mlir-print-ir-before-all",
                 "-mlir-print-ir-after-all", "--split-input-file", "-mlir-timing "]:
        assert flag in runs, flag


def _help_options(tool: str, argv0: str) -> set[str]:
    proc = subprocess.run([argv0, "--help"], executable=tool, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    options = set()
    in_passes = False
    for line in proc.stdout.splitlines():
        # The pass list (pass flags are indented deeper than driver options).
        if re.match(r"^\s+--pass-pipeline\b|^\s+Compiler passes to run", line):
            in_passes = True
        match = re.match(r"^(\s+)(--?[A-Za-z0-9][\w.=<>-]*)", line)
        if not match:
            continue
        indent, name = len(match.group(1)), match.group(2)
        if indent > 4 and in_passes:
            continue  # a pass or a pass option
        options.add(name.split("=")[0])
    return options


def test_help_lists_the_same_driver_options():
    upstream = _help_options(MLIR_OPT, "mlir-opt")
    ours = _help_options(TDF_OPT, "tdf-opt")
    assert upstream - ours == set()
    assert ours - upstream == set()


def test_help_lists_tdf_passes_next_to_upstream_ones():
    proc = subprocess.run([TDF_OPT, "--help"], capture_output=True, text=True, timeout=120)
    assert "--tdf-donate" in proc.stdout and "--canonicalize" in proc.stdout
    assert "tdf modular optimizer driver" in proc.stdout


def test_show_dialects_adds_tdf_to_mlir_opts_list():
    def dialects(tool, argv0):
        proc = subprocess.run([argv0, "-show-dialects"], executable=tool,
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        line = proc.stdout.strip()
        assert line.startswith("Available Dialects: ")
        names = line[len("Available Dialects: "):].split(",")
        assert names == sorted(names)
        return set(names)

    upstream = dialects(MLIR_OPT, "mlir-opt")
    ours = dialects(TDF_OPT, "tdf-opt")
    assert upstream <= ours
    assert "tdf" in ours - upstream


def test_python_pass_runs_on_pass_manager_threads(tmp_path):
    """A Python pass nested under func.func runs on the pass manager's worker
    threads (the driver releases the GIL): same result with and without
    -mlir-disable-threading."""
    source = tmp_path / "many.mlir"
    source.write_text("".join(
        f"func.func @f{i}(%a: tensor<4xf32>) -> tensor<4xf32> {{\n"
        f"  %0 = arith.addf %a, %a : tensor<4xf32>\n  return %0 : tensor<4xf32>\n}}\n"
        for i in range(24)))
    pipeline = "--pass-pipeline=builtin.module(func.func(test-tdf-liveness,cse))"
    threaded = subprocess.run([TDF_OPT, str(source), pipeline], capture_output=True,
                              text=True, timeout=120)
    single = subprocess.run([TDF_OPT, str(source), pipeline, "-mlir-disable-threading"],
                            capture_output=True, text=True, timeout=120)
    assert threaded.returncode == 0 and single.returncode == 0, threaded.stderr + single.stderr
    assert threaded.stdout == single.stdout
    assert threaded.stdout.count("tdf.last_use") == 48


def test_cli_main_runs_twice_in_one_process(tmp_path):
    """Options do not leak from one in-process run to the next."""
    source = tmp_path / "f.mlir"
    source.write_text("func.func @f(%a: i32) -> i32 {\n  %0 = arith.addi %a, %a : i32\n"
                      "  %1 = arith.addi %a, %a : i32\n  return %1 : i32\n}\n")
    code = (
        "import sys\nfrom tdf import cli\n"
        f"a = cli.main(['tdf-opt', {str(source)!r}, '-cse', '-mlir-timing', '-o', {str(tmp_path / 'a')!r}])\n"
        f"b = cli.main(['tdf-opt', {str(source)!r}, '-o', {str(tmp_path / 'b')!r}])\n"
        "sys.exit(10 * a + b)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("Execution time report") == 1
    assert (tmp_path / "a").read_text().count("arith.addi") == 1
    assert (tmp_path / "b").read_text().count("arith.addi") == 2


def _link_map() -> Path | None:
    for candidate in (REPO / "build").glob("*/python/_tdf.map"):
        return candidate
    return None


def test_linked_mlir_tool_objects_duplicate_no_shared_mlir_symbol(tmp_path):
    """The archive members linked into the extension for the driver define no
    symbol that libMLIRPythonCAPI.so exports (one MLIR per process)."""
    link_map = _link_map()
    if link_map is None:
        pytest.skip("no link map: the extension was not built in this tree")
    capi = _mlir_package() / "_mlir_libs" / "libMLIRPythonCAPI.so"
    exported = set()
    for line in subprocess.run(["nm", "-D", "--defined-only", str(capi)], capture_output=True,
                               text=True, check=True).stdout.splitlines():
        exported.add(line.split()[-1].split("@")[0])
    members = set(re.findall(r"^(/\S+\.a)\((\S+\.o)\)", link_map.read_text(), re.M))
    assert any(member == "MlirOptMain.cpp.o" for _, member in members)
    duplicates = []
    for archive, member in sorted(members):
        if "/mlir/lib/" not in archive:
            continue
        out = tmp_path / member
        subprocess.run(["ar", "p", archive, member], stdout=out.open("wb"), check=True)
        for line in subprocess.run(["nm", "--defined-only", str(out)], capture_output=True,
                                   text=True, check=True).stdout.splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[1] in "TDBR" and parts[2] in exported:
                duplicates.append(f"{member}: {parts[2]}")
    assert duplicates == []


def _llvm_lib() -> Path:
    import importlib.util

    return Path(list(importlib.util.find_spec("llvm").submodule_search_locations)[0]) / "lib"


@pytest.mark.parametrize("option", ["--load-pass-plugin", "--load-dialect-plugin"])
@pytest.mark.parametrize("plugin, message", [
    # mlir-opt aborts on these three (its loader leaves the error unchecked).
    ("/nonexistent/plugin.so", "cannot load plugin '/nonexistent/plugin.so'"),
    (str(_llvm_lib() / "libLLVM.so"), "entry point"),
    # A second copy of MLIR would abort the process when loaded.
    (str(_mlir_package() / "lib" / "libMLIR-C.so"), "links libMLIR.so, a second copy of MLIR"),
])
def test_unusable_plugin_is_refused_without_abort(option, plugin, message):
    proc = subprocess.run([TDF_OPT, f"{option}={plugin}", "-"], input="module {}\n",
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert message in proc.stderr


# Inputs on which mlir-opt 22.1.8 aborts (fixed upstream later): tdf-opt exits
# 1 with the message instead.
ABORTS_IN_MLIR_OPT = {
    "debug_counter_not_numeric": (
        ["--mlir-debug-counter=my-action-skip=-2x"],
        "for the --mlir-debug-counter option: expected DebugCounter counter value to be "
        "numeric, but got `-2x`"),
    "debug_counter_no_equals": (
        ["--mlir-debug-counter", "pass-execution-skip=1,my-action-count"],
        "expected DebugCounter argument to have an `=` separating the counter name and "
        "value, but the provided argument was: `my-action-count`"),
    "debug_counter_bad_suffix": (
        ["-mlir-debug-counter=my-action=3"],
        "expected DebugCounter counter name to end with either `-skip` or `-count`, "
        "but got `my-action`"),
    "unmatched_unknown_loc_expectations": (
        ["--verify-diagnostics"],
        "unknown_loc_expectations.mlir:6:4: error: expected error \"Local crash "
        "reproduction may not be used without disabling mutli-threading first.\" was not "
        "produced"),
    "unmatched_unknown_loc_remark": (
        ["--verify-diagnostics", "--mlir-pass-pipeline-local-reproducer",
         "--mlir-pass-pipeline-crash-reproducer=reproducer.mlir"],
        "unknown_loc_expectations.mlir:7:4: error: expected remark \"a remark nobody "
        "emits\" was not produced"),
}


@pytest.mark.parametrize("name", sorted(ABORTS_IN_MLIR_OPT))
def test_inputs_that_abort_mlir_opt_exit_1_in_tdf_opt(name, tmp_path):
    args, message = ABORTS_IN_MLIR_OPT[name]
    source = CASES / "Inputs" / "unknown_loc_expectations.mlir"
    for tool, argv0 in ((TDF_OPT, "tdf-opt"), (MLIR_OPT, "mlir-opt")):
        proc = subprocess.run([argv0, str(source), *args], executable=tool, cwd=tmp_path,
                              capture_output=True, text=True, timeout=120)
        if argv0 == "mlir-opt":
            # Documents why this is not a parity case; passes again (and can
            # move to tests/opt_parity/) once the wheel's mlir-opt is fixed.
            assert proc.returncode in (1, -6, 134)
            continue
        assert proc.returncode == 1, proc.stderr
        assert message in proc.stderr, proc.stderr
        if name == "unmatched_unknown_loc_remark":
            # The local-reproducer error was expected and matched: only the
            # remark is reported.
            assert "expected error" not in proc.stderr


def test_list_passes_has_every_upstream_pass_and_tdfs():
    def listing(tool, argv0):
        proc = subprocess.run([argv0, "-list-passes"], executable=tool, capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.splitlines()

    upstream, ours = listing(MLIR_OPT, "mlir-opt"), listing(TDF_OPT, "tdf-opt")
    missing = [line for line in upstream if line not in set(ours)]
    assert missing == []
    assert any(line.strip().startswith("--tdf-donate") for line in ours)
