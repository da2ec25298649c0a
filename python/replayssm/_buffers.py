# SPDX-License-Identifier: Apache-2.0
"""Layer shapes, buffer sizes, and the buffers a layer keeps per state slot."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from . import _native
from ._policy import Policy

# Element types of state pools in a typed format; every other format's pools are bytes.
_TYPED_FORMATS = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}


class Mamba2Shape(NamedTuple):
    """Shape of one Mamba-2 layer (per tensor-parallel rank), as C++'s ``mamba2_layer_shape``."""

    heads: int
    head_dim: int
    state_dim: int
    groups: int


class GDNShape(NamedTuple):
    """Shape of one Gated DeltaNet layer, as C++'s ``gdn_layer_shape``."""

    value_heads: int
    key_heads: int
    key_dim: int
    value_dim: int


def mamba2_buffer_sizes(policy: Policy, shape: Mamba2Shape, num_slots: int, dtype: str = "bfloat16",
                        draft_tokens: int = 0) -> dict:
    """Bytes of every buffer of a Mamba-2 layer with ``num_slots`` slots (1: per request)."""
    return _native.mamba2_buffers(policy.index, *shape, num_slots, dtype, draft_tokens)


def gdn_buffer_sizes(policy: Policy, shape: GDNShape, num_slots: int, dtype: str = "bfloat16",
                     draft_tokens: int = 0) -> dict:
    """Bytes of every buffer of a Gated DeltaNet layer with ``num_slots`` slots, in the policy's window mode."""
    return _native.gdn_buffers(policy.index, policy.raw_inputs, *shape, num_slots, dtype, draft_tokens)


def mamba2_bytes_per_step(policy: Policy, shape: Mamba2Shape, batch: int, dtype: str = "bfloat16") -> float:
    """Modelled device-memory bytes of one Mamba-2 decode step, averaged over a window."""
    return _native.mamba2_bytes_per_step(policy.index, *shape, batch, dtype)


def gdn_bytes_per_step(policy: Policy, shape: GDNShape, batch: int, dtype: str = "bfloat16") -> float:
    """Modelled device-memory bytes of one Gated DeltaNet decode step, averaged over a window."""
    return _native.gdn_bytes_per_step(policy.index, policy.raw_inputs, *shape, batch, dtype)


def is_torch(a) -> bool:
    """True for a PyTorch tensor (without importing torch)."""
    return type(a).__module__.startswith("torch")


class _Allocator:
    """Zeroed arrays: NumPy arrays for ``device=None``, else PyTorch tensors on ``device``."""

    def __init__(self, device):
        self.device = device
        if device is not None:
            import torch

            self.torch = torch

    def zeros(self, shape, dtype: str):
        if self.device is None:
            if dtype == "bfloat16":
                raise ValueError("replayssm: NumPy has no bfloat16; use PyTorch tensors (device='cpu' or 'cuda')")
            return np.zeros(shape, dtype=dtype)
        return self.torch.zeros(shape, dtype=getattr(self.torch, dtype), device=self.device)

    @property
    def is_cuda(self) -> bool:
        return self.device is not None and self.torch.device(self.device).type == "cuda"


