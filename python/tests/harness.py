# SPDX-License-Identifier: Apache-2.0
"""One recurrent layer stepped by the library and by the float64 reference side by side,
on NumPy arrays or PyTorch tensors: fresh random inputs every step, per-request errors."""

import importlib.util

import numpy as np

import replayssm as rs
import reference as ref

HAS_TORCH = importlib.util.find_spec("torch") is not None

RECURRENCES = {
    "mamba2": (rs.Mamba2Buffers, rs.mamba2_step, ref.mamba2_step, ref.mamba2_inputs, ref.mamba2_weights, "y"),
    "gated_deltanet": (rs.GDNBuffers, rs.gdn_step, ref.gdn_step, ref.gdn_inputs, ref.gdn_weights, "o"),
}


class Arrays:
    """Makes the library's arrays (NumPy, or torch tensors on ``device``) and the
    reference's float64 arrays (same module) from NumPy values."""

    def __init__(self, device=None):
        self.device = device
        if device is None:
            self.xp = np
        else:
            import torch

            self.xp = torch

    def library(self, values, dtype):
        if self.device is None:
            return np.ascontiguousarray(values, dtype=dtype)
        return self.xp.as_tensor(np.asarray(values), device=self.device).to(getattr(self.xp, dtype)).contiguous()

    def reference(self, values):
        """Float64 values of a library array or of NumPy values."""
        if self.device is None:
            return np.asarray(values, dtype=np.float64)
        if isinstance(values, np.ndarray):
            return self.xp.as_tensor(values, dtype=self.xp.float64, device=self.device)
        return values.to(self.xp.float64)

    def numpy(self, values):
        return values if isinstance(values, np.ndarray) else values.cpu().numpy()


class Layer:
    """A layer of `recurrence` under `policy` with `num_slots` slots, every slot loaded with a
    random state (as after prefill), and its float64 reference states."""

    def __init__(self, recurrence, policy, shape, num_slots, dtype, rng, arrays=None, draft_tokens=0, seed=7):
        buffers, self.step_fn, self.ref_fn, self.draw, weights, self.out_name = RECURRENCES[recurrence]
        self.recurrence, self.shape, self.dtype, self.rng = recurrence, shape, dtype, rng
        self.arrays = arrays or Arrays()
        self.buffers = buffers(policy, shape, num_slots, dtype, device=self.arrays.device, draft_tokens=draft_tokens,
                               seed=seed)
        w = weights(rng, shape)
        self.weights = {k: self.arrays.library(v, "float32") for k, v in w.items()}
        head = self.buffers._head_shape
        states = 0.3 * rng.standard_normal((num_slots, *head))
        for slot in range(num_slots):
            self.buffers.write_state(slot, states[slot].astype(np.float32))
        self.states = self.arrays.reference(states.astype(np.float32))

    def inputs(self, rows):
        """Fresh random inputs in the activation dtype, and their float64 values."""
        values = self.draw(self.rng, rows, self.shape)
        library = {k: self.arrays.library(v, self.dtype) for k, v in values.items()}
        return library, {k: self.arrays.reference(v) for k, v in library.items()}

    def reference_step(self, slots, exact):
        """The reference's step of the requests at `slots` (indices into the states) from
        float64 inputs `exact`: outputs, and the states advanced in place."""
        states = self.states[slots]
        out = self.ref_fn(self.arrays.xp, states, **exact, **{k: self.arrays.reference(v)
                                                            for k, v in self.weights.items()})
        self.states[slots] = states
        return out

    def run(self, kind, library, slot_indices, **kwargs):
        """The library's step on `library` inputs; returns the output array."""
        slots = self.arrays.library(np.asarray(slot_indices), "int32")
        return self.step_fn(kind, self.buffers, **library, **self.weights, slot_indices=slots, **kwargs)

    def decode(self, slot_indices, pad_slot_id=-1):
        """One decode step of requests on `slot_indices` (pad_slot_id: padding): the largest
        relative error of a real request's output, and the padded requests' rows untouched."""
        library, exact = self.inputs(len(slot_indices))
        out = self.arrays.library(np.full((len(slot_indices), *library[self._out_like].shape[1:]), 7.0), self.dtype)
        self.run("decode", library, slot_indices, out=out, pad_slot_id=pad_slot_id)
        real = [b for b, s in enumerate(slot_indices) if s != pad_slot_id]
        pads = [b for b, s in enumerate(slot_indices) if s == pad_slot_id]
        want = self.reference_step([slot_indices[b] for b in real], {k: v[real] for k, v in exact.items()})
        got = self.arrays.reference(out)
        assert (self.arrays.numpy(out)[pads] == 7.0).all(), "a padded request's output was written"
        return ref.relative_error(got[real], want)

    @property
    def _out_like(self):
        return "x" if self.recurrence == "mamba2" else "v"

    def verify(self, slot_indices, tokens, token_counts=None):
        """A verify step of `tokens` drafts per request (`token_counts`: each request's; a
        request on slot -1 is padding): the largest relative error of a draft's output
        against the reference's sequential steps from the request's state; the reference's
        states after each draft are kept for `commit`."""
        batch = len(slot_indices)
        counts = token_counts or [tokens] * batch
        library, exact = self.inputs(batch * tokens)
        extra = {} if token_counts is None else {"token_counts": self.arrays.library(np.asarray(counts), "int32")}
        # Rows past a request's drafts are not written: zeros, not uninitialized memory.
        out = self.arrays.library(np.zeros(library[self._out_like].shape), self.dtype)
        out = self.arrays.reference(self.run("verify", library, slot_indices, tokens=tokens, out=out, **extra))
        weights = {k: self.arrays.reference(v) for k, v in self.weights.items()}
        errors, self.drafted = [], []
        for b, slot in enumerate(slot_indices):
            if slot == -1:  # padded: its rows are not written
                assert not self.arrays.numpy(out[b * tokens:(b + 1) * tokens]).any(), "a padded row was written"
                self.drafted.append(None)
                continue
            state = self.states[[slot]] + 0
            history = [state + 0]
            for t in range(counts[b]):
                row = [b * tokens + t]
                want = self.ref_fn(self.arrays.xp, state, **{k: v[row] for k, v in exact.items()}, **weights)
                errors.append(ref.relative_error(out[row], want))
                history.append(state + 0)
            self.drafted.append(history)
        return max(errors)

    def commit(self, slot_indices, accepted, tokens, token_counts=None):
        """Commits `accepted[b]` drafts of request b of the last verify step; the reference
        takes the state after them."""
        extra = {} if token_counts is None else {"token_counts": self.arrays.library(np.asarray(token_counts), "int32")}
        rs.commit_drafts(self.buffers, self.arrays.library(np.asarray(accepted), "int32"), tokens=tokens,
                         slot_indices=self.arrays.library(np.asarray(slot_indices), "int32"), **extra)
        for b, slot in enumerate(slot_indices):
            if slot != -1:
                self.states[[slot]] = self.drafted[b][accepted[b]]
