# SPDX-License-Identifier: Apache-2.0
"""Drop-in shaped wrappers for engines: arguments follow vLLM's conventions for its Mamba-2
state update and its Gated DeltaNet decode, plus ``buffers``, the layer's
``Mamba2Buffers`` / ``GDNBuffers`` (made once per layer next to the engine's state cache,
with ``checkpoint=state``). The policy of the buffers decides the step: write-back or
replay. PyTorch tensors; CUDA graph capturable.
"""

from __future__ import annotations

import torch

from ._buffers import GDNBuffers, Mamba2Buffers
from ._steps import gdn_step, mamba2_step

_float32, _int32 = torch.float32, torch.int32

PAD_SLOT_ID = -1


def _per_head(t, dims: int):
    """A per-head float32 vector from a tensor that may repeat it over further dimensions
    (vLLM ties A, D and dt_bias over head_dim and state_dim with stride-0 views). One that
    already is one is returned as it is: each torch call from Python costs about a
    microsecond or two of host time per step."""
    if t.dim() > dims:  # the first element of each repeat: t[..., 0, 0] as one view
        t = t.as_strided(t.shape[:dims], t.stride()[:dims])
    if t.dtype is not _float32:
        t = t.float()
    return t if t.is_contiguous() else t.contiguous()


def selective_state_update(state, x, dt, A, B, C, D=None, z=None, dt_bias=None, dt_softplus=False,
                           state_batch_indices=None, pad_slot_id=PAD_SLOT_ID, out=None, *,
                           buffers: Mamba2Buffers):
    """One Mamba-2 decode step in vLLM's argument conventions.

    ``state`` ``[num_slots, heads, head_dim, state_dim]`` is the checkpoint; x, z, out
    ``[batch, heads, head_dim]``; dt ``[batch, heads]`` or ``[batch, heads, head_dim]``
    (tied over head_dim); A ``[heads]`` or ``[heads, head_dim, state_dim]`` (tied); B, C
    ``[batch, groups, state_dim]``; D, dt_bias ``[heads]`` or ``[heads, head_dim]`` (tied);
    ``state_batch_indices`` the requests' slots. Returns ``out``. A, D and dt_bias given as
    float32 ``[heads]`` pass through as they are; tied views cost a torch call each on every
    call (about 5 us of host time for the three, CPU tensors, 2026-12-01).
    """
    if dt.dim() == 3:
        dt = dt[..., 0]
    return mamba2_step("decode", buffers, x, dt, _per_head(A, 1), B, C, None if D is None else _per_head(D, 1), z,
                       None if dt_bias is None else _per_head(dt_bias, 1), dt_softplus=dt_softplus,
                       slot_indices=_slots(state_batch_indices), pad_slot_id=pad_slot_id, out=out,
                       checkpoint=state)


def gated_delta_rule_update(state, mixed_qkv, a, b, A_log, dt_bias, state_indices, pad_slot_id=PAD_SLOT_ID,
                            out=None, *, buffers: GDNBuffers):
    """One Gated DeltaNet decode step in vLLM's argument conventions.

    ``state`` ``[num_slots, value_heads, value_dim, key_dim]`` is the checkpoint (in the
    library's chunk order: load it with ``buffers.write_state``); ``mixed_qkv`` ``[batch,
    2 * key_heads * key_dim + value_heads * value_dim]`` packs q, k and v (raw: the step
    normalizes q and k); a, b ``[batch, value_heads]`` the raw projections; A_log, dt_bias
    ``[value_heads]``; out ``[batch, value_heads, value_dim]`` (before the output norm and
    gate). Returns ``out``.
    """
    return gdn_step("decode", buffers, None, None, None, a, b, _per_head(A_log, 1),
                    None if dt_bias is None else _per_head(dt_bias, 1), slot_indices=_slots(state_indices),
                    pad_slot_id=pad_slot_id, out=out, checkpoint=state, qkv=mixed_qkv)


def _slots(indices):
    return None if indices is None or indices.dtype is _int32 else indices.to(_int32)
