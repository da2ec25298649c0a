// SPDX-License-Identifier: Apache-2.0
/// \file cpu_steps.hpp
/// The CPU steps of every recurrence, defined once: `cpu::decode_step<Policy>(p)` and
/// `cpu::verify_step<Policy>(p)` on a recurrence's params (`mamba2_params`, `gdn_params`),
/// whose cpu.hpp says how one (request, head) steps (`cpu::head_steps`). The commits are
/// `cpu::commit_drafts` and `cpu::snapshot_commit` (runtime/commit.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "replayssm/policy/policy.hpp"
#include "replayssm/replay/cursor.hpp"
#include "replayssm/runtime/cpu_launch.hpp"
#include "replayssm/runtime/status.hpp"
#include "replayssm/runtime/validate.hpp"

namespace replayssm {
namespace cpu {

/// How one (request, head) of a recurrence steps on the CPU, specialized for its params by
/// the recurrence's cpu.hpp: its `name`; the scratch bytes of a (request, head),
/// `scratch_bytes<Policy>(p)` and `snapshot_scratch_bytes<StateFormat>(p)`; and the head steps
/// `step<Policy, Kind>(p, b, h, slot, scratch)` and `snapshot<StateFormat>(p, b, h, slot,
/// scratch)`, which return the head's step_error bits.
template <class Params>
struct head_steps;

namespace detail {

/// A decode or verify step of every request, its (request, head) pairs spread by
/// `parallel_for`.
template <class Policy, step_kind Kind, class Params, class ParallelFor>
status tokens_step(const Params& p, ParallelFor&& parallel_for) {
  using steps = head_steps<Params>;
  if (status s = step_checks<Params>::template step<Policy>(p, /*host_memory=*/true, Kind); !s) return s;
  return for_each_request_head(
      p, steps::template scratch_bytes<Policy>(p), steps::name,
      [&](int32_t b, int32_t h, int32_t slot, float* scratch) {
        return steps::template step<Policy, Kind>(p, b, h, slot, scratch);
      },
      parallel_for);
}

/// The snapshot baseline's verify step of every request.
template <class StateFormat, class Params, class ParallelFor>
status snapshot_step(const Params& p, ParallelFor&& parallel_for) {
  using steps = head_steps<Params>;
  if (status s = step_checks<Params>::template snapshot<StateFormat>(p, /*host_memory=*/true); !s) return s;
  return for_each_request_head(
      p, steps::template snapshot_scratch_bytes<StateFormat>(p), steps::name,
      [&](int32_t b, int32_t h, int32_t slot, float* scratch) {
        return steps::template snapshot<StateFormat>(p, b, h, slot, scratch);
      },
      parallel_for);
}

}  // namespace detail

/// One decode step for every request of `p` (host memory) under `Policy`: the write-back
/// step (`writeback_policy<Format>`) reads, updates and writes each head's state; a replay
/// step forms the output from checkpoint + window, and flushes on the step whose window
/// fills. Every CPU step takes an optional `ParallelFor` last, which spreads the step's
/// (request, head) pairs over the caller's threads (runtime/cpu_launch.hpp).
template <class Policy, class Params, class ParallelFor = serial_for>
[[nodiscard]] status decode_step(const Params& p, ParallelFor&& parallel_for = {}) {
  static_assert(replayssm::detail::require_policy<Policy>::ok);
  return detail::tokens_step<Policy, step_kind::decode>(p, parallel_for);
}

/// The speculative verify step for every request of `p` (host memory), up to `p.tokens`
/// drafts each. Under a replay policy each draft's output comes from checkpoint + window +
/// the drafts before it, and the drafts wait in the window, uncommitted, until
/// `commit_drafts`. Under a write-back policy it is the conventional snapshot baseline: each
/// draft's state is written to its snapshot slot (`p.snapshot_slots`), and `snapshot_commit`
/// follows.
template <class Policy, class Params, class ParallelFor = serial_for>
[[nodiscard]] status verify_step(const Params& p, ParallelFor&& parallel_for = {}) {
  static_assert(replayssm::detail::require_policy<Policy>::ok);
  if constexpr (Policy::is_writeback) {
    static_assert(std::is_same_v<typename Policy::rounding, round_nearest_even>,
                  "verify_step: the snapshot baseline rounds its states to nearest even");
    return detail::snapshot_step<typename Policy::checkpoint_format>(p, parallel_for);
  } else {
    return detail::tokens_step<Policy, step_kind::verify>(p, parallel_for);
  }
}

}  // namespace cpu
}  // namespace replayssm
