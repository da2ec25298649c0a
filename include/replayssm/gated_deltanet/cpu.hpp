// SPDX-License-Identifier: Apache-2.0
/// \file cpu.hpp
/// The CPU launchers of the Gated DeltaNet steps (decode, speculative verify and the snapshot
/// baseline), from the same head step as the CUDA kernels, run by `serial_executor`. A
/// policy's window mode is its `gdn_window_mode` (gated_deltanet/recurrence.hpp).
#pragma once

#include <cstddef>

#include "replayssm/gated_deltanet/head_step.hpp"
#include "replayssm/gated_deltanet/params.hpp"
#include "replayssm/gated_deltanet/snapshot.hpp"
#include "replayssm/gated_deltanet/validate.hpp"
#include "replayssm/replay/executor.hpp"
#include "replayssm/runtime/commit.hpp"
#include "replayssm/runtime/cpu_launch.hpp"
#include "replayssm/runtime/status.hpp"

namespace replayssm {
namespace cpu {
namespace detail {

/// A Gated DeltaNet decode or verify step of every request, its (request, head) pairs
/// spread by `parallel_for` (runtime/cpu_launch.hpp).
template <class Policy, step_kind Kind, class Act, class ParallelFor>
status gdn_tokens_step(const gdn_params<Act>& p, ParallelFor&& parallel_for) {
  if (status s = validate_gdn<Policy>(p, /*host_memory=*/true, Kind); !s) return s;
  const size_t bytes = gdn_scratch_layout::make(p.shape(), Policy::window, p.tokens).bytes();
  return for_each_request_head(
      p, bytes, "gated_deltanet",
      [&](int32_t b, int32_t h, int32_t slot, float* scratch) {
        const gdn_head_views<Policy, Act> v(p, b, h, slot);
        return gdn_head_step<Kind>(serial_executor{}, v.in, v.state, p.shape(), scratch);
      },
      parallel_for);
}

}  // namespace detail

/// One decode step for every request of `p` (host memory), under any policy: write-back or
/// replay. Every CPU launcher takes an optional `ParallelFor` last, which spreads the step's
/// (request, head) pairs over the caller's threads (runtime/cpu_launch.hpp).
template <class Policy, class Act, class ParallelFor = serial_for>
[[nodiscard]] status gdn_decode_step(const gdn_params<Act>& p, ParallelFor&& parallel_for = {}) {
  return detail::gdn_tokens_step<Policy, step_kind::decode>(p, parallel_for);
}

/// The conventional step: read, update and write the whole state.
template <class StateFormat, class Rounding = round_nearest_even, class Act, class ParallelFor = serial_for>
[[nodiscard]] status writeback_decode_step(const gdn_params<Act>& p, ParallelFor&& parallel_for = {}) {
  return gdn_decode_step<writeback_policy<StateFormat, Rounding>>(p, parallel_for);
}

/// The replay step: output from checkpoint + window, flush when the window fills.
template <class Policy, class Act, class ParallelFor = serial_for>
[[nodiscard]] status replay_decode_step(const gdn_params<Act>& p, ParallelFor&& parallel_for = {}) {
  static_assert(!Policy::is_writeback, "replay_decode_step needs a window longer than 1");
  return gdn_decode_step<Policy>(p, parallel_for);
}

/// The speculative verify step; the drafts wait in the window until `commit_drafts`
/// (runtime/commit.hpp).
template <class Policy, class Act, class ParallelFor = serial_for>
[[nodiscard]] status replay_verify_step(const gdn_params<Act>& p, ParallelFor&& parallel_for = {}) {
  return detail::gdn_tokens_step<Policy, step_kind::verify>(p, parallel_for);
}

/// The conventional verify step: each draft's state written to its snapshot slot.
template <class StateFormat, class Act, class ParallelFor = serial_for>
[[nodiscard]] status snapshot_verify_step(const gdn_params<Act>& p, ParallelFor&& parallel_for = {}) {
  if (status s = validate_snapshot<StateFormat>(p, /*host_memory=*/true); !s) return s;
  const size_t bytes = gdn_scratch_layout::make(p.shape(), 0, p.tokens).bytes();
  return detail::for_each_request_head(
      p, bytes, "gated_deltanet",
      [&](int32_t b, int32_t h, int32_t slot, float* scratch) {
        return gdn_snapshot_head_step<StateFormat>(serial_executor{}, p, b, h, slot, scratch);
      },
      parallel_for);
}

}  // namespace cpu
}  // namespace replayssm
