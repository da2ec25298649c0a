// SPDX-License-Identifier: Apache-2.0
/// \file formats.hpp
/// Storage formats of a state tensor ("block formats"): fp32, fp16, bf16, fp8 e4m3 with an
/// fp32 scale per 16 elements, and NVFP4 (e2m1 with a ue4m3 scale per 16 elements).
///
/// A state format is a struct of static members that converts *chunks* of consecutive fp32
/// elements to and from a data plane and a scale plane; engines may write their own.
/// `state_format_v<F>` checks its members for the policy layer's static_asserts. The
/// concept's members, each format's layout, non-finite values, and the conditions for
/// bit-identical host and device results (no flush-to-zero) are in docs/formats.md ("The
/// formats", "Bringing your own format", "Reproducibility conditions").
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "replayssm/config.hpp"
#include "replayssm/numeric/convert.hpp"
#include "replayssm/numeric/math.hpp"
#include "replayssm/numeric/rounding.hpp"
#include "replayssm/numeric/types.hpp"

namespace replayssm {
namespace detail {

/// Loads N 32-bit words from `p`, aligned to 4 N bytes: one vector load on the device.
template <int N>
REPLAYSSM_HOST_DEVICE void load_words(const uint8_t* p, uint32_t (&w)[N]) {
  static_assert(N == 1 || N == 2 || N == 4, "load_words: 1, 2 or 4 words");
#if REPLAYSSM_DEVICE_PASS
  if constexpr (N == 4) {
    const uint4 v = *reinterpret_cast<const uint4*>(p);
    w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
  } else if constexpr (N == 2) {
    const uint2 v = *reinterpret_cast<const uint2*>(p);
    w[0] = v.x, w[1] = v.y;
  } else {
    w[0] = *reinterpret_cast<const uint32_t*>(p);
  }
#else
  std::memcpy(w, p, sizeof w);
#endif
}

/// Stores N 32-bit words to `p`, aligned to 4 N bytes: one vector store on the device.
template <int N>
REPLAYSSM_HOST_DEVICE void store_words(uint8_t* p, const uint32_t (&w)[N]) {
  static_assert(N == 1 || N == 2 || N == 4, "store_words: 1, 2 or 4 words");
#if REPLAYSSM_DEVICE_PASS
  if constexpr (N == 4) {
    *reinterpret_cast<uint4*>(p) = make_uint4(w[0], w[1], w[2], w[3]);
  } else if constexpr (N == 2) {
    *reinterpret_cast<uint2*>(p) = make_uint2(w[0], w[1]);
  } else {
    *reinterpret_cast<uint32_t*>(p) = w[0];
  }
#else
  std::memcpy(p, w, sizeof w);
#endif
}

/// fp32 bits of max |in[i]|, ordered as integers so that NaN > inf > every finite value.
template <int N>
REPLAYSSM_HOST_DEVICE uint32_t amax_bits(const float (&in)[N]) {
  uint32_t amax = 0;
  for (int i = 0; i < N; ++i) {
    const uint32_t a = math::float_bits(in[i]) & fp32_abs_mask;
    amax = a > amax ? a : amax;
  }
  return amax;
}

/// `in` divided by a finite block's `scale` (nonzero), for its codes. Rounding to nearest
/// multiplies by 1 / scale, one ulp smaller where that would carry the largest magnitude
/// (fp32 bits `amax`) past `max_code`, which the quotient of a block that does not saturate
/// never passes: the correctly rounded division per element had been about a tenth of a
/// narrow flush's instructions (ncu), and the nearest code does not see the last ulp but at
/// an exact tie. Stochastic rounding divides: a product one ulp below a code would round
/// down with the probability of its random bits' last unit.
template <class Round, int N>
REPLAYSSM_HOST_DEVICE void scale_block(const float (&in)[N], float scale, uint32_t amax, float max_code,
                                       float (&scaled)[N]) {
  if constexpr (Round::is_stochastic) {
    for (int i = 0; i < N; ++i) scaled[i] = math::div(in[i], scale);
  } else {
    float inverse = math::div(1.0f, scale);
    if (math::mul(math::float_from_bits(amax), inverse) > max_code)
      inverse = math::float_from_bits(math::float_bits(inverse) - 1u);
    for (int i = 0; i < N; ++i) scaled[i] = math::mul(in[i], inverse);
  }
}

/// Whether T's nearest-even encode converts a packed group at once (`apply_packed`).
template <class T, class = void>
struct has_packed_nearest : std::false_type {};
template <class T>
struct has_packed_nearest<T, std::void_t<decltype(convert<T, float, round_nearest_even>::apply_packed(
                                 std::declval<const float*>()))>> : std::true_type {};

/// `Count` elements of `in` encoded to T and packed Width bits apart, element 0 lowest.
/// Stochastic rounding converts them as one `cvt.rs` group from `random_word`.
template <class T, int Width, int Count, class Round>
REPLAYSSM_HOST_DEVICE uint32_t encode_group(const float* in, uint32_t random_word) {
  if constexpr (Round::is_stochastic) {
    using C = convert<T, float, round_stochastic>;
    static_assert(C::elems_per_word == Count, "encode_group: Count must match cvt.rs");
    return C::apply_packed(in, random_word);
  } else if constexpr (has_packed_nearest<T>::value) {
    using C = convert<T, float, Round>;
    static_assert(C::elems_per_word == Count, "encode_group: Count must match the packed encode");
    return C::apply_packed(in);
  } else {
    uint32_t packed = 0;
    for (int i = 0; i < Count; ++i) {
      packed |= static_cast<uint32_t>(convert<T, float, Round>::apply(in[i]).bits) << (i * Width);
    }
    return packed;
  }
}

/// The 16-bit formats (all of fp16_format and bf16_format but their names): unscaled, 8
/// elements per chunk, two per 32-bit word, element 2k in the low half.
template <class T>
struct half_width_format {
  static constexpr int chunk_elems = 8;
  static constexpr int block_elems = 1;
  static constexpr int data_bytes_per_chunk = 16;
  static constexpr int scale_bytes_per_chunk = 0;
  static constexpr int random_words_per_chunk = 4;
  static constexpr double bytes_per_element = 2.0;
  static constexpr bool is_exact_fp32 = false;

