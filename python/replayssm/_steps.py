# SPDX-License-Identifier: Apache-2.0
"""The steps: decode (write-back or replay), speculative verify and commit, of both
recurrences, on NumPy arrays (the CPU) or PyTorch tensors (CPU or CUDA, on the current
stream; through the ``replayssm::`` torch ops while torch.compile traces)."""

from __future__ import annotations

import numpy as np

from . import _native
from ._buffers import GDNBuffers, LayerBuffers, Mamba2Buffers, is_torch

# Each step's arguments, named as the C++ params' fields, in the order the native steps and
# the torch ops take them: (name, role), role `str`, `int` or `bool` for a scalar, `read` or
# `written` for an array.
FIELDS = {op: tuple(fields) for op, fields in _native.step_fields.items()}
_ARRAY_ROLES = ("read", "written")
_SCALAR_NAMES = {op: tuple(n for n, r in fields if r not in _ARRAY_ROLES) for op, fields in FIELDS.items()}
_ARRAY_NAMES = {op: tuple(n for n, r in fields if r in _ARRAY_ROLES) for op, fields in FIELDS.items()}
NATIVE = {op: getattr(_native, op) for op in FIELDS}  # the module's entry point of each step
_POSITION = {op: {name: i for i, (name, _) in enumerate(fields)} for op, fields in FIELDS.items()}


def _positions(op: str, names: str) -> tuple:
    return tuple(_POSITION[op][name] for name in names.split())


# What mamba2_step and gdn_step give per call, in this order (a None checkpoint: the
# buffers'); the rest of a layer's step arguments are bound once per buffers (launch_layer).
_PER_CALL = {
    "mamba2_step": _positions("mamba2_step", "kind tokens pad_slot_id dt_softplus x dt A B C D z dt_bias out "
                                             "slot_indices token_counts checkpoint"),
    "gdn_step": _positions("gdn_step", "kind tokens pad_slot_id raw_inputs q k v qkv a b A_log dt_bias out "
                                       "slot_indices token_counts checkpoint"),
}
_BIND = {op: getattr(_native, "bind_" + op) for op in _PER_CALL}


def arguments(op: str, scalars: dict, arrays: dict) -> list:
    """The positional arguments of ``op`` (``FIELDS`` order) from its scalars and arrays by
    name (arrays not named: None)."""
    return [*map(scalars.__getitem__, _SCALAR_NAMES[op]), *map(arrays.get, _ARRAY_NAMES[op])]


def _layer_arguments(op: str, buffers: LayerBuffers) -> list:
    """The positional arguments of a layer's step ``op`` with ``buffers``' arrays, policy,
    seed and shape (which the step checks every array against) in place, None where
    ``_PER_CALL`` goes."""
    constants = {name: None for name in _SCALAR_NAMES[op]}
    constants.update(policy=buffers.policy_index, seed=buffers.seed, **buffers.shape._asdict())
    return arguments(op, constants, buffers.arrays)


# Set by _torch_ops when PyTorch is importable: torch.compiler.is_compiling and
# torch.ops.replayssm. While torch.compile traces, the steps go through the torch ops; else
# straight to the module (no dispatcher).
tracing = None
torch_ops = None


def launch_layer(op: str, buffers: LayerBuffers, values: tuple) -> None:
    """Runs a layer's step ``op`` on ``buffers`` with ``values`` (``_PER_CALL`` order; None:
    the bound value). The buffers' side is bound in the module at the first call (its arrays
    converted once); while torch.compile traces, the torch op takes all the arguments."""
    if tracing is not None and tracing():
        args = _layer_arguments(op, buffers)
        for position, value in zip(_PER_CALL[op], values):
            if value is not None:
                args[position] = value
        launch(op, args)
        return
    step = buffers._bound_steps.get(op)
    if step is None:
        step = buffers._bound_steps[op] = _BIND[op](_PER_CALL[op], *_layer_arguments(op, buffers))
    step(*values)


def launch(op: str, args: list) -> None:
    """Runs ``op`` on its positional arguments (``FIELDS`` order), NumPy arrays or PyTorch
    tensors, on the current stream of the arrays' framework: ValueError with the launcher's
    message on bad input."""
    if tracing is not None and tracing():
        getattr(torch_ops, op)(*args)
    else:
        NATIVE[op](*args)


def _zeros(like, shape):
    """A zeroed array of ``shape`` with the dtype, framework and device of ``like`` (a step
    leaves the rows of padded requests as they are)."""
    return like.new_zeros(shape) if is_torch(like) else np.zeros(shape, like.dtype)


def _check_buffers(buffers, kind):
    if not isinstance(buffers, kind):
        raise TypeError(f"replayssm: expected {kind.__name__}, got {type(buffers).__name__}")


