// SPDX-License-Identifier: Apache-2.0
/// \file scalar_decay.hpp
/// How scalar per-step decays compose over a window (Mamba-2, Gated DeltaNet).
#pragma once

#include "replayssm/config.hpp"
#include "replayssm/numeric/math.hpp"

namespace replayssm {

/// Sum of `log_decay[i]` for i from k-1 down to j+1: the log of the decay that step j's
/// contribution undergoes until step k-1. j = -1 gives the decay of the checkpoint.
///
/// Summed from the newest step backwards, in this order on host and device alike, so that
/// both produce the same bits. Summing logs (rather than multiplying decays) keeps the
/// error at one rounding per step and never underflows an intermediate.
REPLAYSSM_HOST_DEVICE float suffix_log_decay(const float* log_decay, int j, int k) {
  float sum = 0.0f;
  for (int i = k - 1; i > j; --i) sum = math::add(sum, log_decay[i]);
  return sum;
}

/// Decay that window step j (0-based, of k) undergoes until step k-1: exp(decay from j to k-1).
REPLAYSSM_HOST_DEVICE float entry_decay(const float* log_decay, int j, int k) {
  return math::exp(suffix_log_decay(log_decay, j, k));
}

/// Coefficient of window step j (0-based, of k) in the state at step k-1:
/// exp(decay from j to k-1) * scale[j].
REPLAYSSM_HOST_DEVICE float window_coefficient(const float* log_decay, const float* scale, int j, int k) {
  return math::mul(entry_decay(log_decay, j, k), scale[j]);
}

/// Decay of the checkpoint over the whole window of k steps.
REPLAYSSM_HOST_DEVICE float checkpoint_decay(const float* log_decay, int k) {
  return entry_decay(log_decay, -1, k);
}

/// The decays a closed-form fold of k entries needs, indexed as the flushes stage them:
/// entry j's (`entry_decay`) for j < k, the checkpoint's (`checkpoint_decay`) at j = k.
REPLAYSSM_HOST_DEVICE float fold_decay(const float* log_decay, int j, int k) {
  return j < k ? entry_decay(log_decay, j, k) : checkpoint_decay(log_decay, k);
}

/// The flush's arithmetic per state element, one definition for every executor (the CPU,
/// the block kernels and the warp kernels), so that checkpoints are bit-identical wherever
/// they are formed: S = exp(L_k) S_c, then for j = 0, 1, ... in order S += (coef_j v_j) k_j.
/// The checkpoint value decayed over the window.
REPLAYSSM_HOST_DEVICE float decayed_checkpoint(float checkpoint_decay, float checkpoint) {
  return math::mul(checkpoint_decay, checkpoint);
}
/// Entry j's value weighted by its coefficient, coef_j v_j (formed once per row).
REPLAYSSM_HOST_DEVICE float weighted_value(float coefficient, float value) { return math::mul(coefficient, value); }
/// Folds an entry into a state element: s + (coef_j v_j) k_j, one rounding.
REPLAYSSM_HOST_DEVICE float fold_entry(float s, float weighted, float key) { return math::fma(weighted, key, s); }

}  // namespace replayssm