  REPLAYSSM_HOST_DEVICE static void decode(const uint8_t* data_chunk, const uint8_t* /*scale*/,
                                           float (&out)[chunk_elems]) {
    decode_words<nan_payload::kept>(data_chunk, out);
  }
  /// `decode` for operands of arithmetic (`decode_operands`): a NaN may lose its payload.
  REPLAYSSM_HOST_DEVICE static void decode_operands(const uint8_t* data_chunk, const uint8_t* /*scale*/,
                                                    float (&out)[chunk_elems]) {
    decode_words<nan_payload::dropped>(data_chunk, out);
  }

  template <class Round>
  REPLAYSSM_HOST_DEVICE static void encode(const float (&in)[chunk_elems], const uint32_t* rbits, uint8_t* data_chunk,
                                           uint8_t* /*scale*/) {
    uint32_t w[4];
    if constexpr (Round::is_stochastic) {
      for (int k = 0; k < 4; ++k) w[k] = encode_group<T, 16, 2, Round>(in + 2 * k, rbits[k]);
    } else {
      convert<T, float, Round>::template apply_words<4>(in, w);
    }
    store_words(data_chunk, w);
  }

 private:
  template <nan_payload Nan>
  REPLAYSSM_HOST_DEVICE static void decode_words(const uint8_t* data_chunk, float (&out)[chunk_elems]) {
    uint32_t w[4];
    load_words(data_chunk, w);
    convert<float, T>::template apply_words<4, Nan>(w, out);
  }
};

}  // namespace detail

/// fp32, unscaled and exact: encode is the identity whatever the rounding.
struct fp32_format {
  static constexpr const char* name = "fp32";
  static constexpr int chunk_elems = 4;
  static constexpr int block_elems = 1;
  static constexpr int data_bytes_per_chunk = 16;
  static constexpr int scale_bytes_per_chunk = 0;
  static constexpr int random_words_per_chunk = 4;
  static constexpr double bytes_per_element = 4.0;
  static constexpr bool is_exact_fp32 = true;