def mamba2_step(kind: str, buffers: Mamba2Buffers, x, dt, A, B, C, D=None, z=None, dt_bias=None, *,
                dt_softplus: bool = True, slot_indices=None, pad_slot_id: int = -1, tokens: int = 1,
                token_counts=None, out=None, checkpoint=None):
    """A Mamba-2 step of ``kind`` (``decode`` or ``verify``) under ``buffers.policy``.

    Activations are ``[batch * tokens, ...]`` (request b's token t is row b * tokens + t):
    x, z, out ``[rows, heads, head_dim]``; dt ``[rows, heads]`` (raw); B, C ``[rows,
    groups, state_dim]``; A, D, dt_bias float32 ``[heads]``. ``slot_indices`` (int32
    ``[batch]``) maps requests to state slots, ``pad_slot_id`` skips a request.
    ``checkpoint`` overrides ``buffers.checkpoint``. Returns ``out`` (allocated when None,
    zeros in the rows of padded requests). Every array is checked against ``buffers.shape``:
    ValueError naming the one at fault.
    """
    _check_buffers(buffers, Mamba2Buffers)
    out = _zeros(x, (x.shape[0], buffers.shape.heads, buffers.shape.head_dim)) if out is None else out
    launch_layer("mamba2_step", buffers, (kind, tokens, pad_slot_id, dt_softplus, x, dt, A, B, C, D, z, dt_bias, out,
                                          slot_indices, token_counts, checkpoint))
    return out


def gdn_step(kind: str, buffers: GDNBuffers, q, k, v, a, b, A_log, dt_bias=None, *, slot_indices=None,
             pad_slot_id: int = -1, tokens: int = 1, token_counts=None, out=None, checkpoint=None, qkv=None):
    """A Gated DeltaNet step of ``kind`` (``decode`` or ``verify``) under ``buffers.policy``.

    q, k ``[rows, key_heads, key_dim]`` raw (the step L2-normalizes them and scales q by
    key_dim^-1/2); v, out ``[rows, value_heads, value_dim]``; a, b ``[rows, value_heads]``,
    the raw decay and write-strength projections; A_log, dt_bias float32 ``[value_heads]``.
    Or ``qkv`` ``[rows, 2 * key_heads * key_dim + value_heads * value_dim]``, the three
    packed in each row (its last dimension contiguous), with q, k and v None: no views are
    made. ``out`` is the output before the layer's norm and gate. Rows, slots and
    ``checkpoint`` as in ``mamba2_step``. Returns ``out``.
    """
    _check_buffers(buffers, GDNBuffers)
    if out is None:
        out = _zeros(a, (a.shape[0], buffers.shape.value_heads, buffers.shape.value_dim))
    launch_layer("gdn_step", buffers, (kind, tokens, pad_slot_id, buffers.policy.raw_inputs, q, k, v, qkv, a, b,
                                       A_log, dt_bias, out, slot_indices, token_counts, checkpoint))
    return out


def mamba2_decode(buffers: Mamba2Buffers, x, dt, A, B, C, D=None, z=None, dt_bias=None, **kwargs):
    """One decode step (write-back, or replay under a replay policy): ``mamba2_step``."""
    return mamba2_step("decode", buffers, x, dt, A, B, C, D, z, dt_bias, **kwargs)


def mamba2_verify(buffers: Mamba2Buffers, x, dt, A, B, C, D=None, z=None, dt_bias=None, *, tokens: int,
                  **kwargs):
    """A speculative verify step of up to ``tokens`` drafts per request (``token_counts``:
    each request's, optional): every draft's output; the drafts wait in the window until
    ``commit_drafts``. The buffers need ``draft_tokens >= tokens``."""
    return mamba2_step("verify", buffers, x, dt, A, B, C, D, z, dt_bias, tokens=tokens, **kwargs)


def gdn_decode(buffers: GDNBuffers, q, k, v, a, b, A_log, dt_bias=None, **kwargs):
    """One Gated DeltaNet decode step: ``gdn_step``."""
    return gdn_step("decode", buffers, q, k, v, a, b, A_log, dt_bias, **kwargs)


def gdn_verify(buffers: GDNBuffers, q, k, v, a, b, A_log, dt_bias=None, *, tokens: int, **kwargs):
    """A Gated DeltaNet speculative verify step, as ``mamba2_verify``."""
    return gdn_step("verify", buffers, q, k, v, a, b, A_log, dt_bias, tokens=tokens, **kwargs)


def commit_drafts(buffers: LayerBuffers, accepted_counts, *, tokens: int, slot_indices=None, token_counts=None,
                  pad_slot_id: int = -1) -> None:
    """Keeps the first ``accepted_counts[b]`` (int32 ``[batch]``) drafts of request b's last
    verify step of ``tokens`` drafts, at all its heads or none (on the device: moves the
    cursors; a bad count is reported through ``take_errors``)."""
    arrays = {"cursors": buffers.cursors, "report": buffers.report, "accepted_counts": accepted_counts,
              "slot_indices": slot_indices, "token_counts": token_counts}
    launch("commit_drafts", arguments("commit_drafts", {"tokens": tokens, "pad_slot_id": pad_slot_id}, arrays))
