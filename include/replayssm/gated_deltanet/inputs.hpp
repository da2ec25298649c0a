// SPDX-License-Identifier: Apache-2.0
/// \file inputs.hpp
/// Preparing a Gated DeltaNet step's query and key, written once for an executor
/// (replay/executor.hpp): the CPU runs it serially, a CUDA block with its threads.
#pragma once

#include "replayssm/config.hpp"
#include "replayssm/gated_deltanet/recurrence.hpp"
#include "replayssm/numeric/activation.hpp"
#include "replayssm/numeric/math.hpp"

namespace replayssm {

/// Elements per partial sum of `l2_normalize`. Fixed, so that the summation order, and
/// with it every bit of the result, does not depend on how many threads run it.
inline constexpr int l2_normalize_chunk = 16;

/// Scratch floats that `l2_normalize` needs for a vector of n elements.
REPLAYSSM_HOST_DEVICE constexpr int l2_normalize_scratch(int n) {
  return (n + l2_normalize_chunk - 1) / l2_normalize_chunk;
}

/// The sum of squares of chunk `c` of the n elements at `in`, in index order: one partial
/// sum of `l2_normalize`.
template <class Act>
REPLAYSSM_HOST_DEVICE float l2_chunk_sum(const Act* in, int n, int c) {
  const int end = (c + 1) * l2_normalize_chunk < n ? (c + 1) * l2_normalize_chunk : n;
  float acc = 0.0f;
  for (int i = c * l2_normalize_chunk; i < end; ++i) {
    const float x = to_float(in[i]);
    acc = math::fma(x, x, acc);
  }
  return acc;
}

/// The norm `l2_normalize` divides by, from the chunk sums added in chunk order.
REPLAYSSM_HOST_DEVICE float l2_norm(float sum_of_chunk_sums, float eps = gated_deltanet::l2_norm_eps) {
  return math::sqrt(math::add(sum_of_chunk_sums, eps));
}

/// One normalized element: scale * x / norm.
REPLAYSSM_HOST_DEVICE float l2_normalized(float x, float norm, float scale) {
  return math::mul(math::div(x, norm), scale);
}

/// First half of `l2_normalize`: the chunk sums of squares of `in` into `scratch`
/// (`l2_normalize_scratch(n)` floats). No barrier.
template <class Exec, class Act>
REPLAYSSM_HOST_DEVICE void l2_partial_sums(const Exec& ex, const Act* in, int n, float* scratch) {
  ex.for_each(l2_normalize_scratch(n), [&](int c) { scratch[c] = l2_chunk_sum(in, n, c); });
}

/// Second half of `l2_normalize`, after a barrier: out = scale * in / sqrt(sum + eps) from the
/// chunk sums in `scratch`. No barrier.
template <class Exec, class Act>
REPLAYSSM_HOST_DEVICE void l2_scale(const Exec& ex, const Act* in, int n, float* out, const float* scratch, float scale,
                                    float eps = gated_deltanet::l2_norm_eps) {
  const int chunks = l2_normalize_scratch(n);
  float sum = 0.0f;
  for (int c = 0; c < chunks; ++c) sum = math::add(sum, scratch[c]);
  const float norm = l2_norm(sum, eps);
  ex.for_each(n, [&](int i) { out[i] = l2_normalized(to_float(in[i]), norm, scale); });
}

/// out[i] = scale * in[i] / sqrt(sum_j in[j]^2 + eps), over n elements: the L2
/// normalization of Gated DeltaNet's q (with scale = K^-1/2, gated_deltanet::query_scale)
/// and k (scale = 1). eps sits inside the root, as in the reference implementations
/// (`x * rsqrt(sum x^2 + eps)`); here the root divides, rounding once instead of twice.
///
/// The squares are summed with fused multiply-adds over chunks of `l2_normalize_chunk`
/// elements, each in index order, and the chunk sums in chunk order, so host and device
/// give identical bits. The sum of squares must be finite (|in| below about 1e18 for
/// n = 128); beyond that it overflows and the output is 0.
///
/// `scratch` holds `l2_normalize_scratch(n)` floats and is free again on return; `out`
/// may be `in` when Act is float. Every thread of the executor must call it; it ends with
/// a barrier, so all of `out` is visible on return.
///
/// The two halves, `l2_partial_sums` then `l2_scale` after a barrier, let a step normalize
/// its q and k with the barriers of one vector.
template <class Exec, class Act>
REPLAYSSM_HOST_DEVICE void l2_normalize(const Exec& ex, const Act* in, int n, float* out, float* scratch,
                                        float scale = 1.0f, float eps = gated_deltanet::l2_norm_eps) {
  l2_partial_sums(ex, in, n, scratch);
  ex.sync();
  l2_scale(ex, in, n, out, scratch, scale, eps);
  ex.sync();
}

}  // namespace replayssm
