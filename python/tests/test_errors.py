# SPDX-License-Identifier: Apache-2.0
"""Bad input from Python gets a Python exception with the launcher's message (shape, dtype,
stride, buffer size, slot, cursor, token and accepted counts), and nothing is stepped."""

import numpy as np
import pytest

import replayssm as rs
from reference import gdn_inputs, gdn_weights, mamba2_inputs, mamba2_weights
from test_steps import GDN, MAMBA2

POLICY = rs.replay_policy(8)


@pytest.fixture
def mamba2():
    """A valid Mamba-2 decode step of 2 requests on slots [2, 0] of 3: its buffers and arguments."""
    rng = np.random.default_rng(0)
    buffers = rs.Mamba2Buffers(POLICY, MAMBA2, 3, "float32", draft_tokens=2)
    values = {**mamba2_inputs(rng, 2, MAMBA2), **mamba2_weights(rng, MAMBA2)}
    args = {k: v.astype(np.float32) for k, v in values.items()}
    args["slot_indices"] = np.array([2, 0], np.int32)
    args["out"] = np.zeros_like(args["x"])
    return buffers, args


def error(fn, *args, **kwargs):
    with pytest.raises(ValueError) as e:
        fn(*args, **kwargs)
    return str(e.value)


def test_valid_arguments_run(mamba2):
    buffers, args = mamba2
    rs.mamba2_decode(buffers, **args)
    assert np.abs(args["out"]).max() > 0


@pytest.mark.parametrize("name,value,message", [
    ("x", np.zeros((2, 4, 10)), "mamba2: x: expected float32, float16 or bfloat16 activations, got float64"),
    ("C", np.zeros((2, 2, 16), np.float32), "mamba2: C: expected shape [2, 2, 32] (batch * tokens, groups, state_dim), "
                                           "got [2, 2, 16]"),
    ("dt", np.zeros((2, 4), np.float16), "mamba2: dt: expected float32, got float16"),
    ("A", np.zeros(3, np.float32), "mamba2: A: holds 3 elements, expected 4 (heads)"),
    ("slot_indices", np.array([2, 0], np.int64), "mamba2: slot_indices: expected int32, got int64"),
    ("slot_indices", np.array([2, 9], np.int32),
     "mamba2: slot_indices[1]=9 is outside [0, 3) and is not the pad id -1"),
    ("slot_indices", np.array([2, 2], np.int32),
     "mamba2: slot_indices[0]=2 repeats slot_indices[1]: two requests of one step cannot share a state slot"),
    ("out", np.zeros((2, 4, 10), np.float32)[::-1], "mamba2: out: dimension 0 has stride -40, smaller than the 40 "
                                                    "elements of one entry"),
    # Shapes are the layer's: the array at fault is named, not one checked against it later.
    ("B", np.zeros((2, 3, 32), np.float32), "mamba2: B: expected shape [2, 2, 32] (batch * tokens, groups, state_dim), "
                                           "got [2, 3, 32]"),
    ("x", np.zeros((2, 4, 65), np.float32), "mamba2: x: expected shape [2, 4, 10] (batch * tokens, heads, head_dim), "
                                           "got [2, 4, 65]"),
    ("out", np.zeros((2, 4, 9), np.float32), "mamba2: out: expected shape [2, 4, 10]"),
    ("out", np.zeros((2, 4, 10), np.float16), "mamba2: out: expected float32, got float16"),
])
def test_bad_argument_names_it(mamba2, name, value, message):
    buffers, args = mamba2
    args[name] = value
    cursors = buffers.cursors.copy()
    assert message in error(rs.mamba2_decode, buffers, **args)
    assert (buffers.cursors == cursors).all() and not args["out"].any(), "something was stepped"


def test_inner_dimension_must_be_contiguous(mamba2):
    buffers, args = mamba2
    args["x"] = np.repeat(args["x"], 2, axis=2)[:, :, ::2]
    assert "mamba2: x: its last dimension must be contiguous (stride 1), got stride 2" in \
        error(rs.mamba2_decode, buffers, **args)


