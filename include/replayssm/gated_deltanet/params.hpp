// SPDX-License-Identifier: Apache-2.0
/// \file params.hpp
/// The arguments of the ready-made Gated DeltaNet steps, as one plain struct of
/// pointers and strides, and the views of one (request, value head) that the primitives take.
///
/// Activations are `[batch * tokens][rows][inner]` with the inner dimension contiguous and
/// the two outer strides in elements: request b's token t is at row b * tokens + t. State
/// pools are `[num_slots][value_heads]` heads of V x K values in the policy's formats, each
/// head's chunks in the order of `gdn_state_chunk` (gated_deltanet/head_step.hpp). Window
/// buffers, a ring of E = window_entries entries per slot:
///
///     window_u    [num_slots][E][value_heads][V]  float, the corrected values
///     window_k    [num_slots][E][key_heads][K]    float, the normalized keys
///     window_g    [num_slots][E][value_heads]     float, log decays
///     window_v    [num_slots][E][value_heads][V]  activation dtype (raw_inputs mode)
///     window_beta [num_slots][E][value_heads]     float (raw_inputs mode)
///     cursors     [num_slots][value_heads]        replay_cursor
#pragma once

#include <cstdint>

#include "replayssm/config.hpp"
#include "replayssm/gated_deltanet/head_step.hpp"
#include "replayssm/gated_deltanet/recurrence.hpp"
#include "replayssm/numeric/activation.hpp"
#include "replayssm/runtime/requests.hpp"
#include "replayssm/runtime/step_params.hpp"

namespace replayssm {

/// Arguments of one Gated DeltaNet step for a batch: a decode step (one token per request)
/// or a speculative verify step (up to `tokens` drafts per request), with activations of
/// element type `Act` (as in `mamba2_params`).
template <class Act>
struct gdn_params : step_params {
  static_assert(is_activation_v<Act>, "gdn_params: Act must be float, half_t, bfloat16_t, __half or __nv_bfloat16");
  using activation = Act;
  /// Whether a decode step's flush under `Policy` folds its token (`flush_folds_token`).
  template <class Policy>
  static constexpr bool flush_folds_token = gdn_flush_folds_token<Policy>;
  // Shape (and `heads`: HV, value heads, a multiple of key_heads). Tensor-parallel shards are
  // simply fewer heads.
  int32_t key_heads = 0;  ///< HK
  int32_t key_dim = 0;    ///< K, a multiple of 16 in [16, gdn_max_key_dim]
  int32_t value_dim = 0;  ///< V, in [1, 256]

  // Step inputs and output.
  const Act* q = nullptr;  ///< [batch * tokens][HK][K], before normalization
  int64_t q_batch_stride = 0, q_head_stride = 0;
  const Act* k = nullptr;  ///< [batch * tokens][HK][K], before normalization
  int64_t k_batch_stride = 0, k_head_stride = 0;
  const Act* v = nullptr;  ///< [batch * tokens][HV][V]
  int64_t v_batch_stride = 0, v_head_stride = 0;
  Act* o = nullptr;  ///< [batch * tokens][HV][V] output (before the output norm and gate)
  int64_t o_batch_stride = 0, o_head_stride = 0;
  const Act* a = nullptr;  ///< [batch * tokens][HV] raw decay projection
  int64_t a_batch_stride = 0, a_head_stride = 0;
  const Act* b = nullptr;  ///< [batch * tokens][HV] raw write-strength projection
  int64_t b_batch_stride = 0, b_head_stride = 0;

  // Per-head weights, float.
  const float* A_log = nullptr;    ///< [HV]
  const float* dt_bias = nullptr;  ///< [HV], optional (0)

  // Window buffers (replay only), rings of `window_entries` entries per slot.
  float* window_u = nullptr;
  float* window_k = nullptr;
  float* window_g = nullptr;
  Act* window_v = nullptr;       ///< raw_inputs mode only
  float* window_beta = nullptr;  ///< raw_inputs mode only

  /// The layer shape of the heads this step covers.
  REPLAYSSM_HOST_DEVICE gdn_layer_shape shape() const { return {heads, key_heads, key_dim, value_dim}; }
};

/// Params of a batch whose activations of type `Act` are all contiguous: shape, tokens per
/// request and strides set, every pointer still null.
template <class Act>
gdn_params<Act> contiguous_gdn_params(gdn_layer_shape s, int32_t batch, int32_t tokens = 1) {
  gdn_params<Act> p;
  p.batch = batch;
  p.tokens = tokens;
  p.heads = s.value_heads;
  p.key_heads = s.key_heads;
  p.key_dim = s.key_dim;
  p.value_dim = s.value_dim;
  p.q_batch_stride = p.k_batch_stride = int64_t(s.key_heads) * s.key_dim;
  p.q_head_stride = p.k_head_stride = s.key_dim;
  p.v_batch_stride = p.o_batch_stride = int64_t(s.value_heads) * s.value_dim;
  p.v_head_stride = p.o_head_stride = s.value_dim;
  p.a_batch_stride = p.b_batch_stride = s.value_heads;
  p.a_head_stride = p.b_head_stride = 1;
  return p;
}

/// Builds the views of request `b`, value head `h`, stored in slot `slot`.
template <class Policy, class Act>
struct gdn_head_views {
  gdn_head_inputs<Act> in;
  gdn_head_state<Policy, Act> state;

  REPLAYSSM_HOST_DEVICE gdn_head_views(const gdn_params<Act>& p, int32_t b, int32_t h, int32_t slot) {
    const int32_t kh = h / (p.heads / p.key_heads);
    const int64_t row = int64_t(b) * p.tokens;
    auto rows = [row](const Act* base, int64_t token_stride, int64_t offset) {
      return token_rows<const Act>{base + row * token_stride + offset, token_stride};
    };
    in.q = rows(p.q, p.q_batch_stride, kh * p.q_head_stride);
    in.k = rows(p.k, p.k_batch_stride, kh * p.k_head_stride);
    in.v = rows(p.v, p.v_batch_stride, h * p.v_head_stride);
    in.o = {p.o + row * p.o_batch_stride + h * p.o_head_stride, p.o_batch_stride};
    in.a = rows(p.a, p.a_batch_stride, h * p.a_head_stride);
    in.b = rows(p.b, p.b_batch_stride, h * p.b_head_stride);
    in.tokens = request_tokens(p, b);
    in.A_log = p.A_log[h];
    in.dt_bias = p.dt_bias != nullptr ? p.dt_bias[h] : 0.0f;

    bind_head_state(p, slot, h, int64_t(p.value_dim) * p.key_dim, state);
    if constexpr (!Policy::is_writeback) {
      const int64_t E = p.template ring_entries<Policy>(), HV = p.heads, V = p.value_dim;
      state.window_entries = int32_t(E);
      state.window_u = p.window_u + (slot * E * HV + h) * V;
      state.window_u_stride = HV * V;
      state.window_k = p.window_k + (slot * E * p.key_heads + kh) * p.key_dim;
      state.window_k_stride = int64_t(p.key_heads) * p.key_dim;
      state.window_g = p.window_g + slot * E * HV + h;
      state.window_g_stride = HV;
      if (p.window_v != nullptr) {
        state.window_v = p.window_v + (slot * E * HV + h) * V;
        state.window_v_stride = HV * V;
        state.window_beta = p.window_beta + slot * E * HV + h;
        state.window_beta_stride = HV;
      }
      state.appends_key = h % (p.heads / p.key_heads) == 0;
    }
  }
};

}  // namespace replayssm
