// SPDX-License-Identifier: Apache-2.0
/// \file commit.hpp
/// Committing the accepted prefix of a verify step's drafts, for any recurrence's
/// params (they share the fields used here). A commit moves each (slot, head)'s committed
/// length on the device; it reads and writes nothing but the cursors.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "replayssm/config.hpp"
#include "replayssm/replay/cursor.hpp"
#include "replayssm/runtime/requests.hpp"
#include "replayssm/runtime/status.hpp"
#include "replayssm/runtime/validate.hpp"

namespace replayssm {

/// Why request `b` of `p`, on slot `slot` (not padding), cannot commit `p.accepted_counts[b]`
/// drafts at heads `first`, `first + stride`, ... (step_error bits; step_ok when it can).
template <class Params>
REPLAYSSM_HOST_DEVICE uint32_t commit_heads_errors(const Params& p, int32_t b, int32_t slot, int32_t first,
                                                   int32_t stride) {
  const int32_t accepted = p.accepted_counts[b];
  uint32_t errors = step_ok;
  for (int32_t h = first; h < p.heads; h += stride)
    errors |= accept_error(p.cursors[int64_t(slot) * p.heads + h], accepted);
  return errors;
}

/// Commits `p.accepted_counts[b]` drafts of request `b` on slot `slot` at heads `first`,
/// `first + stride`, ... (`commit_heads_errors` found none at any head of the request).
template <class Params>
REPLAYSSM_HOST_DEVICE void commit_heads(const Params& p, int32_t b, int32_t slot, int32_t first, int32_t stride) {
  const int32_t accepted = p.accepted_counts[b];
  for (int32_t h = first; h < p.heads; h += stride) accept_drafts(p.cursors[int64_t(slot) * p.heads + h], accepted);
}

/// Why request `b` of `p` cannot commit `p.accepted_counts[b]` drafts at every head (step_error
/// bits; step_ok when it can, or when it is padding).
template <class Params>
REPLAYSSM_HOST_DEVICE uint32_t commit_request_errors(const Params& p, int32_t b) {
  const int32_t slot = request_slot(p, b);
  if (const uint32_t errors = slot_errors(p, b); errors != step_ok || slot == p.pad_slot_id) return errors;
  return commit_heads_errors(p, b, slot, 0, 1);
}

/// Commits `p.accepted_counts[b]` drafts of request `b` at every head, or at none: returns
/// the reason when it cannot (`commit_request_errors`).
template <class Params>
REPLAYSSM_HOST_DEVICE uint32_t commit_request(const Params& p, int32_t b) {
  const int32_t slot = request_slot(p, b);
  if (const uint32_t errors = commit_request_errors(p, b); errors != step_ok || slot == p.pad_slot_id) return errors;
  commit_heads(p, b, slot, 0, 1);
  return step_ok;
}

/// Validates `p` for a commit. With `host_memory` the accepted counts are checked against
/// the verify step's token count; on the device the cursors' pending counts check them.
template <class Params>
[[nodiscard]] status validate_commit(const Params& p, bool host_memory) {
  if (p.batch < 0 || p.heads <= 0 || p.num_slots <= 0)
    return status::error("commit: batch, heads and num_slots must be valid (batch=" + std::to_string(p.batch) +
                         ", heads=" + std::to_string(p.heads) + ", num_slots=" + std::to_string(p.num_slots) + ")");
  if (p.cursors == nullptr) return status::error("commit: cursors are null");
  if (p.accepted_counts == nullptr) return status::error("commit: accepted_counts are null");
  if (status s = detail::check_slot_fields("commit", p); !s) return s;
  if (!host_memory) return detail::check_report("commit", p);
  if (status s = detail::check_token_counts(p, "commit"); !s) return s;
  if (status s = detail::check_accepted_counts(p, "commit"); !s) return s;
  return detail::check_request_slots("commit", p);
}

/// The commit of the conventional speculative baseline (mamba2/snapshot.hpp,
/// gated_deltanet/snapshot.hpp, which keep each draft's state in a snapshot slot of its own)
/// for request `b`: its slot becomes the snapshot slot of its last
/// accepted draft, and that snapshot slot takes the slot it held.
template <class Params>
REPLAYSSM_HOST_DEVICE uint32_t snapshot_commit_request(const Params& p, int32_t* slot_indices, int32_t* snapshot_slots,
                                                       int32_t b) {
  const int32_t accepted = p.accepted_counts[b], verified = request_tokens(p, b);
  if (verified < 1 || verified > p.tokens) return error_tokens_out_of_range;  // beyond [batch][tokens]
  if (accepted < 0 || accepted > verified) return error_accepted_out_of_range;
  if (accepted == 0 || slot_indices[b] == p.pad_slot_id) return step_ok;
  int32_t& snapshot = snapshot_slots[int64_t(b) * p.tokens + accepted - 1];
  const int32_t previous = slot_indices[b];
  slot_indices[b] = snapshot;
  snapshot = previous;
  return step_ok;
}

/// Validates the snapshot commit's arguments.
template <class Params>
[[nodiscard]] status validate_snapshot_commit(const Params& p, const int32_t* slot_indices,
                                              const int32_t* snapshot_slots, bool host_memory) {
  if (slot_indices == nullptr || snapshot_slots == nullptr || p.accepted_counts == nullptr)
    return status::error("snapshot commit: slot_indices, snapshot_slots and accepted_counts must be set");
  if (!host_memory) return detail::check_report("snapshot commit", p);
  if (status s = detail::check_token_counts(p, "snapshot commit"); !s) return s;
  return detail::check_accepted_counts(p, "snapshot commit");
}

namespace detail {

/// Checks the snapshot verify step's own fields: `p.tokens` drafts and their slots (with
/// `host_memory`, every slot and token count too).
template <class Params>
status check_snapshot_slots(const Params& p, bool host_memory) {
  if (p.tokens < 1 || p.tokens > max_draft_tokens)
    return status::error("snapshot: tokens=" + std::to_string(p.tokens) +
                         " is outside [1, max_draft_tokens=" + std::to_string(max_draft_tokens) + "]");
  if (p.snapshot_slots == nullptr) return status::error("snapshot: snapshot_slots are null");
  if (!host_memory) return {};
  if (status s = check_token_counts(p, "snapshot"); !s) return s;
  // Every draft writes a slot of its own: no two drafts, and no draft and a request, share one.
  std::vector<std::string> owner(size_t(p.num_slots));
  for (int32_t b = 0; b < p.batch; ++b)
    if (const int32_t slot = request_slot(p, b); slot >= 0 && slot < p.num_slots)
      owner[size_t(slot)] = "slot_indices[" + std::to_string(b) + "]";
  for (int32_t b = 0; b < p.batch; ++b) {
    if (request_slot(p, b) == p.pad_slot_id) continue;
    for (int32_t t = 0; t < request_tokens(p, b); ++t) {
      const int64_t i = int64_t(b) * p.tokens + t;
      const int32_t slot = p.snapshot_slots[i];
      const std::string at = "snapshot: snapshot_slots[" + std::to_string(i) + "]=" + std::to_string(slot);
      if (slot < 0 || slot >= p.num_slots)
        return status::error(at + " is outside [0, " + std::to_string(p.num_slots) + ")");
      if (!owner[size_t(slot)].empty())
        return status::error(at + " is also " + owner[size_t(slot)] + ": every draft needs a slot of its own");
      owner[size_t(slot)] = "snapshot_slots[" + std::to_string(i) + "]";
    }
  }
  return {};
}

}  // namespace detail

namespace cpu {

/// Commits the accepted drafts of every request of `p` (host memory), or of none.
template <class Params>
[[nodiscard]] status commit_drafts(const Params& p) {
  if (status s = validate_commit(p, /*host_memory=*/true); !s) return s;
  for (int32_t b = 0; b < p.batch; ++b) {
    if (const uint32_t errors = commit_request_errors(p, b); errors != step_ok)
      return status::error("commit: request " + std::to_string(b) + ": " + describe_step_errors(errors) +
                           "; nothing was committed");
  }
  for (int32_t b = 0; b < p.batch; ++b) commit_request(p, b);
  return {};
}

/// The conventional commit: request b's state slot becomes the snapshot of its last
/// accepted draft (`slot_indices` is updated; the slot it held becomes that snapshot slot).
template <class Params>
[[nodiscard]] status snapshot_commit(const Params& p, int32_t* slot_indices, int32_t* snapshot_slots) {
  if (status s = validate_snapshot_commit(p, slot_indices, snapshot_slots, /*host_memory=*/true); !s) return s;
  for (int32_t b = 0; b < p.batch; ++b) snapshot_commit_request(p, slot_indices, snapshot_slots, b);
  return {};
}

}  // namespace cpu
}  // namespace replayssm