  REPLAYSSM_HOST_DEVICE static void decode(const uint8_t* data_chunk, const uint8_t* /*scale*/,
                                           float (&out)[chunk_elems]) {
    uint32_t w[4];
    detail::load_words(data_chunk, w);
    for (int i = 0; i < chunk_elems; ++i) out[i] = math::float_from_bits(w[i]);
  }

  template <class Round>
  REPLAYSSM_HOST_DEVICE static void encode(const float (&in)[chunk_elems], const uint32_t* /*rbits*/,
                                           uint8_t* data_chunk, uint8_t* /*scale*/) {
    uint32_t w[4];
    for (int i = 0; i < chunk_elems; ++i) w[i] = math::float_bits(in[i]);
    detail::store_words(data_chunk, w);
  }
};

/// IEEE binary16, unscaled: overflow rounds to infinity, subnormals kept.
struct fp16_format : detail::half_width_format<half_t> {
  static constexpr const char* name = "fp16";
};

/// bfloat16, unscaled: fp32's range with 8 significant bits.
struct bf16_format : detail::half_width_format<bfloat16_t> {
  static constexpr const char* name = "bf16";
};

/// FP8 E4M3 with one fp32 scale per block of 16: element = e4m3 code * scale.
///
/// The scale is amax / 448 rounded up to 20 significant bits and raised to at least
/// 2^-121. With 20 bits, code * scale is exact in fp32, so decoding is exact (and immune to
/// multiply-add contraction) and a decoded block re-encodes to the same bytes under
/// nearest even. Relative error per element: at most 2^-4 (nearest) or 2^-3 (stochastic)
/// of |v|, or 2^-10 (2^-9) of the scale in the e4m3 subnormal range, i.e. for |v| below
/// amax / 2^15. Blocks with amax below 448 * 2^-121 (about 1.7e-34) share the floor scale
/// and lose precision; a block whose amax is within 2^-19 of FLT_MAX may decode its largest
/// element as infinity. An all-zero block stores scale 0 and decodes to (signed) zeros.
struct fp8_e4m3_format {
  static constexpr const char* name = "fp8_e4m3";
  static constexpr int chunk_elems = 16;
  static constexpr int block_elems = 16;
  static constexpr int data_bytes_per_chunk = 16;
  static constexpr int scale_bytes_per_chunk = 4;
  static constexpr int random_words_per_chunk = 4;
  static constexpr double bytes_per_element = 1.25;
  static constexpr bool is_exact_fp32 = false;
  /// Four e4m3 NaN codes: the data of a block holding an infinity or a NaN.
  static constexpr uint32_t nan_codes = 0x7F7F7F7Fu;

  REPLAYSSM_HOST_DEVICE static void decode(const uint8_t* data_chunk, const uint8_t* scale_chunk,
                                           float (&out)[chunk_elems]) {
    decode_scaled<nan_payload::kept>(data_chunk, scale_chunk, out);
  }
  /// `decode` for operands of arithmetic (`decode_operands`): a NaN may lose its payload.
  REPLAYSSM_HOST_DEVICE static void decode_operands(const uint8_t* data_chunk, const uint8_t* scale_chunk,
                                                    float (&out)[chunk_elems]) {
    decode_scaled<nan_payload::dropped>(data_chunk, scale_chunk, out);
  }

