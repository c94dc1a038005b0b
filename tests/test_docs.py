"""The generated references in docs/ match the ODS and the pass registry."""

import os
import re
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_generated_references_are_up_to_date():
    proc = subprocess.run([sys.executable, "-m", "tdf.docgen", "--check", "docs",
                           "--repo", REPO], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_pass_reference_covers_every_registered_pass():
    """Every tdf pass and pipeline tdf-opt registers (Python and C++) has an
    entry in docs/PassReference.md."""
    help_text = subprocess.run([os.path.join(os.path.dirname(sys.executable), "tdf-opt"),
                                "--help"], capture_output=True, text=True, check=True).stdout
    registered = set(re.findall(r"^\s+--((?:test-)?tdf-[a-z0-9-]+)\s", help_text, re.M))
    assert {"tdf-insert-inplace", "tdf-math-approximation", "tdf-convert-math-to-libm",
            "tdf-lower-to-cpu"} <= registered
    with open(os.path.join(REPO, "docs", "PassReference.md")) as f:
        documented = set(re.findall(r"^## `([a-z0-9-]+)` \((?:pass|pipeline)\)", f.read(), re.M))
    assert registered - documented == set()
