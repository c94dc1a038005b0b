"""Mutation fuzzing of malformed input: never an abort, a hang or an error
without a location or a named culprit.

Seeds are the differential corpus (``tests/programs``) and every lit input
(``lit_tests/**/*.mlir``, split at ``// -----``). Each case mutates one seed
(deleted/duplicated/swapped lines, truncation, bracket and punctuation noise,
extreme numbers and shapes, swapped element types, tdf op and attribute
mutations, deep nesting, invalid UTF-8) and runs it through one consumer:
``tdf.parse``, a textual pipeline (every tdf pass and pipeline, the GPU
lowering included), ``tdf.compile`` (CPU JIT, nothing called) or ``tdf-opt``.
Other cases mutate pass pipelines (unknown passes, bad options, unbalanced
and deep brackets) or call the API with arguments of the wrong type.

Cases run in worker subprocesses (a batch per worker, restarted after a
crash); a case that kills its worker (a signal, exit 134) or runs past the
time limit is a failure, and so is an exception that is not a tdf error (an
internal ``IndexError``, ``RecursionError`` ...), a pass failing with a Python
exception, or an error whose message has neither ``file:line:col`` (line >= 1)
nor a named culprit (``@symbol``, a quoted name).

CI runs a short seeded slice; ``TDF_LONG=1`` runs thousands of cases
(``TDF_FUZZ_CASES``, ``TDF_FUZZ_SEED`` and ``TDF_FUZZ_WORKERS`` override) and
prints the counts. The module also runs standalone::

    python tests/test_malformed_fuzz.py --cases 3000 --seed 1
"""

from __future__ import annotations

import glob
import json
import os
import random
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TDF_OPT = os.path.join(os.path.dirname(sys.executable), "tdf-opt")
CASE_TIMEOUT = 120.0  # seconds; a case running longer is a hang

PIPELINES = [
    "builtin.module(test-tdf-liveness)",
    "builtin.module(test-tdf-alias)",
    "builtin.module(tdf-insert-inplace{remarks})",
    "builtin.module(tdf-insert-inplace{size-match})",
    "builtin.module(tdf-verify-inplace{strict})",
    "builtin.module(tdf-donate{strict})",
    "builtin.module(tdf-check-sizes)",
    "builtin.module(tdf-bufferize)",
    "builtin.module(tdf-bufferize{copy-before-write})",
    "builtin.module(tdf-lower-to-cpu)",
    "builtin.module(tdf-lower-to-cpu{strict})",
    "builtin.module(tdf-lower-to-nvvm{stop-at=gpu})",
    "builtin.module(tdf-lower-to-nvvm)",
    "builtin.module(canonicalize, cse)",
]

# ----------------------------------------------------------------- seeds


def lit_seeds() -> list[str]:
    seeds = []
    for path in sorted(glob.glob(os.path.join(ROOT, "lit_tests", "**", "*.mlir"), recursive=True)):
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        for chunk in re.split(r"^// -----\s*$", text, flags=re.M):
            if chunk.strip():
                seeds.append(chunk)
    return seeds


def corpus_seeds() -> list[str]:
    sys.path.insert(0, ROOT)
    try:
        from tests.programs import PROGRAMS
    finally:
        sys.path.pop(0)
    return [program.source for program in PROGRAMS]


# ------------------------------------------------------------- mutations

_NUMBERS = ["0", "-1", "1", "7", "-9223372036854775808", "9223372036854775807",
            "4611686018427387904", "99999999999999999999999", "1e309", "0x7fffffffffffffff",
            "2147483648", "-0.0", "nan"]
_TYPES = ["f32", "f64", "f16", "bf16", "i1", "i8", "i32", "i64", "index", "complex<f32>",
          "tensor<4xf32>", "memref<4xf32>", "tensor<?xf32>", "tensor<*xf32>", "none", "tuple<>",
          "vector<4xf32>", "tensor<0xf32>", "tensor<4611686018427387904x4xf32>"]
_NOISE = list("{}()[]<>%@:,=?x^#!\"'\\") + ["->", "//", "\n", " ", "tensor<", "memref<",
                                             "dense<", "array<i64: ", "\ud800", "\x00"]
_OPS = ["tdf.call", "tdf.call_inplace", "tdf.call_opaque", "tdf.assume_unaliased",
        "func.call", "scf.for", "scf.if", "scf.forall", "tensor.insert_slice",
        "tensor.extract_slice", "linalg.generic", "func.return", "scf.yield"]
