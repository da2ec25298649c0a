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
    written = 0
    schema = []
    for name, role in _steps.FIELDS[op]:
        if role == "read":
            schema.append(f"Tensor? {name}")
        elif role == "written":
            schema.append(f"Tensor(a{written}!)? {name}")
            written += 1
        else:
            schema.append(f"{role} {name}")  # str, int or bool
    _library.define(f"{op}({', '.join(schema)}) -> ()")

    def kernel(*args):
        _steps.native(op, args)

    _library.impl(op, kernel, "CompositeExplicitAutograd")
    torch.library.register_fake(f"replayssm::{op}", lambda *args: None, lib=_library)


for _op in _steps.FIELDS:
    _define(_op)


def call(op: str, args: list) -> None:
    """Runs ``op`` on torch tensors (its positional arguments, ``_steps.FIELDS`` order): the
    torch op ``replayssm::<op>`` while torch.compile traces, else the module directly."""
    if torch.compiler.is_compiling():
        getattr(torch.ops.replayssm, op)(*args)
    else:
        _steps.native(op, args)
