// SPDX-License-Identifier: Apache-2.0
/// \file buffers.hpp
/// Memory per buffer and per request of a Gated DeltaNet layer, snapshot memory of
/// the conventional speculative baseline, and modelled bytes moved per decode step.
#pragma once

#include <cstddef>
#include <cstdint>

#include "replayssm/gated_deltanet/recurrence.hpp"
#include "replayssm/numeric/activation.hpp"
#include "replayssm/policy/traffic.hpp"
#include "replayssm/replay/cursor.hpp"
#include "replayssm/replay/state_pools.hpp"

namespace replayssm {

/// Bytes of every buffer a Gated DeltaNet layer's step uses, for `num_slots` slots.
struct gdn_buffer_sizes : state_pool_sizes {
  size_t window_u = 0, window_k = 0, window_g = 0, window_v = 0, window_beta = 0;
  size_t cursors = 0;
  constexpr size_t window_total() const { return window_u + window_k + window_g + window_v + window_beta + cursors; }
  constexpr size_t total() const { return checkpoint_total() + read_copy_total() + window_total(); }
};

/// Buffer sizes for `Policy`, in its window mode (num_slots = 1: bytes per request per
/// layer), for verify steps of up to `draft_tokens` drafts as in `mamba2_buffers`.
template <class Policy>
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
    if (keeps_raw_inputs<Policy>) {
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
/// the steps from one flush to the next (`gdn_flush_period`, after the first window; all
/// requests in phase 0), in the terms of `mamba2_bytes_per_step`: the policy's state traffic,
/// the step's activations, and the window's traffic.
///
/// A window entry holds u per value head, k per key head (counted once: the value heads that
/// share a key head read it from L2 after the first) and g per value head; `raw_inputs` adds
/// v (activation dtype) and beta per value head. Over the P = W - 1 steps of a period every
/// token appends an entry; the P - 1 read steps read the L = 1 .. W-2 entries before their
/// token (u, k, g, and beta in `raw_inputs`); the flush step folds the W - 1 committed
/// entries (k, g, and u, or in `raw_inputs` v and beta) and its token opens the next window.
template <class Policy>
double gdn_bytes_per_step(gdn_layer_shape s, int64_t batch, dtype act) {
  const state_traffic t = state_traffic_per_step<Policy, gdn_flush_period<Policy>>();
  const double state = t.total() * double(s.state_elements());
  const double a = dtype_size(act);
  const double hv = s.value_heads, keys = double(s.key_heads) * s.key_dim, values = hv * s.value_dim;
  // q and k per key head; v, o, a and b per value head.
  const double io = a * (2.0 * keys + 2.0 * values + 2.0 * hv);
  double window = 0.0;
  if constexpr (!Policy::is_writeback) {
    constexpr bool raw = keeps_raw_inputs<Policy>;
    const double w = Policy::window, period = gdn_flush_period<Policy>;
    const double u = 4.0 * values, k = 4.0 * keys, g = 4.0 * hv;
    const double v = raw ? a * values : 0.0, beta = raw ? 4.0 * hv : 0.0;
    const double appended = period * (u + k + g + v + beta);
    const double read_steps = (w - 1) * (w - 2) / 2 * (u + k + g + beta);
    const double flush = (w - 1) * (k + g + (raw ? v + beta : u));
    window = (appended + read_steps + flush) / period;
  }
  return double(batch) * (state + io + window);
}

}  // namespace replayssm