  template <class Round>
  REPLAYSSM_HOST_DEVICE static void encode(const float (&in)[chunk_elems], const uint32_t* rbits, uint8_t* data_chunk,
                                           uint8_t* scale_chunk) {
    const uint32_t amax = detail::amax_bits(in);
    const float scale = scale_for_amax(amax);
    uint32_t w[4] = {nan_codes, nan_codes, nan_codes, nan_codes};
    // A non-finite block is not scaled: NaN results carry platform-dependent signs,
    // which e4m3's stochastic NaN would keep.
    if (amax < detail::fp32_inf_bits) {
      // An all-zero block is scaled by one so that its zeros keep their signs.
      float scaled[chunk_elems];
      detail::scale_block<Round>(in, amax == 0 ? 1.0f : scale, amax, 448.0f, scaled);
      for (int k = 0; k < 4; ++k) {
        w[k] = detail::encode_group<float_e4m3_t, 8, 4, Round>(scaled + 4 * k, Round::is_stochastic ? rbits[k] : 0u);
      }
    }
    detail::store_words(data_chunk, w);
    const uint32_t scale_word[1] = {math::float_bits(scale)};
    detail::store_words(scale_chunk, scale_word);
  }

  /// The block scale for the fp32 bits `amax` of max |v|: NaN when amax is not finite, 0
  /// for an all-zero block, else amax / 448 rounded up to 20 significant bits, >= 2^-121.
  REPLAYSSM_HOST_DEVICE static float scale_for_amax(uint32_t amax) {
    if (amax >= detail::fp32_inf_bits) return math::float_from_bits(detail::fp32_quiet_nan_bits);
    if (amax == 0) return 0.0f;
    // 2^-121: the least scale whose 20-bit multiples by e4m3 codes (down to 2^-9) stay
    // exact, i.e. do not drop below fp32's 2^-149 resolution.
    constexpr uint32_t min_scale_bits = 6u << 23;
    const uint32_t quotient = math::float_bits(math::div(math::float_from_bits(amax), 448.0f));
    // Rounding the bit pattern up to a multiple of 16 keeps 20 significant bits; a carry
    // into the exponent field is the correct next binade.
    const uint32_t rounded = (quotient + 0xFu) & ~0xFu;
    return math::float_from_bits(rounded > min_scale_bits ? rounded : min_scale_bits);
  }

 private:
  template <nan_payload Nan>
  REPLAYSSM_HOST_DEVICE static void decode_scaled(const uint8_t* data_chunk, const uint8_t* scale_chunk,
                                                  float (&out)[chunk_elems]) {
    uint32_t w[4];
    uint32_t scale_word[1];
    detail::load_words(data_chunk, w);
    detail::load_words(scale_chunk, scale_word);
    const float scale = math::float_from_bits(scale_word[0]);
    convert<float, float_e4m3_t>::template apply_words<4, Nan>(w, out);
    for (float& v : out) v = math::mul(v, scale);
  }
};

/// NVFP4: FP4 E2M1 elements with one unsigned-E4M3 scale per block of 16: element = e2m1
/// code * scale. Data: 8 bytes, two codes per byte, element 2i in the low nibble.
///
/// The scale is the smallest ue4m3 value s with 6 s >= amax (amax / 6 rounded up), so no
/// element saturates unless amax > 6 * 448 = 2688; larger blocks clamp to +-2688. There is
/// no second-level (per-tensor) scale, so the dynamic range is the scale's: full 3-bit
/// scale precision needs amax in [6 * 2^-6, 2688] (about [0.094, 2688]); below it the scale
/// is subnormal (coarser, at worst 2x amax / 6) and floors at 2^-9, so elements under
/// 2^-11 flush to zero. Error per element: at most s (nearest) or 2 s (stochastic), where
/// s < 8/7 amax / 6 whenever s is normal (s >= 2^-6). Decoding is exact, and with a normal
/// scale a decoded block re-encodes to the same bytes under nearest even; with a
/// subnormal one the amax element may round below 6 and the next encode picks a smaller
/// scale. An all-zero block stores scale 0 and decodes to (signed) zeros; a non-finite
/// block stores the NaN scale 0x7F.
struct nvfp4_format {
  static constexpr const char* name = "nvfp4";
  static constexpr int chunk_elems = 16;
  static constexpr int block_elems = 16;
  static constexpr int data_bytes_per_chunk = 8;
  static constexpr int scale_bytes_per_chunk = 1;
  static constexpr int random_words_per_chunk = 4;
  static constexpr double bytes_per_element = 0.5625;
  static constexpr bool is_exact_fp32 = false;

