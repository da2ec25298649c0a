#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A stack of recurrent layers with fixed-seed random weights generates tokens for a batch,
once with the conventional write-back step and once with replay, in lockstep on the same
tokens: the Python twin of examples/decode_loop. NumPy on the CPU (default; PyTorch CPU
tensors for bfloat16 activations, which NumPy lacks), PyTorch on a GPU (``--device cuda``).
It ends with the agreement of the two:

    replay_vs_writeback_max_rel_err=<value> steps=<n> mode=<describe()>

Run after ``pip install .``:  python examples/python/decode_loop.py [--device cuda] [--model qwen3.5-4b-like]
"""

import argparse
import importlib.util
import sys
import time

import numpy as np

import replayssm as rs

MODELS = {
    "small": rs.Mamba2Shape(8, 64, 128, 2),
    "nemotron-nano-like": rs.Mamba2Shape(96, 80, 128, 8),
    "qwen3.5-4b-like": rs.GDNShape(32, 16, 128, 128),
}
REPLAY, WRITEBACK = rs.replay_policy(16), rs.writeback_policy("fp32")


class Arrays:
    """NumPy arrays on the CPU, or torch tensors (on the GPU; on the CPU for bfloat16), from
    NumPy values."""

    def __init__(self, device, dtype):
        self.device, self.torch = device, None
        if device == "cuda" or dtype == "bfloat16":
            import torch

            self.torch = torch

    @property
    def buffers_device(self):
        """The buffers' ``device``: None for NumPy arrays."""
        return None if self.torch is None else self.device

    def __call__(self, values, dtype="float32"):
        if self.torch is None:
            return np.ascontiguousarray(values, dtype=dtype)
        return self.torch.as_tensor(np.asarray(values), device=self.device).to(getattr(self.torch, dtype))

    def numpy(self, a):
        return a if isinstance(a, np.ndarray) else a.float().cpu().numpy()

    def sync(self):
        if self.device == "cuda":
            self.torch.cuda.synchronize()


class Stack:
    """One stack of layers under one policy: each layer's buffers, loaded with the same
    prefill states, and the step of the whole stack for a batch of tokens."""

    def __init__(self, policy, model, arrays, args):
        self.model, self.arrays, self.gdn = model, arrays, isinstance(model.shape, rs.GDNShape)
        kind = rs.GDNBuffers if self.gdn else rs.Mamba2Buffers
        self.layers = [kind(policy, model.shape, args.batch, args.dtype, device=arrays.buffers_device, seed=layer)
                       for layer in range(args.layers)]
        for buffers, states in zip(self.layers, model.states):
            for slot, values in enumerate(states):
                buffers.write_state(slot, values)
        self.outputs = []

    def step(self, tokens, dtype):
        """Embeds `tokens`, runs every layer with a residual RMSNorm, returns the hidden stream."""
        m, a = self.model, self.arrays
        tokens = np.asarray(tokens, dtype=np.int64)  # sampled on the host in both modes
        hidden = m.embed[tokens]
        self.outputs = []
        for layer, buffers in enumerate(self.layers):
            inputs = {k: a(v[layer][tokens], dtype) for k, v in m.tables.items()}
            weights = {k: a(v[layer]) for k, v in m.weights.items()}
            stream = a(hidden.reshape(len(tokens), *m.stream_shape), dtype)
            if self.gdn:
                out = rs.gdn_decode(buffers, v=stream, **inputs, **weights)
            else:
                out = rs.mamba2_decode(buffers, x=stream, **inputs, **weights)
            y = a.numpy(out).reshape(len(tokens), -1).astype(np.float64)
            self.outputs.append(y)
            hidden = hidden + y
            hidden = hidden / np.sqrt((hidden * hidden).mean(-1, keepdims=True) + 1e-6)
        return hidden


