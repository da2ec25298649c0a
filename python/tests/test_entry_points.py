# SPDX-License-Identifier: Apache-2.0
"""Every public entry point of a decode step against the float64 reference (reference.py,
written from the recurrences' math): ``rs.mamba2_decode`` / ``rs.gdn_decode`` (NumPy arrays
and torch tensors), ``rs.mamba2_step`` / ``rs.gdn_step``, a packed qkv, the torch ops called
directly, the same under ``torch.compile``, and the ``engine`` wrappers in vLLM's
conventions (tied views, int32 and int64 slot indices), eager and compiled; on the CPU and,
with a CUDA device, on it.

Every case: requests on a permuted, non-identity map into a larger pool with gaps, padded
rows, the rows shuffled every step, staggered flush phases, fresh random inputs every step,
and enough steps that every slot flushes at least twice. Each step's outputs are compared
with the reference's, padded rows must be left alone (a given ``out``) or zeros (one the
package allocates), and each stepped slot's checkpoint must equal the reference's state at
the slot's last flush (the current state under write-back)."""

import numpy as np
import pytest

import replayssm as rs
import reference as ref
from harness import Arrays, Layer
from test_steps import GDN, MAMBA2

torch = pytest.importorskip("torch")
from replayssm import engine  # noqa: E402  (needs torch)

CUDA = torch.cuda.is_available() and rs.has_cuda
PAD = -1
NUM_SLOTS = 11
SLOTS = [7, PAD, 2, 9, 4, PAD, 0]  # 5 requests and 2 pads; slots 1, 3, 5, 6, 8, 10 unused
# Largest relative error of a request's output: FP32 activations and states agree with the
# float64 reference to float rounding (about 1e-7 per operation, over a window of steps);
# BF16 outputs are rounded to 8 bits of mantissa (2^-9 relative) and the steps' sums
# in another order on top. A checkpoint (FP32 in every case here) is the float64 state to
# float rounding: the inputs it folded are exact in both.
OUTPUT_TOLERANCE = {"float32": 1e-5, "bfloat16": 1e-2}
CHECKPOINT_TOLERANCE = {"cpu": 1e-5, "cuda": 1e-4}  # the device's exp is not the host's


def decode(layer, inputs, slots, out):
    """``rs.mamba2_decode`` / ``rs.gdn_decode``."""
    fn = rs.mamba2_decode if layer.recurrence == "mamba2" else rs.gdn_decode
    return fn(layer.buffers, **inputs, **layer.weights, slot_indices=slots, pad_slot_id=PAD, out=out)


def step(layer, inputs, slots, out):
    """``rs.mamba2_step`` / ``rs.gdn_step`` of kind decode."""
    fn = rs.mamba2_step if layer.recurrence == "mamba2" else rs.gdn_step
    return fn("decode", layer.buffers, **inputs, **layer.weights, slot_indices=slots, pad_slot_id=PAD, out=out)


def packed(layer, inputs, slots, out):
    """``rs.gdn_decode`` with q, k and v packed in one row (``qkv``)."""
    rest = {k: v for k, v in inputs.items() if k not in ("q", "k", "v")}
    return rs.gdn_decode(layer.buffers, None, None, None, **rest, **layer.weights, slot_indices=slots,
                         pad_slot_id=PAD, out=out, qkv=_mixed_qkv(inputs))


def torch_op(layer, inputs, slots, out):
    """``torch.ops.replayssm.mamba2_step`` / ``gdn_step`` with every argument (positional)."""
    buffers = layer.buffers
    op = "mamba2_step" if layer.recurrence == "mamba2" else "gdn_step"
    scalars = {"kind": "decode", "policy": buffers.policy_index, "tokens": 1, "pad_slot_id": PAD,
               "seed": buffers.seed, "dt_softplus": True, "raw_inputs": buffers.policy.raw_inputs,
               **buffers.shape._asdict()}
    arrays = {**buffers.arrays, **inputs, **layer.weights, "slot_indices": slots, "out": out}
    getattr(torch.ops.replayssm, op)(*rs._steps.arguments(op, scalars, arrays))
    return out


