// SPDX-License-Identifier: Apache-2.0
/// \file params.hpp
/// The arguments of the ready-made Mamba-2 decode steps, as one plain struct of
/// pointers and strides, and the views of one (request, head) that the primitives take.
///
/// Activations are `[batch * tokens][rows][inner]` with the inner dimension contiguous and
/// the two outer strides in elements: request b's token t is at row b * tokens + t (a decode
/// step has one token per request). State pools are `[num_slots][heads][head_dim][state_dim]`
/// in the policy's formats (replay/state_view.hpp). Window buffers, a ring of
/// E = window_entries entries per slot:
///
///     window_x  [num_slots][E][heads][head_dim]    activation dtype
///     window_B  [num_slots][E][groups][state_dim]  activation dtype
///     window_dt [num_slots][E][heads]              float, after bias and softplus
///     cursors   [num_slots][heads]                 replay_cursor
#pragma once

#include <cstdint>

#include "replayssm/config.hpp"
#include "replayssm/mamba2/head_step.hpp"
#include "replayssm/mamba2/recurrence.hpp"
#include "replayssm/numeric/activation.hpp"
#include "replayssm/runtime/requests.hpp"
#include "replayssm/runtime/step_params.hpp"

namespace replayssm {

/// Arguments of one Mamba-2 step for a batch: a decode step (one token per request) or a
/// speculative verify step (up to `tokens` drafts per request). `Act` is the activations'
/// element type (`float`, `half_t`, `bfloat16_t`, or CUDA's `__half` / `__nv_bfloat16`), so
/// that buffers of another type do not compile.
template <class Act>
struct mamba2_params : step_params {
  static_assert(is_activation_v<Act>, "mamba2_params: Act must be float, half_t, bfloat16_t, __half or __nv_bfloat16");
  using activation = Act;
  /// A decode step's flush folds its token (`flush_folds_token`).
  template <class Policy>
  static constexpr bool flush_folds_token = true;
  // Shape (and `heads`, H). Tensor-parallel shards are simply fewer heads and groups.
  int32_t head_dim = 0;   ///< P, any value >= 1 (80 included)
  int32_t state_dim = 0;  ///< N, a multiple of 16 in [16, 256]
  int32_t groups = 0;     ///< G, divides H

  // Step inputs and output.
  const Act* x = nullptr;  ///< [batch * tokens][H][P]
  int64_t x_batch_stride = 0, x_head_stride = 0;
  const Act* z = nullptr;  ///< [batch * tokens][H][P] gate, optional
  int64_t z_batch_stride = 0, z_head_stride = 0;
  Act* y = nullptr;  ///< [batch * tokens][H][P] output
  int64_t y_batch_stride = 0, y_head_stride = 0;
  const Act* dt = nullptr;  ///< [batch * tokens][H] raw step sizes
  int64_t dt_batch_stride = 0, dt_head_stride = 0;
  const Act* B = nullptr;  ///< [batch * tokens][G][N]
  int64_t B_batch_stride = 0, B_group_stride = 0;
  const Act* C = nullptr;  ///< [batch * tokens][G][N]
  int64_t C_batch_stride = 0, C_group_stride = 0;

  // Per-head weights, float.
  const float* A = nullptr;        ///< [H], negative
  const float* D = nullptr;        ///< [H] skip, optional (0)
  const float* dt_bias = nullptr;  ///< [H], optional (0)
  bool dt_softplus = true;

  // Window buffers (replay only), rings of `window_entries` entries per slot.
  Act* window_x = nullptr;
  Act* window_B = nullptr;
  float* window_dt = nullptr;

  /// The layer shape of the heads and groups this step covers.
  REPLAYSSM_HOST_DEVICE mamba2_layer_shape shape() const { return {heads, head_dim, state_dim, groups}; }
};

/// Params of a batch whose activations of type `Act` are all contiguous
/// (`[batch * tokens][heads][head_dim]`, `[batch * tokens][heads]`,
/// `[batch * tokens][groups][state_dim]`): shape, tokens per request and strides set, every
/// pointer still null.
template <class Act>
mamba2_params<Act> contiguous_mamba2_params(mamba2_layer_shape s, int32_t batch, int32_t tokens = 1) {
  mamba2_params<Act> p;
  p.batch = batch;
  p.tokens = tokens;
  p.heads = s.heads;
  p.head_dim = s.head_dim;
  p.state_dim = s.state_dim;
  p.groups = s.groups;
  p.x_batch_stride = p.z_batch_stride = p.y_batch_stride = int64_t(s.heads) * s.head_dim;
  p.x_head_stride = p.z_head_stride = p.y_head_stride = s.head_dim;
  p.dt_batch_stride = s.heads;
  p.dt_head_stride = 1;
  p.B_batch_stride = p.C_batch_stride = int64_t(s.groups) * s.state_dim;
  p.B_group_stride = p.C_group_stride = s.state_dim;
  return p;
}

/// Builds the views of request `b`, head `h`, stored in slot `slot`.
template <class Policy, class Act>
struct mamba2_head_views {
  mamba2_head_inputs<Act> in;
  mamba2_head_state<Policy, Act> state;

  REPLAYSSM_HOST_DEVICE mamba2_head_views(const mamba2_params<Act>& p, int32_t b, int32_t h, int32_t slot)
      : mamba2_head_views(p, b, h, h / (p.heads / p.groups), slot) {}
  /// The same where the caller knows head `h`'s group `g` (h / (heads / groups)): a kernel
  /// whose grid places groups saves the two divisions.
  REPLAYSSM_HOST_DEVICE mamba2_head_views(const mamba2_params<Act>& p, int32_t b, int32_t h, int32_t g, int32_t slot) {
    const int64_t row = int64_t(b) * p.tokens;
    auto rows = [row](const Act* base, int64_t token_stride, int64_t offset) {
      return token_rows<const Act>{base + row * token_stride + offset, token_stride};
    };
    in.x = rows(p.x, p.x_batch_stride, h * p.x_head_stride);
    if (p.z != nullptr) in.z = rows(p.z, p.z_batch_stride, h * p.z_head_stride);
    in.y = {p.y + row * p.y_batch_stride + h * p.y_head_stride, p.y_batch_stride};
    in.B = rows(p.B, p.B_batch_stride, g * p.B_group_stride);
    in.C = rows(p.C, p.C_batch_stride, g * p.C_group_stride);
    in.dt = rows(p.dt, p.dt_batch_stride, h * p.dt_head_stride);
    in.tokens = request_tokens(p, b);
    in.A = p.A[h];
    in.D = p.D != nullptr ? p.D[h] : 0.0f;
    in.dt_bias = p.dt_bias != nullptr ? p.dt_bias[h] : 0.0f;
    in.dt_softplus = p.dt_softplus;

    bind_head_state(p, slot, h, int64_t(p.head_dim) * p.state_dim, state);
    const int64_t W = p.template ring_entries<Policy>();
    if constexpr (!Policy::is_writeback) {
      state.window_entries = int32_t(W);
      state.window_x = p.window_x + (int64_t(slot) * W * p.heads + h) * p.head_dim;
      state.window_x_stride = int64_t(p.heads) * p.head_dim;
      state.window_B = p.window_B + (int64_t(slot) * W * p.groups + g) * p.state_dim;
      state.window_B_stride = int64_t(p.groups) * p.state_dim;
      state.window_dt = p.window_dt + int64_t(slot) * W * p.heads + h;
      state.window_dt_stride = p.heads;
      state.appends_key = int64_t(h) * p.groups == int64_t(g) * p.heads;  // the group's first head
    }
  }
};

}  // namespace replayssm
