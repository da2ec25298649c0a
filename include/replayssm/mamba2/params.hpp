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
#include "replayssm/runtime/requests.hpp"
#include "replayssm/numeric/activation.hpp"
#include "replayssm/mamba2/recurrence.hpp"
#include "replayssm/mamba2/head_step.hpp"

namespace replayssm {

/// Arguments of one Mamba-2 step for a batch: a decode step (one token per request) or a
/// speculative verify step (up to `tokens` drafts per request).
struct mamba2_params {
  // Shape. Tensor-parallel shards are simply fewer heads and groups.
  int32_t batch = 0;
  int32_t heads = 0;      ///< H
  int32_t head_dim = 0;   ///< P, any value >= 1 (80 included)
  int32_t state_dim = 0;  ///< N, a multiple of 16 in [16, 256]
  int32_t groups = 0;     ///< G, divides H

  // Tokens per request: 1 for a decode step; a verify step's drafts, at most
  // max_draft_tokens and the window. Every activation's batch stride is its token stride.
  int32_t tokens = 1;
  const int32_t* token_counts = nullptr;  ///< [batch] drafts of each request in [1, tokens]; optional (all `tokens`)

  // Step inputs and output, in `act_dtype`.
  dtype act_dtype = dtype::f32;
  const void* x = nullptr;  ///< [batch * tokens][H][P]
  int64_t x_batch_stride = 0, x_head_stride = 0;
  const void* z = nullptr;  ///< [batch * tokens][H][P] gate, optional
  int64_t z_batch_stride = 0, z_head_stride = 0;
  void* y = nullptr;  ///< [batch * tokens][H][P] output
  int64_t y_batch_stride = 0, y_head_stride = 0;
  const void* dt = nullptr;  ///< [batch * tokens][H] raw step sizes
  int64_t dt_batch_stride = 0, dt_head_stride = 0;
  const void* B = nullptr;  ///< [batch * tokens][G][N]
  int64_t B_batch_stride = 0, B_group_stride = 0;
  const void* C = nullptr;  ///< [batch * tokens][G][N]
  int64_t C_batch_stride = 0, C_group_stride = 0;

  // Per-head weights, float.
  const float* A = nullptr;        ///< [H], negative
  const float* D = nullptr;        ///< [H] skip, optional (0)
  const float* dt_bias = nullptr;  ///< [H], optional (0)
  bool dt_softplus = true;

  // State slots: request b uses slot slot_indices[b] (b when null); pad_slot_id skips it.
  const int32_t* slot_indices = nullptr;
  int32_t pad_slot_id = -1;
  int32_t num_slots = 0;

  // Recurrent state.
  void* checkpoint = nullptr;  ///< checkpoint pool (the state itself for write-back)
  void* checkpoint_scales = nullptr;
  void* read_copy = nullptr;  ///< separate read copy pool; unused in shared mode
  void* read_copy_scales = nullptr;

  // Window (replay only) and bookkeeping.
  int32_t window_entries = 0;  ///< ring entries of the window buffers per slot; 0: the policy's window
  void* window_x = nullptr;
  void* window_B = nullptr;
  float* window_dt = nullptr;
  replay_cursor* cursors = nullptr;      ///< [num_slots][H]; optional for nearest-even write-back
  const int32_t* flush_phase = nullptr;  ///< [num_slots] first-window shortening, optional
  uint64_t seed = 0;                     ///< stochastic-rounding seed

  // Speculative decoding.
  const int32_t* accepted_counts = nullptr;  ///< [batch] drafts each request keeps (commit_drafts)
  /// [batch][tokens] slots the snapshot baseline writes each draft's state to.
  const int32_t* snapshot_slots = nullptr;

  /// Ring entries the window buffers hold (`window_entries`, or the policy's window).
  template <class Policy>
  REPLAYSSM_HOST_DEVICE int32_t ring_entries() const {
    return window_entries > 0 ? window_entries : Policy::window;
  }

  /// Device launchers OR step_error bits here (device memory, optional): bad slot indices,
  /// cursors and phases live on the device, so they are reported, and their rows skipped.
  uint32_t* error_flags = nullptr;
};

/// Params of a batch whose activations are all contiguous (`[batch * tokens][heads][head_dim]`,
/// `[batch * tokens][heads]`, `[batch * tokens][groups][state_dim]`): shape, dtype, tokens
/// per request and strides set, every pointer still null.
inline mamba2_params contiguous_mamba2_params(mamba2_layer_shape s, int32_t batch, dtype act, int32_t tokens = 1) {
  mamba2_params p;
  p.batch = batch;
  p.tokens = tokens;
  p.heads = s.heads;
  p.head_dim = s.head_dim;
  p.state_dim = s.state_dim;
  p.groups = s.groups;
  p.act_dtype = act;
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

  REPLAYSSM_HOST_DEVICE mamba2_head_views(const mamba2_params& p, int32_t b, int32_t h, int32_t slot) {
    const int32_t g = h / (p.heads / p.groups);
    const int64_t row = int64_t(b) * p.tokens;
    auto rows = [row](const void* base, int64_t token_stride, int64_t offset) {
      return token_rows<const Act>{static_cast<const Act*>(base) + row * token_stride + offset, token_stride};
    };
    in.x = rows(p.x, p.x_batch_stride, h * p.x_head_stride);
    if (p.z != nullptr) in.z = rows(p.z, p.z_batch_stride, h * p.z_head_stride);
    in.y = {static_cast<Act*>(p.y) + row * p.y_batch_stride + h * p.y_head_stride, p.y_batch_stride};
    in.B = rows(p.B, p.B_batch_stride, g * p.B_group_stride);
    in.C = rows(p.C, p.C_batch_stride, g * p.C_group_stride);
    in.dt = rows(p.dt, p.dt_batch_stride, h * p.dt_head_stride);
    in.tokens = request_tokens(p, b);
    in.A = p.A[h];
    in.D = p.D != nullptr ? p.D[h] : 0.0f;
    in.dt_bias = p.dt_bias != nullptr ? p.dt_bias[h] : 0.0f;
    in.dt_softplus = p.dt_softplus;

    bind_head_state(p, slot, h, int64_t(p.head_dim) * p.state_dim, state);
    const int64_t W = p.ring_entries<Policy>();
    if constexpr (!Policy::is_writeback) {
      state.window_entries = int32_t(W);
      state.window_x = static_cast<Act*>(p.window_x) + (int64_t(slot) * W * p.heads + h) * p.head_dim;
      state.window_x_stride = int64_t(p.heads) * p.head_dim;
      state.window_B = static_cast<Act*>(p.window_B) + (int64_t(slot) * W * p.groups + g) * p.state_dim;
      state.window_B_stride = int64_t(p.groups) * p.state_dim;
      state.window_dt = p.window_dt + int64_t(slot) * W * p.heads + h;
      state.window_dt_stride = p.heads;
      state.appends_key = h % (p.heads / p.groups) == 0;
    }
  }
};

}  // namespace replayssm
