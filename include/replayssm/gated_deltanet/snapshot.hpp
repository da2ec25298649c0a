// SPDX-License-Identifier: Apache-2.0
/// \file snapshot.hpp
/// The conventional speculative-decoding baseline for Gated DeltaNet, as engines run
/// it today: one pass reads a value head's state once, steps it through every draft in
/// registers, and writes each draft's state to a snapshot slot of its own; the commit
/// (`snapshot_commit`, runtime/commit.hpp) makes the last accepted draft's snapshot the request's state.
#pragma once

#include <cstdint>

#include "replayssm/config.hpp"
#include "replayssm/gated_deltanet/head_step.hpp"
#include "replayssm/gated_deltanet/params.hpp"
#include "replayssm/gated_deltanet/validate.hpp"
#include "replayssm/runtime/commit.hpp"
#include "replayssm/runtime/validate.hpp"

namespace replayssm {

/// The snapshot verify step of request `b`, value head `h` (state in `slot`): draft t's
/// state goes to p.snapshot_slots[b][t], its output to o.
template <class StateFormat, class Act, class Exec>
REPLAYSSM_HOST_DEVICE uint32_t gdn_snapshot_head_step(const Exec& ex, const gdn_params<Act>& p, int32_t b, int32_t h,
                                                      int32_t slot, float* scratch) {
  using Policy = writeback_policy<StateFormat>;
  if (slot < 0 || slot >= p.num_slots) return error_slot_out_of_range;
  const gdn_head_views<Policy, Act> v(p, b, h, slot);
  const int32_t T = v.in.tokens;
  if (T < 1 || T > p.tokens) return error_tokens_out_of_range;
  for (int32_t t = 0; t < T; ++t) {
    const int32_t snapshot = p.snapshot_slots[int64_t(b) * p.tokens + t];
    if (snapshot < 0 || snapshot >= p.num_slots) return error_slot_out_of_range;
  }
  const gdn_layer_shape shape = p.shape();
  const step_plan plan{0, T, T, true, 0, 0, 0u, step_ok};
  const auto l = gdn_scratch_layout::make(shape, 0, T);
  stage_gdn_entries(ex, v.in, v.state, shape, plan, l, scratch);
  const int32_t V = shape.value_dim, K = shape.key_dim;
  const int64_t elements = int64_t(V) * K;
  ex.for_each_row(V, [&](int row, int lane) {
    detail::gdn_row_part<Exec::row_lanes> s;
    s.load(v.state.checkpoint, row, V, K, lane);
    for (int32_t t = 0; t < T; ++t) {
      detail::fold_row(ex, s, scratch + l.keys + t * K, K, lane, scratch[l.decay + t], scratch[l.beta + t],
                       to_float(v.in.v.at(t)[row]));
      const float o = detail::row_dot(ex, s, scratch + l.queries + t * K, K, lane);
      if (lane == 0) v.in.o.at(t)[row] = from_float<Act>(o);
      const int32_t snapshot = p.snapshot_slots[int64_t(b) * p.tokens + t];
      const auto target = state_head_view<StateFormat>::in_pool(p.checkpoint, p.checkpoint_scales,
                                                                int64_t(snapshot) * p.heads + h, elements);
      s.template store<round_nearest_even>(target, row, V, K, lane, v.state.key);
    }
  });
  return step_ok;
}

/// Validates `p` for the snapshot verify step (`p.tokens` drafts per request, slots in
/// `p.snapshot_slots`). With `host_memory` every slot and token count is checked too.
template <class StateFormat, class Act>
[[nodiscard]] status validate_snapshot(const gdn_params<Act>& p, bool host_memory) {
  gdn_params<Act> one = p;  // every other check is the write-back step's
  one.tokens = 1;
  one.token_counts = nullptr;
  if (status s = validate_gdn<writeback_policy<StateFormat>>(one, host_memory); !s) return s;
  return detail::check_snapshot_slots(p, host_memory);
}

/// The checks of a step's params (`step_checks`).
template <class Act>
struct step_checks<gdn_params<Act>> {
  template <class Policy>
  static status step(const gdn_params<Act>& p, bool host_memory, step_kind kind) {
    return validate_gdn<Policy>(p, host_memory, kind);
  }
  template <class StateFormat>
  static status snapshot(const gdn_params<Act>& p, bool host_memory) {
    return validate_snapshot<StateFormat>(p, host_memory);
  }
};

}  // namespace replayssm
