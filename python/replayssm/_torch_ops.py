# SPDX-License-Identifier: Apache-2.0
"""The ``replayssm::`` torch ops (``torch.library``): one per native step, with fake
implementations, so that ``torch.compile`` traces them and CUDA graphs capture them. Each
runs on the current CUDA stream of its tensors' device (or on the CPU) and mutates its
written tensors in place. Outside ``torch.compile`` the steps call the module directly:
the same launch without the dispatcher's cost (tensors cross through DLPack's C exchange
API, the stream is torch's current one)."""

from __future__ import annotations

import torch

from . import _steps

_library = torch.library.Library("replayssm", "DEF")


def _define(op: str) -> None:
    scalars, read, written = _steps.SCALARS[op], _steps.READ[op], _steps.WRITTEN[op]
    scalar_names, array_names = [n for n, _ in scalars], read + written
    schema = ", ".join([f"{t} {n}" for n, t in scalars] + [f"Tensor? {n}" for n in read] +
                       [f"Tensor(a{i}!)? {n}" for i, n in enumerate(written)])
    _library.define(f"{op}({schema}) -> ()")

    def kernel(*args):
        first = len(scalar_names)
        _steps.native(op, dict(zip(scalar_names, args[:first])), dict(zip(array_names, args[first:])))

    _library.impl(op, kernel, "CompositeExplicitAutograd")
    torch.library.register_fake(f"replayssm::{op}", lambda *args: None, lib=_library)


for _op in _steps.SCALARS:
    _define(_op)


def call(op: str, scalars: dict, arrays: dict) -> None:
    """Runs ``op`` on torch tensors: the torch op ``replayssm::<op>`` while torch.compile
    traces, else the module directly."""
    if torch.compiler.is_compiling():
        getattr(torch.ops.replayssm, op)(*[scalars[n] for n, _ in _steps.SCALARS[op]],
                                         *[arrays.get(n) for n in _steps.READ[op] + _steps.WRITTEN[op]])
    else:
        _steps.native(op, scalars, arrays)