  REPLAYSSM_HOST_DEVICE static void decode(const uint8_t* data_chunk, const uint8_t* scale_chunk,
                                           float (&out)[chunk_elems]) {
    uint32_t w[2];
    detail::load_words(data_chunk, w);
    // A code's three magnitude bits at bits 11..9 of a half and its sign at bit 15 make the
    // half code * 2^-14 exactly (code 0.5 a subnormal half); then one exact conversion and one
    // exact multiply by scale * 2^14 per element. The byte permute, integer conversion and
    // sign fix per element before were half of an NVFP4 read step's instructions (ncu).
    const float scale_2_14 =
        math::mul(0x1p14f, convert<float, float_ue4m3_t>::apply(float_ue4m3_t::from_bits(scale_chunk[0])));
    for (int k = 0; k < 2; ++k) {
      const uint32_t signs = w[k] & 0x88888888u;
      // Codes j and j + 4 of word k come out of one 64-bit shift into the halves of one word.
      const uint64_t magnitudes = uint64_t(w[k] ^ signs) << 12, signs_15 = uint64_t(signs) << 15;
      for (int j = 0; j < 4; ++j) {
        const uint32_t halves = (static_cast<uint32_t>(magnitudes >> (3 + 4 * j)) & 0x0E000E00u) |
                                (static_cast<uint32_t>(signs_15 >> (3 + 4 * j)) & 0x80008000u);
        out[8 * k + j] = math::mul(half_to_float(halves), scale_2_14);
        out[8 * k + j + 4] = math::mul(half_to_float(halves >> 16), scale_2_14);
      }
    }
  }

  template <class Round>
  REPLAYSSM_HOST_DEVICE static void encode(const float (&in)[chunk_elems], const uint32_t* rbits, uint8_t* data_chunk,
                                           uint8_t* scale_chunk) {
    const uint32_t amax = detail::amax_bits(in);
    const float_ue4m3_t scale_code = scale_for_amax(amax);
    uint32_t w[2] = {0u, 0u};
    // A non-finite block keeps zero codes under its NaN scale (see fp8_e4m3_format).
    if (amax < detail::fp32_inf_bits) {
      // A zero scale means an all-zero block: scale by one so its zeros keep their signs.
      const float scale = scale_code.bits == 0 ? 1.0f : convert<float, float_ue4m3_t>::apply(scale_code);
      float scaled[chunk_elems];
      detail::scale_block<Round>(in, scale, amax, 6.0f, scaled);
      for (int k = 0; k < 2; ++k) {
        const float* group = scaled + 8 * k;
        const uint32_t lo =
            detail::encode_group<float_e2m1_t, 4, 4, Round>(group, Round::is_stochastic ? rbits[2 * k] : 0u);
        const uint32_t hi =
            detail::encode_group<float_e2m1_t, 4, 4, Round>(group + 4, Round::is_stochastic ? rbits[2 * k + 1] : 0u);
        w[k] = lo | (hi << 16);
      }
    }
    detail::store_words(data_chunk, w);
    scale_chunk[0] = scale_code.bits;
  }

  /// The low half of `halves` (never a NaN) to fp32.
  REPLAYSSM_HOST_DEVICE static float half_to_float(uint32_t halves) {
    return convert<float, half_t>::apply_non_nan(half_t::from_bits(static_cast<uint16_t>(halves)));
  }

