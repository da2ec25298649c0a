# SPDX-License-Identifier: Apache-2.0
"""The CUDA steps on torch tensors at the Nemotron-Nano (Mamba-2) and Qwen3.5-4B (Gated
DeltaNet) layer shapes, replayed from captured CUDA graphs with fresh random inputs over
many windows, against float64 torch references. Skipped without a CUDA device."""

import numpy as np
import pytest

import replayssm as rs
from harness import Arrays, Layer
from reference import relative_error

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not (torch.cuda.is_available() and rs.has_cuda),
                                reason="needs a CUDA device and a module built with CUDA")

DEVICE = "cuda"
NANO = rs.Mamba2Shape(heads=96, head_dim=80, state_dim=128, groups=8)
QWEN = rs.GDNShape(value_heads=32, key_heads=16, key_dim=128, value_dim=128)
SHAPES = {"mamba2": NANO, "gated_deltanet": QWEN}
SLOTS = [5, 0, 11, -1, 7, 2, 9, 3]  # 8 requests on 12 slots, out of order, one padded
# bf16 outputs round to 2^-9 relative; the states' formats add their error over the run.
TOLERANCE = {"fp32": 1e-2, "fp16": 2e-2, "nvfp4": 0.5}


def captured(layer, step):
    """A CUDA graph of `step(buffers)` on the layer's buffers, captured after one run on
    spare buffers of the same layer (which loads the kernels)."""
    b = layer.buffers
    step(type(b)(b.policy, b.shape, b.num_slots, b.dtype, device=DEVICE, draft_tokens=b.draft_tokens))
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step(b)
    return graph


@pytest.mark.parametrize("recurrence", SHAPES)
@pytest.mark.parametrize("policy", [rs.writeback_policy("fp32"), rs.replay_policy(16),
                                    rs.replay_policy(16, "nvfp4", "fp16", "stochastic")], ids=str)
def test_captured_decode_matches_reference(recurrence, policy):
    if not policy.has_cuda_steps:
        pytest.skip(f"{policy}: no CUDA steps in this build (REPLAYSSM_PYTHON_CUDA_POLICIES)")
    rng = np.random.default_rng(2026)
    layer = Layer(recurrence, policy, SHAPES[recurrence], num_slots=12, dtype="bfloat16", rng=rng,
                  arrays=Arrays(DEVICE))
    if not policy.is_writeback:
        layer.buffers.flush_phase.copy_(torch.as_tensor(rng.integers(0, 16, 12), dtype=torch.int32))
    slots = torch.tensor(SLOTS, dtype=torch.int32, device=DEVICE)
    real = [b for b, s in enumerate(SLOTS) if s >= 0]
    static, _ = layer.inputs(len(SLOTS))
    out = torch.full_like(static[layer._out_like], 7.0)
    graph = captured(layer, lambda buffers: layer.step_fn("decode", buffers, **static, **layer.weights,
                                                          slot_indices=slots, out=out))
    out.fill_(7.0)
    errors = []
    for _ in range(40):  # 2.5 windows: every request flushes twice, each at its own step
        library, exact = layer.inputs(len(SLOTS))
        for name, tensor in library.items():
            static[name].copy_(tensor)
        graph.replay()
        want = layer.reference_step([SLOTS[b] for b in real], {k: v[real] for k, v in exact.items()})
        errors.append(relative_error(layer.arrays.reference(out[real]), want))
    layer.buffers.take_errors()
    assert (out[3] == 7.0).all(), "the padded request's output was written"
    assert max(errors) <= TOLERANCE[policy.read], errors


@pytest.mark.parametrize("recurrence", SHAPES)
def test_captured_verify_and_commit_match_sequential_steps(recurrence):
    rng = np.random.default_rng(7)
    tokens, slots = 4, [3, 0, 6, 1]
    layer = Layer(recurrence, rs.replay_policy(16), SHAPES[recurrence], num_slots=8, dtype="bfloat16", rng=rng,
                  arrays=Arrays(DEVICE), draft_tokens=tokens)
    slot_tensor = torch.tensor(slots, dtype=torch.int32, device=DEVICE)
    counts = torch.zeros(len(slots), dtype=torch.int32, device=DEVICE)
    accepted = torch.zeros(len(slots), dtype=torch.int32, device=DEVICE)
    static, _ = layer.inputs(len(slots) * tokens)
    out = torch.zeros_like(static[layer._out_like])

    def round_(buffers):  # verify the drafts, commit the accepted ones: one graph
        layer.step_fn("verify", buffers, **static, **layer.weights, slot_indices=slot_tensor, tokens=tokens,
                      token_counts=counts, out=out)
        rs.commit_drafts(buffers, accepted, tokens=tokens, slot_indices=slot_tensor, token_counts=counts)

    counts.fill_(1)
    graph = captured(layer, round_)
    weights = {k: layer.arrays.reference(v) for k, v in layer.weights.items()}
    for _ in range(24):
        draft_counts = rng.integers(1, tokens + 1, len(slots))
        kept = [int(rng.integers(0, c + 1)) for c in draft_counts]
        library, exact = layer.inputs(len(slots) * tokens)
        for name, tensor in library.items():
            static[name].copy_(tensor)
        counts.copy_(torch.as_tensor(draft_counts, dtype=torch.int32))
        accepted.copy_(torch.as_tensor(kept, dtype=torch.int32))
        graph.replay()
        got = layer.arrays.reference(out)
        for b, slot in enumerate(slots):
            state = layer.states[[slot]] + 0
            for t in range(int(draft_counts[b])):
                row = [b * tokens + t]
                want = layer.ref_fn(torch, state, **{k: v[row] for k, v in exact.items()}, **weights)
                assert (got[row] - want).norm() <= TOLERANCE["fp32"] * want.norm()
                if t + 1 == kept[b]:
                    layer.states[[slot]] = state
    layer.buffers.take_errors()


def test_device_report_names_a_bad_request():
    layer = Layer("mamba2", rs.replay_policy(16), NANO, 4, "bfloat16", np.random.default_rng(1), Arrays(DEVICE))
    library, _ = layer.inputs(2)
    layer.run("decode", library, [1, 9])
    with pytest.raises(ValueError, match="request 1: a slot index was outside"):
        layer.buffers.take_errors()
    layer.buffers.take_errors()  # the report was cleared


def test_arrays_on_another_device_are_rejected():
    layer = Layer("mamba2", rs.replay_policy(16), NANO, 4, "bfloat16", np.random.default_rng(2), Arrays(DEVICE))
    library, _ = layer.inputs(2)
    library["B"] = library["B"].cpu()
    with pytest.raises(ValueError, match="mamba2: B: is on cpu, the step runs on cuda:0"):
        layer.run("decode", library, [1, 0])


def test_a_policy_without_cuda_steps_says_so():
    missing = [p for p in rs.policies() if not p.has_cuda_steps]
    if not missing:
        pytest.skip("every policy has its CUDA steps in this build")
    layer = Layer("mamba2", missing[0], NANO, 4, "bfloat16", np.random.default_rng(3), Arrays(DEVICE))
    library, _ = layer.inputs(2)
    with pytest.raises(ValueError, match="has no CUDA steps in this build"):
        layer.run("decode", library, [1, 0])
