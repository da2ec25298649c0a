// SPDX-License-Identifier: Apache-2.0
/// \file cpu_decode.hpp
/// Layer 6: the CPU implementation of the Mamba-2 and Gated DeltaNet steps (decode,
/// speculative verify and the snapshot baseline), from the same primitives as the CUDA
/// kernels (run by `serial_executor`). The launchers are overloaded on the params type.
#pragma once

#include <string>
#include <vector>

#include "replayssm/kernels/commit.hpp"
#include "replayssm/kernels/gdn_params.hpp"
#include "replayssm/kernels/gdn_snapshot.hpp"
#include "replayssm/kernels/gdn_validate.hpp"
#include "replayssm/kernels/mamba2_params.hpp"
#include "replayssm/kernels/mamba2_snapshot.hpp"
#include "replayssm/kernels/mamba2_validate.hpp"
#include "replayssm/kernels/status.hpp"
#include "replayssm/replay/executor.hpp"
#include "replayssm/replay/gdn_head_step.hpp"
#include "replayssm/replay/mamba2_head_step.hpp"

namespace replayssm {
namespace cpu {

namespace detail {

/// Runs `head(b, h, slot, scratch)` for every (request, head) of `p` that is not padding,
/// with `scratch_bytes` of scratch.
template <class Params, class HeadStep>
status for_each_request_head(const Params& p, size_t scratch_bytes, const char* who, HeadStep&& head) {
  std::vector<float> scratch(scratch_bytes / sizeof(float));
  uint32_t errors = 0;
  for (int32_t b = 0; b < p.batch; ++b) {
    const int32_t slot = request_slot(p, b);
    if (slot == p.pad_slot_id) continue;
    for (int32_t h = 0; h < p.heads; ++h) errors |= head(b, h, slot, scratch.data());
  }
  if (errors != 0) return status::error(std::string(who) + ": " + describe_step_errors(errors));
  return {};
}

/// Scratch bytes of a Mamba-2 step of `tokens` tokens.
template <class Policy>
size_t scratch_bytes(const mamba2_params& p, int32_t tokens) {
  return mamba2_scratch_layout<Policy>::make({p.head_dim, p.state_dim}, tokens).bytes();
}

/// A decode (`immediate`) or verify (`pending`) step of every request.
template <class Policy, token_commit Commit>
status mamba2_tokens_step(const mamba2_params& p) {
  if (status s = validate_mamba2<Policy>(p, /*host_memory=*/true, Commit); !s) return s;
  status result;
  dispatch_dtype(p.act_dtype, [&](auto act) {
    using Act = decltype(act);
    result = for_each_request_head(p, scratch_bytes<Policy>(p, p.tokens), "mamba2", [&](int32_t b, int32_t h, int32_t slot, float* scratch) {
      const mamba2_head_views<Policy, Act> v(p, b, h, slot);
      return mamba2_head_tokens<Commit>(serial_executor{}, v.in, v.state, {p.head_dim, p.state_dim}, scratch);
    });
  });
  return result;
}

}  // namespace detail

/// One decode step for every request of `p` (host memory), under `Policy`.
template <class Policy>
[[nodiscard]] status mamba2_decode_step(const mamba2_params& p) {
  return detail::mamba2_tokens_step<Policy, token_commit::immediate>(p);
}

/// The conventional step: read, update and write the whole state.
template <class StateFormat, class Rounding = round_nearest_even>
[[nodiscard]] status naive_decode_step(const mamba2_params& p) {
  return mamba2_decode_step<writeback_policy<StateFormat, Rounding>>(p);
}

/// The replay step: output from checkpoint + window, flush when the window fills.
template <class Policy>
[[nodiscard]] status replay_decode_step(const mamba2_params& p) {
  static_assert(!Policy::is_writeback, "replay_decode_step needs a window longer than 1");
  return mamba2_decode_step<Policy>(p);
}

/// The speculative verify step: every draft's output from checkpoint + window + the drafts
/// before it; the drafts wait in the window until `commit_drafts` (commit.hpp).
template <class Policy>
[[nodiscard]] status replay_verify_step(const mamba2_params& p) {
  return detail::mamba2_tokens_step<Policy, token_commit::pending>(p);
}

/// The conventional verify step: each draft's state written to its snapshot slot.
template <class StateFormat>
[[nodiscard]] status snapshot_verify_step(const mamba2_params& p) {
  using Policy = writeback_policy<StateFormat>;
  if (status s = validate_snapshot<StateFormat>(p, /*host_memory=*/true); !s) return s;
  status result;
  dispatch_dtype(p.act_dtype, [&](auto act) {
    using Act = decltype(act);
    result = detail::for_each_request_head(p, detail::scratch_bytes<Policy>(p, 1), "mamba2", [&](int32_t b, int32_t h, int32_t slot, float* scratch) {
      return mamba2_snapshot_head_step<StateFormat, Act>(serial_executor{}, p, b, h, slot, scratch);
    });
  });
  return result;
}

/// The conventional commit: request b's state slot becomes the snapshot of its last
/// accepted draft (`slot_indices` is updated; the slot it held becomes that snapshot slot).
template <class Params>
[[nodiscard]] status snapshot_commit(const Params& p, int32_t* slot_indices, int32_t* snapshot_slots) {
  if (status s = validate_snapshot_commit(p, slot_indices, snapshot_slots, /*host_memory=*/true); !s) return s;
  for (int32_t b = 0; b < p.batch; ++b) snapshot_commit_request(p, slot_indices, snapshot_slots, b);
  return {};
}

namespace detail {

/// A Gated DeltaNet decode (`immediate`) or verify (`pending`) step of every request.
template <class Policy, gdn_window Mode, token_commit Commit>
status gdn_tokens_step(const gdn_params& p) {
  if (status s = validate_gdn<Policy, Mode>(p, /*host_memory=*/true, Commit); !s) return s;
  const gdn_shape shape{p.value_dim, p.key_dim};
  const size_t bytes = gdn_scratch_layout::make(shape, Policy::window, p.tokens).bytes();
  status result;
  dispatch_dtype(p.act_dtype, [&](auto act) {
    using Act = decltype(act);
    result = for_each_request_head(p, bytes, "gated_deltanet", [&](int32_t b, int32_t h, int32_t slot, float* scratch) {
      const gdn_head_views<Policy, Act> v(p, b, h, slot);
      return gdn_head_tokens<Commit, Mode>(serial_executor{}, v.in, v.state, shape, scratch);
    });
  });
  return result;
}

}  // namespace detail

/// Gated DeltaNet: one decode step for every request of `p` (host memory), under `Policy`,
/// with the window mode `Mode`.
template <class Policy, gdn_window Mode = gdn_window::corrected_values>
[[nodiscard]] status gdn_decode_step(const gdn_params& p) {
  return detail::gdn_tokens_step<Policy, Mode, token_commit::immediate>(p);
}

/// Gated DeltaNet: the conventional step, read, update and write the whole state.
template <class StateFormat, class Rounding = round_nearest_even>
[[nodiscard]] status naive_decode_step(const gdn_params& p) {
  return gdn_decode_step<writeback_policy<StateFormat, Rounding>>(p);
}

/// Gated DeltaNet: the replay step, output from checkpoint + window, flush when it fills.
template <class Policy, gdn_window Mode = gdn_window::corrected_values>
[[nodiscard]] status replay_decode_step(const gdn_params& p) {
  static_assert(!Policy::is_writeback, "replay_decode_step needs a window longer than 1");
  return gdn_decode_step<Policy, Mode>(p);
}

/// Gated DeltaNet: the speculative verify step; drafts wait in the window until
/// `commit_drafts` (commit.hpp).
template <class Policy, gdn_window Mode = gdn_window::corrected_values>
[[nodiscard]] status replay_verify_step(const gdn_params& p) {
  return detail::gdn_tokens_step<Policy, Mode, token_commit::pending>(p);
}

/// Gated DeltaNet: the conventional verify step, each draft's state written to its
/// snapshot slot.
template <class StateFormat>
[[nodiscard]] status snapshot_verify_step(const gdn_params& p) {
  if (status s = validate_snapshot<StateFormat>(p, /*host_memory=*/true); !s) return s;
  const size_t bytes = gdn_scratch_layout::make({p.value_dim, p.key_dim}, 0, p.tokens).bytes();
  status result;
  dispatch_dtype(p.act_dtype, [&](auto act) {
    using Act = decltype(act);
    result = detail::for_each_request_head(p, bytes, "gated_deltanet", [&](int32_t b, int32_t h, int32_t slot, float* scratch) {
      return gdn_snapshot_head_step<StateFormat, Act>(serial_executor{}, p, b, h, slot, scratch);
    });
  });
  return result;
}

}  // namespace cpu
}  // namespace replayssm
