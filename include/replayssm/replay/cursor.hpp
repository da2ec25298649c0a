// SPDX-License-Identifier: Apache-2.0
/// \file cursor.hpp
/// The window bookkeeping every replayed recurrence shares: a (slot, head)'s cursor,
/// the error bits a step reports, and committing speculative drafts.
#pragma once

#include <cstdint>

#include "replayssm/config.hpp"

namespace replayssm {

/// Window bookkeeping of one (slot, head). The window is a ring of `window_entries` slots;
/// entry j of the window lies in ring slot (start + j) mod window_entries.
struct replay_cursor {
  int32_t length;        ///< committed entries in the window
  uint32_t flush_count;  ///< flushes so far (they key stochastic rounding)
  int32_t start;         ///< ring slot of entry 0
  int32_t pending;       ///< drafts of the last verify step, after the committed entries, not yet committed
};

/// Error bits a step reports instead of touching memory it must not touch.
enum step_error : uint32_t {
  step_ok = 0,
  error_slot_out_of_range = 1u << 0,      ///< a slot index outside [0, num_slots), not the pad id
  error_cursor_out_of_range = 1u << 1,    ///< a window cursor that no step could have left
  error_phase_out_of_range = 1u << 2,     ///< a flush phase outside [0, window)
  error_tokens_out_of_range = 1u << 3,    ///< a token count outside [1, max_draft_tokens] or the window
  error_accepted_out_of_range = 1u << 4,  ///< a commit of more drafts than were verified, or fewer than 0
  error_duplicate_slot = 1u << 5,         ///< two requests of one step named the same state slot
};

/// Most tokens one verify step takes per request.
inline constexpr int32_t max_draft_tokens = 8;

/// What a step does with its tokens.
enum class step_kind : uint8_t {
  decode,  ///< one token, committed at once; the flush folds it in when the window fills
  verify,  ///< speculative drafts, appended uncommitted; `commit_drafts` keeps a prefix
};

/// Whether a (slot, head) can keep `accepted` drafts of its last verify step.
REPLAYSSM_HOST_DEVICE uint32_t accept_error(const replay_cursor& cursor, int32_t accepted) {
  return accepted < 0 || accepted > cursor.pending ? error_accepted_out_of_range : step_ok;
}

/// Keeps the first `accepted` drafts of a (slot, head)'s last verify step (`accept_error`
/// must be step_ok): moves its committed length, leaving rejected drafts to be overwritten.
/// Nothing else is touched.
REPLAYSSM_HOST_DEVICE void accept_drafts(replay_cursor& cursor, int32_t accepted) {
  cursor.length += accepted;
  cursor.pending = 0;
}

}  // namespace replayssm
