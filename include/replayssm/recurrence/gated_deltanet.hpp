// SPDX-License-Identifier: Apache-2.0
/// \file gated_deltanet.hpp
/// Layer 4: the Gated DeltaNet recurrence (the linear-attention layers of Qwen3-Next and
/// Qwen3.5) as a trait.
///
/// Per value head h, with its key head h / (HV / HK), a step with query q, key k (both
/// L2-normalized, see replay/gdn_inputs.hpp), value v, log decay g and write strength beta:
///
///     S' = exp(g) S_{t-1}
///     u  = beta (v - S' k)
///     S_t = S' + u k^T
///     o  = S_t q K^-1/2
///
/// g = -exp(A_log) softplus(a + dt_bias) and beta = sigmoid(b), from the raw projections a
/// and b. The state of a value head is V x K, row-major: rows are value channels (like
/// Mamba-2's P), columns are key channels (like N).
///
/// Once u is known the step is the scalar-decay form of mamba2.hpp with u as the value, k
/// as the key and scale 1; u itself needs S' k, the state applied to the key.
#pragma once

#include <cstdint>

#include "replayssm/config.hpp"
#include "replayssm/numeric/math.hpp"

namespace replayssm {

/// Shape of one Gated DeltaNet layer (per tensor-parallel rank).
struct gdn_layer_shape {
  int32_t value_heads;  ///< HV, a multiple of HK
  int32_t key_heads;    ///< HK
  int32_t key_dim;      ///< K: query and key channels, the state's columns
  int32_t value_dim;    ///< V: value and output channels, the state's rows
  /// Value heads that share one key head (and its q and k).
  constexpr int32_t value_heads_per_key_head() const { return value_heads / key_heads; }
  /// The key head that value head `h` reads q and k from.
  constexpr int32_t key_head(int32_t h) const { return h / value_heads_per_key_head(); }
  /// Elements of state per request.
  constexpr int64_t state_elements() const { return int64_t(value_heads) * value_dim * key_dim; }
};

/// Gated DeltaNet recurrence trait: how a step's scalars are formed from its inputs.
struct gated_deltanet {
  static constexpr const char* name = "gated_deltanet";

  /// Default epsilon of the q and k L2 normalization: x / sqrt(sum x^2 + eps).
  static constexpr float l2_norm_eps = 1e-6f;

  /// Natural log of the step's decay, g = -exp(A_log) softplus(a + dt_bias) (g <= 0).
  REPLAYSSM_HOST_DEVICE static float log_decay(float a, float A_log, float dt_bias) {
    return math::mul(-math::exp(A_log), math::softplus(math::add(a, dt_bias)));
  }

  /// Write strength of the step, beta = sigmoid(b), in [0, 1].
  REPLAYSSM_HOST_DEVICE static float write_strength(float b) { return math::sigmoid(b); }

  /// Scale of the normalized query, K^-1/2.
  REPLAYSSM_HOST_DEVICE static float query_scale(int32_t key_dim) {
    return math::div(1.0f, math::sqrt(static_cast<float>(key_dim)));
  }
};

}  // namespace replayssm