_ATTRS = ["{tdf.donate}", "{tdf.donate = 1}", "{tdf.elementwise}", "{bufferization.writable = true}",
          "{tdf.donate, bufferization.writable = false}", "{tdf.inplace_ok = array<i64: 0>}"]


def _mutate_lines(kind: int, lines: list[str], rng: random.Random, seeds: list[str]) -> None:
    """Line mutations, in place on ``lines``."""
    if kind == 0:  # delete a line
        del lines[rng.randrange(len(lines))]
    elif kind == 1:  # duplicate a line
        i = rng.randrange(len(lines))
        lines.insert(rng.randrange(len(lines) + 1), lines[i])
    elif kind == 2:  # swap two lines
        i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
    elif kind == 14:  # splice a line from another seed
        other = rng.choice(seeds).split("\n")
        lines.insert(rng.randrange(len(lines) + 1), rng.choice(other))


def _mutate_tokens(kind: int, text: str, rng: random.Random) -> str | None:
    """Character and token mutations: the new text, or None for no change."""
    if kind == 3:  # truncate
        return text[: rng.randrange(len(text) + 1)]
    elif kind == 4:  # delete a span
        i = rng.randrange(len(text))
        return text[:i] + text[i + rng.randrange(1, 12):]
    elif kind == 5:  # insert noise
        i = rng.randrange(len(text) + 1)
        return text[:i] + rng.choice(_NOISE) + text[i:]
    elif kind == 6:  # replace a number
        numbers = list(re.finditer(r"-?\b\d+\b", text))
        if numbers:
            m = rng.choice(numbers)
            return text[: m.start()] + rng.choice(_NUMBERS) + text[m.end():]
    elif kind == 7:  # replace an element type / type
        types = list(re.finditer(r"\b(f16|f32|f64|bf16|i1|i8|i32|i64|index)\b", text))
        if types:
            m = rng.choice(types)
            return text[: m.start()] + rng.choice(_TYPES) + text[m.end():]
    elif kind == 8:  # shape dimension
        dims = list(re.finditer(r"(?<=[<x])(\d+)(?=x)", text))
        if dims:
            m = rng.choice(dims)
            dim = rng.choice(["?", "0", "1", "4611686018427387904", "9223372036854775807",
                              "3", "100000000000"])
            return text[: m.start()] + dim + text[m.end():]
    elif kind == 9:  # swap op names
        ops = [m for m in re.finditer(r"\b(tdf\.\w+|func\.call|scf\.\w+|tensor\.\w+|linalg\.\w+)\b", text)]
        if ops:
            m = rng.choice(ops)
            return text[: m.start()] + rng.choice(_OPS) + text[m.end():]
    elif kind == 10:  # in-place indices
        found = list(re.finditer(r"inplace \[[^\]]*\]", text))
        if found:
            m = rng.choice(found)
            new = "inplace [" + ", ".join(str(rng.choice([-2, -1, 0, 1, 2, 7]))
                                          for _ in range(rng.randrange(0, 4))) + "]"
            return text[: m.start()] + new + text[m.end():]
    return None


def _mutate_structure(kind: int, text: str, rng: random.Random) -> str | None:
    """Attribute, name and structure mutations (any other kind removes a terminator): the new text, or None."""
    if kind == 11:  # add an attribute after an SSA name / type
        found = list(re.finditer(r"(%\w+: [^,)]+?)(?=[,)])", text))
        if found:
            m = rng.choice(found)
            return text[: m.end()] + " " + rng.choice(_ATTRS) + text[m.end():]
    elif kind == 12:  # drop or swap attributes
        found = list(re.finditer(r"\{[^{}\n]*\}", text))
        if found:
            m = rng.choice(found)
            return text[: m.start()] + rng.choice(["", "{}", rng.choice(_ATTRS)]) + text[m.end():]
    elif kind == 13:  # rename an SSA use
        names = re.findall(r"%[\w.]+", text)
        uses = list(re.finditer(r"%[\w.]+", text))
        if names and uses:
            m = rng.choice(uses)
            return text[: m.start()] + rng.choice(names + ["%undefined", "%0"]) + text[m.end():]
    elif kind == 15:  # deep nesting
        depth = rng.choice([100, 1000, 2100, 5000, 20000])
        piece = rng.choice([("[" * depth + "]" * depth), ("tuple<" * depth + "i32" + ">" * depth),
                            "(" * depth + ")" * depth])
        i = rng.randrange(len(text) + 1)
        return text[:i] + piece + text[i:]
    elif kind == 16:  # symbol names
        syms = list(re.finditer(r"@[\w.]+", text))
        if syms:
            m = rng.choice(syms)
            return text[: m.start()] + rng.choice([s.group() for s in syms] + ["@nope", "@main"]) \
                + text[m.end():]
    elif kind == 17:  # visibility / declarations
        return text.replace("func.func @", rng.choice(["func.func private @", "func.func nested @"]), 1)
    elif kind == 18:  # duplicate a whole function
        funcs = list(re.finditer(r"func\.func[^\n]*\{.*?\n\}", text, flags=re.S))
        if funcs:
            m = rng.choice(funcs)
            return text + "\n" + m.group() + "\n"
    else:  # remove a terminator or a yield
        found = list(re.finditer(r"^\s*(return|func\.return|scf\.yield|linalg\.yield)[^\n]*$", text, flags=re.M))
        if found:
            m = rng.choice(found)
            return text[: m.start()] + text[m.end():]
    return None


