// SPDX-License-Identifier: Apache-2.0
/// \file step_params.hpp
/// The fields every recurrence's step params share: the batch and its tokens, the state
/// slots and pools, the window's bookkeeping, speculative decoding and the device report.
/// Each recurrence's params (`mamba2_params`, `gdn_params`) derive from it and add their
/// shape, activations, weights and window buffers; the runtime's helpers (requests,
/// validation, commits, launches) read only these fields, so they serve every recurrence.
#pragma once

#include <cstdint>

#include "replayssm/config.hpp"
#include "replayssm/replay/cursor.hpp"
#include "replayssm/runtime/requests.hpp"

namespace replayssm {

/// The step params' shared fields (see the file comment).
struct step_params {
  int32_t batch = 0;  ///< requests of the step
  int32_t heads = 0;  ///< state heads per slot (Mamba-2's heads, Gated DeltaNet's value heads)

  // Tokens per request: 1 for a decode step; a verify step's drafts, at most
  // max_draft_tokens and the window. Every activation's batch stride is its token stride:
  // request b's token t is row b * tokens + t.
  int32_t tokens = 1;
  const int32_t* token_counts = nullptr;  ///< [batch] drafts of each request in [1, tokens]; optional (all `tokens`)

  // State slots: request b uses slot slot_indices[b] (b when null); pad_slot_id skips it.
  const int32_t* slot_indices = nullptr;
  int32_t pad_slot_id = -1;
  int32_t num_slots = 0;

  // Recurrent state, `[num_slots][heads]` heads in the policy's formats (replay/state_view.hpp).
  void* checkpoint = nullptr;  ///< checkpoint pool (the state itself for write-back)
  void* checkpoint_scales = nullptr;
  void* read_copy = nullptr;  ///< separate read copy pool; unused in shared mode
  void* read_copy_scales = nullptr;

  // Window bookkeeping (replay only).
  int32_t window_entries = 0;            ///< ring entries of the window buffers per slot; 0: the policy's window
  replay_cursor* cursors = nullptr;      ///< [num_slots][heads]; optional for nearest-even write-back
  const int32_t* flush_phase = nullptr;  ///< [num_slots] first-window shortening, optional
  uint64_t seed = 0;                     ///< stochastic-rounding seed

  // Speculative decoding.
  const int32_t* accepted_counts = nullptr;  ///< [batch] drafts each request keeps (commit_drafts)
  const int32_t* snapshot_slots = nullptr;   ///< [batch][tokens] the snapshot baseline's draft slots

  /// Where the device steps report bad slot indices, cursors and phases, which live on the
  /// device (device memory, zeroed once; required by the CUDA launchers): the lowest bad
  /// request and the error bits of all. A request found bad is skipped on every head
  /// (`cuda::take_step_errors` reads and clears the report).
  step_report* report = nullptr;

  /// `[batch]` device scratch where the CUDA steps plan each request (read, flush or skip)
  /// from its slot and cursors before they step any head: device memory, required by the
  /// CUDA step launchers, contents undefined between steps.
  request_plan* request_plans = nullptr;

  /// Ring entries the window buffers hold (`window_entries`, or the policy's window).
  template <class Policy>
  REPLAYSSM_HOST_DEVICE int32_t ring_entries() const {
    return window_entries > 0 ? window_entries : Policy::window;
  }
};

}  // namespace replayssm
