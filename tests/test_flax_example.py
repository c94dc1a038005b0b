"""The flax + optax training example runs end to end (losses equal
jax.jit's, every TrainState leaf updated in place under strict=True)."""

from __future__ import annotations

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))

import flax_train as example  # noqa: E402


def test_example_main_succeeds(capsys):
    argv = ["--steps", "6", "--batch", "16", "--features", "8", "--hidden", "16",
            "--rounds", "1"]
    assert example.main(argv) == 0
    out = capsys.readouterr().out
    assert "losses match jax.jit: True" in out and "final parameters match: True" in out
    assert "every TrainState leaf updated in place (same numpy buffers after 6 steps): True" in out
    assert "allocated per step:" in out
    assert out.rstrip().endswith("OK")