class LayerBuffers:
    """What one recurrent layer keeps per state slot for a policy: the checkpoint pool (the
    state), the read copy, the window ring, the cursors and the flush phases, plus the
    device steps' scratch (report and request plans). Arrays are NumPy for ``device=None``,
    else PyTorch tensors on ``device``; all zeroed (empty windows, no flushes yet).

    ``checkpoint`` may be the engine's own state cache (typed formats:
    ``[num_slots, heads, rows, cols]`` of the format's dtype). ``draft_tokens`` sizes the
    ring for verify steps of up to that many drafts. ``max_batch`` bounds a CUDA step's
    requests (default ``num_slots``). ``seed`` keys stochastic rounding: give each layer
    its own. The module binds the arrays at a layer's first step (converted once, held
    alive): write into them, never replace them with other arrays.
    """

    recurrence = ""

    def __init__(self, policy: Policy, shape, num_slots: int, dtype: str = "bfloat16", *, device=None,
                 draft_tokens: int = 0, seed: int = 0, max_batch: int | None = None, checkpoint=None):
        self.policy, self.shape, self.num_slots, self.dtype, self.seed = policy, shape, num_slots, dtype, seed
        self.policy_index = policy.index  # looked up once: steps traced by torch.compile reuse it
        self._bound_steps = {}  # each step with these buffers bound in the module (_steps.launch_layer)
        self.draft_tokens = 0 if policy.is_writeback else draft_tokens
        self.window_entries = 0 if policy.is_writeback else policy.window + draft_tokens
        sizes = self._sizes(num_slots, self.draft_tokens)
        alloc = _Allocator(device)
        heads, rows, cols = self._head_shape
        arrays = {}

        def pool(name, fmt, typed_shape):
            if sizes[name] == 0:
                return
            if fmt in _TYPED_FORMATS and typed_shape:
                arrays[name] = alloc.zeros((num_slots, heads, rows, cols), _TYPED_FORMATS[fmt])
            else:
                arrays[name] = alloc.zeros((num_slots, heads, sizes[name] // (num_slots * heads)), "uint8")

        if checkpoint is None:
            pool("checkpoint", policy.checkpoint, True)
        else:
            arrays["checkpoint"] = checkpoint
        pool("checkpoint_scales", policy.checkpoint, False)
        if not policy.shared_state:
            pool("read_copy", policy.read, True)
            pool("read_copy_scales", policy.read, False)
        if not policy.is_writeback:
            for name, (inner, dt) in self._windows().items():
                if sizes[name]:
                    arrays[name] = alloc.zeros((num_slots, self.window_entries, *inner), dt)
            arrays["flush_phase"] = alloc.zeros((num_slots,), "int32")
        arrays["cursors"] = alloc.zeros((num_slots, heads, 4), "int32")
        if alloc.is_cuda:
            arrays["report"] = alloc.zeros((2,), "int32")
            arrays["request_plans"] = alloc.zeros((max_batch or num_slots,), "int32")
        self.arrays = arrays
        # Every buffer as an attribute, None where the policy needs none.
        for name in ("checkpoint", "checkpoint_scales", "read_copy", "read_copy_scales", *self._windows(),
                     "flush_phase", "cursors", "report", "request_plans"):
            setattr(self, name, arrays.get(name))

    def write_state(self, slot: int, values) -> None:
        """Loads slot ``slot``'s state (after prefill, or for a new request) from floats of
        shape ``[heads, rows, cols]`` (any array), encoding it into the policy's formats, and
        empties its window (its cursors reset)."""
        self._check_slot(slot, "write_state")
        host = _host_float32(values)
        if host.shape != self._head_shape:
            raise ValueError(f"replayssm: write_state: values have shape {list(host.shape)}, "
                             f"expected {list(self._head_shape)}")
        names = ("checkpoint", "checkpoint_scales", "read_copy", "read_copy_scales")
        staged = [_staging(self.arrays.get(n), slot) for n in names]
        _native.write_state(self.recurrence, self.policy_index, host, *(s[0] for s in staged))
        for s in staged:
            s[1]()
        self.cursors[slot] = 0

    def read_state(self, slot: int) -> np.ndarray:
        """Slot ``slot``'s checkpoint as float32 ``[heads, rows, cols]`` (a NumPy array)."""
        self._check_slot(slot, "read_state")
        values = np.zeros(self._head_shape, dtype=np.float32)
        staged = [_staging(self.arrays.get(n), slot) for n in ("checkpoint", "checkpoint_scales")]
        _native.read_state(self.recurrence, self.policy_index, values, *(s[0] for s in staged))
        return values

    def _check_slot(self, slot, who: str) -> None:
        if not isinstance(slot, (int, np.integer)) or not 0 <= slot < self.num_slots:
            raise ValueError(f"replayssm: {who}: slot {slot!r} is not an integer in [0, {self.num_slots})")

    def take_errors(self, stream: int | None = None) -> None:
        """Raises what the last CUDA steps found wrong (a bad slot or cursor: the request was
        skipped) and clears it; synchronizes ``stream`` (default: torch's current stream).
        Nothing on the CPU, whose steps raise at once. Not inside a CUDA graph capture."""
        if self.report is not None:
            _native.take_step_errors(self.report, stream)


class Mamba2Buffers(LayerBuffers):
    """A Mamba-2 layer's buffers (``LayerBuffers``): checkpoint ``[num_slots, heads,
    head_dim, state_dim]``; window_x, window_B (activation dtype) and window_dt (float32)
    rings of ``window_entries`` per slot; cursors ``[num_slots, heads, 4]`` int32."""

    recurrence = "mamba2"

    def _sizes(self, num_slots, drafts):
        return mamba2_buffer_sizes(self.policy, self.shape, num_slots, self.dtype, drafts)

    @property
    def _head_shape(self):
        return (self.shape.heads, self.shape.head_dim, self.shape.state_dim)

    def _windows(self):
        s = self.shape
        return {"window_x": ((s.heads, s.head_dim), self.dtype), "window_B": ((s.groups, s.state_dim), self.dtype),
                "window_dt": ((s.heads,), "float32")}


class GDNBuffers(LayerBuffers):
    """A Gated DeltaNet layer's buffers (``LayerBuffers``): checkpoint ``[num_slots,
    value_heads, value_dim, key_dim]`` (each head in the library's chunk order: load it with
    ``write_state``); window_u, window_k, window_g (float32), and in the raw_inputs mode
    window_v (activation dtype) and window_beta (float32); cursors ``[num_slots,
    value_heads, 4]`` int32."""

    recurrence = "gated_deltanet"

    def _sizes(self, num_slots, drafts):
        return gdn_buffer_sizes(self.policy, self.shape, num_slots, self.dtype, drafts)

    @property
    def _head_shape(self):
        return (self.shape.value_heads, self.shape.value_dim, self.shape.key_dim)

    def _windows(self):
        s = self.shape
        return {"window_u": ((s.value_heads, s.value_dim), "float32"),
                "window_k": ((s.key_heads, s.key_dim), "float32"), "window_g": ((s.value_heads,), "float32"),
                "window_v": ((s.value_heads, s.value_dim), self.dtype),
                "window_beta": ((s.value_heads,), "float32")}


def _host_float32(values) -> np.ndarray:
    if is_torch(values):
        values = values.detach().float().cpu().numpy()
    return np.ascontiguousarray(values, dtype=np.float32)


def _staging(pool, slot):
    """Host bytes of ``pool[slot]`` for the native state encoder, and the function that
    copies them back where the pool lives (None and a no-op without a pool)."""
    if pool is None:
        return None, lambda: None
    if not is_torch(pool):
        return pool[slot].view(np.uint8), lambda: None
    import torch

    if pool.device.type == "cpu":
        return pool[slot].view(torch.uint8), lambda: None
    host = pool[slot].cpu()
    return host.view(torch.uint8), lambda: pool[slot].copy_(host)
