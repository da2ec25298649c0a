// SPDX-License-Identifier: Apache-2.0
// Errors against the float64 references, and the tolerances they are held to, for every
// recurrence.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <type_traits>
#include <vector>

#include "replayssm/numeric/activation.hpp"
#include "replayssm/numeric/formats.hpp"

namespace replayssm_test {

using namespace replayssm;

/// Tolerances of a scenario, as relative errors.
struct tolerances {
  double output;  ///< per step, outputs against the reference
  double state;   ///< per flush, checkpoint against the reference
};

/// Output tolerance of an activation type: its rounding of the output (half an ulp,
/// normwise well below it) plus float32 arithmetic.
template <class Act>
constexpr double output_tolerance() {
  if constexpr (std::is_same_v<Act, float>) return 1e-5;
  else if constexpr (std::is_same_v<Act, half_t>) return 1e-3;  // 2^-11 = 4.9e-4 per element
  else return 8e-3;                                          // 2^-8 = 3.9e-3 per element
}

/// Half an ulp relative to the largest magnitude of a block, per format: the worst
/// relative error of one rounding. NVFP4 has one mantissa bit (2^-2); FP8 E4M3 three
/// (2^-4); BF16 eight (2^-8 with the implicit bit); FP16 eleven; any other, a 4-bit
/// element's one (NVFP4, and examples/custom_policy's MXFP4).
template <class Format>
constexpr double unit_roundoff() {
  if constexpr (std::is_same_v<Format, fp32_format>) return 0x1p-24;
  else if constexpr (std::is_same_v<Format, fp16_format>) return 0x1p-11;
  else if constexpr (std::is_same_v<Format, bf16_format>) return 0x1p-8;
  else if constexpr (std::is_same_v<Format, fp8_e4m3_format>) return 0x1p-4;
  else return 0x1p-2;
}

/// Bounds of a policy over `windows` windows: outputs read the read copy once (its
/// roundoff, times 2 for the cancellation in S C) on top of the checkpoint's error; the
/// checkpoint accumulates one rounding per flush, as a random walk under stochastic
/// rounding and at most linearly under nearest even.
template <class Policy>
tolerances split_bounds(int windows) {
  const double u_read = unit_roundoff<typename Policy::read_format>();
  const double u_ckpt = unit_roundoff<typename Policy::checkpoint_format>();
  const double growth = Policy::rounding::is_stochastic ? std::sqrt(double(windows)) : double(windows);
  const double state = std::max(4 * u_ckpt * growth, 1e-5);
  return {2 * u_read + 2 * state + 1e-5, state};
}

/// A value as double: arithmetic types directly, narrow formats through their `to_float`.
template <class T>
double widen(T v) {
  if constexpr (std::is_arithmetic_v<T>) return double(v);
  else return double(to_float(v));
}

/// Row `row` of `from`, rows of `n` values, widened to double.
template <class T>
std::vector<double> widen_row(const std::vector<T>& from, size_t row, size_t n) {
  std::vector<double> to(n);
  for (size_t i = 0; i < n; ++i) to[i] = widen(from[row * n + i]);
  return to;
}

/// ||a - b|| / ||b|| over n values (normwise).
template <class T, class U>
double relative_error(const T* a, const U* b, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    const double d = widen(a[i]) - widen(b[i]);
    num += d * d;
    den += widen(b[i]) * widen(b[i]);
  }
  return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}

/// Largest |a - b| over max |b| over n values (a relative error that ignores near-zero
/// entries).
template <class T, class U>
double relative_max_error(const T* a, const U* b, size_t n) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < n; ++i) {
    diff = std::max(diff, std::abs(widen(a[i]) - widen(b[i])));
    scale = std::max(scale, std::abs(widen(b[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

}  // namespace replayssm_test
