"""The generated references in docs/ match the ODS and the pass registry."""

import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_generated_references_are_up_to_date():
    proc = subprocess.run([sys.executable, "-m", "tdf.docgen", "--check", "docs",
                           "--repo", REPO], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
