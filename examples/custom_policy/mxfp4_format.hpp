// SPDX-License-Identifier: Apache-2.0
// An engine's own state format, defined outside the library: OCP MXFP4, E2M1 elements
// sharing one E8M0 (power-of-two) scale per 32. It models the state-format concept of
// replayssm/numeric/formats.hpp and reuses the library's E2M1 conversions, so both
// nearest-even and stochastic rounding work unchanged.
#pragma once

#include <replayssm/numeric/convert.hpp>
#include <replayssm/numeric/math.hpp>
#include <replayssm/numeric/rounding.hpp>
#include <replayssm/numeric/types.hpp>

#include <cstdint>

namespace my_engine {

/// MXFP4: 32 E2M1 codes (16 bytes, element 2i in the low nibble of byte i) and one E8M0
/// scale byte, 2^(e - 127); e = 255 is NaN. The shared exponent is floor(log2 amax) - 2,
/// so the block's largest element lands in [4, 8) before E2M1 saturates it at 6 (as the
/// OCP MX specification does).
struct mxfp4_format {
  static constexpr const char* name = "mxfp4";
  static constexpr int chunk_elems = 32;
  static constexpr int block_elems = 32;
  static constexpr int data_bytes_per_chunk = 16;
  static constexpr int scale_bytes_per_chunk = 1;
  static constexpr int random_words_per_chunk = 8;  // 8 random bits per element
  static constexpr double bytes_per_element = 17.0 / 32.0;
  static constexpr bool is_exact_fp32 = false;

  /// 2^(e - 127) for an E8M0 byte (NaN for 255; 2^-127 is subnormal).
  REPLAYSSM_HOST_DEVICE static float scale_value(uint8_t e) {
    if (e == 255) return replayssm::math::float_from_bits(0x7FC00000u);
    if (e == 0) return replayssm::math::float_from_bits(0x00400000u);
    return replayssm::math::float_from_bits(uint32_t(e) << 23);
  }

  REPLAYSSM_HOST_DEVICE static void decode(const uint8_t* data_chunk, const uint8_t* scale_chunk,
                                           float (&out)[chunk_elems]) {
    const float scale = scale_value(scale_chunk[0]);
    const uint32_t* words = reinterpret_cast<const uint32_t*>(data_chunk);
    for (int i = 0; i < chunk_elems; ++i) {
      const auto code = replayssm::float_e2m1_t::from_bits(uint8_t((words[i / 8] >> (4 * (i % 8))) & 0xFu));
      out[i] = replayssm::math::mul(replayssm::convert<float, replayssm::float_e2m1_t>::apply(code), scale);
    }
  }

  template <class Round>
  REPLAYSSM_HOST_DEVICE static void encode(const float (&in)[chunk_elems], const uint32_t* rbits, uint8_t* data_chunk,
                                           uint8_t* scale_chunk) {
    uint32_t amax = 0;
    for (int i = 0; i < chunk_elems; ++i) {
      const uint32_t a = replayssm::math::float_bits(in[i]) & 0x7FFFFFFFu;
      amax = a > amax ? a : amax;
    }
    uint32_t words[4] = {0u, 0u, 0u, 0u};
    if (amax >= 0x7F800000u) {  // an infinity or a NaN: the whole block decodes as NaN
      scale_chunk[0] = 255;
    } else {
      // floor(log2 amax) - 2, clamped to the E8M0 range; 0 for an all-zero block.
      int shared = amax == 0 ? 0 : int(amax >> 23) - 127 - 2;
      shared = shared < -127 ? -127 : (shared > 127 ? 127 : shared);
      scale_chunk[0] = uint8_t(shared + 127);
      // Dividing by a power of two is exact unless the quotient is subnormal.
      const float scale = scale_value(scale_chunk[0]);
      for (int i = 0; i < chunk_elems; ++i) {
        const float v = replayssm::math::div(in[i], scale);
        replayssm::float_e2m1_t code;
        if constexpr (Round::is_stochastic) {
          code = replayssm::convert<replayssm::float_e2m1_t, float, Round>::apply(v, rbits[i / 4] >> (8 * (i % 4)));
        } else {
          code = replayssm::convert<replayssm::float_e2m1_t, float, Round>::apply(v);
        }
        words[i / 8] |= uint32_t(code.bits & 0xFu) << (4 * (i % 8));
      }
    }
    uint32_t* out = reinterpret_cast<uint32_t*>(data_chunk);
    for (int k = 0; k < 4; ++k) out[k] = words[k];
  }
};

}  // namespace my_engine
