// SPDX-License-Identifier: Apache-2.0
/// \file math.hpp
/// The scalar float math of the recurrences, written once for host and device.
///
/// Each function is built from correctly rounded operations only (fused multiply-add,
/// multiply, add, divide, square root and bit manipulation), never from the platform's
/// `expf` or `log1pf`, whose last bits differ between glibc and CUDA. So host and device
/// compute bit-identical states, which reproducible stochastic rounding needs.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "replayssm/config.hpp"

namespace replayssm {
namespace math {

/// Reinterprets the bits of a float as an unsigned integer.
REPLAYSSM_HOST_DEVICE uint32_t float_bits(float value) {
#if REPLAYSSM_DEVICE_PASS
  return __float_as_uint(value);
#else
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
#endif
}

/// Reinterprets an unsigned integer as the bits of a float.
REPLAYSSM_HOST_DEVICE float float_from_bits(uint32_t bits) {
#if REPLAYSSM_DEVICE_PASS
  return __uint_as_float(bits);
#else
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
#endif
}

/// Byte k of the result is byte (selector >> 4k) & 7 of the eight bytes {lo, hi} (lo's
/// bytes first), for k = 0..3: PTX `prmt` without its sign-replication mode. The selector's
/// bits 3, 7, 11 and 15 must be zero.
REPLAYSSM_HOST_DEVICE uint32_t byte_perm(uint32_t lo, uint32_t hi, uint32_t selector) {
#if REPLAYSSM_DEVICE_PASS
  return __byte_perm(lo, hi, selector);
#else
  const uint64_t bytes = uint64_t(hi) << 32 | lo;
  uint32_t out = 0;
  for (int k = 0; k < 4; ++k) out |= uint32_t(bytes >> (8 * ((selector >> (4 * k)) & 7u)) & 0xFFu) << (8 * k);
  return out;
#endif
}

/// a * b + c with a single rounding, on host and device alike.
REPLAYSSM_HOST_DEVICE float fma(float a, float b, float c) {
#if REPLAYSSM_DEVICE_PASS
  return __fmaf_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}

/// a * b rounded once, never contracted with a neighbouring add.
REPLAYSSM_HOST_DEVICE float mul(float a, float b) {
#if REPLAYSSM_DEVICE_PASS
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

/// a + b rounded once, never contracted with a neighbouring multiply.
REPLAYSSM_HOST_DEVICE float add(float a, float b) {
#if REPLAYSSM_DEVICE_PASS
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

/// a / b, IEEE division rounded once (also under --use_fast_math).
REPLAYSSM_HOST_DEVICE float div(float a, float b) {
#if REPLAYSSM_DEVICE_PASS
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}

/// Square root, correctly rounded (IEEE) on host and device alike.
REPLAYSSM_HOST_DEVICE float sqrt(float x) {
#if REPLAYSSM_DEVICE_PASS
  return __fsqrt_rn(x);
#else
  return std::sqrt(x);
#endif
}

/// e^x to within 2 ulp for x in [-87, 88]; 0 below (no subnormal results), +inf above.
REPLAYSSM_HOST_DEVICE float exp(float x) {
  if (!(x > -87.0f)) return x != x ? x : 0.0f;  // NaN stays NaN
  if (x > 88.7f) return INFINITY;
  // x = n ln2 + r with |r| <= ln2 / 2 (Cody-Waite split of ln2).
  const float rounding_shift = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float n = add(fma(x, 1.44269504f, rounding_shift), -rounding_shift);
  float r = fma(n, -0.693145752f, x);
  r = fma(n, -1.42860677e-6f, r);
  // Taylor polynomial of e^r to degree 7, in Horner form.
  float p = 1.98412698e-4f;
  p = fma(p, r, 1.38888889e-3f);
  p = fma(p, r, 8.33333333e-3f);
  p = fma(p, r, 4.16666667e-2f);
  p = fma(p, r, 1.66666667e-1f);
  p = fma(p, r, 0.5f);
  p = fma(p, r, 1.0f);
  p = fma(p, r, 1.0f);
  // Multiply by 2^n in two halves so that n = 128 or n = -126 stays representable.
  const int e = static_cast<int>(n);
  const int half = e / 2;
  const float s1 = float_from_bits(static_cast<uint32_t>(half + 127) << 23);
  const float s2 = float_from_bits(static_cast<uint32_t>(e - half + 127) << 23);
  return mul(mul(p, s1), s2);
}

/// ln(1 + y) for y >= 0, to within 2 ulp.
REPLAYSSM_HOST_DEVICE float log1p_nonnegative(float y) {
  const float u = add(1.0f, y);
  if (u == 1.0f) return y;  // y below half an ulp of 1: ln(1 + y) = y to float precision
  if (u == INFINITY) return u;
  // u = m 2^e with m in [sqrt(1/2), sqrt(2)); ln m = 2 atanh(s), s = (m - 1) / (m + 1).
  const uint32_t bits = float_bits(u);
  int e = static_cast<int>((bits >> 23) & 0xff) - 127;
  float m = float_from_bits((bits & 0x007fffffu) | 0x3f800000u);
  if (m > 1.41421356f) {
    m = mul(m, 0.5f);
    e += 1;
  }
  const float s = div(m - 1.0f, m + 1.0f);
  const float s2 = mul(s, s);
  float p = 0.111111111f;  // 1/9
  p = fma(p, s2, 0.142857143f);
  p = fma(p, s2, 0.2f);
  p = fma(p, s2, 0.333333333f);
  p = fma(p, s2, 1.0f);
  const float log_u = fma(static_cast<float>(e), 0.693147181f, mul(mul(2.0f, s), p));
  // Correct for the rounding of 1 + y: ln(1 + y) = ln(u) * y / (u - 1).
  return mul(log_u, div(y, add(u, -1.0f)));
}

/// softplus(x) = ln(1 + e^x), exact to float precision for large x.
REPLAYSSM_HOST_DEVICE float softplus(float x) {
  if (x > 20.0f) return x;
  return log1p_nonnegative(exp(x));
}

/// sigmoid(x) = 1 / (1 + e^-x), to within a few ulp for x >= -87; 0 below x = -88.7.
REPLAYSSM_HOST_DEVICE float sigmoid(float x) {
  return div(1.0f, add(1.0f, exp(-x)));
}

/// silu(x) = x / (1 + e^-x).
REPLAYSSM_HOST_DEVICE float silu(float x) {
  return div(x, add(1.0f, exp(-x)));
}

}  // namespace math
}  // namespace replayssm
