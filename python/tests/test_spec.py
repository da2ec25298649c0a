# SPDX-License-Identifier: Apache-2.0
"""Speculative decoding on the CPU: verify steps of several drafts, commits of a random
prefix, decode steps between rounds, against the float64 reference."""

import numpy as np
import pytest

import replayssm as rs
from harness import HAS_TORCH, Arrays, Layer
from test_steps import SHAPES


@pytest.mark.parametrize("recurrence", SHAPES)
@pytest.mark.parametrize("policy", [rs.replay_policy(8), rs.replay_policy(16, "fp16", "fp32")], ids=str)
@pytest.mark.parametrize("device", [None, pytest.param("cpu", marks=pytest.mark.skipif(not HAS_TORCH,
                                                                                      reason="needs PyTorch"))],
                         ids=["numpy", "torch"])
def test_verify_and_commit_match_sequential_steps(recurrence, policy, device):
    rng = np.random.default_rng(11)
    tokens, slots = 4, [5, -1, 0, 3]  # out of order, with gaps and a padded request
    layer = Layer(recurrence, policy, SHAPES[recurrence], num_slots=7, dtype="float32", rng=rng,
                  arrays=Arrays(device), draft_tokens=tokens)
    tolerance = 1e-5 if policy.checkpoint == policy.read else 3e-3
    accepted_total = 0
    for round_ in range(40):  # several windows of committed drafts per request
        counts = [int(c) for c in rng.integers(1, tokens + 1, len(slots))]
        assert layer.verify(slots, tokens, counts) <= tolerance
        accepted = [int(rng.integers(0, c + 1)) for c in counts]
        layer.commit(slots, accepted, tokens, counts)
        accepted_total += sum(a for a, slot in zip(accepted, slots) if slot != -1)
        if round_ % 3 == 2:  # decode steps fold a window left full by a commit
            assert layer.decode(slots) <= tolerance
    assert accepted_total > 2 * policy.window * (len(slots) - 1)


def test_rejected_drafts_leave_no_trace():
    """Verifying drafts and accepting none changes no output of the steps that follow."""
    rng = np.random.default_rng(5)
    layer = Layer("mamba2", rs.replay_policy(8), SHAPES["mamba2"], num_slots=2, dtype="float32", rng=rng,
                  draft_tokens=3)
    for _ in range(10):
        assert layer.verify([1, 0], 3) <= 1e-5
        layer.commit([1, 0], [0, 0], 3)
        assert layer.decode([1, 0]) <= 1e-5