def _mutate_once(text: str, rng: random.Random, seeds: list[str]) -> str:
    lines = text.split("\n")
    kind = rng.randrange(20)
    # A kind whose precondition fails falls through to the last kind.
    applies = {0: len(lines) > 1, 1: bool(lines), 2: len(lines) > 1, 4: bool(text)}
    if not applies.get(kind, True):
        kind = 19
    if kind in (0, 1, 2, 14):
        _mutate_lines(kind, lines, rng, seeds)
        return "\n".join(lines)
    mutate_text = _mutate_tokens if 3 <= kind <= 10 else _mutate_structure
    new = mutate_text(kind, text, rng)
    return text if new is None else new


def mutate(text: str, rng: random.Random, seeds: list[str]) -> str:
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        text = _mutate_once(text, rng, seeds)
    return text


_PASS_NAMES = ["tdf-insert-inplace", "tdf-verify-inplace", "tdf-donate", "tdf-bufferize",
               "tdf-lower-to-cpu", "tdf-lower-to-nvvm", "test-tdf-alias", "test-tdf-liveness",
               "tdf-check-sizes", "canonicalize", "cse", "one-shot-bufferize", "tdf-nope"]
_OPTIONS = ["", "{strict}", "{strict=maybe}", "{remarks}", "{size-match=2}", "{chip=sm_1}",
            "{chip=sm_90a}", "{format=elf}", "{opt-level=9}", "{tile-sizes=0}", "{tile-sizes=4096,1}",
            "{stop-at=never}", "{inplace=false}", "{copy-before-write}", "{dealloc=false}",
            "{phase=x}", "{nope}", "{", "}", "{strict strict}", "{count-allocations}",
            "{tile-sizes=1,1,1,1}", "{chip=}"]


def mutate_pipeline(rng: random.Random) -> str:
    passes = [rng.choice(_PASS_NAMES) + rng.choice(_OPTIONS) for _ in range(rng.randrange(1, 4))]
    anchor = rng.choice(["builtin.module", "func.func", "builtin.module(func.func", "gpu.module", ""])
    text = f"{anchor}({', '.join(passes)})"
    if anchor.endswith("func.func") and anchor.startswith("builtin"):
        text += ")"
    if rng.random() < 0.3:
        text = _mutate_once(text, rng, [text])
    return text


_API_VALUES = ["None", "''", "'x'", "3", "3.5", "b'module {}'", "[]", "{}", "object()",
               "tdf.Context()", "'\\ud800'", "True", "-1", "'builtin.module(cse)'",
               "tdf.parse('module {}')", "float('nan')", "10**30"]
_API_CALLS = [
    "tdf.parse({0})", "tdf.parse('module {{}}', {0})", "tdf.parse('module {{}}', None, {0})",
    "tdf.run_pipeline({0}, 'builtin.module(cse)')", "tdf.run_pipeline(M, {0})",
    "tdf.run_pipeline(M, 'builtin.module(cse)', {0})",
    "tdf.run_pipeline(M, 'builtin.module(cse)', None, {0})",
    "tdf.compile({0})", "tdf.compile(P, target={0})", "tdf.compile(P, inplace={0})",
    "tdf.compile(P, strict={0})", "tdf.compile(P, opt_level={0})", "tdf.compile(P, shared_libs={0})",
    "tdf.compile(P, chip={0})", "tdf.compile(P, filename={0})",
    "tdf.compile(P, copy_before_write={0})", "tdf.compile(P, count_allocations={0})",
    "tdf.compile(P, target='nvvm', chip={0})",
]


