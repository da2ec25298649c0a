// SPDX-License-Identifier: Apache-2.0
/// \file memory.hpp
/// Layer 7: memory per buffer and per request, and modelled bytes moved per decode step.
#pragma once

#include <cstddef>
#include <cstdint>

#include "replayssm/numeric/activation.hpp"
#include "replayssm/policy/traffic.hpp"
#include "replayssm/recurrence/gated_deltanet.hpp"
#include "replayssm/recurrence/mamba2.hpp"
#include "replayssm/replay/gdn_head_step.hpp"
#include "replayssm/replay/mamba2_head_step.hpp"
#include "replayssm/replay/state_view.hpp"

namespace replayssm {

/// Bytes of a layer's state pools, for any recurrence: checkpoint and separate read copy.
struct state_pool_sizes {
  size_t checkpoint = 0, checkpoint_scales = 0;
  size_t read_copy = 0, read_copy_scales = 0;
  /// Recurrent checkpoint, data and scales.
  constexpr size_t checkpoint_total() const { return checkpoint + checkpoint_scales; }
  /// Separate read copy, data and scales (0 in shared mode).
  constexpr size_t read_copy_total() const { return read_copy + read_copy_scales; }
};

/// The state pools of `elements` state values under `Policy`.
template <class Policy>
constexpr state_pool_sizes state_pools(size_t elements) {
  state_pool_sizes b;
  b.checkpoint = state_data_bytes<typename Policy::checkpoint_format>(elements);
  b.checkpoint_scales = state_scale_bytes<typename Policy::checkpoint_format>(elements);
  if (!Policy::shared_state) {
    b.read_copy = state_data_bytes<typename Policy::read_format>(elements);
    b.read_copy_scales = state_scale_bytes<typename Policy::read_format>(elements);
  }
  return b;
}

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

/// Bytes of every buffer a Gated DeltaNet layer's step uses, for `num_slots` slots.
struct gdn_buffer_sizes : state_pool_sizes {
  size_t window_u = 0, window_k = 0, window_g = 0, window_v = 0, window_beta = 0;
  size_t cursors = 0;
  constexpr size_t window_total() const { return window_u + window_k + window_g + window_v + window_beta + cursors; }
  constexpr size_t total() const { return checkpoint_total() + read_copy_total() + window_total(); }
};

/// Buffer sizes for `Policy` and window mode `Mode` (num_slots = 1: bytes per request per
/// layer), for verify steps of up to `draft_tokens` drafts as in `mamba2_buffers`.
template <class Policy, gdn_window Mode = gdn_window::corrected_values>
constexpr gdn_buffer_sizes gdn_buffers(gdn_layer_shape s, int64_t num_slots, dtype act, int32_t draft_tokens = 0) {
  const size_t elements = size_t(s.state_elements()) * size_t(num_slots);
  gdn_buffer_sizes b;
  static_cast<state_pool_sizes&>(b) = state_pools<Policy>(elements);
  if (!Policy::is_writeback) {
    const size_t entries = size_t(num_slots) * size_t(Policy::window + draft_tokens);
    const size_t values = entries * s.value_heads * s.value_dim;
    b.window_u = values * sizeof(float);
    b.window_k = entries * s.key_heads * s.key_dim * sizeof(float);
    b.window_g = entries * s.value_heads * sizeof(float);
    if (Mode == gdn_window::raw_inputs) {
      b.window_v = values * dtype_size(act);
      b.window_beta = b.window_g;
    }
  }
  b.cursors = size_t(num_slots) * s.value_heads * sizeof(replay_cursor);
  return b;
}

/// Snapshot memory of the conventional speculative decoding of a Gated DeltaNet layer, as
/// `mamba2_snapshot_bytes`.
template <class StateFormat>
constexpr size_t gdn_snapshot_bytes(gdn_layer_shape s, int64_t batch, int32_t draft_tokens) {
  const size_t elements = size_t(s.state_elements()) * size_t(batch) * size_t(draft_tokens);
  return state_data_bytes<StateFormat>(elements) + state_scale_bytes<StateFormat>(elements);
}

/// Modelled device-memory bytes of one Gated DeltaNet decode step for a batch, averaged over
/// a window (all requests in phase 0), in the terms of `mamba2_bytes_per_step`: the policy's
/// state traffic, the step's activations, and the window's traffic.
///
/// A window entry holds u per value head, k per key head (counted once: the value heads that
/// share a key head read it from L2 after the first) and g per value head; `raw_inputs` adds
/// v (activation dtype) and beta per value head. Over the W steps of a window the W - 1 read
/// steps each append an entry and read the L = 0 .. W-2 entries before it (u, k, g, and beta
/// in `raw_inputs`); the flush step folds the W - 1 entries (k, g, and u, or in `raw_inputs`
/// v and beta) with its own token and appends nothing.
template <class Policy, gdn_window Mode = gdn_window::corrected_values>
double gdn_bytes_per_step(gdn_layer_shape s, int64_t batch, dtype act) {
  const state_traffic t = state_traffic_per_step<Policy>();
  const double state = t.total() * double(s.state_elements());
  const double a = dtype_size(act);
  const double hv = s.value_heads, keys = double(s.key_heads) * s.key_dim, values = hv * s.value_dim;
  // q and k per key head; v, o, a and b per value head.
  const double io = a * (2.0 * keys + 2.0 * values + 2.0 * hv);
  double window = 0.0;
  if constexpr (!Policy::is_writeback) {
    constexpr bool raw = Mode == gdn_window::raw_inputs;
    const double w = Policy::window;
    const double u = 4.0 * values, k = 4.0 * keys, g = 4.0 * hv;
    const double v = raw ? a * values : 0.0, beta = raw ? 4.0 * hv : 0.0;
    const double appended = (w - 1) * (u + k + g + v + beta);
    const double read_steps = (w - 1) * (w - 2) / 2 * (u + k + g + beta);
    const double flush = (w - 1) * (k + g + (raw ? v + beta : u));
    window = (appended + read_steps + flush) / w;
  }
  return double(batch) * (state + io + window);
}


}  // namespace replayssm