def test_buffers_too_small_for_the_slots(mamba2):
    buffers, args = mamba2
    buffers.arrays["window_x"] = np.zeros((3, 8, 4, 9), np.float32)
    assert "mamba2: window_x: holds 3456 bytes, replay W=8 shared=fp32 rounding=nearest-even with num_slots=3, " \
           "window_entries=10 needs 4800" in error(rs.mamba2_decode, buffers, **args)


def test_a_bad_cursor_is_named_and_nothing_is_stepped(mamba2):
    buffers, args = mamba2
    buffers.cursors[0, 1] = [99, 0, 0, 0]
    message = error(rs.mamba2_decode, buffers, **args)
    assert "request 1 (slot 0, head 1)" in message and "cursors[1] holds length=99" in message
    assert "nothing was stepped" in message
    assert not args["out"].any()


def test_verify_needs_room_and_a_replay_policy(mamba2):
    buffers, args = mamba2
    rng = np.random.default_rng(1)
    args.update({k: v.astype(np.float32) for k, v in mamba2_inputs(rng, 6, MAMBA2).items()})
    args["out"] = np.zeros_like(args["x"])
    assert "window_entries=10 is too short for a verify step: it needs window + tokens = 11" in \
        error(rs.mamba2_verify, buffers, tokens=3, **args)
    writeback = rs.Mamba2Buffers(rs.writeback_policy(), MAMBA2, 3, "float32")
    assert "mamba2: the verify step needs a replay policy, not write-back state=fp32" in \
        error(rs.mamba2_verify, writeback, tokens=3, **args)
    assert "rows are not a whole number of requests of tokens=4" in error(rs.mamba2_verify, buffers, tokens=4, **args)


def test_a_commit_beyond_the_verified_drafts_commits_nothing(mamba2):
    buffers, args = mamba2
    rng = np.random.default_rng(2)
    args.update({k: v.astype(np.float32) for k, v in mamba2_inputs(rng, 4, MAMBA2).items()})
    args["out"] = np.zeros_like(args["x"])
    rs.mamba2_verify(buffers, tokens=2, **args)
    cursors = buffers.cursors.copy()
    message = error(rs.commit_drafts, buffers, np.array([1, 3], np.int32), tokens=2,
                    slot_indices=args["slot_indices"])
    assert "commit: accepted_counts[1]=3 is outside [0, 2]" in message
    assert (buffers.cursors == cursors).all()


def test_gdn_arguments_are_checked():
    rng = np.random.default_rng(3)
    buffers = rs.GDNBuffers(rs.replay_policy(16, "fp16", "fp32", gdn_window="raw_inputs"), GDN, 2, "float32")
    args = {k: v.astype(np.float32) for k, v in {**gdn_inputs(rng, 2, GDN), **gdn_weights(rng, GDN)}.items()}
    rs.gdn_decode(buffers, **args)
    # Shapes are the layer's: the array at fault is named.
    for name, value, message in [
        ("q", args["q"][:, :, :16], "q: expected shape [2, 2, 32] (batch * tokens, key_heads, key_dim), got "
                                    "[2, 2, 16]"),
        ("v", args["v"][:, :3], "v: expected shape [2, 4, 16] (batch * tokens, value_heads, value_dim), got "
                                "[2, 3, 16]"),
        ("out", np.zeros((2, 4, 8), np.float32), "out: expected shape [2, 4, 16]"),
        ("k", args["k"][:, :1], "k: expected shape [2, 2, 32] (batch * tokens, key_heads, key_dim), got [2, 1, 32]"),
    ]:
        assert "gated_deltanet: " + message in error(rs.gdn_decode, buffers, **{**args, name: value})
    shared = rs.replay_policy(8, gdn_window="raw_inputs")
    assert "the raw_inputs window mode needs a separate read copy" in \
        error(rs.GDNBuffers, shared, GDN, 2, "float32")


