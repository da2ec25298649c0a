# SPDX-License-Identifier: Apache-2.0
"""The torch ops on CPU tensors: the same bits as the NumPy path, traceable by torch.compile
(fake implementations), and the engine wrappers in vLLM's argument conventions."""

import numpy as np
import pytest

import replayssm as rs
from harness import Arrays, Layer
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
            library, _ = layer.inputs(3)
            outs.append(np.asarray(layer.run("decode", library, [3, 0, 1])))
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


def test_torch_compile_traces_the_step():
    rng = np.random.default_rng(2)
    eager = Layer("mamba2", rs.replay_policy(8), MAMBA2, 3, "float32", rng, Arrays("cpu"))
    compiled = Layer("mamba2", rs.replay_policy(8), MAMBA2, 3, "float32", np.random.default_rng(2), Arrays("cpu"))
    slots = torch.tensor([2, 0], dtype=torch.int32)

    def step(buffers, x, dt, A, B, C, D, z, dt_bias):
        return rs.mamba2_decode(buffers, x, dt, A, B, C, D, z, dt_bias, slot_indices=slots) * 2.0

    fn = torch.compile(step, backend="aot_eager", fullgraph=True)
    for _ in range(12):
        library, _ = eager.inputs(2)
        names = ("x", "dt", "A", "B", "C", "D", "z", "dt_bias")
        a = step(eager.buffers, *[{**library, **eager.weights}[n] for n in names])
        b = fn(compiled.buffers, *[{**library, **compiled.weights}[n] for n in names])
        assert torch.equal(a, b)


def test_engine_wrappers_take_vllm_conventions():
    from replayssm import engine

    rng = np.random.default_rng(3)
    a, b = (Layer("mamba2", rs.replay_policy(8), MAMBA2, 3, "float32", np.random.default_rng(4), Arrays("cpu"))
            for _ in range(2))
    P, N = MAMBA2.head_dim, MAMBA2.state_dim
    slots = torch.tensor([1, 2], dtype=torch.int64)
    for _ in range(10):
        a.rng = b.rng = rng
        inputs, _ = a.inputs(2)
        w = a.weights
        want = rs.mamba2_decode(a.buffers, **inputs, **w, slot_indices=slots.int())
        got = engine.selective_state_update(
            b.buffers.checkpoint, inputs["x"], inputs["dt"][:, :, None].expand(-1, -1, P),
            w["A"][:, None, None].expand(-1, P, N), inputs["B"], inputs["C"], D=w["D"][:, None].expand(-1, P),
            z=inputs["z"], dt_bias=w["dt_bias"][:, None].expand(-1, P), dt_softplus=True, state_batch_indices=slots,
            buffers=b.buffers)
        assert torch.equal(want, got)

    g = Layer("gated_deltanet", rs.replay_policy(8), GDN, 3, "float32", np.random.default_rng(5), Arrays("cpu"))
    h = Layer("gated_deltanet", rs.replay_policy(8), GDN, 3, "float32", np.random.default_rng(5), Arrays("cpu"))
    for _ in range(10):
        inputs, _ = g.inputs(2)
        want = rs.gdn_decode(g.buffers, **inputs, **g.weights, slot_indices=slots.int())
        mixed = torch.cat([inputs["q"].flatten(1), inputs["k"].flatten(1), inputs["v"].flatten(1)], dim=1)
        out = torch.empty_like(inputs["v"])
        engine.gated_delta_rule_update(h.buffers.checkpoint, mixed, inputs["a"], inputs["b"], h.weights["A_log"],
                                       h.weights["dt_bias"], slots, out=out, buffers=h.buffers)
        assert torch.equal(want, out)


CUDA = torch.cuda.is_available() and rs.has_cuda


@pytest.mark.parametrize("device,shape,dtype", [
    ("cpu", MAMBA2, "float32"),
    pytest.param("cuda", rs.Mamba2Shape(96, 80, 128, 8), "bfloat16",
                 marks=pytest.mark.skipif(not CUDA, reason="needs a CUDA device and a module built with CUDA")),
])
def test_engine_wrapper_under_torch_compile(device, shape, dtype):
    """The Mamba-2 wrapper with vLLM's tied dt, A and D, compiled as one graph, gives the
    eager call's bits."""
    from replayssm import engine

    rng = np.random.default_rng(3)
    eager, compiled = (Layer("mamba2", rs.replay_policy(16), shape, 4, dtype, np.random.default_rng(4),
                             Arrays(device)) for _ in range(2))
    P, N = shape.head_dim, shape.state_dim
    slots = torch.tensor([2, 0], dtype=torch.int32, device=device)

    def update(buffers, x, dt, A, B, C, D, z, dt_bias):
        return engine.selective_state_update(buffers.checkpoint, x, dt[..., None].expand(-1, -1, P),
                                             A[:, None, None].expand(-1, P, N), B, C, D[:, None].expand(-1, P), z,
                                             dt_bias, dt_softplus=True, state_batch_indices=slots, buffers=buffers)

    fn = torch.compile(update, fullgraph=True)
    for _ in range(20):
        eager.rng = compiled.rng = rng
        library, _ = eager.inputs(2)
        names = ("x", "dt", "A", "B", "C", "D", "z", "dt_bias")
        a = update(eager.buffers, *[{**library, **eager.weights}[n] for n in names])
        b = fn(compiled.buffers, *[{**library, **compiled.weights}[n] for n in names])
        assert torch.equal(a, b)
