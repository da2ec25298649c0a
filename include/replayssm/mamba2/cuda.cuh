// SPDX-License-Identifier: Apache-2.0
/// \file cuda.cuh
/// The ready-made CUDA kernels of the Mamba-2 steps (decode, speculative verify and the
/// snapshot baseline) and their launchers, built from the same head step as the CPU path,
/// run by `block_executor`: one block per (request, head). Commits and device error flags
/// are shared by every recurrence (runtime/cuda_launch.cuh).
#pragma once

#include <cuda_runtime.h>

#include "replayssm/mamba2/head_step.hpp"
#include "replayssm/mamba2/params.hpp"
#include "replayssm/mamba2/snapshot.hpp"
#include "replayssm/mamba2/validate.hpp"
#include "replayssm/replay/executor.hpp"
#include "replayssm/runtime/cuda_launch.cuh"
#include "replayssm/runtime/gpu_tuning.hpp"
#include "replayssm/runtime/status.hpp"

namespace replayssm {
namespace cuda {

/// One block runs one head of one request: a decode or verify step.
template <class Policy, class Act, int Threads, step_kind Kind>
__global__ void __launch_bounds__(Threads, decode_min_blocks<Threads, mamba2_blocks_per_sm<Policy, Kind>>)
    mamba2_decode_kernel(const mamba2_params<Act> p) {
  static_assert(Threads % 32 == 0 && Threads <= 1024, "mamba2_decode_kernel: Threads must be whole warps");
  detail::run_request_head(p, [&](int32_t b, int32_t h, int32_t slot, float* scratch) {
    const mamba2_head_views<Policy, Act> v(p, b, h, slot);
    return mamba2_head_step<Kind>(block_executor{}, v.in, v.state, p.shape(), scratch);
  });
}

/// The snapshot baseline's verify step: one block per (request, head), drafts in order.
template <class StateFormat, class Act, int Threads>
__global__ void __launch_bounds__(
    Threads, decode_min_blocks<Threads, mamba2_blocks_per_sm<writeback_policy<StateFormat>, step_kind::verify>>)
    mamba2_snapshot_kernel(const mamba2_params<Act> p) {
  detail::run_request_head(p, [&](int32_t b, int32_t h, int32_t slot, float* scratch) {
    return mamba2_snapshot_head_step<StateFormat, Act>(block_executor{}, p, b, h, slot, scratch);
  });
}

namespace detail {

/// A decode or verify step for every request of `p` (device memory).
template <class Policy, int Threads, step_kind Kind, class Act>
status mamba2_tokens_step(const mamba2_params<Act>& p, cudaStream_t stream) {
  if (status s = validate_mamba2<Policy>(p, /*host_memory=*/false, Kind); !s) return s;
  const size_t smem = mamba2_scratch_layout<Policy>::make(p.shape(), p.tokens).bytes();
  return launch_head_blocks(mamba2_decode_kernel<Policy, Act, Threads, Kind>, p, smem, Threads, stream, "mamba2");
}

}  // namespace detail

/// One decode step for every request of `p` (device memory), under any policy (write-back or
/// replay), on `stream`, with `Threads` threads per (request, head) block.
template <class Policy, int Threads = decode_block_threads, class Act>
[[nodiscard]] status mamba2_decode_step(const mamba2_params<Act>& p, cudaStream_t stream = nullptr) {
  return detail::mamba2_tokens_step<Policy, Threads, step_kind::decode>(p, stream);
}

/// The conventional step: read, update and write the whole state.
template <class StateFormat, class Rounding = round_nearest_even, int Threads = decode_block_threads, class Act>
[[nodiscard]] status writeback_decode_step(const mamba2_params<Act>& p, cudaStream_t stream = nullptr) {
  return mamba2_decode_step<writeback_policy<StateFormat, Rounding>, Threads>(p, stream);
}

/// The replay step: output from checkpoint + window, the flush folded into the step on
/// which a request's window fills.
template <class Policy, int Threads = decode_block_threads, class Act>
[[nodiscard]] status replay_decode_step(const mamba2_params<Act>& p, cudaStream_t stream = nullptr) {
  static_assert(!Policy::is_writeback, "replay_decode_step needs a window longer than 1");
  return mamba2_decode_step<Policy, Threads>(p, stream);
}

/// The speculative verify step: every draft's output from checkpoint + window + the drafts
/// before it, the state read once for all of them; the drafts wait in the window,
/// uncommitted, until `commit_drafts`. The committed entries are flushed first when the
/// drafts would not fit.
template <class Policy, int Threads = decode_block_threads, class Act>
[[nodiscard]] status replay_verify_step(const mamba2_params<Act>& p, cudaStream_t stream = nullptr) {
  return detail::mamba2_tokens_step<Policy, Threads, step_kind::verify>(p, stream);
}

/// The conventional verify step: each draft's state written to its snapshot slot.
template <class StateFormat, int Threads = decode_block_threads, class Act>
[[nodiscard]] status snapshot_verify_step(const mamba2_params<Act>& p, cudaStream_t stream = nullptr) {
  if (status s = validate_snapshot<StateFormat>(p, /*host_memory=*/false); !s) return s;
  using Policy = writeback_policy<StateFormat>;
  const size_t smem = mamba2_scratch_layout<Policy>::make(p.shape()).bytes();
  return detail::launch_head_blocks(mamba2_snapshot_kernel<StateFormat, Act, Threads>, p, smem, Threads, stream,
                                    "mamba2 snapshot");
}

}  // namespace cuda
}  // namespace replayssm
