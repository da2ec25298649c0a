# SPDX-License-Identifier: Apache-2.0
"""The ``replayssm::`` torch ops (``torch.library``): one per native step, with fake
implementations, so that ``torch.compile`` traces them and CUDA graphs capture them. Each
runs on the current CUDA stream of its tensors' device (or on the CPU) and mutates its
written tensors in place. The steps take them while ``torch.compile`` traces
(``_steps.launch_layer`` and ``launch``); otherwise they call the module directly: the same
launch without the dispatcher's cost (tensors cross through DLPack's C exchange API, the
stream is torch's current one)."""

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

    native = _steps.NATIVE[op]

    def kernel(*args):
        native(*args)  # its host time per call (a float) is not the op's: none

    _library.impl(op, kernel, "CompositeExplicitAutograd")
    torch.library.register_fake(f"replayssm::{op}", lambda *args: None, lib=_library)


for _op in _steps.FIELDS:
    _define(_op)
_steps.tracing, _steps.torch_ops = torch.compiler.is_compiling, torch.ops.replayssm
