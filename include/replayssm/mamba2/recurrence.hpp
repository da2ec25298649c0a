// SPDX-License-Identifier: Apache-2.0
/// \file recurrence.hpp
/// The Mamba-2 (SSD) recurrence as a trait.
///
///     dt_t = softplus(dt_raw_t + dt_bias)        a_t = exp(dt_t A)
///     S_t  = a_t S_{t-1} + dt_t x_t B_t^T        y_t = (S_t C_t + D x_t) silu(z_t)
///
/// Replay form over a window of k steps after the checkpoint S_c: every recurrence with a
/// scalar decay per step (Mamba-2, Gated DeltaNet) is
///
///     S_k = exp(L_k) S_c + sum_j coef_j v_j kv_j^T,   coef_j = exp(L_k - L_j) s_j
///
/// with value v, key kv and input scale s. For Mamba-2 the value is x, the key is B and
/// the scale is dt; the window stores x (per head), B (per group) and dt (per head).
#pragma once

#include <cstdint>

#include "replayssm/config.hpp"
#include "replayssm/numeric/math.hpp"

namespace replayssm {

/// Shape of one Mamba-2 layer (per tensor-parallel rank).
struct mamba2_layer_shape {
  int32_t heads;
  int32_t head_dim;
  int32_t state_dim;
  int32_t groups;
  /// Elements of state per request.
  constexpr int64_t state_elements() const { return int64_t(heads) * head_dim * state_dim; }
};

/// Mamba-2 recurrence trait: what a step stores and how its pieces combine.
struct mamba2 {
  static constexpr const char* name = "mamba2";

  /// dt after bias and, when enabled, softplus.
  REPLAYSSM_HOST_DEVICE static float step_size(float dt_raw, float dt_bias, bool softplus) {
    const float v = math::add(dt_raw, dt_bias);
    return softplus ? math::softplus(v) : v;
  }

  /// Natural log of the step's decay: dt * A (A < 0).
  REPLAYSSM_HOST_DEVICE static float log_decay(float dt, float A) { return math::mul(dt, A); }

  /// The step output from its parts: `state_term` (the state applied to C), the
  /// window term, the skip D x and the optional gate silu(z).
  REPLAYSSM_HOST_DEVICE static float output(float state_term, float window_term, float D, float x, float z,
                                            bool gated) {
    const float y = math::fma(D, x, math::add(state_term, window_term));
    return gated ? math::mul(y, math::silu(z)) : y;
  }
};

}  // namespace replayssm