def wrapper(layer, inputs, slots, out, tied=True):
    """``engine.selective_state_update`` with vLLM's tied dt, A, D and dt_bias (``tied``),
    or ``engine.gated_delta_rule_update`` with a packed ``mixed_qkv``."""
    b, w = layer.buffers, layer.weights
    if layer.recurrence == "mamba2":
        P, N = b.shape.head_dim, b.shape.state_dim
        dt, A, D, dt_bias = inputs["dt"], w["A"], w["D"], w["dt_bias"]
        if tied:
            dt, A = dt[:, :, None].expand(-1, -1, P), A[:, None, None].expand(-1, P, N)
            D, dt_bias = D[:, None].expand(-1, P), dt_bias[:, None].expand(-1, P)
        return engine.selective_state_update(b.checkpoint, inputs["x"], dt, A, inputs["B"], inputs["C"], D, inputs["z"],
                                             dt_bias, dt_softplus=True, state_batch_indices=slots, pad_slot_id=PAD,
                                             out=out, buffers=b)
    return engine.gated_delta_rule_update(b.checkpoint, _mixed_qkv(inputs), inputs["a"], inputs["b"], w["A_log"],
                                          w["dt_bias"], slots, PAD, out=out, buffers=b)


def flat_wrapper(layer, inputs, slots, out):
    """``engine.selective_state_update`` with dt, A, D and dt_bias one value per head."""
    return wrapper(layer, inputs, slots, out, tied=False)


def _mixed_qkv(inputs):
    parts = [inputs[n].reshape(inputs[n].shape[0], -1) for n in ("q", "k", "v")]
    return torch.cat(parts, dim=1) if torch.is_tensor(parts[0]) else np.concatenate(parts, axis=1)


def compiled(entry, backend="aot_eager"):
    """``entry`` traced by ``torch.compile`` as one graph (per layer)."""
    def run(layer, inputs, slots, out):
        if layer not in graphs:
            torch.compiler.reset()  # a new layer: compiled afresh, not counted as a recompile of the last
            graphs.clear()
            graphs[layer] = torch.compile(lambda i, s, o: entry(layer, i, s, o), backend=backend, fullgraph=True)
        return graphs[layer](inputs, slots, out)

    graphs = {}
    run.__name__ = f"compiled_{entry.__name__}"
    return run


# (entry point, framework: numpy or torch, index dtypes it takes)
ENTRIES = [
    (decode, "numpy", ("int32",)),
    (decode, "torch", ("int32",)),
    (step, "torch", ("int32",)),
    (packed, "torch", ("int32",)),
    (torch_op, "torch", ("int32",)),
    (compiled(decode), "torch", ("int32",)),
    (wrapper, "torch", ("int32", "int64")),
    (flat_wrapper, "torch", ("int32", "int64")),
    (compiled(wrapper, "inductor"), "torch", ("int32", "int64")),
]
POLICIES = {"cpu": [rs.writeback_policy("fp32"), rs.replay_policy(8)],
            # the first two policies: a build with REPLAYSSM_PYTHON_CUDA_POLICIES=2 has them
            "cuda": [rs.writeback_policy("fp32"), rs.replay_policy(16)]}
SHAPES = {"cpu": {"mamba2": MAMBA2, "gated_deltanet": GDN},
          "cuda": {"mamba2": rs.Mamba2Shape(96, 80, 128, 8), "gated_deltanet": rs.GDNShape(32, 16, 128, 128)}}


