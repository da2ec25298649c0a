# SPDX-License-Identifier: Apache-2.0
"""ReplaySSM from Python: replay decode of Mamba-2 and Gated DeltaNet layers.

The steps run on NumPy arrays (the CPU) or PyTorch tensors (the CPU, or a CUDA device on
the current stream, capturable in CUDA graphs), with no copies: arrays cross into the C++
launchers through DLPack. With PyTorch importable, the steps are also torch ops
(``torch.ops.replayssm.*``) with fake implementations for ``torch.compile``.
``replayssm.engine`` has wrappers whose arguments follow vLLM's conventions.
"""

from ._buffers import (GDNBuffers, GDNShape, LayerBuffers, Mamba2Buffers, Mamba2Shape, gdn_buffer_sizes,
                       gdn_bytes_per_step, mamba2_buffer_sizes, mamba2_bytes_per_step)
from ._native import cuda as has_cuda
from ._policy import Policy, describe, policies, replay_policy, writeback_policy
from ._steps import (commit_drafts, gdn_decode, gdn_step, gdn_verify, mamba2_decode, mamba2_step,
                     mamba2_verify)

try:
    from . import _torch_ops  # noqa: F401  (registers the torch ops)
except ImportError:
    pass

__all__ = [
    "GDNBuffers", "GDNShape", "LayerBuffers", "Mamba2Buffers", "Mamba2Shape", "Policy", "commit_drafts",
    "describe", "gdn_buffer_sizes", "gdn_bytes_per_step", "gdn_decode", "gdn_step", "gdn_verify", "has_cuda",
    "mamba2_buffer_sizes", "mamba2_bytes_per_step", "mamba2_decode", "mamba2_step", "mamba2_verify", "policies",
    "replay_policy", "writeback_policy",
]