class Model:
    """Fixed-seed weights: a token embedding (the stream a token starts from), per-token
    tables of the layer's other inputs, per-head weights, and prefill states."""

    def __init__(self, shape, layers, batch, vocab, seed):
        rng = np.random.default_rng(seed)
        self.shape, self.vocab = shape, vocab
        if isinstance(shape, rs.GDNShape):
            HV, HK, K, V = shape
            self.stream_shape = (HV, V)
            table_shapes = {"q": (HK, K, 1.0), "k": (HK, K, 1.0), "a": (HV, 0.3), "b": (HV, 1.0)}
            self.weights = {"A_log": rng.uniform(-1, 1, (layers, HV)), "dt_bias": rng.uniform(-1, 1, (layers, HV))}
            head = (HV, V, K)
        else:
            H, P, N, G = shape
            self.stream_shape = (H, P)
            table_shapes = {"z": (H, P, 1.0), "B": (G, N, 1.0), "C": (G, N, 1.0), "dt": (H, 0.3)}
            self.weights = {"A": -rng.uniform(1, 16, (layers, H)) / 16, "D": rng.standard_normal((layers, H)),
                            "dt_bias": rng.uniform(-4, -2, (layers, H))}
            head = (H, P, N)
        d_model = int(np.prod(self.stream_shape))
        self.embed = rng.standard_normal((vocab, d_model))
        self.tables = {k: s[-1] * rng.standard_normal((layers, vocab, *s[:-1])) for k, s in table_shapes.items()}
        self.states = 0.3 * rng.standard_normal((layers, batch, *head)).astype(np.float32)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                        help="where the steps run (default: cpu; cuda needs PyTorch and a module built with CUDA)")
    parser.add_argument("--model", choices=MODELS, default="small", help="the layer shape (default: small, Mamba-2)")
    parser.add_argument("--dtype", choices=("float32", "float16", "bfloat16"),
                        help="activations (default: float32 on the CPU, bfloat16 on the GPU, whose steps take it; "
                             "bfloat16 on the CPU needs PyTorch)")
    parser.add_argument("--batch", type=int, default=4, help="requests stepped together (default: 4)")
    parser.add_argument("--steps", type=int, default=64, help="tokens generated per request (default: 64)")
    parser.add_argument("--layers", type=int, default=0, help="layers in the stack (default: 4 Mamba-2 or 2 Gated "
                                                              "DeltaNet)")
    parser.add_argument("--seed", type=int, default=2026, help="seed of the random weights (default: 2026)")
    args = parser.parse_args()
    shape = MODELS[args.model]
    gdn = isinstance(shape, rs.GDNShape)
    args.layers = args.layers or (2 if gdn else 4)
    args.dtype = args.dtype or ("float32" if args.device == "cpu" else "bfloat16")
    if args.device == "cuda" and not rs.has_cuda:
        parser.error("--device cuda: this module was built without CUDA")
    if (args.device == "cuda" or args.dtype == "bfloat16") and importlib.util.find_spec("torch") is None:
        parser.error(f"--device {args.device} --dtype {args.dtype} needs PyTorch (NumPy has no bfloat16)")

    arrays = Arrays(args.device, args.dtype)
    model = Model(shape, args.layers, args.batch, vocab=256, seed=args.seed)
    stacks = {"writeback": Stack(WRITEBACK, model, arrays, args), "replay": Stack(REPLAY, model, arrays, args)}
    kind = "Gated DeltaNet" if gdn else "Mamba-2"
    dims = (f"{shape.value_heads} value heads x {shape.value_dim}, {shape.key_heads} key heads x {shape.key_dim}"
            if gdn else f"{shape.heads} heads x {shape.head_dim} x {shape.state_dim}, {shape.groups} groups")
    print(f"model: {args.layers} {kind} layers, {dims}, batch {args.batch}, {args.steps} steps, device {args.device}")
    print(f"mode: {REPLAY} (baseline: {WRITEBACK})")

    tokens = (np.arange(args.batch) * 37 + 11) % model.vocab
    seconds = {name: 0.0 for name in stacks}
    max_err = 0.0
    for _ in range(args.steps):
        for name, stack in stacks.items():
            start = time.perf_counter()
            hidden = stack.step(tokens, args.dtype)
            arrays.sync()
            seconds[name] += time.perf_counter() - start
        for yw, yr in zip(stacks["writeback"].outputs, stacks["replay"].outputs):
            err = np.sqrt(((yr - yw) ** 2).sum(1)) / np.sqrt((yw ** 2).sum(1))
            max_err = max(max_err, float(np.nan_to_num(err, nan=np.inf).max()))
        tokens = hidden.argmax(-1) % model.vocab  # both stacks take the tokens replay samples

    total = args.steps * args.batch
    print(f"tokens/s: writeback {total / seconds['writeback']:.1f}, replay {total / seconds['replay']:.1f} "
          f"(whole stack, {args.device}, Python)")
    per_step = rs.gdn_bytes_per_step if gdn else rs.mamba2_bytes_per_step
    bw, br = (per_step(p, shape, args.batch, args.dtype) * args.layers for p in (WRITEBACK, REPLAY))
    print(f"modelled bytes per step (all layers): writeback {bw / 1e6:.3f} MB, replay {br / 1e6:.3f} MB "
          f"({bw / br:.2f}x fewer)")
    sizes = (rs.gdn_buffer_sizes if gdn else rs.mamba2_buffer_sizes)(REPLAY, shape, 1, args.dtype)
    window = sizes["total"] - sizes["checkpoint"] - sizes["checkpoint_scales"] - sizes["read_copy"] - \
        sizes["read_copy_scales"]
    print(f"memory per request per layer: checkpoint {sizes['checkpoint'] + sizes['checkpoint_scales']} B, "
          f"read copy {sizes['read_copy'] + sizes['read_copy_scales']} B, window {window} B")
    print(f"replay_vs_writeback_max_rel_err={max_err:.3e} steps={args.steps} mode={REPLAY}")
    # fp32 states: the two agree to the rounding of the activations' dtype; more is a defect.
    return 0 if max_err <= (1e-5 if args.dtype == "float32" else 2e-2) else 1


if __name__ == "__main__":
    sys.exit(main())
