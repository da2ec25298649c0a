#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""What calling a replay step from Python costs over calling its C++ launcher, on a GPU (or the CPU).

For one decode step (Nemotron-Nano Mamba-2 or Qwen3.5-4B Gated DeltaNet layer, BF16
activations, FP32 state, replay W = 16) it measures the host time of one call:

  cpp       the C++ launcher alone, called in a loop inside the module (arguments converted once)
  native    the module's entry point of all the arguments, called from Python with torch
            tensors (positional, DLPack's C exchange API per tensor)
  op        torch.ops.replayssm.<step> (the dispatcher, then the native call)
  op_floor  an op of the same schema whose Python kernel does nothing: what the dispatcher
            costs by itself
  bound     the layer's step with its buffers bound in the module (what the API calls), called
            with the per-call arguments
  api       replayssm.mamba2_decode / gdn_decode (the bound step, bound at the first call)
  engine    replayssm.engine's vLLM-convention wrapper (per-head views, then the API)

and the device time per step of a CUDA graph of 64 steps captured from the C++ loop and from
the Python API (nothing of Python is inside a graph: the two should match). Prints one line
per measurement and their overhead over `cpp`.

    python bench/python_overhead.py [--model nemotron-nano|qwen3.5-4b|tiny-mamba2|tiny-gdn]
                                    [--batch 1] [--iters 2000] [--rounds 7] [--device cuda|cpu]

Each figure is the least over `rounds` rounds, each round timing every way of calling in
turn.

On the CPU (`--device cpu`, no graphs) the launcher's own work is the step's: take the tiny
shapes there.
"""

import argparse
import time

import numpy as np
import torch

import replayssm as rs
from replayssm import _native, engine

# The tiny shapes keep the CPU launcher's own work small (--device cpu).
MODELS = {"nemotron-nano": rs.Mamba2Shape(96, 80, 128, 8), "qwen3.5-4b": rs.GDNShape(32, 16, 128, 128),
          "tiny-mamba2": rs.Mamba2Shape(1, 16, 16, 1), "tiny-gdn": rs.GDNShape(1, 1, 16, 16)}


def synchronize(device):
    if device == "cuda":
        torch.cuda.synchronize()


def host_time(fn, iters, device):
    """Seconds of host time per call of fn(), the GPU kept from falling behind."""
    for _ in range(10):
        fn()
    synchronize(device)
    total = 0.0
    for _ in range(iters // 100):
        start = time.perf_counter()
        for _ in range(100):
            fn()
        total += time.perf_counter() - start
        synchronize(device)  # keep the launch queue short: host time only
    return total / (iters // 100 * 100)


def graph_time(fn, steps=64, replays=20):
    """Device seconds per step of a CUDA graph of `steps` calls of fn()."""
    fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(steps):
            fn()
    graph.replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(replays):
        graph.replay()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / 1e3 / (replays * steps)


def empty_op_like(op):
    """A torch op with ``op``'s schema whose kernel does nothing."""
    library = torch.library.Library("replayssm_overhead", "FRAGMENT")
    schema = str(op.default._schema).split("::", 1)[1]
    library.define(schema)
    name = schema.split("(", 1)[0]
    library.impl(name, lambda *args: None, "CompositeExplicitAutograd")
    empty_op_like.libraries.append(library)  # registered while it lives
    return getattr(torch.ops.replayssm_overhead, name)


empty_op_like.libraries = []


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=MODELS, default="nemotron-nano")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--iters", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    args = parser.parse_args()
    device = args.device
    shape = MODELS[args.model]
    gdn = isinstance(shape, rs.GDNShape)
    policy = rs.replay_policy(16)
    kind = rs.GDNBuffers if gdn else rs.Mamba2Buffers
    buffers = kind(policy, shape, args.batch, "bfloat16", device=device)
    rng = np.random.default_rng(0)

    def tensor(*dims, scale=1.0, dtype=torch.bfloat16):
        return torch.as_tensor(scale * rng.standard_normal(dims), device=device).to(dtype)

    B = args.batch
    slots = torch.arange(B, dtype=torch.int32, device=device)
    if gdn:
        HV, HK, K, V = shape
        inputs = {"q": tensor(B, HK, K), "k": tensor(B, HK, K), "v": tensor(B, HV, V), "a": tensor(B, HV, scale=0.3),
                  "b": tensor(B, HV), "A_log": tensor(HV, dtype=torch.float32),
                  "dt_bias": tensor(HV, dtype=torch.float32)}
        out = torch.empty_like(inputs["v"])
        native_args = {**buffers.arrays, **inputs, "o": out, "slot_indices": slots}
        step, native_step, op = rs.gdn_decode, _native.gdn_step, torch.ops.replayssm.gdn_step
        mixed = torch.cat([inputs["q"].flatten(1), inputs["k"].flatten(1), inputs["v"].flatten(1)], 1)
        wrapper = lambda: engine.gated_delta_rule_update(  # noqa: E731
            buffers.checkpoint, mixed, inputs["a"], inputs["b"], inputs["A_log"], inputs["dt_bias"], slots,
            out=out, buffers=buffers)
        scalars = {"raw_inputs": False, "key_heads": 0}
    else:
        H, P, N, G = shape
        inputs = {"x": tensor(B, H, P), "dt": tensor(B, H, scale=0.3), "B": tensor(B, G, N), "C": tensor(B, G, N),
                  "z": tensor(B, H, P), "A": -torch.rand(H, device=device), "D": tensor(H, dtype=torch.float32),
                  "dt_bias": tensor(H, dtype=torch.float32)}
        out = torch.empty_like(inputs["x"])
        native_args = {**buffers.arrays, **inputs, "y": out, "slot_indices": slots}
        step, native_step, op = rs.mamba2_decode, _native.mamba2_step, torch.ops.replayssm.mamba2_step
        wrapper = lambda: engine.selective_state_update(  # noqa: E731
            buffers.checkpoint, inputs["x"], inputs["dt"], inputs["A"], inputs["B"], inputs["C"], inputs["D"],
            inputs["z"], inputs["dt_bias"], dt_softplus=True, state_batch_indices=slots, out=out, buffers=buffers)
        scalars = {"dt_softplus": True}
    scalars.update({"kind": "decode", "policy": buffers.policy_index, "tokens": 1, "pad_slot_id": -1, "seed": 0})
    op_args = rs._steps.arguments("gdn_step" if gdn else "mamba2_step", scalars, native_args)

    def cpp(repeats):
        return native_step(*op_args, repeats=repeats)

    op_floor = empty_op_like(op)
    cpp(10)
    synchronize(device)
    step(buffers, **inputs, slot_indices=slots, out=out)  # binds the layer's step
    bound = buffers._bound_steps["gdn_step" if gdn else "mamba2_step"]
    per_call = [op_args[i] for i in rs._steps._PER_CALL["gdn_step" if gdn else "mamba2_step"]]
    per_call[-1] = None  # the checkpoint: the bound one
    calls = {
        "native": lambda: native_step(*op_args),
        "bound": lambda: bound(*per_call),
        "op": lambda: op(*op_args),
        "op_floor": lambda: op_floor(*op_args),
        "api": lambda: step(buffers, **inputs, slot_indices=slots, out=out),
        "engine": wrapper,
    }
    # The least of several rounds taken in turn over every way of calling, so that a busy
    # moment of the host does not fall on one of them only (three runs of each in a row
    # left differences of 5-10 us between runs on the 16-core H200 host).
    timings = {}
    for _ in range(args.rounds):
        timings["cpp"] = min(timings.get("cpp", float("inf")), cpp(args.iters))
        synchronize(device)
        for name, fn in calls.items():
            timings[name] = min(timings.get(name, float("inf")), host_time(fn, args.iters, device))

    print(f"model {args.model}, batch {B}, {policy}, bf16 activations, torch {torch.__version__}, "
          f"{torch.cuda.get_device_name() if device == 'cuda' else 'cpu'}")
    for name, seconds in timings.items():
        extra = "" if name == "cpp" else f"  (+{(seconds - timings['cpp']) * 1e6:.2f} us over cpp)"
        print(f"host_us_per_call {name:8s} {seconds * 1e6:8.2f}{extra}")
    if device == "cuda":
        report_graphs(cpp, calls["api"])
    buffers.take_errors()


def report_graphs(cpp, api):
    """The device time per step of the C++ launcher and of the Python API in CUDA graphs."""
    in_graph = {"cpp": graph_time(lambda: cpp(1)), "api": graph_time(api)}
    for name, seconds in in_graph.items():
        print(f"graph_us_per_step {name:7s} {seconds * 1e6:8.2f}")
    print(f"graph_overhead_us_per_step {(in_graph['api'] - in_graph['cpp']) * 1e6:.2f}")


if __name__ == "__main__":
    main()
