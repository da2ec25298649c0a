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

/// Coefficient of window step j (0-based, of k) in the state at step k-1:
/// exp(decay from j to k-1) * scale[j].
REPLAYSSM_HOST_DEVICE float window_coefficient(const float* log_decay, const float* scale, int j, int k) {
  return math::mul(math::exp(suffix_log_decay(log_decay, j, k)), scale[j]);
}

/// Decay of the checkpoint over the whole window of k steps.
REPLAYSSM_HOST_DEVICE float checkpoint_decay(const float* log_decay, int k) {
  return math::exp(suffix_log_decay(log_decay, -1, k));
}

}  // namespace replayssm
