// SPDX-License-Identifier: Apache-2.0
/// \file cpu.hpp
/// The CPU launchers of the Mamba-2 steps (decode, speculative verify and the snapshot
/// baseline), from the same head step as the CUDA kernels, run by `serial_executor`.
#pragma once

#include <cstddef>

#include "replayssm/mamba2/head_step.hpp"
#include "replayssm/mamba2/params.hpp"
#include "replayssm/mamba2/snapshot.hpp"
#include "replayssm/mamba2/validate.hpp"
#include "replayssm/replay/executor.hpp"
#include "replayssm/runtime/commit.hpp"
#include "replayssm/runtime/cpu_launch.hpp"
#include "replayssm/runtime/status.hpp"

namespace replayssm {
namespace cpu {
namespace detail {

/// Scratch bytes of a Mamba-2 step of `tokens` tokens.
template <class Policy, class Act>
size_t scratch_bytes(const mamba2_params<Act>& p, int32_t tokens) {
  return mamba2_scratch_layout<Policy>::make(p.shape(), tokens).bytes();
}

/// A decode or verify step of every request, its (request, head) pairs spread by
/// `parallel_for` (runtime/cpu_launch.hpp).
template <class Policy, step_kind Kind, class Act, class ParallelFor>
status mamba2_tokens_step(const mamba2_params<Act>& p, ParallelFor&& parallel_for) {
  if (status s = validate_mamba2<Policy>(p, /*host_memory=*/true, Kind); !s) return s;
  return for_each_request_head(
      p, scratch_bytes<Policy>(p, p.tokens), "mamba2",
      [&](int32_t b, int32_t h, int32_t slot, float* scratch) {
        const mamba2_head_views<Policy, Act> v(p, b, h, slot);
        return mamba2_head_step<Kind>(serial_executor{}, v.in, v.state, p.shape(), scratch);
      },
      parallel_for);
}

}  // namespace detail

/// One decode step for every request of `p` (host memory), under any policy: write-back or
/// replay. Every CPU launcher takes an optional `ParallelFor` last, which spreads the step's
/// (request, head) pairs over the caller's threads (runtime/cpu_launch.hpp).
template <class Policy, class Act, class ParallelFor = serial_for>
[[nodiscard]] status mamba2_decode_step(const mamba2_params<Act>& p, ParallelFor&& parallel_for = {}) {
  return detail::mamba2_tokens_step<Policy, step_kind::decode>(p, parallel_for);
}

/// The conventional step: read, update and write the whole state.
template <class StateFormat, class Rounding = round_nearest_even, class Act, class ParallelFor = serial_for>
[[nodiscard]] status writeback_decode_step(const mamba2_params<Act>& p, ParallelFor&& parallel_for = {}) {
  return mamba2_decode_step<writeback_policy<StateFormat, Rounding>>(p, parallel_for);
}

/// The replay step: output from checkpoint + window, flush when the window fills.
template <class Policy, class Act, class ParallelFor = serial_for>
[[nodiscard]] status replay_decode_step(const mamba2_params<Act>& p, ParallelFor&& parallel_for = {}) {
  static_assert(!Policy::is_writeback, "replay_decode_step needs a window longer than 1");
  return mamba2_decode_step<Policy>(p, parallel_for);
}

/// The speculative verify step: every draft's output from checkpoint + window + the drafts
/// before it; the drafts wait in the window until `commit_drafts` (runtime/commit.hpp).
template <class Policy, class Act, class ParallelFor = serial_for>
[[nodiscard]] status replay_verify_step(const mamba2_params<Act>& p, ParallelFor&& parallel_for = {}) {
  return detail::mamba2_tokens_step<Policy, step_kind::verify>(p, parallel_for);
}

/// The conventional verify step: each draft's state written to its snapshot slot.
template <class StateFormat, class Act, class ParallelFor = serial_for>
[[nodiscard]] status snapshot_verify_step(const mamba2_params<Act>& p, ParallelFor&& parallel_for = {}) {
  using Policy = writeback_policy<StateFormat>;
  if (status s = validate_snapshot<StateFormat>(p, /*host_memory=*/true); !s) return s;
  return detail::for_each_request_head(
      p, detail::scratch_bytes<Policy>(p, 1), "mamba2",
      [&](int32_t b, int32_t h, int32_t slot, float* scratch) {
        return mamba2_snapshot_head_step<StateFormat>(serial_executor{}, p, b, h, slot, scratch);
      },
      parallel_for);
}

}  // namespace cpu
}  // namespace replayssm
