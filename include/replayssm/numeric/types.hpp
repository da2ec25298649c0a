// SPDX-License-Identifier: Apache-2.0
/// \file types.hpp
/// Storage types of the narrow floating-point formats. Each holds the raw bit
/// pattern in a public `bits` member and does no arithmetic: values are decoded to fp32,
/// computed on, and encoded back (numeric/convert.hpp).
#pragma once

#include <cstdint>
#include <type_traits>

#include "replayssm/config.hpp"

namespace replayssm {

/// IEEE 754 binary16: sign, 5 exponent bits (bias 15), 10 mantissa bits. Max 65504.
struct half_t {
  uint16_t bits;
  /// Largest finite value.
  static constexpr float max_finite = 65504.0f;
  REPLAYSSM_HOST_DEVICE static constexpr half_t from_bits(uint16_t b) { return half_t{b}; }
};

/// bfloat16: the upper half of an fp32 (sign, 8 exponent bits, 7 mantissa bits).
struct bfloat16_t {
  uint16_t bits;
  /// Largest finite value, 0x7F7F.
  static constexpr float max_finite = 3.38953139e38f;
  REPLAYSSM_HOST_DEVICE static constexpr bfloat16_t from_bits(uint16_t b) { return bfloat16_t{b}; }
};

/// OCP FP8 E4M3FN: sign, 4 exponent bits (bias 7), 3 mantissa bits. No infinities; the
/// only NaN codes are S.1111.111 (0x7F, 0xFF). Max 448, smallest subnormal 2^-9.
struct float_e4m3_t {
  uint8_t bits;
  /// Largest finite value, 0x7E.
  static constexpr float max_finite = 448.0f;
  REPLAYSSM_HOST_DEVICE static constexpr float_e4m3_t from_bits(uint8_t b) { return float_e4m3_t{b}; }
};

/// Unsigned E4M3, the block scale of NVFP4: E4M3FN with the sign bit fixed at zero, so
/// 7 bits are used (bit 7 is ignored when decoding and zero after encoding). 0x7F is NaN,
/// max 448, smallest positive value 2^-9.
struct float_ue4m3_t {
  uint8_t bits;
  /// Largest finite value, 0x7E.
  static constexpr float max_finite = 448.0f;
  REPLAYSSM_HOST_DEVICE static constexpr float_ue4m3_t from_bits(uint8_t b) { return float_ue4m3_t{b}; }
};

/// OCP FP4 E2M1, one code in the low nibble of `bits` (the high nibble is ignored when
/// decoding and zero after encoding): sign, 2 exponent bits (bias 1), 1 mantissa bit.
/// Magnitudes {0, 0.5, 1, 1.5, 2, 3, 4, 6}; no infinities, no NaN.
struct float_e2m1_t {
  uint8_t bits;
  /// Largest finite value, code 0x7.
  static constexpr float max_finite = 6.0f;
  REPLAYSSM_HOST_DEVICE static constexpr float_e2m1_t from_bits(uint8_t b) { return float_e2m1_t{b}; }
};

static_assert(std::is_trivially_copyable_v<half_t> && std::is_trivially_copyable_v<bfloat16_t> &&
                  std::is_trivially_copyable_v<float_e4m3_t> && std::is_trivially_copyable_v<float_ue4m3_t> &&
                  std::is_trivially_copyable_v<float_e2m1_t>,
              "numeric types must be trivially copyable");
static_assert(sizeof(half_t) == 2 && sizeof(bfloat16_t) == 2 && sizeof(float_e4m3_t) == 1 &&
                  sizeof(float_ue4m3_t) == 1 && sizeof(float_e2m1_t) == 1,
              "numeric types must have the size of their bits");

}  // namespace replayssm
