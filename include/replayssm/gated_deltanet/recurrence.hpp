// SPDX-License-Identifier: Apache-2.0
/// \file recurrence.hpp
/// The Gated DeltaNet recurrence (the linear-attention layers of Qwen3-Next and
/// Qwen3.5) as a trait.
///
/// Per value head h, with its key head h / (HV / HK), a step with query q, key k (both
/// L2-normalized, see gated_deltanet/inputs.hpp), value v, log decay g and write strength beta:
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
/// Once u is known the step is the scalar-decay form of mamba2/recurrence.hpp with u as the value, k
/// as the key and scale 1; u itself needs S' k, the state applied to the key.
#pragma once

#include <cstdint>
#include <type_traits>

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

/// What the window keeps of each entry, which decides what a flush folds in.
enum class gdn_window : uint8_t {
  /// u (computed from the read copy), k and g: the flush adds u k^T. Least traffic; with a
  /// read copy narrower than the checkpoint, the read copy's error enters the state via u.
  corrected_values,
  /// Also v and beta: the flush recomputes u from the checkpoint, so the read copy's error
  /// never enters the recurrent state. Costs a value row per entry more.
  raw_inputs,
};

/// A Gated DeltaNet layer's policy: a replay policy (policy/policy.hpp) with the window mode
/// it runs in. Sizing, validating and launching take this one type, so they cannot disagree
/// about the mode. A plain replay policy runs in the `corrected_values` mode.
template <class Policy, gdn_window Mode>
struct gdn_policy : Policy {
  static constexpr gdn_window window_mode = Mode;
};

/// The window mode of a Gated DeltaNet policy: its `window_mode`, or `corrected_values`.
template <class Policy, class = void>
inline constexpr gdn_window gdn_window_mode = gdn_window::corrected_values;
template <class Policy>
inline constexpr gdn_window gdn_window_mode<Policy, std::void_t<decltype(Policy::window_mode)>> = Policy::window_mode;

/// True when a Gated DeltaNet policy's window keeps the raw inputs (v and beta).
template <class Policy>
inline constexpr bool keeps_raw_inputs = gdn_window_mode<Policy> == gdn_window::raw_inputs;

/// Whether a Gated DeltaNet decode step's flush folds its own token: under a write-back
/// policy (a window of one) it does, as conventional decoding does. A replay flush folds the
/// window's committed entries only and its token opens the next window: the token's u is a
/// dot product over a whole state row as it stands before the token, which the flush's one
/// pass over the state forms as it folds (its output too); folding the token as well would
/// take a second pass. A replay window of W entries thus flushes every W - 1 tokens after
/// its first.
template <class Policy>
inline constexpr bool gdn_flush_folds_token = Policy::is_writeback;

/// Tokens between two flushes of a head after its first window (`gdn_flush_folds_token`).
template <class Policy>
inline constexpr int gdn_flush_period = gdn_flush_folds_token<Policy> ? Policy::window : Policy::window - 1;

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

  /// The corrected value of a state row, u = beta (v - (S' k)), from the row's dot product
  /// with the key.
  REPLAYSSM_HOST_DEVICE static float corrected_value(float beta, float v, float state_dot_key) {
    return math::mul(beta, math::add(v, -state_dot_key));
  }

  /// Scale of the normalized query, K^-1/2.
  REPLAYSSM_HOST_DEVICE static float query_scale(int32_t key_dim) {
    return math::div(1.0f, math::sqrt(static_cast<float>(key_dim)));
  }
};

}  // namespace replayssm
