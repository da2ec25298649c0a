# SPDX-License-Identifier: Apache-2.0
"""The torch ops on CPU tensors: the same bits as the NumPy path, and fake implementations
for torch.compile; the engine wrappers' argument checks. (Every entry point, compiled or
not, against the float64 reference: test_entry_points.py.)"""

import numpy as np
import pytest

import replayssm as rs
from harness import Arrays, Layer
from reference import relative_error
from test_steps import GDN, MAMBA2

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("recurrence,shape", [("mamba2", MAMBA2), ("gated_deltanet", GDN)])
def test_torch_tensors_give_the_numpy_paths_bits(recurrence, shape):
    policy = rs.replay_policy(8)
    layers = [Layer(recurrence, policy, shape, 4, "float32", np.random.default_rng(9), arrays)
              for arrays in (Arrays(), Arrays("cpu"))]
    rngs = [np.random.default_rng(10), np.random.default_rng(10)]
    for _ in range(20):
        outs = []
        for layer, rng in zip(layers, rngs):
            layer.rng = rng
            library, exact = layer.inputs(3)
            out = layer.run("decode", library, [3, 0, 1])
            assert relative_error(layer.arrays.reference(out), layer.reference_step([3, 0, 1], exact)) <= 1e-5
            outs.append(np.asarray(out))
        assert np.array_equal(outs[0], outs[1])


def test_ops_have_schemas_and_fake_implementations():
    for op in ("mamba2_step", "gdn_step", "commit_drafts"):
        schema = str(getattr(torch.ops.replayssm, op).default._schema)
        assert "Tensor(a0!)?" in schema
    layer = Layer("mamba2", rs.replay_policy(8), MAMBA2, 3, "float32", np.random.default_rng(1), Arrays("cpu"))
    library, _ = layer.inputs(2)
    args = {**library, **layer.weights, "out": torch.zeros_like(library["x"]), **layer.buffers.arrays}
    scalars = {"kind": "decode", "policy": layer.buffers.policy_index, "tokens": 1, "pad_slot_id": -1, "seed": 0,
               "dt_softplus": True, **MAMBA2._asdict()}
    with torch._subclasses.fake_tensor.FakeTensorMode() as mode:
        fake = {k: mode.from_tensor(v) for k, v in args.items()}
        torch.ops.replayssm.mamba2_step(*rs._steps.arguments("mamba2_step", scalars, fake))


def test_engine_wrapper_takes_a_tied_view_and_rejects_others():
    """A, D, dt_bias and dt are one value per head (dt: per request and head), or vLLM's
    views that repeat it with stride 0; a tensor with other values in its further
    dimensions (an untied D [heads, head_dim]) is rejected, not reduced to its first column."""
    from replayssm import engine

    layer = Layer("mamba2", rs.replay_policy(8), MAMBA2, 3, "float32", np.random.default_rng(6), Arrays("cpu"))
    inputs, _ = layer.inputs(2)
    w = layer.weights
    H, P, N = MAMBA2.heads, MAMBA2.head_dim, MAMBA2.state_dim
    tied = {"dt": inputs["dt"][:, :, None].expand(-1, -1, P), "A": w["A"][:, None, None].expand(-1, P, N),
            "D": w["D"][:, None].expand(-1, P), "dt_bias": w["dt_bias"][:, None].expand(-1, P)}
    untied = {"dt": torch.randn(2, H, P), "A": torch.randn(H, P, N), "D": torch.randn(H, P),
              "dt_bias": torch.randn(H, P)}
    slots = torch.tensor([2, 0], dtype=torch.int64)

    def update(indices=slots, **given):
        args = {**tied, **given}
        return engine.selective_state_update(layer.buffers.checkpoint, inputs["x"], args["dt"], args["A"], inputs["B"],
                                             inputs["C"], args["D"], inputs["z"], args["dt_bias"], dt_softplus=True,
                                             state_batch_indices=indices, buffers=layer.buffers)

    update()
    for name, value in untied.items():
        cursors = layer.buffers.cursors.clone()
        with pytest.raises(ValueError, match=rf"replayssm: {name}: expected .* or a view that repeats it .* stride 0"):
            update(**{name: value})
        assert torch.equal(layer.buffers.cursors, cursors), "something was stepped"
    with pytest.raises(ValueError, match="state_batch_indices: expected int32 or int64 slot indices, got "
                                         "torch.float32"):
        update(slots.float())
