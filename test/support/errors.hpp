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
