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

_float32, _int32, _int64 = torch.float32, torch.int32, torch.int64

PAD_SLOT_ID = -1


def _untied(t, name: str, dims: int):
    """The first ``dims`` dimensions of ``t``, a view that may repeat them over further
    dimensions with stride 0 (vLLM ties A, D, dt_bias and dt so): ``t[..., 0, 0]`` as one
    view. A tensor whose further dimensions hold other values raises ValueError."""
    if t.dim() <= dims:
        return t
    if any(stride != 0 and size != 1 for size, stride in zip(t.shape[dims:], t.stride()[dims:])):
        raise ValueError(f"replayssm: {name}: expected {list(t.shape[:dims])} or a view that repeats it over "
                         f"{list(t.shape[dims:])} with stride 0 (vLLM's tied view); got shape {list(t.shape)} with "
                         f"strides {list(t.stride())}")
    return t.as_strided(t.shape[:dims], t.stride()[:dims])


def _per_head(t, name: str):
    """A per-head float32 vector from ``t`` (``_untied``). One that already is one is
    returned as it is: each torch call from Python costs about a microsecond or two of host
    time per step."""
    t = _untied(t, name, 1)
    if t.dtype is not _float32:
        t = t.float()
    return t if t.is_contiguous() else t.contiguous()


def _slots(indices, name: str):
    """The int32 slot indices the steps take, from int32 (as they are) or int64 indices."""
    if indices is None or indices.dtype is _int32:
        return indices
    if indices.dtype is not _int64:
        raise ValueError(f"replayssm: {name}: expected int32 or int64 slot indices, got {indices.dtype}")
    return indices.to(_int32)


def selective_state_update(state, x, dt, A, B, C, D=None, z=None, dt_bias=None, dt_softplus=False,
                           state_batch_indices=None, pad_slot_id=PAD_SLOT_ID, out=None, *,
                           buffers: Mamba2Buffers):
    """One Mamba-2 decode step in vLLM's argument conventions.

    ``state`` ``[num_slots, heads, head_dim, state_dim]`` is the checkpoint; x, z, out
    ``[batch, heads, head_dim]``; dt ``[batch, heads]`` or ``[batch, heads, head_dim]``
    (tied over head_dim); A ``[heads]`` or ``[heads, head_dim, state_dim]`` (tied); B, C
    ``[batch, groups, state_dim]``; D, dt_bias ``[heads]`` or ``[heads, head_dim]`` (tied);
    ``state_batch_indices`` the requests' slots, int32 or int64 ``[batch]`` (a request on
    ``pad_slot_id`` is skipped: its row of ``out`` is left as it is). Returns ``out``
    (allocated when None, zeros in padded rows). A, D and dt_bias given as float32
    ``[heads]`` pass through as they are; tied views cost a torch call each on every call
    (bench/python_overhead.py measures what they cost). A tensor of more
    dimensions that is not such a view (an untied D ``[heads, head_dim]``) raises ValueError.
    """
    return mamba2_step("decode", buffers, x, _untied(dt, "dt", 2), _per_head(A, "A"), B, C,
                       None if D is None else _per_head(D, "D"), z,
                       None if dt_bias is None else _per_head(dt_bias, "dt_bias"), dt_softplus=dt_softplus,
                       slot_indices=_slots(state_batch_indices, "state_batch_indices"), pad_slot_id=pad_slot_id,
                       out=out, checkpoint=state)


def gated_delta_rule_update(state, mixed_qkv, a, b, A_log, dt_bias, state_indices, pad_slot_id=PAD_SLOT_ID,
                            out=None, *, buffers: GDNBuffers):
    """One Gated DeltaNet decode step in vLLM's argument conventions.

    ``state`` ``[num_slots, value_heads, value_dim, key_dim]`` is the checkpoint (in the
    library's chunk order: load it with ``buffers.write_state``); ``mixed_qkv`` ``[batch,
    2 * key_heads * key_dim + value_heads * value_dim]`` packs q, k and v (raw: the step
    normalizes q and k); a, b ``[batch, value_heads]`` the raw projections; A_log, dt_bias
    ``[value_heads]``; out ``[batch, value_heads, value_dim]`` (before the output norm and
    gate); ``state_indices`` and ``pad_slot_id`` as in ``selective_state_update``. Returns
    ``out``.
    """
    return gdn_step("decode", buffers, None, None, None, a, b, _per_head(A_log, "A_log"),
                    None if dt_bias is None else _per_head(dt_bias, "dt_bias"),
                    slot_indices=_slots(state_indices, "state_indices"), pad_slot_id=pad_slot_id, out=out,
                    checkpoint=state, qkv=mixed_qkv)