  /// The block scale for the fp32 bits `amax` of max |v|: NaN (0x7F) when amax is not
  /// finite, 0 for an all-zero block, else the smallest ue4m3 s with 6 s >= amax, capped
  /// at 448.
  REPLAYSSM_HOST_DEVICE static float_ue4m3_t scale_for_amax(uint32_t amax) {
    if (amax >= detail::fp32_inf_bits) return float_ue4m3_t::from_bits(0x7F);
    if (amax == 0) return float_ue4m3_t::from_bits(0);
    const float amax_value = math::float_from_bits(amax);
    float_ue4m3_t s = detail::encode_ue4m3_upward(math::div(amax_value, 6.0f));
    // amax / 6 was rounded to fp32 first (possibly down, or to zero); 6 s is exact, so
    // this comparison settles it.
    const float six_s = 6.0f * convert<float, float_ue4m3_t>::apply(s);
    if (six_s < amax_value && s.bits < 0x7E) s = float_ue4m3_t::from_bits(static_cast<uint8_t>(s.bits + 1));
    return s;
  }
};

namespace detail {

template <class F, class = void>
struct has_state_format_members : std::false_type {};

template <class F>
struct has_state_format_members<
    F, std::void_t<decltype(F::name), decltype(F::chunk_elems), decltype(F::block_elems),
                   decltype(F::data_bytes_per_chunk), decltype(F::scale_bytes_per_chunk),
                   decltype(F::random_words_per_chunk), decltype(F::bytes_per_element), decltype(F::is_exact_fp32),
                   decltype(F::decode(std::declval<const uint8_t*>(), std::declval<const uint8_t*>(),
                                      std::declval<float (&)[F::chunk_elems]>())),
                   decltype(F::template encode<round_nearest_even>(std::declval<const float (&)[F::chunk_elems]>(),
                                                                   std::declval<const uint32_t*>(),
                                                                   std::declval<uint8_t*>(), std::declval<uint8_t*>())),
                   decltype(F::template encode<round_stochastic>(
                       std::declval<const float (&)[F::chunk_elems]>(), std::declval<const uint32_t*>(),
                       std::declval<uint8_t*>(), std::declval<uint8_t*>()))>> : std::true_type {};

template <class F>
constexpr bool state_format_shape_ok() {
  if constexpr (has_state_format_members<F>::value) {
    return F::chunk_elems > 0 && F::block_elems > 0 && F::chunk_elems % F::block_elems == 0 &&
           F::data_bytes_per_chunk > 0 && F::scale_bytes_per_chunk >= 0 && F::random_words_per_chunk >= 0;
  } else {
    return false;
  }
}

}  // namespace detail

/// True when F models the state-format concept above: all members present with callable
/// decode / encode<round_nearest_even> / encode<round_stochastic>, and a consistent shape
/// (positive chunk and block sizes, chunk_elems % block_elems == 0).
template <class F>
struct is_state_format : std::bool_constant<detail::state_format_shape_ok<F>()> {};

/// \copydoc is_state_format
template <class F>
inline constexpr bool state_format_v = is_state_format<F>::value;

/// Largest chunk a state format may have. A kernel holds a few chunks of floats per thread in
/// registers; larger chunks (a per-row format of 128 elements, say) spill to local memory.
/// Split such a format's rows into chunks of at most this many elements, each with its own
/// scales.
inline constexpr int max_chunk_elems = 32;

namespace detail {

template <class F, template <class> class Member, class = void>
struct has_member : std::false_type {};
template <class F, template <class> class Member>
struct has_member<F, Member, std::void_t<Member<F>>> : std::true_type {};

template <class F>
using name_t = decltype(F::name);
template <class F>
using chunk_elems_t = decltype(F::chunk_elems);
template <class F>
using block_elems_t = decltype(F::block_elems);
template <class F>
using data_bytes_t = decltype(F::data_bytes_per_chunk);
template <class F>
using scale_bytes_t = decltype(F::scale_bytes_per_chunk);
template <class F>
using random_words_t = decltype(F::random_words_per_chunk);
template <class F>
using bytes_per_element_t = decltype(F::bytes_per_element);
template <class F>
using is_exact_fp32_t = decltype(F::is_exact_fp32);
template <class F>
using decode_t = decltype(F::decode(std::declval<const uint8_t*>(), std::declval<const uint8_t*>(),
                                    std::declval<float (&)[F::chunk_elems]>()));
template <class F>
using encode_t = decltype(F::template encode<round_stochastic>(std::declval<const float (&)[F::chunk_elems]>(),
                                                               std::declval<const uint32_t*>(),
                                                               std::declval<uint8_t*>(), std::declval<uint8_t*>()));

}  // namespace detail

/// Checks `F` against the state-format concept one member at a time, so that a format missing
/// one gets an error that names it; the policy layer instantiates it for every format.
template <class F>
struct state_format_check {
  template <template <class> class Member>
  static constexpr bool has = detail::has_member<F, Member>::value;
  static_assert(has<detail::name_t>, "state format: missing `static constexpr const char* name`");
  static_assert(has<detail::chunk_elems_t>, "state format: missing `static constexpr int chunk_elems`");
  static_assert(has<detail::block_elems_t>, "state format: missing `static constexpr int block_elems`");
  static_assert(has<detail::data_bytes_t>, "state format: missing `static constexpr int data_bytes_per_chunk`");
  static_assert(has<detail::scale_bytes_t>, "state format: missing `static constexpr int scale_bytes_per_chunk`");
  static_assert(has<detail::random_words_t>, "state format: missing `static constexpr int random_words_per_chunk`");
  static_assert(has<detail::bytes_per_element_t>, "state format: missing `static constexpr double bytes_per_element`");
  static_assert(has<detail::is_exact_fp32_t>, "state format: missing `static constexpr bool is_exact_fp32`");
  static_assert(has<detail::decode_t>,
                "state format: missing `static void decode(const uint8_t*, const uint8_t*, float (&)[chunk_elems])`");
  static_assert(has<detail::encode_t>,
                "state format: missing `template <class Round> static void encode(const float (&)[chunk_elems], "
                "const uint32_t*, uint8_t*, uint8_t*)`");
  static constexpr bool complete = state_format_v<F>;
  static_assert(!complete || F::chunk_elems <= max_chunk_elems,
                "state format: chunk_elems is above max_chunk_elems (32): its chunks would spill from registers to "
                "local memory in the kernels; use smaller chunks (docs/formats.md, \"Bringing your own format\")");
  static constexpr bool ok = complete;
};

namespace detail {
template <class F>
using decode_operands_t = decltype(F::decode_operands(std::declval<const uint8_t*>(), std::declval<const uint8_t*>(),
                                                      std::declval<float (&)[F::chunk_elems]>()));
}  // namespace detail

/// Decodes a chunk of `F` into operands of arithmetic (a read step's products, a flush's
/// decayed checkpoint): by `F::decode_operands` where the format has one (a NaN may come back
/// with another payload, which the GPU's arithmetic drops anyway, and the device skips its
/// NaN test), else by `F::decode`. Values stored again as decoded (a copy) take `decode`,
/// which keeps a NaN's bits.
template <class F>
REPLAYSSM_HOST_DEVICE void decode_operands(const uint8_t* data_chunk, const uint8_t* scale_chunk,
                                           float (&out)[F::chunk_elems]) {
  if constexpr (detail::has_member<F, detail::decode_operands_t>::value)
    F::decode_operands(data_chunk, scale_chunk, out);
  else
    F::decode(data_chunk, scale_chunk, out);
}

}  // namespace replayssm