def test_packed_qkv_is_checked():
    rng = np.random.default_rng(4)
    buffers = rs.GDNBuffers(POLICY, GDN, 2, "float32")
    args = {k: v.astype(np.float32) for k, v in {**gdn_inputs(rng, 2, GDN), **gdn_weights(rng, GDN)}.items()}
    q, k, v = (args.pop(n) for n in ("q", "k", "v"))
    qkv = np.concatenate([q.reshape(2, -1), k.reshape(2, -1), v.reshape(2, -1)], axis=1)
    cursors = buffers.cursors.copy()
    assert "gated_deltanet: q: q, k and v come packed in qkv here" in \
        error(rs.gdn_decode, buffers, q, None, None, **args, qkv=qkv)
    assert ("gated_deltanet: qkv: 191 columns are not 2 * key_heads * key_dim + 64 (value_heads * value_dim) "
            "with key_heads=2") in error(rs.gdn_decode, buffers, None, None, None, **args, qkv=qkv[:, 1:])
    assert "gated_deltanet: qkv: its last dimension must be contiguous" in \
        error(rs.gdn_decode, buffers, None, None, None, **args, qkv=np.asfortranarray(qkv))
    assert (buffers.cursors == cursors).all()
    unshaped = {"kind": "decode", "policy": POLICY.index, "tokens": 1, "pad_slot_id": -1, "seed": 0,
                "raw_inputs": False, "value_heads": 0, "key_heads": 0, "key_dim": 0, "value_dim": 0}
    assert "gated_deltanet: qkv: 192 columns are not 2 * key_heads * key_dim + 64 (value_heads * value_dim) with " \
           "key_heads=0" in error(rs._native.gdn_step, *rs._steps.arguments("gdn_step", unshaped, {
               **buffers.arrays, **args, "qkv": qkv, "out": np.zeros_like(v)}))


def test_wrong_objects_are_type_errors(mamba2):
    buffers, args = mamba2
    with pytest.raises(TypeError, match="expected GDNBuffers, got Mamba2Buffers"):
        rs.gdn_decode(buffers, *[args[k] for k in ("x", "x", "x", "dt", "dt", "A")])
    with pytest.raises(TypeError, match="mamba2: x must be an array"):
        rs.mamba2_decode(buffers, **{**args, "x": "not an array"})
    with pytest.raises(TypeError, match=r"mamba2: expected \d+ arguments \(kind, policy, .*\), got 2"):
        rs._native.mamba2_step("decode", POLICY.index)
    with pytest.raises(TypeError, match="mamba2: tokens must be an integer"):
        rs._native.mamba2_step(*rs._steps.arguments("mamba2_step", {"kind": "decode", "policy": POLICY.index,
                                                                     "tokens": "one", "pad_slot_id": -1, "seed": 0,
                                                                     "dt_softplus": True, **MAMBA2._asdict()}, args))


def test_state_io_checks_shapes_and_slots():
    buffers = rs.Mamba2Buffers(POLICY, MAMBA2, 2, "float32")
    with pytest.raises(ValueError, match=r"values have shape \[4, 10, 16\], expected \[4, 10, 32\]"):
        buffers.write_state(0, np.zeros((4, 10, 16)))
    for slot in (2, 99, -1, 1.0):
        with pytest.raises(ValueError, match=rf"write_state: slot {slot!r} is not an integer in \[0, 2\)"):
            buffers.write_state(slot, np.zeros((4, 10, 32)))
        with pytest.raises(ValueError, match=rf"read_state: slot {slot!r} is not an integer in \[0, 2\)"):
            buffers.read_state(slot)
    with pytest.raises(ValueError, match=r"NumPy has no bfloat16.*device='cpu'"):
        rs.Mamba2Buffers(POLICY, MAMBA2, 2, "bfloat16")


def test_a_checkpoint_given_per_call_is_the_one_stepped(mamba2):
    """The buffers' arrays are bound at the first step; a checkpoint given to a call is
    stepped instead of the bound one, and the next call without one steps the bound one."""
    _, args = mamba2
    buffers = rs.Mamba2Buffers(rs.writeback_policy(), MAMBA2, 3, "float32")
    own = np.zeros_like(buffers.checkpoint)
    rs.mamba2_decode(buffers, **args)
    bound_after_one = buffers.checkpoint.copy()
    assert np.abs(bound_after_one).max() > 0
    rs.mamba2_decode(buffers, **args, checkpoint=own)
    assert (buffers.checkpoint == bound_after_one).all() and np.abs(own).max() > 0
    rs.mamba2_decode(buffers, **args)
    assert not (buffers.checkpoint == bound_after_one).all()
    bad = error(rs.mamba2_decode, buffers, **args, checkpoint=own.astype(np.float16))
    assert "mamba2: checkpoint" in bad, bad
