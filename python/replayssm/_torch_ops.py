# SPDX-License-Identifier: Apache-2.0
"""The ``replayssm::`` torch ops (``torch.library``): one per native step, with fake
implementations, so that ``torch.compile`` traces them and CUDA graphs capture them. Each
runs on the current CUDA stream of its tensors' device (or on the CPU) and mutates its
written tensors in place."""

from __future__ import annotations

import torch
import torch.utils.dlpack

from . import _steps

_library = torch.library.Library("replayssm", "DEF")


def _define(op: str) -> None:
    scalars, read, written = _steps.SCALARS[op], _steps.READ[op], _steps.WRITTEN[op]
    names = [n for n, _ in scalars] + list(read) + list(written)
    schema = ", ".join([f"{t} {n}" for n, t in scalars] + [f"Tensor? {n}" for n in read] +
                       [f"Tensor(a{i}!)? {n}" for i, n in enumerate(written)])
    _library.define(f"{op}({schema}) -> ()")
    first = len(scalars)

    def kernel(*args):
        tensors = args[first:]
        device = next(t.device for t in tensors if t is not None)
        stream = torch.cuda.current_stream(device).cuda_stream if device.type == "cuda" else 0
        # DLPack capsules made by torch's C++ exporter (faster than each tensor's __dlpack__).
        arrays = {n: torch.utils.dlpack.to_dlpack(t) for n, t in zip(names[first:], tensors) if t is not None}
        _steps.native(op, dict(zip(names[:first], args[:first])), arrays, stream)

    _library.impl(op, kernel, "CompositeExplicitAutograd")
    torch.library.register_fake(f"replayssm::{op}", lambda *args: None, lib=_library)


for _op in _steps.SCALARS:
    _define(_op)


def call(op: str, scalars: dict, arrays: dict) -> None:
    """Calls the torch op ``replayssm::<op>`` with named scalars and tensors."""
    getattr(torch.ops.replayssm, op)(*[scalars[n] for n, _ in _steps.SCALARS[op]],
                                     *[arrays.get(n) for n in _steps.READ[op] + _steps.WRITTEN[op]])