def _cases():
    for device in ("cpu", "cuda"):
        marks = [] if device == "cpu" else [pytest.mark.skipif(not CUDA, reason="needs a CUDA device and a module "
                                                                                 "built with CUDA")]
        for recurrence in ("mamba2", "gated_deltanet"):
            for entry, framework, index_dtypes in ENTRIES:
                if (entry is packed and recurrence == "mamba2" or entry is flat_wrapper and recurrence != "mamba2"
                        or framework == "numpy" and device == "cuda"):
                    continue
                # The CUDA steps take BF16 activations; on the CPU the engine wrapper runs BF16 too.
                dtypes = ["bfloat16"] if device == "cuda" else \
                    ["float32", "bfloat16"] if entry is wrapper else ["float32"]
                for policy in POLICIES[device]:
                    for dtype in dtypes:
                        for index_dtype in index_dtypes:
                            yield pytest.param(device, recurrence, entry, framework, policy, dtype, index_dtype,
                                               marks=marks, id=f"{device}-{recurrence}-{entry.__name__}-{framework}-"
                                                               f"{policy}-{dtype}-{index_dtype}")


@pytest.mark.parametrize("device,recurrence,entry,framework,policy,dtype,index_dtype", list(_cases()))
def test_entry_point_matches_reference(device, recurrence, entry, framework, policy, dtype, index_dtype):
    if device == "cuda" and not policy.has_cuda_steps:
        pytest.skip(f"{policy}: no CUDA steps in this build (REPLAYSSM_PYTHON_CUDA_POLICIES)")
    rng = np.random.default_rng(2026)
    arrays = Arrays(None if framework == "numpy" else device)
    layer = Layer(recurrence, policy, SHAPES[device][recurrence], NUM_SLOTS, dtype, rng, arrays)
    if not policy.is_writeback:  # every slot flushes at its own step
        phases = rng.integers(0, policy.window, NUM_SLOTS)
        layer.buffers.flush_phase[:] = phases if framework == "numpy" else torch.as_tensor(phases)
    history = {s: [layer.states[s] + 0] for s in SLOTS if s != PAD}  # each slot's reference states
    steps = 2 * policy.window + 4 if not policy.is_writeback else 12
    for n in range(steps):
        slots = [SLOTS[i] for i in rng.permutation(len(SLOTS))]
        real = [b for b, s in enumerate(slots) if s != PAD]
        pads = [b for b, s in enumerate(slots) if s == PAD]
        library, exact = layer.inputs(len(slots))
        index = np.asarray(slots, dtype=index_dtype)
        index = index if framework == "numpy" else torch.as_tensor(index, device=device)
        # A given out keeps its padded rows (7.0 here); one the package allocates has zeros there.
        given = n % 2 == 0 or entry is torch_op
        out_shape = (len(slots), *library["x" if recurrence == "mamba2" else "v"].shape[1:])
        out = layer.arrays.library(np.full(out_shape, 7.0), dtype) if given else None
        got = entry(layer, library, index, out)
        want = layer.reference_step([slots[b] for b in real], {k: v[real] for k, v in exact.items()})
        error = ref.relative_error(layer.arrays.reference(got)[real], want)
        assert error <= OUTPUT_TOLERANCE[dtype], f"step {n}: output error {error:.3g} (slots {slots})"
        padded = layer.arrays.numpy(layer.arrays.reference(got))[pads]
        assert (padded == (7.0 if given else 0.0)).all(), f"step {n}: a padded row was written"
        cursors = layer.arrays.numpy(layer.buffers.cursors)
        for s in history:
            history[s].append(layer.states[s] + 0)
            # The checkpoint holds the state of the slot's last flush, `length` steps ago.
            want_state = layer.arrays.numpy(history[s][-1 - cursors[s, 0, 0]])
            got_state = layer.buffers.read_state(s)
            error = np.linalg.norm(got_state - want_state) / np.linalg.norm(want_state)
            assert error <= CHECKPOINT_TOLERANCE[device], f"step {n}: slot {s}'s checkpoint error {error:.3g}"
    if not policy.is_writeback:
        assert (cursors[[s for s in SLOTS if s != PAD], :, 1] >= 2).all(), "a slot flushed less than twice"
    unused = [s for s in range(NUM_SLOTS) if s not in SLOTS]
    if framework == "torch":
        layer.buffers.take_errors()
    for s in unused:  # slots no request named are untouched
        assert np.array_equal(layer.buffers.read_state(s), layer.arrays.numpy(layer.states[s]).astype(np.float32))
