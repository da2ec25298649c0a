# SPDX-License-Identifier: Apache-2.0
"""examples/python/decode_loop.py runs, and its replay steps agree with its write-back steps
(which test_steps.py and test_entry_points.py hold to the float64 reference)."""

import pathlib
import subprocess
import sys

import pytest

from harness import HAS_TORCH

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "python" / "decode_loop.py"


@pytest.mark.parametrize("model,dtype", [
    ("small", "float32"), ("qwen3.5-4b-like", "float32"),
    pytest.param("small", "bfloat16", marks=pytest.mark.skipif(not HAS_TORCH, reason="bfloat16 needs PyTorch")),
])
def test_decode_loop_example(model, dtype):
    command = [sys.executable, str(EXAMPLE), "--model", model, "--dtype", dtype, "--steps", "20", "--layers", "1",
               "--batch", "2"]
    run = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    last = run.stdout.strip().splitlines()[-1]
    assert last.startswith("replay_vs_writeback_max_rel_err=") and "steps=20 mode=replay W=16" in last


def test_decode_loop_help_is_whole():
    """--help shows the whole description (with the closing line's format) and every
    option's help with its default."""
    run = subprocess.run([sys.executable, str(EXAMPLE), "--help"], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert "replay_vs_writeback_max_rel_err=<value> steps=<n> mode=<describe()>" in run.stdout
    options = ("--device", "--model", "--dtype", "--batch", "--steps", "--layers", "--seed")
    assert all(option in run.stdout for option in options) and run.stdout.count("(default") >= len(options)
