# SPDX-License-Identifier: Apache-2.0
"""examples/python/decode_loop.py runs and agrees with itself (replay vs write-back)."""

import pathlib
import subprocess
import sys

import pytest

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "python" / "decode_loop.py"


@pytest.mark.parametrize("model", ["small", "qwen3.5-4b-like"])
def test_decode_loop_example(model):
    command = [sys.executable, str(EXAMPLE), "--model", model, "--steps", "20", "--layers", "1", "--batch", "2"]
    run = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    last = run.stdout.strip().splitlines()[-1]
    assert last.startswith("replay_vs_writeback_max_rel_err=") and "steps=20 mode=replay W=16" in last
