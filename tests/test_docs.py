"""The generated dialect reference in docs/ matches the ODS."""

import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_dialect_reference_is_up_to_date():
    proc = subprocess.run([sys.executable, "-m", "tdf.docgen", "--check", "docs/TDFDialect.md",
                           "--repo", REPO], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
