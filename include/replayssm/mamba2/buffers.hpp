// SPDX-License-Identifier: Apache-2.0
/// \file buffers.hpp
/// Memory per buffer and per request of a Mamba-2 layer, snapshot memory of the
/// conventional speculative baseline, and modelled bytes moved per decode step.
#pragma once

#include <cstddef>
#include <cstdint>

#include "replayssm/mamba2/recurrence.hpp"
#include "replayssm/numeric/activation.hpp"
#include "replayssm/policy/traffic.hpp"
#include "replayssm/replay/cursor.hpp"
#include "replayssm/replay/state_pools.hpp"

namespace replayssm {

/// Bytes of every buffer a Mamba-2 layer's decode step uses, for `num_slots` slots.
struct mamba2_buffer_sizes : state_pool_sizes {
  size_t window_x = 0, window_B = 0, window_dt = 0;
  size_t cursors = 0;
  /// Window entries and cursors.
  constexpr size_t window_total() const { return window_x + window_B + window_dt + cursors; }
  constexpr size_t total() const { return checkpoint_total() + read_copy_total() + window_total(); }
};

/// Buffer sizes for `Policy` (call with num_slots = 1 for bytes per request per layer). For
/// speculative verify steps of up to `draft_tokens` drafts the window ring holds that many
/// entries more than the window (`mamba2_params::window_entries`); a write-back policy has
/// no window, and `draft_tokens` changes nothing for it.
template <class Policy>
constexpr mamba2_buffer_sizes mamba2_buffers(mamba2_layer_shape s, int64_t num_slots, dtype act,
                                             int32_t draft_tokens = 0) {
  const size_t elements = size_t(s.state_elements()) * size_t(num_slots);
  mamba2_buffer_sizes b;
  static_cast<state_pool_sizes&>(b) = state_pools<Policy>(elements);
  if (!Policy::is_writeback) {
    const size_t entries = size_t(num_slots) * size_t(Policy::window + draft_tokens);
    b.window_x = entries * s.heads * s.head_dim * dtype_size(act);
    b.window_B = entries * s.groups * s.state_dim * dtype_size(act);
    b.window_dt = entries * s.heads * sizeof(float);
  }
  b.cursors = size_t(num_slots) * s.heads * sizeof(replay_cursor);
  return b;
}

/// Snapshot memory of the conventional speculative decoding, per layer: `batch` requests
/// verifying `draft_tokens` drafts keep one state snapshot per draft beside their state.
/// Replay keeps none; its drafts wait in the window (`mamba2_buffers` with draft_tokens).
template <class StateFormat>
constexpr size_t mamba2_snapshot_bytes(mamba2_layer_shape s, int64_t batch, int32_t draft_tokens) {
  const size_t elements = size_t(s.state_elements()) * size_t(batch) * size_t(draft_tokens);
  return state_data_bytes<StateFormat>(elements) + state_scale_bytes<StateFormat>(elements);
}

/// Modelled device-memory bytes of one decode step for a batch, averaged over a window:
/// state traffic from the policy's model plus the step's activations and window traffic.
template <class Policy>
constexpr double mamba2_bytes_per_step(mamba2_layer_shape s, int64_t batch, dtype act) {
  const state_traffic t = state_traffic_per_step<Policy>();
  const double state = t.total() * double(s.state_elements());
  const double a = dtype_size(act);
  // x, z, y and dt per head; B and C per group.
  const double io = a * (3.0 * s.heads * s.head_dim + s.heads + 2.0 * s.groups * s.state_dim);
  double window = 0.0;
  if (!Policy::is_writeback) {
    // Each step appends one entry and a read step reads the ones before it: on average
    // (W - 1) / 2 entries of x per head and B per group, plus dt.
    const double entry = a * (double(s.heads) * s.head_dim + double(s.groups) * s.state_dim) + 4.0 * s.heads;
    window = entry * (1.0 + (Policy::window - 1) / 2.0);
  }
  return double(batch) * (state + io + window);
}

}  // namespace replayssm
