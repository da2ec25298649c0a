# SPDX-License-Identifier: Apache-2.0
"""Policies: the window, the read copy's and the checkpoint's formats, and the rounding."""

from __future__ import annotations

import dataclasses
import functools

from . import _native

_ROUNDINGS = ("nearest-even", "stochastic")
_GDN_WINDOWS = ("corrected_values", "raw_inputs")


@dataclasses.dataclass(frozen=True)
class Policy:
    """A replay policy, as C++'s ``replay_policy<window, read, checkpoint, rounding>``.

    ``window`` 1 is the conventional write-back step. ``read`` and ``checkpoint`` name
    state formats (``fp32``, ``fp16``, ``bf16``, ``fp8_e4m3``, ``nvfp4``, or a custom
    format's ``name``); equal names mean one shared state. ``gdn_window`` is what a Gated
    DeltaNet layer's window keeps (``corrected_values`` or ``raw_inputs``, the latter for a
    separate read copy only); Mamba-2 ignores it. Only the policies compiled into the module
    run (``policies()``).
    """

    window: int
    read: str
    checkpoint: str
    rounding: str = "nearest-even"
    gdn_window: str = "corrected_values"

    def __post_init__(self):
        if self.rounding not in _ROUNDINGS:
            raise ValueError(f"replayssm: rounding {self.rounding!r} is not one of {', '.join(_ROUNDINGS)}")
        if self.gdn_window not in _GDN_WINDOWS:
            raise ValueError(f"replayssm: gdn_window {self.gdn_window!r} is not one of {', '.join(_GDN_WINDOWS)}")

    @property
    def is_writeback(self) -> bool:
        """True for the conventional step (a window of one)."""
        return self.window == 1

    @property
    def shared_state(self) -> bool:
        """True when the read copy is the checkpoint (one buffer)."""
        return self.read == self.checkpoint

    @property
    def index(self) -> int:
        """The policy's index in the module; ValueError when it is not compiled in."""
        return _index(self.window, self.read, self.checkpoint, self.rounding)

    @property
    def has_cuda_steps(self) -> bool:
        """True when the module has this policy's CUDA steps (a build with
        ``REPLAYSSM_PYTHON_CUDA_POLICIES=N`` has those of the first N policies only, one
        without CUDA none); its CPU steps are always there."""
        return _native.policies()[self.index]["cuda"]

    @property
    def raw_inputs(self) -> bool:
        return self.gdn_window == "raw_inputs"

    def __str__(self) -> str:
        return describe(self)


def replay_policy(window: int, read: str = "fp32", checkpoint: str | None = None,
                  rounding: str = "nearest-even", gdn_window: str = "corrected_values") -> Policy:
    """A replay policy; ``checkpoint`` defaults to ``read`` (one shared state)."""
    return Policy(window, read, checkpoint or read, rounding, gdn_window)


def writeback_policy(state: str = "fp32", rounding: str = "nearest-even") -> Policy:
    """The conventional read-update-write step with the state in ``state``."""
    return Policy(1, state, state, rounding)


def policies() -> list[Policy]:
    """The policies compiled into the module (python/src/policies.hpp)."""
    return [Policy(p["window"], p["read"], p["checkpoint"], p["rounding"]) for p in _native.policies()]


def describe(policy: Policy) -> str:
    """The policy's mode as text, e.g. ``replay W=16 read=nvfp4 checkpoint=fp16 rounding=stochastic(philox-10)``."""
    return _native.policies()[policy.index]["description"]


@functools.lru_cache(maxsize=None)
def _index(window: int, read: str, checkpoint: str, rounding: str) -> int:
    for i, p in enumerate(_native.policies()):
        if (p["window"], p["read"], p["checkpoint"], p["rounding"]) == (window, read, checkpoint, rounding):
            return i
    compiled = "; ".join(p["description"] for p in _native.policies())
    raise ValueError(
        f"replayssm: Policy(window={window}, read={read!r}, checkpoint={checkpoint!r}, rounding={rounding!r}) "
        f"is not compiled into this module; compiled: {compiled}. Add it to python/src/policies.hpp "
        "(README, 'From Python').")
