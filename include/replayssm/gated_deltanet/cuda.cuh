// SPDX-License-Identifier: Apache-2.0
/// \file cuda.cuh
/// The ready-made CUDA kernels of the Gated DeltaNet steps (decode, speculative verify and the
/// snapshot baseline) and their launchers, built from the same head step as the CPU path:
/// one block per (request, value head). Commits and device error flags are shared by every
/// recurrence (runtime/cuda_launch.cuh).
#pragma once

#include <cuda_runtime.h>

#include "replayssm/gated_deltanet/head_step.hpp"
#include "replayssm/gated_deltanet/params.hpp"
#include "replayssm/gated_deltanet/snapshot.hpp"
#include "replayssm/gated_deltanet/validate.hpp"
#include "replayssm/replay/executor.hpp"
#include "replayssm/runtime/cuda_launch.cuh"
#include "replayssm/runtime/gpu_tuning.hpp"
#include "replayssm/runtime/status.hpp"

namespace replayssm {
namespace cuda {

/// The block executor of a Gated DeltaNet step: a whole row per thread for the streaming
/// (write-back and snapshot) steps, four lanes per row for replay steps.
template <bool Streaming>
using gdn_executor = basic_block_executor<gdn_row_lanes<Streaming>>;

/// One block runs one value head of one request: a decode or verify step of the planned
/// requests.
template <class Policy, class Act, int Threads, step_kind Kind>
__global__ void __launch_bounds__(Threads, decode_min_blocks<Threads, gdn_blocks_per_sm<Policy::is_writeback, Kind>>)
    gdn_decode_kernel(const gdn_params<Act> p) {
  static_assert(Threads % 32 == 0 && Threads <= 1024, "gdn_decode_kernel: Threads must be whole warps");
  detail::run_request_head(p, [&](int32_t b, int32_t h, int32_t slot, float* scratch) {
    const gdn_head_views<Policy, Act> v(p, b, h, slot);
    return gdn_head_step<Kind>(gdn_executor<Policy::is_writeback>{}, v.in, v.state, p.shape(), scratch);
  });
}

/// The snapshot baseline's verify step: one block per (request, value head), a row per thread.
template <class StateFormat, class Act, int Threads>
__global__ void __launch_bounds__(Threads, decode_min_blocks<Threads, gdn_blocks_per_sm<true, step_kind::verify>>)
    gdn_snapshot_kernel(const gdn_params<Act> p) {
  detail::run_request_head(p, [&](int32_t b, int32_t h, int32_t slot, float* scratch) {
    return gdn_snapshot_head_step<StateFormat, Act>(gdn_executor<true>{}, p, b, h, slot, scratch);
  });
}

namespace detail {

/// A decode or verify step for every request of `p` (device memory): the plans, then the
/// step of the requests planned to run.
template <class Policy, int Threads, step_kind Kind, class Act>
status gdn_tokens_step(const gdn_params<Act>& p, cudaStream_t stream) {
  if (status s = validate_gdn<Policy>(p, /*host_memory=*/false, Kind); !s) return s;
  if (status s = plan_requests<Policy, Kind>(p, stream); !s) return s;
  const size_t smem = gdn_scratch_layout::make(p.shape(), Policy::window, p.tokens).bytes();
  return launch_head_blocks(gdn_decode_kernel<Policy, Act, Threads, Kind>, p, smem, Threads, stream, "gated_deltanet");
}

}  // namespace detail

/// One decode step for every request of `p` (device memory), under any policy (write-back or
/// replay, in its window mode), in blocks of `Threads` threads.
template <class Policy, int Threads = decode_block_threads, class Act>
[[nodiscard]] status gdn_decode_step(const gdn_params<Act>& p, cudaStream_t stream = nullptr) {
  return detail::gdn_tokens_step<Policy, Threads, step_kind::decode>(p, stream);
}

/// The conventional step: read, update and write the whole state.
template <class StateFormat, class Rounding = round_nearest_even, int Threads = decode_block_threads, class Act>
[[nodiscard]] status writeback_decode_step(const gdn_params<Act>& p, cudaStream_t stream = nullptr) {
  return gdn_decode_step<writeback_policy<StateFormat, Rounding>, Threads>(p, stream);
}

/// The replay step: output from checkpoint + window, flush when the window fills.
template <class Policy, int Threads = decode_block_threads, class Act>
[[nodiscard]] status replay_decode_step(const gdn_params<Act>& p, cudaStream_t stream = nullptr) {
  static_assert(!Policy::is_writeback, "replay_decode_step needs a window longer than 1");
  return gdn_decode_step<Policy, Threads>(p, stream);
}

/// The speculative verify step; the drafts wait in the window until `commit_drafts`.
template <class Policy, int Threads = decode_block_threads, class Act>
[[nodiscard]] status replay_verify_step(const gdn_params<Act>& p, cudaStream_t stream = nullptr) {
  return detail::gdn_tokens_step<Policy, Threads, step_kind::verify>(p, stream);
}

/// The conventional verify step: each draft's state written to its snapshot slot in one pass
/// over the state.
template <class StateFormat, int Threads = decode_block_threads, class Act>
[[nodiscard]] status snapshot_verify_step(const gdn_params<Act>& p, cudaStream_t stream = nullptr) {
  if (status s = validate_snapshot<StateFormat>(p, /*host_memory=*/false); !s) return s;
  if (status s = detail::plan_requests<writeback_policy<StateFormat>, step_kind::decode>(p, stream); !s) return s;
  const size_t smem = gdn_scratch_layout::make(p.shape(), 0, p.tokens).bytes();
  return detail::launch_head_blocks(gdn_snapshot_kernel<StateFormat, Act, Threads>, p, smem, Threads, stream,
                                    "gated_deltanet snapshot");
}

}  // namespace cuda
}  // namespace replayssm
