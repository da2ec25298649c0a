// SPDX-License-Identifier: Apache-2.0
/// \file requests.hpp
/// What a request of a step's params maps to (its state slot, its token count, its
/// heads' state views), and the host checks of the per-request counts. Generic over the params of any recurrence:
/// they share the fields used here.
#pragma once

#include <cstdint>
#include <string>

#include "replayssm/config.hpp"
#include "replayssm/numeric/philox.hpp"
#include "replayssm/replay/state_view.hpp"
#include "replayssm/replay/step_plan.hpp"
#include "replayssm/runtime/status.hpp"

namespace replayssm {

/// The slot request `b` of `p` uses.
template <class Params>
REPLAYSSM_HOST_DEVICE int32_t request_slot(const Params& p, int32_t b) {
  return p.slot_indices != nullptr ? p.slot_indices[b] : b;
}

/// The tokens request `b` of `p` carries (its drafts in a verify step).
template <class Params>
REPLAYSSM_HOST_DEVICE int32_t request_tokens(const Params& p, int32_t b) {
  return p.token_counts != nullptr ? p.token_counts[b] : p.tokens;
}

/// Points a head state (any recurrence's: it has `policy`, the state views, `phase`,
/// `cursor` and `key`) at head `h` of slot `slot` in the pools of `p`, `elements` state
/// values per head: checkpoint, read copy, flush phase, cursor and random stream.
template <class Params, class State>
REPLAYSSM_HOST_DEVICE void bind_head_state(const Params& p, int32_t slot, int32_t h, int64_t elements, State& state) {
  using Policy = typename State::policy;
  const int64_t head_index = int64_t(slot) * p.heads + h;
  state.checkpoint = state_head_view<typename Policy::checkpoint_format>::in_pool(p.checkpoint, p.checkpoint_scales,
                                                                                  head_index, elements);
  if constexpr (!Policy::shared_state)
    state.read_copy =
        state_head_view<typename Policy::read_format>::in_pool(p.read_copy, p.read_copy_scales, head_index, elements);
  if constexpr (!Policy::is_writeback) state.phase = p.flush_phase != nullptr ? p.flush_phase[slot] : 0;
  state.cursor = p.cursors == nullptr ? nullptr : p.cursors + head_index;
  state.key = random_stream_key{p.seed, uint32_t(slot), uint32_t(h), 0u};
}

/// What the device steps report instead of touching memory they must not (device memory,
/// zeroed before the first step; `cuda::take_step_errors` reads and clears it).
struct step_report {
  uint32_t errors;      ///< step_error bits
  int32_t request_key;  ///< INT32_MAX minus the lowest request index that raised one; 0: none
};

/// A head state with only what `plan_step` reads: a cursor, a phase and the ring's length.
template <class Policy, bool FoldsToken>
struct cursor_probe {
  using policy = Policy;
  static constexpr bool flush_folds_token = FoldsToken;
  const replay_cursor* cursor;
  int32_t phase;
  int32_t window_entries;
};

/// Head `h`'s cursor in slot `slot`: an empty window where the step keeps no cursors.
template <class Params>
REPLAYSSM_HOST_DEVICE replay_cursor head_cursor(const Params& p, int32_t slot, int32_t h) {
  return p.cursors != nullptr ? p.cursors[int64_t(slot) * p.heads + h] : replay_cursor{0, 0u, 0, 0};
}

/// The flush phase of slot `slot` under `Policy` (0 where it keeps none).
template <class Policy, class Params>
REPLAYSSM_HOST_DEVICE int32_t slot_phase(const Params& p, int32_t slot) {
  return !Policy::is_writeback && p.flush_phase != nullptr ? p.flush_phase[slot] : 0;
}

/// The plan of a head of request `b` whose cursor is `cursor` (`head_cursor`) in a slot of
/// phase `phase` (`slot_phase`) for a step of `Kind`: the cursor, phase and token count
/// against what a step could have left (the planner the step itself runs), and whether it
/// flushes.
template <class Policy, step_kind Kind, class Params>
REPLAYSSM_HOST_DEVICE step_plan head_plan(const Params& p, int32_t b, const replay_cursor& cursor, int32_t phase) {
  using probe_t = cursor_probe<Policy, Params::template flush_folds_token<Policy>>;
  const probe_t probe{&cursor, phase, p.template ring_entries<Policy>()};
  const int32_t tokens = Kind == step_kind::decode ? 1 : request_tokens(p, b);
  step_plan plan = plan_step<Kind>(probe, tokens);
  if (tokens > p.tokens) plan.error |= error_tokens_out_of_range;  // more than the step's rows hold
  return plan;
}

/// The plan of head `h` of request `b` in slot `slot` (`head_plan` of its `head_cursor`).
template <class Policy, step_kind Kind, class Params>
REPLAYSSM_HOST_DEVICE step_plan head_plan(const Params& p, int32_t b, int32_t slot, int32_t h) {
  return head_plan<Policy, Kind>(p, b, head_cursor(p, slot, h), slot_phase<Policy>(p, slot));
}

/// step_error bits of head `h` of request `b` (`head_plan`).
template <class Policy, step_kind Kind, class Params>
REPLAYSSM_HOST_DEVICE uint32_t head_errors(const Params& p, int32_t b, int32_t slot, int32_t h) {
  return head_plan<Policy, Kind>(p, b, slot, h).error;
}

/// Slots or cursors a request's checks load at once (`visit_loaded`): a memory latency per so
/// many of a thread's share on the device, not one per load.
inline constexpr int32_t loads_at_once = 4;

/// Visits a thread's share of `count` items (first, first + stride, ...) `loads_at_once` at a
/// time: `load(i)` of each of them first (of item `fallback`, which must be loadable, in place
/// of those past the end), then `use(i, loaded)` of each in turn until one returns false.
/// Returns whether every `use` returned true.
template <class Load, class Use>
REPLAYSSM_HOST_DEVICE bool visit_loaded(int32_t first, int32_t stride, int32_t count, int32_t fallback, Load&& load,
                                        Use&& use) {
  REPLAYSSM_ROLLED
  for (int32_t i = first; i < count; i += loads_at_once * stride) {
    decltype(load(i)) loaded[loads_at_once];
    REPLAYSSM_UNROLL
    for (int32_t k = 0; k < loads_at_once; ++k) loaded[k] = load(i + k * stride < count ? i + k * stride : fallback);
    REPLAYSSM_UNROLL
    for (int32_t k = 0; k < loads_at_once; ++k) {
      if (i + k * stride >= count) break;
      if (!use(i + k * stride, loaded[k])) return false;
    }
  }
  return true;
}

/// step_error bits of request `b`'s slot: outside [0, num_slots), or shared with another
/// request of the step (among the requests first, first + stride, ...: a lane's share of
/// them; all by default). Step_ok for padding.
template <class Params>
REPLAYSSM_HOST_DEVICE uint32_t slot_errors(const Params& p, int32_t b, int32_t first = 0, int32_t stride = 1) {
  const int32_t slot = request_slot(p, b);
  if (slot == p.pad_slot_id) return step_ok;
  if (slot < 0 || slot >= p.num_slots) return error_slot_out_of_range;
  const bool unshared = visit_loaded(
      first, stride, p.batch, b, [&](int32_t other) { return request_slot(p, other); },
      [&](int32_t other, int32_t other_slot) { return other == b || other_slot != slot; });
  return unshared ? step_ok : error_duplicate_slot;
}

/// How a request takes a decode step: not at all, a read step on every head, or a flush on
/// every head.
enum class request_plan : int32_t { skip = 0, read = 1, flush = 2 };

/// What the checks of a request gather over a share of the other requests and of its heads:
/// error bits, and whether some checked head flushes and some reads.
struct request_share {
  uint32_t errors;
  bool flushes, reads;
};

/// The checks of request `b` for a step of `Kind` over the other requests and the heads
/// first, first + stride, ... (a lane's share on the device; the CPU takes them all): its
/// `slot_errors` and its heads' `head_plan`s.
template <class Policy, step_kind Kind, class Params>
REPLAYSSM_HOST_DEVICE request_share check_request_share(const Params& p, int32_t b, int32_t first, int32_t stride) {
  const int32_t slot = request_slot(p, b);
  request_share r{slot_errors(p, b, first, stride), false, false};
  if (slot == p.pad_slot_id || (r.errors & error_slot_out_of_range)) return r;
  const int32_t phase = slot_phase<Policy>(p, slot);
  visit_loaded(
      first, stride, p.heads, 0, [&](int32_t h) { return head_cursor(p, slot, h); },
      [&](int32_t, const replay_cursor& cursor) {
        const step_plan plan = head_plan<Policy, Kind>(p, b, cursor, phase);
        r.errors |= plan.error;
        r.flushes |= plan.error == step_ok && plan.writes_checkpoint;
        r.reads |= plan.error == step_ok && !plan.writes_checkpoint;
        return true;
      });
  return r;
}

/// What a step of `Kind` finds for request `b` of `p`: its error bits (its slot, any of its
/// heads, or heads of one slot that would not all flush together, a state no step leaves)
/// and whether its heads flush. Step_ok for padding.
struct request_check {
  uint32_t errors;
  bool flushes;
  /// The check of a request from the union of its shares.
  REPLAYSSM_HOST_DEVICE static request_check of(const request_share& all) {
    return {all.errors | (all.flushes && all.reads ? uint32_t(error_cursor_out_of_range) : uint32_t(step_ok)),
            all.flushes};
  }
};
template <class Policy, step_kind Kind, class Params>
REPLAYSSM_HOST_DEVICE request_check check_request(const Params& p, int32_t b) {
  return request_check::of(check_request_share<Policy, Kind>(p, b, 0, 1));
}

/// step_error bits of request `b` of `p` for a step of `Kind` (`check_request`).
template <class Policy, step_kind Kind, class Params>
REPLAYSSM_HOST_DEVICE uint32_t request_errors(const Params& p, int32_t b) {
  return check_request<Policy, Kind>(p, b).errors;
}

namespace detail {

/// Every request's token count lies in [1, tokens] (host memory).
template <class Params>
status check_token_counts(const Params& p, const char* who) {
  for (int32_t b = 0; p.token_counts != nullptr && b < p.batch; ++b) {
    if (p.token_counts[b] < 1 || p.token_counts[b] > p.tokens)
      return status::error(std::string(who) + ": token_counts[" + std::to_string(b) +
                           "]=" + std::to_string(p.token_counts[b]) +
                           " is outside [1, tokens=" + std::to_string(p.tokens) + "]");
  }
  return {};
}

/// Every request accepts between 0 and the drafts it verified (host memory).
template <class Params>
status check_accepted_counts(const Params& p, const char* who) {
  for (int32_t b = 0; b < p.batch; ++b) {
    const int32_t verified = request_tokens(p, b);
    if (p.accepted_counts[b] < 0 || p.accepted_counts[b] > verified)
      return status::error(std::string(who) + ": accepted_counts[" + std::to_string(b) +
                           "]=" + std::to_string(p.accepted_counts[b]) + " is outside [0, " + std::to_string(verified) +
                           "], the drafts request " + std::to_string(b) + " verified");
  }
  return {};
}

}  // namespace detail
}  // namespace replayssm
