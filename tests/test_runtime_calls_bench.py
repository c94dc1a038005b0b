"""benchmarks/runtime_calls.py runs end to end (toy sizes) and reports
every ratio it promises; the numbers themselves live in benchmarks/README.md."""

import json
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_runtime_calls_benchmark_tiny(tmp_path):
    run = subprocess.run([sys.executable, os.path.join(REPO, "benchmarks", "runtime_calls.py"),
                          "--tiny", "--out", str(tmp_path)], capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads((tmp_path / "runtime_calls.json").read_text())
    kv = result["kv_step"]
    for key in ("ratio_tdf/numpy", "ratio_bounds_on/off", "call_overhead_s"):
        assert kv[key] is not None and kv[key] > 0, key
    assert result["loop"]["ratio_bounds_on/off"] > 0
    assert result["threads"]["ratio_locked/per_call"] > 0
    assert (tmp_path / "runtime_calls.md").read_text().startswith("# Runtime calls")
