// SPDX-License-Identifier: Apache-2.0
/// \file step_plan.hpp
/// What a replay step of one head does with its window, for every recurrence with
/// a scalar decay per step: which entries it sees, how many it folds into the checkpoint,
/// where its tokens go, and the cursor it leaves.
#pragma once

#include <cstdint>

#include "replayssm/config.hpp"
#include "replayssm/replay/cursor.hpp"

namespace replayssm {

/// Rows of one activation for consecutive tokens: token t's row starts at `at(t)`.
template <class T>
struct token_rows {
  T* data = nullptr;
  int64_t token_stride = 0;
  REPLAYSSM_HOST_DEVICE T* at(int32_t t) const { return data + t * token_stride; }
};

/// What a step does: which entries it sees, how many it folds into the checkpoint first, and
/// where its tokens go. Entries 0 .. length-1 are the window's committed entries, entries
/// length .. length+tokens-1 the step's tokens.
struct step_plan {
  int32_t length;          ///< committed window entries before the step (L)
  int32_t tokens;          ///< the step's tokens (T)
  int32_t folded;          ///< entries folded into the checkpoint first (F): 0, L, or L + T
  bool writes_checkpoint;  ///< the step flushes: the checkpoint (and read copy) is rewritten
  int32_t start;           ///< ring slot of entry 0
  int32_t ring;            ///< ring slots of the window buffers
  uint32_t flush_count;    ///< flushes done before this step
  uint32_t error;
  REPLAYSSM_HOST_DEVICE int32_t entries() const { return length + tokens; }
  /// Ring slot of entry j (j < entries()). The planner keeps start < ring and a step's
  /// entries within the ring, so one wrap is all there is (a remainder by a run-time ring
  /// size is some twenty instructions on the GPU, per entry).
  REPLAYSSM_HOST_DEVICE int32_t ring_slot(int32_t j) const {
    const int32_t slot = start + j;
    return ring <= 0 ? 0 : slot >= ring ? slot - ring : slot;
  }
};

/// Whether a decode step's flush folds its own token (`State::flush_folds_token`: Mamba-2,
/// and every write-back step) or folds the committed entries only, its token opening the next
/// window (Gated DeltaNet replay: the token's u is a dot product over a whole state row as it
/// stands before the token, so the flush streams the state once).
template <class State>
inline constexpr bool flush_folds_token = State::flush_folds_token;

/// Reads the cursor of a head state (any recurrence's: it has `cursor`, `phase`,
/// `window_entries`, `policy` and `flush_folds_token`) and decides the step. A decode step
/// flushes when its token fills the window (`flush_folds_token`: the token is folded in, or
/// opens the next window); a verify step flushes the committed entries first when the window
/// cannot hold its drafts after them.
template <step_kind Kind, class State>
REPLAYSSM_HOST_DEVICE step_plan plan_step(const State& st, int32_t tokens) {
  using Policy = typename State::policy;
  const replay_cursor c = st.cursor != nullptr ? *st.cursor : replay_cursor{0, 0u, 0, 0};
  constexpr bool one_token = Kind == step_kind::decode;
  // A decode step's token count is the constant 1: its loops over tokens then compile away
  // (with a run-time count the write-back kernel took 127 registers per thread, not 75).
  step_plan plan{c.length, one_token ? 1 : tokens, 0, false, c.start, st.window_entries, c.flush_count, step_ok};
  if (st.phase < 0 || st.phase >= Policy::window) return plan.error = error_phase_out_of_range, plan;
  if (tokens < 1 || tokens > max_draft_tokens || tokens > Policy::window || (one_token && tokens != 1))
    return plan.error = error_tokens_out_of_range, plan;
  const int32_t capacity = c.flush_count == 0 ? Policy::window - st.phase : Policy::window;
  // A write-back state keeps no window (its step's entries are its tokens): no step leaves
  // its cursor holding entries.
  const int32_t most = Policy::is_writeback ? 0 : capacity;
  if (c.length < 0 || c.length > most || c.start < 0 || c.start >= (st.window_entries > 0 ? st.window_entries : 1))
    return plan.error = error_cursor_out_of_range, plan;
  if constexpr (one_token) {
    plan.writes_checkpoint = c.length + 1 >= capacity;
    plan.folded = plan.writes_checkpoint ? c.length + (flush_folds_token<State> ? 1 : 0) : 0;
  } else {
    plan.writes_checkpoint = c.length + tokens > capacity;
    plan.folded = plan.writes_checkpoint ? c.length : 0;
    if (c.length + tokens > st.window_entries) return plan.error = error_tokens_out_of_range, plan;
  }
  return plan;
}

/// Whether the step's outputs come from the state its flush forms, before it is stored: a
/// decode step's flush, which folds its token in. A verify step that flushes its committed
/// entries first reads its drafts' outputs from the new state as stored (the read copy), as
/// the read steps after a decode step's flush do.
REPLAYSSM_HOST_DEVICE bool outputs_from_flush(const step_plan& plan) {
  return plan.writes_checkpoint && plan.folded == plan.entries();
}

/// Token t (entry L + t) sees entries F .. L + t: this many of them.
REPLAYSSM_HOST_DEVICE int32_t entries_seen(const step_plan& plan, int32_t t) {
  return plan.length + t + 1 - plan.folded;
}

/// The cursor after a step: committed entries, flushes, ring start and pending drafts. An
/// emptied window starts again at ring slot 0.
REPLAYSSM_HOST_DEVICE replay_cursor next_cursor(const step_plan& plan, step_kind kind) {
  const int32_t start = plan.writes_checkpoint && plan.ring > 0 ? (plan.start + plan.folded) % plan.ring : plan.start;
  const uint32_t flush_count = plan.flush_count + (plan.writes_checkpoint ? 1u : 0u);
  if (kind == step_kind::decode) {
    const int32_t length = plan.entries() - plan.folded;
    return replay_cursor{length, flush_count, length == 0 ? 0 : start, 0};
  }
  return replay_cursor{plan.length - plan.folded, flush_count, start, plan.tokens};
}

}  // namespace replayssm
