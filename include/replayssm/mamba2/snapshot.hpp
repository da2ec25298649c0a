// SPDX-License-Identifier: Apache-2.0
/// \file snapshot.hpp
/// The conventional speculative-decoding baseline, as engines run it today: every
/// draft's state is written to a snapshot slot of its own, and a commit makes the snapshot of
/// the last accepted draft the request's state (a slot swap, no copy). It is what replay's
/// verify + commit is measured against; it is the write-back step applied draft by draft.
#pragma once

#include <cstdint>
#include <string>

#include "replayssm/config.hpp"
#include "replayssm/mamba2/head_step.hpp"
#include "replayssm/mamba2/params.hpp"
#include "replayssm/mamba2/validate.hpp"
#include "replayssm/runtime/commit.hpp"
#include "replayssm/runtime/requests.hpp"
#include "replayssm/runtime/status.hpp"
#include "replayssm/runtime/validate.hpp"

namespace replayssm {

/// Token `t` of `in` as a one-token step.
template <class Act>
REPLAYSSM_HOST_DEVICE mamba2_head_inputs<Act> single_token(mamba2_head_inputs<Act> in, int32_t t) {
  in.x.data = in.x.at(t);
  if (in.z.data != nullptr) in.z.data = in.z.at(t);
  in.y.data = in.y.at(t);
  in.B.data = in.B.at(t);
  in.C.data = in.C.at(t);
  in.dt.data = in.dt.at(t);
  in.tokens = 1;
  return in;
}

/// The snapshot verify step of request `b`, head `h` (state in `slot`): draft t reads the
/// state of draft t-1 (the slot's for t = 0) and writes its own to p.snapshot_slots[b][t].
template <class StateFormat, class Act, class Exec>
REPLAYSSM_HOST_DEVICE uint32_t mamba2_snapshot_head_step(const Exec& ex, const mamba2_params<Act>& p, int32_t b,
                                                         int32_t h, int32_t slot, float* scratch) {
  using Policy = writeback_policy<StateFormat>;
  if (slot < 0 || slot >= p.num_slots) return error_slot_out_of_range;
  const mamba2_head_views<Policy, Act> v(p, b, h, slot);
  if (v.in.tokens < 1 || v.in.tokens > p.tokens) return error_tokens_out_of_range;
  const int64_t elements = int64_t(p.head_dim) * p.state_dim;
  mamba2_head_state<Policy, Act> st = v.state;
  st.cursor = nullptr;
  for (int32_t t = 0; t < v.in.tokens; ++t) {
    const int32_t snapshot = p.snapshot_slots[int64_t(b) * p.tokens + t];
    if (snapshot < 0 || snapshot >= p.num_slots) return error_slot_out_of_range;
    st.checkpoint_source = st.checkpoint;
    st.checkpoint = state_head_view<StateFormat>::in_pool(p.checkpoint, p.checkpoint_scales,
                                                          int64_t(snapshot) * p.heads + h, elements);
    mamba2_head_step(ex, single_token(v.in, t), st, p.shape(), scratch);
    ex.sync();  // the next draft reads this one's state and reuses the scratch
  }
  return step_ok;
}

/// Validates `p` for the snapshot verify step (`p.tokens` drafts per request, slots in
/// `p.snapshot_slots`). With `host_memory` every slot and token count is checked too.
template <class StateFormat, class Act>
[[nodiscard]] status validate_snapshot(const mamba2_params<Act>& p, bool host_memory) {
  mamba2_params<Act> one = p;  // every other check is the write-back step's
  one.tokens = 1;
  one.token_counts = nullptr;
  if (status s = validate_mamba2<writeback_policy<StateFormat>>(one, host_memory); !s) return s;
  return detail::check_snapshot_slots(p, host_memory);
}

/// The checks of a step's params (`step_checks`).
template <class Act>
struct step_checks<mamba2_params<Act>> {
  template <class Policy>
  static status step(const mamba2_params<Act>& p, bool host_memory, step_kind kind) {
    return validate_mamba2<Policy>(p, host_memory, kind);
  }
  template <class StateFormat>
  static status snapshot(const mamba2_params<Act>& p, bool host_memory) {
    return validate_snapshot<StateFormat>(p, host_memory);
  }
};

}  // namespace replayssm
