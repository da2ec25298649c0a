# SPDX-License-Identifier: Apache-2.0
"""Policies compiled into the module, their descriptions and buffer sizes."""

import pytest

import replayssm as rs


def test_compiled_policies_describe_themselves():
    compiled = rs.policies()
    assert rs.writeback_policy("fp32") in compiled
    assert rs.replay_policy(16, "nvfp4", "fp16", "stochastic") in compiled
    assert rs.describe(rs.replay_policy(16, "nvfp4", "fp16", "stochastic")) == \
        "replay W=16 read=nvfp4 checkpoint=fp16 rounding=stochastic(philox-10)"
    assert str(rs.writeback_policy("bf16")) == "write-back state=bf16 rounding=nearest-even"
    assert len({rs.describe(p) for p in compiled}) == len(compiled)


def test_a_policy_not_compiled_in_names_the_compiled_ones():
    with pytest.raises(ValueError) as e:
        rs.replay_policy(24, "fp32").index
    assert "is not compiled into this module" in str(e.value)
    assert "replay W=16 shared=fp32 rounding=nearest-even" in str(e.value)
    assert "python/src/policies.hpp" in str(e.value)


def test_bad_rounding_and_window_mode_are_rejected():
    with pytest.raises(ValueError, match="rounding 'up'"):
        rs.replay_policy(16, rounding="up")
    with pytest.raises(ValueError, match="gdn_window 'v'"):
        rs.replay_policy(16, gdn_window="v")


def test_buffer_sizes_follow_the_formats():
    shape = rs.Mamba2Shape(96, 80, 128, 8)
    elements = 96 * 80 * 128
    fp32 = rs.mamba2_buffer_sizes(rs.replay_policy(16), shape, 1, "bfloat16")
    assert fp32["checkpoint"] == 4 * elements and fp32["read_copy"] == 0
    assert fp32["window_x"] == 16 * 96 * 80 * 2 and fp32["window_B"] == 16 * 8 * 128 * 2
    assert fp32["window_dt"] == 16 * 96 * 4 and fp32["cursors"] == 96 * 16
    split = rs.mamba2_buffer_sizes(rs.replay_policy(16, "nvfp4", "fp16", "stochastic"), shape, 2, "bfloat16", 4)
    assert split["checkpoint"] == 2 * 2 * elements
    assert split["read_copy"] == 2 * elements // 2 and split["read_copy_scales"] == 2 * elements // 16
    assert split["window_x"] == 2 * 20 * 96 * 80 * 2
    gdn = rs.GDNShape(32, 16, 128, 128)
    raw = rs.gdn_buffer_sizes(rs.replay_policy(16, "fp16", "fp32", gdn_window="raw_inputs"), gdn, 1, "bfloat16")
    assert raw["window_v"] == 16 * 32 * 128 * 2 and raw["window_beta"] == 16 * 32 * 4
    assert rs.gdn_buffer_sizes(rs.replay_policy(16, "fp16", "fp32"), gdn, 1, "bfloat16")["window_v"] == 0


def test_replay_moves_fewer_bytes_than_writeback():
    shape = rs.Mamba2Shape(96, 80, 128, 8)
    writeback = rs.mamba2_bytes_per_step(rs.writeback_policy("fp32"), shape, 256)
    replay = rs.mamba2_bytes_per_step(rs.replay_policy(16), shape, 256)
    assert 1.5 < writeback / replay < 2.0
    gdn = rs.GDNShape(32, 16, 128, 128)
    assert rs.gdn_bytes_per_step(rs.replay_policy(16), gdn, 8) < rs.gdn_bytes_per_step(rs.writeback_policy(), gdn, 8)


def test_policies_with_cuda_steps_are_the_first_ones():
    """A build has the CUDA steps of every policy, of the first N
    (REPLAYSSM_PYTHON_CUDA_POLICIES=N), or, without CUDA, of none."""
    has = [p.has_cuda_steps for p in rs.policies()]
    assert has == sorted(has, reverse=True)
    if not rs.has_cuda:
        assert not any(has)
