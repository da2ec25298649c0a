# SPDX-License-Identifier: Apache-2.0
"""Decode steps of both recurrences on the CPU (NumPy) against the float64 reference: many
windows of fresh random inputs, slots out of order, a padded request, staggered flushes."""

import numpy as np
import pytest

import replayssm as rs
from harness import Layer
from reference import relative_error

MAMBA2 = rs.Mamba2Shape(heads=4, head_dim=10, state_dim=32, groups=2)  # head_dim not a power of two
GDN = rs.GDNShape(value_heads=4, key_heads=2, key_dim=32, value_dim=16)
SHAPES = {"mamba2": MAMBA2, "gated_deltanet": GDN}

# Policies and the largest relative output error each may reach over the run: fp32 states
# agree to float rounding; narrower read copies and states carry their formats' error.
POLICIES = [
    (rs.writeback_policy("fp32"), 1e-5),
    (rs.replay_policy(8), 1e-5),
    (rs.replay_policy(16), 1e-5),
    (rs.replay_policy(16, "fp16", rounding="stochastic"), 5e-3),
    (rs.replay_policy(16, "fp16", "fp32"), 3e-3),
    (rs.replay_policy(16, "fp8_e4m3", "fp16", "stochastic"), 0.15),
    (rs.replay_policy(16, "nvfp4", "fp16", "stochastic"), 0.5),
    (rs.replay_policy(16, "nvfp4", "fp16", "stochastic", gdn_window="raw_inputs"), 0.5),
]
# Half-precision activations add their rounding (outputs are rounded to fp16).
ACTIVATION_ERROR = {"float32": 0.0, "float16": 2e-3}


# (The window mode is Gated DeltaNet's: Mamba-2 runs each policy once.)
CASES = [(r, p, t) for r in SHAPES for p, t in POLICIES if r == "gated_deltanet" or not p.raw_inputs]


@pytest.mark.parametrize("recurrence,policy,tolerance", CASES,
                         ids=[f"{r}-{p}-{p.gdn_window}" for r, p, _ in CASES])
@pytest.mark.parametrize("dtype", ACTIVATION_ERROR)
def test_decode_matches_reference(recurrence, policy, tolerance, dtype):
    rng = np.random.default_rng(2026)
    layer = Layer(recurrence, policy, SHAPES[recurrence], num_slots=6, dtype=dtype, rng=rng)
    if not policy.is_writeback:
        layer.buffers.flush_phase[:] = rng.integers(0, policy.window, 6)  # staggered flushes
    # 3.5 windows of the longest policy: every request flushes several times, at its own step.
    errors = [layer.decode([4, -1, 0, 2]) for _ in range(56)]
    assert max(errors) <= tolerance + ACTIVATION_ERROR[dtype], f"errors {errors}"
    if policy.is_writeback:  # the state itself is current: it equals the reference's
        for slot in (4, 0, 2, 1):
            want = np.asarray(layer.states[slot])
            assert np.abs(layer.buffers.read_state(slot) - want).max() <= 1e-5 * np.abs(want).max()


@pytest.mark.parametrize("recurrence", SHAPES)
def test_request_order_and_batch_size_vary_between_steps(recurrence):
    rng = np.random.default_rng(3)
    layer = Layer(recurrence, rs.replay_policy(8), SHAPES[recurrence], num_slots=5, dtype="float32", rng=rng)
    for step in range(30):
        slots = list(rng.permutation(5)[: 1 + step % 5])
        assert layer.decode(slots) <= 1e-5


def test_pad_slot_id_may_be_any_id_outside_the_slots():
    layer = Layer("mamba2", rs.replay_policy(8), MAMBA2, num_slots=3, dtype="float32", rng=np.random.default_rng(4))
    for _ in range(12):
        assert layer.decode([2, 99, 0], pad_slot_id=99) <= 1e-5


def test_packed_qkv_steps_as_q_k_v_apart():
    """A Gated DeltaNet step on q, k and v packed in one row per token (an engine's projection
    output) gives the outputs and states of the same step on them apart, bit for bit, and
    the reference's outputs."""
    apart, packed = (Layer("gated_deltanet", rs.replay_policy(8), GDN, num_slots=3, dtype="float32",
                           rng=np.random.default_rng(5)) for _ in range(2))
    slots = np.array([2, 0], np.int32)
    for _ in range(20):  # flushes included
        library, exact = apart.inputs(2)
        qkv = np.concatenate([library[n].reshape(2, -1) for n in ("q", "k", "v")], axis=1)
        # A row stride wider than the row, as a slice of a larger projection output leaves it.
        wide = np.zeros((2, qkv.shape[1] + 8), np.float32)
        wide[:, :qkv.shape[1]] = qkv
        want = rs.gdn_decode(apart.buffers, **library, **apart.weights, slot_indices=slots)
        gates = {n: library[n] for n in ("a", "b")}
        got = rs.gdn_decode(packed.buffers, None, None, None, **gates, **packed.weights, slot_indices=slots,
                            qkv=wide[:, :qkv.shape[1]])
        assert np.array_equal(got, want)
        assert relative_error(got, apart.reference_step([2, 0], exact)) <= 1e-5
    for slot in range(3):
        assert np.array_equal(packed.buffers.read_state(slot), apart.buffers.read_state(slot))