def make_cases(count: int, seed: int) -> list[dict]:
    """``count`` cases, deterministic in ``seed``."""
    rng = random.Random(seed)
    seeds = corpus_seeds() + lit_seeds()
    cases = []
    for index in range(count):
        roll = rng.random()
        if roll < 0.80:
            text = mutate(rng.choice(seeds), rng, seeds)
            consumer = rng.random()
            if consumer < 0.10:
                case = {"kind": "parse", "text": text}
            elif consumer < 0.72:
                case = {"kind": "pipeline", "text": text, "pipeline": rng.choice(PIPELINES)}
            elif consumer < 0.90:
                case = {"kind": "compile", "text": text}
            else:
                case = {"kind": "opt", "text": text,
                        "args": rng.choice([[], ["--tdf-lower-to-cpu"], ["--tdf-insert-inplace"],
                                            ["--tdf-lower-to-nvvm=stop-at=gpu"], ["--tdf-bufferize"],
                                            ["--split-input-file", "--verify-diagnostics"]])}
        elif roll < 0.90:
            case = {"kind": "pipeline", "text": rng.choice(seeds[:16]), "pipeline": mutate_pipeline(rng),
                    "bad_pipeline": True}
        else:
            call = rng.choice(_API_CALLS).format(rng.choice(_API_VALUES))
            case = {"kind": "api", "code": call}
        case["id"] = index
        cases.append(case)
    return cases


# ---------------------------------------------------------------- worker

_LOCATED = re.compile(r"(?:^|\s|\")[^\s:\"]*:(\d+):(\d+)(?::|\b)")
_NAMED = re.compile(r"@[\w.$-]+|'[^']+'|\"[^\"]+\"")
_API_NAMES = re.compile(r"\b(tdf\.\w+|text|ctx|filename|pipeline|diagnostics|module|target|inplace|"
                        r"strict|opt_level|shared_libs|chip|copy_before_write|count_allocations)\b")
# An error about the whole input names the file (e.g. no entry function).
_WHOLE_FILE = re.compile(r"^(fuzz\.mlir|<input>): ")
_INTERNAL_IN_PASS = re.compile(r"pass '[\w-]+' failed: (\w+(?:Error|Exception))")


def classify(exc_type: str, message: str, api: bool, names_ok: bool = False) -> str:
    """'error' (acceptable), 'internal' (a Python exception escaping tdf) or
    'unlocated' (no location, no culprit)."""
    tdf_errors = {"ParseError", "PipelineError", "CompileError", "StrictModeError",
                  "GPUCompileError", "TDFError", "GPUError"}
    allowed = set(tdf_errors)
    if api:
        allowed |= {"TypeError", "ValueError", "FileNotFoundError"}
    if exc_type not in allowed:
        return "internal"
    if _INTERNAL_IN_PASS.search(message):
        return "internal"
    for m in _LOCATED.finditer(message):
        if int(m.group(1)) >= 1:
            return "error"
    if _NAMED.search(message) or _WHOLE_FILE.match(message):
        return "error"
    if (api or names_ok) and _API_NAMES.search(message):
        return "error"
    return "unlocated"


def _run_case(case: dict, tdf) -> dict:
    kind = case["kind"]
    if kind == "opt":
        for attempt in range(3):  # fork can fail for a moment on a loaded machine
            try:
                proc = subprocess.run([TDF_OPT, "-", *case["args"]],
                                      input=case["text"].encode("utf-8", "surrogatepass"),
                                      capture_output=True, timeout=CASE_TIMEOUT)
                break
            except OSError:
                if attempt == 2:
                    raise
                time.sleep(2)
        err = proc.stderr.decode("utf-8", "replace")
        if proc.returncode < 0 or proc.returncode in (134, 139):
            return {"status": "crash", "detail": f"tdf-opt exit {proc.returncode}: {err[-400:]}"}
        if proc.returncode == 0:
            return {"status": "ok"}
        errors = [line for line in err.splitlines() if "error" in line]
        if not errors:
            return {"status": "unlocated", "detail": err[-400:]}
        verdict = classify("TDFError", "\n".join(errors), api=False)
        return {"status": verdict, "detail": errors[0][:400]}
    try:
        if kind == "parse":
            tdf.parse(case["text"], filename="fuzz.mlir")
        elif kind == "pipeline":
            module = tdf.parse(case["text"], filename="fuzz.mlir")
            tdf.run_pipeline(module, case["pipeline"], filename="fuzz.mlir")
        elif kind == "compile":
            tdf.compile(case["text"], filename="fuzz.mlir")
        else:
            env = {"tdf": tdf, "M": tdf.parse("module {}"),
                   "P": "func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
                        "  return %x : tensor<4xf32>\n}\n"}
            eval(case["code"], env)  # noqa: S307 (the fuzzer's own expressions)
    except Exception as exc:  # noqa: BLE001 -- classifying every escape is the point
        message = str(exc)
        verdict = classify(type(exc).__name__, message, api=kind == "api",
                           names_ok=case.get("bad_pipeline", False))
        return {"status": verdict, "detail": f"{type(exc).__name__}: {message[:600]}"}
    return {"status": "ok"}


def worker_main() -> None:
    """Reads cases (JSON lines) from stdin; for each prints ``start <id>``
    and then the JSON result, flushing, so the parent knows which case
    killed the process."""
    import tdf

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 1000))
    out = sys.stdout
    for line in sys.stdin:
        case = json.loads(line)
        out.write(f"start {case['id']}\n")
        out.flush()
        result = _run_case(case, tdf)
        result["id"] = case["id"]
        out.write(json.dumps(result) + "\n")
        out.flush()


# ---------------------------------------------------------------- driver


class _Worker:
    def __init__(self):
        import tempfile

        # stderr goes to a file: a pipe nobody drains fills up (64 KiB of
        # MLIR diagnostics over many cases) and blocks the worker.
        self.stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--worker"], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=self.stderr, cwd=ROOT, text=True, bufsize=1,
            env={**os.environ, "PYTHONIOENCODING": "utf-8:surrogatepass"})
        # A reader thread turns stdout into a queue of lines (select() on a
        # buffered pipe misses lines already read into the buffer).
        import queue
        import threading

        self.lines: queue.Queue = queue.Queue()

        def pump(stream=self.proc.stdout, lines=self.lines):
            for line in stream:
                lines.put(line)
            lines.put(None)

        threading.Thread(target=pump, daemon=True).start()

    def run(self, case: dict) -> dict:
        """Runs one case; returns its result (crash/hang detected here)."""
        payload = json.dumps(case, ensure_ascii=True)
        try:
            self.proc.stdin.write(payload + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            return self._dead(case)
        import queue

        deadline = time.monotonic() + CASE_TIMEOUT
        started = False
        while True:
            remaining = deadline - time.monotonic()
            try:
                if remaining <= 0:
                    raise queue.Empty
                line = self.lines.get(timeout=remaining)
            except queue.Empty:
                self.proc.kill()
                self.proc.wait()
                return {"id": case["id"], "status": "hang", "detail": f"no answer in {CASE_TIMEOUT} s"}
            if line is None:
                return self._dead(case)
            if line.startswith("start "):
                started = True
                continue
            if started:
                return json.loads(line)

    def _dead(self, case: dict) -> dict:
        code = self.proc.wait()
        self.stderr.seek(max(0, self.stderr.seek(0, 2) - 4000))
        err = self.stderr.read().decode("utf-8", "replace")
        return {"id": case["id"], "status": "crash", "detail": f"worker exit {code}: {err[-600:]}"}

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        self.stderr.close()
        if self.alive():
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def run_cases(cases: list[dict], workers: int = 1) -> list[dict]:
    """Runs ``cases`` over ``workers`` worker processes (threads feed them)."""
    import threading

    results: list[dict] = []
    lock = threading.Lock()
    queue = list(reversed(cases))

    def feed():
        worker = _Worker()
        while True:
            with lock:
                if not queue:
                    break
                case = queue.pop()
            if not worker.alive():
                worker = _Worker()
            result = _Worker.run(worker, case)
            result["kind"] = case["kind"]
            with lock:
                results.append(result)
            if result["status"] in ("crash", "hang"):
                worker.close()
                worker = _Worker()
        worker.close()

    threads = [threading.Thread(target=feed) for _ in range(max(1, workers))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    results.sort(key=lambda r: r["id"])
    return results


def summarize(results: list[dict]) -> dict:
    counts: dict = {}
    for result in results:
        counts[result["status"]] = counts.get(result["status"], 0) + 1
    return counts


BAD = ("crash", "hang", "internal", "unlocated")


def _report(cases, results) -> str:
    by_id = {c["id"]: c for c in cases}
    lines = []
    for result in results:
        if result["status"] in BAD:
            case = by_id[result["id"]]
            shown = {k: (v[:300] if isinstance(v, str) else v) for k, v in case.items()}
            lines.append(f"[{result['status']}] id {result['id']}: {result.get('detail', '')[:400]}"
                         f"\n    case: {shown}")
    return "\n".join(lines)


# ----------------------------------------------------------------- tests


def _check(count: int, seed: int, workers: int):
    cases = make_cases(count, seed)
    results = run_cases(cases, workers)
    counts = summarize(results)
    print(f"malformed-input fuzz: {count} cases, seed {seed}: {counts}")
    bad = {k: v for k, v in counts.items() if k in BAD}
    assert not bad, f"{bad}\n{_report(cases, results)}"
    return counts


def test_fuzz_malformed_input_short_slice():
    """CI: a short seeded slice (each case in a worker subprocess)."""
    counts = _check(int(os.environ.get("TDF_FUZZ_CASES", "64")),
                    int(os.environ.get("TDF_FUZZ_SEED", "11")), 1)
    assert sum(counts.values()) > 0


def test_fuzz_malformed_input_long():
    """``TDF_LONG=1``: thousands of cases."""
    import pytest

    if os.environ.get("TDF_LONG") != "1":
        pytest.skip("long fuzz run: set TDF_LONG=1")
    _check(int(os.environ.get("TDF_FUZZ_CASES", "3000")),
           int(os.environ.get("TDF_FUZZ_SEED", "1")),
           int(os.environ.get("TDF_FUZZ_WORKERS", "2")))


def test_classify_rules():
    """The verdicts the fuzz relies on (a wrong rule would hide failures)."""
    assert classify("ParseError", "cannot parse f\nf.mlir:3:7: error: expected type", False) == "error"
    assert classify("PipelineError", "failed\n-:0:0: error: x", False) == "unlocated"
    assert classify("PipelineError", "failed\nf.mlir:2:1: error: pass 'tdf-donate' failed: "
                    "IndexError: list index out of range", False) == "internal"
    assert classify("IndexError", "f.mlir:1:1: list index out of range", False) == "internal"
    assert classify("TypeError", "tdf.parse expects the IR as str, got int", False) == "internal"
    assert classify("TypeError", "tdf.parse expects the IR as str, got int", True) == "error"
    assert classify("TypeError", "expected str, got int", True) == "unlocated"
    assert classify("TypeError", "tdf.compile: 'opt_level' must be an int", True) == "error"
    assert classify("CompileError", "kernel @add has no body", False) == "error"
    assert classify("CompileError", "fuzz.mlir: no public function with a body", False) == "error"
    assert classify("CompileError", "no public function with a body", False) == "unlocated"
    assert classify("PipelineError", "tdf.run_pipeline: expected a textual pass pipeline, got ''",
                    False, names_ok=True) == "error"
    assert classify("PipelineError", "tdf.run_pipeline: expected a textual pass pipeline, got ''",
                    False) == "unlocated"


if __name__ == "__main__":
    if "--worker" in sys.argv:
        worker_main()
    else:
        import argparse

        parser = argparse.ArgumentParser()
        parser.add_argument("--cases", type=int, default=200)
        parser.add_argument("--seed", type=int, default=1)
        parser.add_argument("--workers", type=int, default=2)
        parser.add_argument("--show", type=int, default=40)
        parser.add_argument("--only", type=str, default="", help="comma-separated case ids")
        parser.add_argument("--out", type=str, default="", help="write the bad cases as JSON here")
        ns = parser.parse_args()
        all_cases = make_cases(ns.cases, ns.seed)
        if ns.only:
            wanted = {int(i) for i in ns.only.split(",")}
            all_cases = [c for c in all_cases if c["id"] in wanted]
        start = time.time()
        all_results = run_cases(all_cases, ns.workers)
        print(f"{ns.cases} cases, seed {ns.seed}, {time.time() - start:.0f} s: {summarize(all_results)}")
        by_status: dict = {}
        for r in all_results:
            by_status.setdefault(r["kind"], {}).setdefault(r["status"], 0)
            by_status[r["kind"]][r["status"]] += 1
        print("by consumer:", json.dumps(by_status))
        report = _report(all_cases, all_results)
        if ns.out:
            bad_ids = {r["id"] for r in all_results if r["status"] in BAD}
            with open(ns.out, "w") as handle:
                json.dump({"cases": [c for c in all_cases if c["id"] in bad_ids],
                           "results": [r for r in all_results if r["id"] in bad_ids]}, handle)
        shown = "\n".join(report.split("\n")[: 2 * ns.show])
        print(shown.encode("utf-8", "backslashreplace").decode("utf-8"))
