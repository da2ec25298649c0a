// SPDX-License-Identifier: Apache-2.0
/// \file convert.hpp
/// Conversions between fp32 and the narrow formats of numeric/types.hpp, as one struct
/// template `convert<To, From, Round>` with a static `apply`: exact decodes, IEEE
/// nearest-even encodes (satfinite for the 8- and 4-bit types), and stochastic rounding with
/// the semantics and random-bit layout of PTX `cvt.rs`, in software everywhere and in
/// hardware where REPLAYSSM_HAS_HW_STOCHASTIC_ROUNDING is 1. Integer arithmetic throughout, so
/// host and device agree bit for bit. The specification (special values, the rounding rule,
/// which bits of which word each element reads, and where the hardware details come from)
/// is docs/formats.md, "Element conversions" and "Stochastic rounding".
#pragma once

#include <cstdint>

#include "replayssm/config.hpp"
#include "replayssm/numeric/math.hpp"
#include "replayssm/numeric/rounding.hpp"
#include "replayssm/numeric/types.hpp"

namespace replayssm {

/// Converts a `From` to a `To` with rounding mode `Round`; specialised below.
template <class To, class From, class Round = round_nearest_even>
struct convert;

/// What a packed conversion to fp32 (`apply_words`) keeps of a NaN: its payload, which a
/// value stored again as decoded needs (it re-encodes to the same bits), or only that it is
/// a NaN, which is all an operand of arithmetic needs (the GPU's arithmetic returns its
/// canonical NaN whatever the payload): the device conversion then takes no NaN test.
enum class nan_payload : uint8_t { kept, dropped };

namespace detail {

/// Position of the most significant set bit of x != 0.
REPLAYSSM_HOST_DEVICE int leading_one(uint32_t x) {
#if REPLAYSSM_DEVICE_PASS
  return 31 - __clz(x);
#else
  return 31 - __builtin_clz(x);
#endif
}

/// The low 16 bits of x in reverse order.
REPLAYSSM_HOST_DEVICE uint32_t bit_reverse16(uint32_t x) {
#if REPLAYSSM_DEVICE_PASS
  return __brev(x) >> 16;
#else
  x = ((x >> 1) & 0x5555u) | ((x & 0x5555u) << 1);
  x = ((x >> 2) & 0x3333u) | ((x & 0x3333u) << 2);
  x = ((x >> 4) & 0x0F0Fu) | ((x & 0x0F0Fu) << 4);
  return ((x >> 8) & 0x00FFu) | ((x & 0x00FFu) << 8);
#endif
}

constexpr uint32_t fp32_abs_mask = 0x7FFFFFFFu;
constexpr uint32_t fp32_sign_mask = 0x80000000u;
constexpr uint32_t fp32_inf_bits = 0x7F800000u;
constexpr uint32_t fp32_quiet_nan_bits = 0x7FC00000u;

/// Grid of a narrow binary format, read by the shared encoder and decoder.
/// `emin` is the exponent of the smallest normal, `max_code` the code of the largest
/// finite magnitude. Non-saturating formats have infinity at max_code + 1.
template <class T>
struct encoding;

template <>
struct encoding<half_t> {
  static constexpr int man_bits = 10;
  static constexpr int emin = -14;
  static constexpr uint32_t max_code = 0x7BFFu;
  static constexpr bool saturates = false;
  static constexpr uint32_t sign_bit = 0x8000u;
  static constexpr uint32_t nan_code = 0x7FFFu;
};

template <>
struct encoding<bfloat16_t> {
  static constexpr int man_bits = 7;
  static constexpr int emin = -126;
  static constexpr uint32_t max_code = 0x7F7Fu;
  static constexpr bool saturates = false;
  static constexpr uint32_t sign_bit = 0x8000u;
  static constexpr uint32_t nan_code = 0x7FFFu;
};

template <>
struct encoding<float_e4m3_t> {
  static constexpr int man_bits = 3;
  static constexpr int emin = -6;
  static constexpr uint32_t max_code = 0x7Eu;
  static constexpr bool saturates = true;
  static constexpr uint32_t sign_bit = 0x80u;
  static constexpr uint32_t nan_code = 0x7Fu;
};

template <>
struct encoding<float_ue4m3_t> : encoding<float_e4m3_t> {
  static constexpr uint32_t sign_bit = 0u;
};

template <>
struct encoding<float_e2m1_t> {
  static constexpr int man_bits = 1;
  static constexpr int emin = 0;
  static constexpr uint32_t max_code = 0x7u;
  static constexpr bool saturates = true;
  static constexpr uint32_t sign_bit = 0x8u;
  static constexpr uint32_t nan_code = 0x7u;
};

/// A finite |v| on the grid of a format: the magnitude code of lo (the grid value at or
/// below |v|) and the discarded fraction f of one step, as f * 2^32 truncated plus a
/// sticky bit for what lies below.
struct grid_split {
  uint32_t code;
  uint32_t fraction;
  bool sticky;
};

/// Splits the finite fp32 magnitude with bits `abs_bits` on the grid of E. Codes past the
/// format's range are returned as they come; the caller clamps.
template <class E>
REPLAYSSM_HOST_DEVICE grid_split split_on_grid(uint32_t abs_bits) {
  const int exp_field = static_cast<int>(abs_bits >> 23);
  const uint64_t significand = (abs_bits & 0x7FFFFFu) | (exp_field != 0 ? 0x800000u : 0u);
  const int exponent = (exp_field != 0 ? exp_field : 1) - 127;
  const int grid_exponent = exponent > E::emin ? exponent : E::emin;
  // Low significand bits below the grid step; past 57 every bit is already below the
  // 32-bit fraction window, so the result no longer changes.
  int shift = grid_exponent - exponent + 23 - E::man_bits;
  shift = shift < 57 ? shift : 57;
  const uint64_t rest = significand & ((uint64_t{1} << shift) - 1u);
  grid_split s;
  // Code = (biased exponent << man_bits) + significand, so a mantissa overflow carries
  // into the exponent, subnormals included (their biased exponent is 0, their grid
  // exponent emin).
  s.code =
      (static_cast<uint32_t>(grid_exponent - E::emin) << E::man_bits) + static_cast<uint32_t>(significand >> shift);
  if (shift <= 32) {
    s.fraction = static_cast<uint32_t>(rest << (32 - shift));
    s.sticky = false;
  } else {
    s.fraction = static_cast<uint32_t>(rest >> (shift - 32));
    s.sticky = (rest & ((uint64_t{1} << (shift - 32)) - 1u)) != 0;
  }
  return s;
}

/// Round to nearest, ties to the even code.
struct step_nearest_even {
  REPLAYSSM_HOST_DEVICE bool operator()(const grid_split& s) const {
    constexpr uint32_t half = 0x80000000u;
    return s.fraction > half || (s.fraction == half && (s.sticky || (s.code & 1u) != 0));
  }
};

/// Round the magnitude up whenever it is off the grid.
struct step_upward {
  REPLAYSSM_HOST_DEVICE bool operator()(const grid_split& s) const { return s.fraction != 0 || s.sticky; }
};

/// `cvt.rs`: the top Bits bits of the fraction plus the random field carry out.
template <int Bits>
struct step_stochastic {
  uint32_t random;
  REPLAYSSM_HOST_DEVICE bool operator()(const grid_split& s) const {
    constexpr uint32_t mask = (1u << Bits) - 1u;
    return (((s.fraction >> (32 - Bits)) + (random & mask)) >> Bits) != 0;
  }
};

/// Encodes fp32 `v` to the bits of E, stepping to the next code when `step_up` says so.
template <class E, class Step>
REPLAYSSM_HOST_DEVICE uint32_t encode_bits(float v, Step step_up, uint32_t nan_code) {
  const uint32_t bits = math::float_bits(v);
  const uint32_t abs_bits = bits & fp32_abs_mask;
  if (abs_bits > fp32_inf_bits) return nan_code;
  constexpr uint32_t overflow_code = E::saturates ? E::max_code : E::max_code + 1u;
  uint32_t magnitude = overflow_code;
  if (abs_bits != fp32_inf_bits) {
    const grid_split s = split_on_grid<E>(abs_bits);
    magnitude = s.code + (step_up(s) ? 1u : 0u);
    magnitude = magnitude <= E::max_code ? magnitude : overflow_code;
  }
  return ((bits >> 31) != 0 ? E::sign_bit : 0u) | magnitude;
}

/// fp32 bits of the finite magnitude code `magnitude` of E (exact).
template <class E>
REPLAYSSM_HOST_DEVICE uint32_t magnitude_to_fp32_bits(uint32_t magnitude) {
  constexpr uint32_t man_mask = (1u << E::man_bits) - 1u;
  const uint32_t exp_field = magnitude >> E::man_bits;
  const uint32_t mantissa = magnitude & man_mask;
  if (exp_field != 0) {
    const uint32_t fp32_exp = static_cast<uint32_t>(E::emin - 1 + 127) + exp_field;
    return (fp32_exp << 23) | (mantissa << (23 - E::man_bits));
  }
  if (mantissa == 0) return 0u;
  // Subnormal: mantissa * 2^(emin - man_bits); its leading one becomes the implicit bit.
  const int lead = leading_one(mantissa);
  const uint32_t fp32_exp = static_cast<uint32_t>(E::emin - E::man_bits + lead + 127);
  return (fp32_exp << 23) | ((mantissa - (1u << lead)) << (23 - lead));
}

/// The finite E4M3 code of magnitude `magnitude` (below 0x7F) and fp32 sign bit `sign` as
/// fp32: its exponent and significand fields placed at fp32's (bias 127 for 7) and scaled by
/// 2^120, exact for subnormal codes too (unless denormals are flushed). The general
/// conversion made FP8 read steps compute-bound, and cost NVFP4's block scales (UE4M3) a
/// branch per chunk.
REPLAYSSM_HOST_DEVICE float e4m3_to_float(uint32_t sign, uint32_t magnitude) {
  return math::mul(math::float_from_bits(sign | magnitude << 20), 0x1p120f);
}

/// Nearest-even encode of fp32 to T.
template <class T>
REPLAYSSM_HOST_DEVICE T encode_nearest(float v) {
  using E = encoding<T>;
  return T::from_bits(static_cast<decltype(T::bits)>(encode_bits<E>(v, step_nearest_even{}, E::nan_code)));
}

/// Software twin of a packed `cvt.rs`: C::apply on each element's random field, element
/// i at bits [i Width, (i + 1) Width) of the result.
template <class C, int Width>
REPLAYSSM_HOST_DEVICE uint32_t pack_stochastic(const float* in, uint32_t word) {
  uint32_t packed = 0;
  for (int i = 0; i < C::elems_per_word; ++i) {
    packed |= static_cast<uint32_t>(C::apply(in[i], C::random_field(i, word)).bits) << (i * Width);
  }
  return packed;
}

/// The smallest float_ue4m3_t value >= v (satfinite; NaN -> NaN, v <= 0 -> 0). NVFP4 block
/// scales round this way so that no element of the block overflows.
REPLAYSSM_HOST_DEVICE float_ue4m3_t encode_ue4m3_upward(float v) {
  using E = encoding<float_ue4m3_t>;
  if ((math::float_bits(v) >> 31) != 0 && (math::float_bits(v) & fp32_abs_mask) <= fp32_inf_bits) {
    return float_ue4m3_t::from_bits(0);
  }
  return float_ue4m3_t::from_bits(static_cast<uint8_t>(encode_bits<E>(v, step_upward{}, E::nan_code)));
}

}  // namespace detail

// ---- decode: exact, for every rounding mode ----------------------------------------------

/// half_t -> fp32. Infinities map to infinities, NaNs to quiet NaNs with the payload kept.
template <class Round>
struct convert<float, half_t, Round> {
  REPLAYSSM_HOST_DEVICE static float apply(half_t h) {
    const uint32_t sign = static_cast<uint32_t>(h.bits & 0x8000u) << 16;
    const uint32_t magnitude = h.bits & 0x7FFFu;
#if REPLAYSSM_DEVICE_PASS
    if (magnitude <= 0x7C00u) return apply_non_nan(h);
#endif
    if (magnitude >= 0x7C00u) {
      const uint32_t payload = (magnitude & 0x3FFu) << 13;
      return math::float_from_bits(sign | detail::fp32_inf_bits | (payload != 0 ? payload | 0x400000u : 0u));
    }
    return math::float_from_bits(sign | detail::magnitude_to_fp32_bits<detail::encoding<half_t>>(magnitude));
  }
  /// `apply` of a half that is not a NaN: on the device one hardware conversion, exact for
  /// every finite value and infinity (bit-identical to the integer path, which cost fp16
  /// states 4x their memory time).
  REPLAYSSM_HOST_DEVICE static float apply_non_nan(half_t h) {
#if REPLAYSSM_DEVICE_PASS
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h.bits));
    return f;
#else
    return apply(h);
#endif
  }
  /// The 2N halves of `words` (element 2k in the low half of word k) to fp32, each as
  /// `apply` converts it (a NaN's payload kept or not: `Nan`). On the device one test covers
  /// all of them: NaN-free words (nearly always) take the hardware conversion without a
  /// branch per element, which had been 37% of an FP16 read step's instructions; with
  /// `nan_payload::dropped` every word takes it (a NaN stays a NaN) and the test goes.
  template <int N, nan_payload Nan = nan_payload::kept>
  REPLAYSSM_HOST_DEVICE static void apply_words(const uint32_t (&words)[N], float (&out)[2 * N]) {
#if REPLAYSSM_DEVICE_PASS
    // A half's magnitude above 0x7C00 (a NaN) carries into its top bit; no carry crosses
    // the halves.
    uint32_t nan_test = 0;
    for (int k = 0; k < N; ++k) nan_test |= (words[k] & 0x7FFF7FFFu) + 0x03FF03FFu;
    const bool by_hardware = Nan == nan_payload::dropped || (nan_test & 0x80008000u) == 0;
    if (by_hardware) {
      for (int k = 0; k < N; ++k) {
        out[2 * k] = apply_non_nan(half_t::from_bits(static_cast<uint16_t>(words[k])));
        out[2 * k + 1] = apply_non_nan(half_t::from_bits(static_cast<uint16_t>(words[k] >> 16)));
      }
    }
#else
    constexpr bool by_hardware = false;
#endif
    if (!by_hardware) {
      for (int k = 0; k < N; ++k) {
        out[2 * k] = apply(half_t::from_bits(static_cast<uint16_t>(words[k])));
        out[2 * k + 1] = apply(half_t::from_bits(static_cast<uint16_t>(words[k] >> 16)));
      }
    }
  }
};

/// bfloat16_t -> fp32: the bits become the upper half.
template <class Round>
struct convert<float, bfloat16_t, Round> {
  REPLAYSSM_HOST_DEVICE static float apply(bfloat16_t b) {
    return math::float_from_bits(static_cast<uint32_t>(b.bits) << 16);
  }
  /// The 2N bfloat16 values of `words` (element 2k in the low half of word k) to fp32 (a
  /// NaN's payload always kept).
  template <int N, nan_payload = nan_payload::kept>
  REPLAYSSM_HOST_DEVICE static void apply_words(const uint32_t (&words)[N], float (&out)[2 * N]) {
    for (int k = 0; k < N; ++k) {
      out[2 * k] = math::float_from_bits(words[k] << 16);
      out[2 * k + 1] = math::float_from_bits(words[k] & 0xFFFF0000u);
    }
  }
};

/// float_e4m3_t -> fp32. S.1111.111 gives a quiet NaN with the sign kept.
template <class Round>
struct convert<float, float_e4m3_t, Round> {
  REPLAYSSM_HOST_DEVICE static float apply(float_e4m3_t x) {
    const uint32_t sign = static_cast<uint32_t>(x.bits & 0x80u) << 24;
    const uint32_t magnitude = x.bits & 0x7Fu;
    if (magnitude == 0x7Fu) return math::float_from_bits(sign | detail::fp32_quiet_nan_bits);
    return detail::e4m3_to_float(sign, magnitude);
  }
  /// The 4N codes of `words` (element 4k + i in byte i of word k) to fp32, each as `apply`
  /// converts it. On sm_89 and up, words without a NaN code (one test for all of them) take
  /// the hardware conversion of two codes to two halves (exact: every e4m3 value is a half),
  /// then one exact conversion each: the field shifts and NaN test per element had kept FP8
  /// read steps bound by instructions. With `nan_payload::dropped` every word takes the
  /// hardware conversion (a NaN code gives a NaN) and the test goes.
  template <int N, nan_payload Nan = nan_payload::kept>
  REPLAYSSM_HOST_DEVICE static void apply_words(const uint32_t (&words)[N], float (&out)[4 * N]) {
#if REPLAYSSM_DEVICE_PASS && __CUDA_ARCH__ >= 890
    // A code's magnitude 0x7F (a NaN) carries into its byte's top bit; no carry crosses bytes.
    uint32_t nan_test = 0;
    for (int k = 0; k < N; ++k) nan_test |= (words[k] & 0x7F7F7F7Fu) + 0x01010101u;
    const bool by_hardware = Nan == nan_payload::dropped || (nan_test & 0x80808080u) == 0;
    if (by_hardware) {
      for (int k = 0; k < 2 * N; ++k) {
        uint32_t halves;
        asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(halves) : "h"(static_cast<uint16_t>(words[k / 2] >> (16 * (k % 2)))));
        out[2 * k] = convert<float, half_t>::apply_non_nan(half_t::from_bits(static_cast<uint16_t>(halves)));
        out[2 * k + 1] = convert<float, half_t>::apply_non_nan(half_t::from_bits(static_cast<uint16_t>(halves >> 16)));
      }
    }
#else
    constexpr bool by_hardware = false;
#endif
    if (!by_hardware)
      for (int i = 0; i < 4 * N; ++i)
        out[i] = apply(float_e4m3_t::from_bits(static_cast<uint8_t>(words[i / 4] >> (8 * (i % 4)))));
  }
};

/// float_ue4m3_t -> fp32, reading the low 7 bits; 0x7F gives a quiet NaN.
template <class Round>
struct convert<float, float_ue4m3_t, Round> {
  REPLAYSSM_HOST_DEVICE static float apply(float_ue4m3_t x) {
    const uint32_t magnitude = x.bits & 0x7Fu;
    if (magnitude == 0x7Fu) return math::float_from_bits(detail::fp32_quiet_nan_bits);
    return detail::e4m3_to_float(0u, magnitude);
  }
};

/// float_e2m1_t -> fp32, reading the low nibble.
template <class Round>
struct convert<float, float_e2m1_t, Round> {
  REPLAYSSM_HOST_DEVICE static float apply(float_e2m1_t x) {
    // Twice the eight magnitudes {0, 0.5, 1, 1.5, 2, 3, 4, 6} as nibbles of one constant:
    // a shift and a conversion, exact, instead of the general path's subnormal branch
    // (NVFP4 reads were compute-bound on it).
    const float twice = static_cast<float>((0xC8643210u >> (4u * (x.bits & 0x7u))) & 0xFu);
    const float magnitude = twice * 0.5f;  // exact: a power of two
    return (x.bits & 0x8u) != 0 ? -magnitude : magnitude;
  }
};

// ---- encode, round to nearest even ---------------------------------------------------------

namespace detail {

/// The 2N values of `in` encoded by `Convert::apply` into 16-bit codes, element 2k in the low
/// half of word k. On the device they convert a pair at a time (`Convert::apply_pair`) with
/// no branch per element (a test and a branch per element had been nearly a third of an
/// FP16 write-back step's instructions). From sm_80 on the pair conversion gives every NaN
/// the code `apply` gives it (0x7FFF, checked for every fp32 NaN in either half on an H100),
/// so no value is tested; before, one NaN test covers all of them.
template <class Convert, int N>
REPLAYSSM_HOST_DEVICE void pack_pairs(const float (&in)[2 * N], uint32_t (&words)[N]) {
#if REPLAYSSM_DEVICE_PASS
  bool by_pairs = true;
#if __CUDA_ARCH__ < 800
  for (int i = 0; i < 2 * N; ++i) by_pairs &= in[i] == in[i];
#endif
  if (by_pairs) {
    for (int k = 0; k < N; ++k) words[k] = Convert::apply_pair(in[2 * k], in[2 * k + 1]);
    return;
  }
#endif
  for (int k = 0; k < N; ++k)
    words[k] = uint32_t(Convert::apply(in[2 * k]).bits) | uint32_t(Convert::apply(in[2 * k + 1]).bits) << 16;
}

}  // namespace detail

/// fp32 -> half_t, IEEE nearest even: overflow to infinity, NaN -> 0x7FFF.
template <>
struct convert<half_t, float, round_nearest_even> {
  REPLAYSSM_HOST_DEVICE static half_t apply(float v) {
#if REPLAYSSM_DEVICE_PASS
    // IEEE nearest even in hardware, bit-identical to the integer path for every non-NaN.
    if (v == v) {
      uint16_t bits;
      asm("cvt.rn.f16.f32 %0, %1;" : "=h"(bits) : "f"(v));
      return half_t::from_bits(bits);
    }
#endif
    return detail::encode_nearest<half_t>(v);
  }
#if REPLAYSSM_DEVICE_PASS
  /// lo, hi -> bits 15..0, 31..16 of the result, as `apply` encodes each (a NaN too from
  /// sm_80 on: `pack_pairs`).
  __device__ static uint32_t apply_pair(float lo, float hi) {
    uint32_t packed;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(hi), "f"(lo));
    return packed;
  }
#endif
  /// The 2N values of `in` as halves, element 2k in the low half of word k (`pack_pairs`).
  template <int N>
  REPLAYSSM_HOST_DEVICE static void apply_words(const float (&in)[2 * N], uint32_t (&words)[N]) {
    detail::pack_pairs<convert>(in, words);
  }
};

/// fp32 -> bfloat16_t, IEEE nearest even: overflow to infinity, NaN -> 0x7FFF.
template <>
struct convert<bfloat16_t, float, round_nearest_even> {
  REPLAYSSM_HOST_DEVICE static bfloat16_t apply(float v) {
#if REPLAYSSM_DEVICE_PASS && __CUDA_ARCH__ >= 800
    // IEEE nearest even in hardware, bit-identical to the integer path for every non-NaN.
    if (v == v) {
      uint16_t bits;
      asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(bits) : "f"(v));
      return bfloat16_t::from_bits(bits);
    }
#endif
    return detail::encode_nearest<bfloat16_t>(v);
  }
#if REPLAYSSM_DEVICE_PASS
  /// lo, hi -> bits 15..0, 31..16 of the result, as `apply` encodes each (a NaN too from
  /// sm_80 on: `pack_pairs`).
  __device__ static uint32_t apply_pair(float lo, float hi) {
#if __CUDA_ARCH__ >= 800
    uint32_t packed;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(hi), "f"(lo));
    return packed;
#else
    return uint32_t(apply(lo).bits) | uint32_t(apply(hi).bits) << 16;
#endif
  }
#endif
  /// The 2N values of `in` as bfloat16 codes, element 2k in the low half of word k
  /// (`pack_pairs`).
  template <int N>
  REPLAYSSM_HOST_DEVICE static void apply_words(const float (&in)[2 * N], uint32_t (&words)[N]) {
    detail::pack_pairs<convert>(in, words);
  }
};

/// fp32 -> float_e4m3_t, nearest even, satfinite (|v| > 448 and +-inf -> +-448); NaN -> 0x7F.
template <>
struct convert<float_e4m3_t, float, round_nearest_even> {
  static constexpr int elems_per_word = 4;
  REPLAYSSM_HOST_DEVICE static float_e4m3_t apply(float v) { return detail::encode_nearest<float_e4m3_t>(v); }
  /// in[0..3] -> bytes 0..3 of the result. The hardware conversion (sm_89 on) rounds as
  /// `apply` does for every input but NaN (to 0x7F or 0xFF there, against 0x7F): callers
  /// pass finite values only (an FP8 block with a NaN stores its NaN codes directly). It
  /// replaces about 40 integer instructions per element, which bound FP8 flushes.
  REPLAYSSM_HOST_DEVICE static uint32_t apply_packed(const float* in) {
#if REPLAYSSM_DEVICE_PASS && __CUDA_ARCH__ >= 890
    uint16_t lo, hi;
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(lo) : "f"(in[1]), "f"(in[0]));
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(hi) : "f"(in[3]), "f"(in[2]));
    return uint32_t(lo) | uint32_t(hi) << 16;
#else
    uint32_t packed = 0;
    for (int i = 0; i < elems_per_word; ++i) packed |= static_cast<uint32_t>(apply(in[i]).bits) << (8 * i);
    return packed;
#endif
  }
};

/// fp32 -> float_ue4m3_t, nearest even, satfinite (v > 448 and +inf -> 448); negative
/// inputs (-0 and -inf included) -> 0; NaN -> 0x7F.
template <>
struct convert<float_ue4m3_t, float, round_nearest_even> {
  REPLAYSSM_HOST_DEVICE static float_ue4m3_t apply(float v) {
    const uint32_t bits = math::float_bits(v);
    if ((bits >> 31) != 0 && (bits & detail::fp32_abs_mask) <= detail::fp32_inf_bits) {
      return float_ue4m3_t::from_bits(0);
    }
    return detail::encode_nearest<float_ue4m3_t>(v);
  }
};

/// fp32 -> float_e2m1_t, nearest even, satfinite (|v| > 6 and +-inf -> +-6); NaN -> +6.
template <>
struct convert<float_e2m1_t, float, round_nearest_even> {
  REPLAYSSM_HOST_DEVICE static float_e2m1_t apply(float v) {
    // The grid (0, 0.5, 1, 1.5, 2, 3, 4, 6) in two pieces instead of the general grid split
    // (NVFP4 flushes were bound by their conversions; seven comparisons with the grid's
    // midpoints still cost a fifth of one). From 1 on the codes follow the fp32 bits: the
    // significand rounded to one bit, nearest even, a carry moving to the next binade, then
    // code = biased exponent * 2 + that bit - 252, capped at 6's. Below 1 the grid is 0, 0.5,
    // 1 (codes 0, 1, 2): 2|v| rounded to an integer by adding 2^23.
    const uint32_t bits = math::float_bits(v), magnitude = bits & detail::fp32_abs_mask;
    if (magnitude > detail::fp32_inf_bits) return float_e2m1_t::from_bits(0x7);
    uint32_t code;
    if (magnitude >= 0x3F800000u) {
      const uint32_t rounded = magnitude + 0x1FFFFFu + ((magnitude >> 22) & 1u);
      code = (rounded >> 22) - 252u;
      code = code < 7u ? code : 7u;
    } else {
      code = math::float_bits(math::fma(2.0f, math::float_from_bits(magnitude), 0x1p23f)) - 0x4B000000u;
    }
    return float_e2m1_t::from_bits(static_cast<uint8_t>(((bits >> 28) & 0x8u) | code));
  }
};

// ---- encode, stochastic (PTX cvt.rs) -------------------------------------------------------

/// fp32 -> half_t with `cvt.rs.f16x2.f32` semantics; 13 random bits per element.
template <>
struct convert<half_t, float, round_stochastic> {
  static constexpr int random_bits = 13;
  static constexpr int elems_per_word = 2;

  /// The random field element `elem` of a packed group reads from `word`.
  REPLAYSSM_HOST_DEVICE static uint32_t random_field(int elem, uint32_t word) {
    return (word >> (16 * elem)) & 0x1FFFu;
  }
  /// Rounds v with the random field in bits 12..0 of rbits.
  REPLAYSSM_HOST_DEVICE static half_t apply(float v, uint32_t rbits) {
    // A finite |v| >= 2^-14 (fp16's normal range and above) discards exactly the 13 low
    // significand bits: adding the field there and truncating is the stochastic step, and
    // the truncated value is exact in fp16 or overflows to infinity, as the step does.
    const uint32_t bits = math::float_bits(v), magnitude = bits & detail::fp32_abs_mask;
    if (magnitude >= 0x38800000u && magnitude < detail::fp32_inf_bits)
      return convert<half_t, float>::apply(math::float_from_bits((bits + (rbits & 0x1FFFu)) & ~0x1FFFu));
    using E = detail::encoding<half_t>;
    return half_t::from_bits(
        static_cast<uint16_t>(detail::encode_bits<E>(v, detail::step_stochastic<random_bits>{rbits}, E::nan_code)));
  }
  /// in[0], in[1] -> bits 15..0, 31..16 of the result.
  REPLAYSSM_HOST_DEVICE static uint32_t apply_packed(const float* in, uint32_t word) {
#if REPLAYSSM_HAS_HW_STOCHASTIC_ROUNDING
    uint32_t packed;
    // The ISA asks for zeros in bits 15..13 and 31..29; the mask makes both readings agree.
    asm("cvt.rs.f16x2.f32 %0, %1, %2, %3;" : "=r"(packed) : "f"(in[1]), "f"(in[0]), "r"(word & 0x1FFF1FFFu));
    return packed;
#else
    return detail::pack_stochastic<convert, 16>(in, word);
#endif
  }
};

/// fp32 -> bfloat16_t with `cvt.rs.bf16x2.f32` semantics; 16 random bits per element.
template <>
struct convert<bfloat16_t, float, round_stochastic> {
  static constexpr int random_bits = 16;
  static constexpr int elems_per_word = 2;

  /// The random field element `elem` of a packed group reads from `word`.
  REPLAYSSM_HOST_DEVICE static uint32_t random_field(int elem, uint32_t word) {
    return (word >> (16 * elem)) & 0xFFFFu;
  }
  /// Rounds v with the random field in bits 15..0 of rbits.
  REPLAYSSM_HOST_DEVICE static bfloat16_t apply(float v, uint32_t rbits) {
    // A finite v discards exactly its 16 low bits (subnormals too): the field added there,
    // with its carry, is the stochastic step (a carry out of the largest finite value gives
    // infinity, as the step does).
    const uint32_t bits = math::float_bits(v);
    if ((bits & detail::fp32_abs_mask) < detail::fp32_inf_bits)
      return bfloat16_t::from_bits(static_cast<uint16_t>((bits + (rbits & 0xFFFFu)) >> 16));
    using E = detail::encoding<bfloat16_t>;
    return bfloat16_t::from_bits(
        static_cast<uint16_t>(detail::encode_bits<E>(v, detail::step_stochastic<random_bits>{rbits}, E::nan_code)));
  }
  /// in[0], in[1] -> bits 15..0, 31..16 of the result.
  REPLAYSSM_HOST_DEVICE static uint32_t apply_packed(const float* in, uint32_t word) {
#if REPLAYSSM_HAS_HW_STOCHASTIC_ROUNDING
    uint32_t packed;
    asm("cvt.rs.bf16x2.f32 %0, %1, %2, %3;" : "=r"(packed) : "f"(in[1]), "f"(in[0]), "r"(word));
    return packed;
#else
    return detail::pack_stochastic<convert, 16>(in, word);
#endif
  }
};

/// fp32 -> float_e4m3_t with `cvt.rs.satfinite.e4m3x4.f32` semantics; 16 random bits per
/// element, two elements sharing each half of the word.
template <>
struct convert<float_e4m3_t, float, round_stochastic> {
  static constexpr int random_bits = 16;
  static constexpr int elems_per_word = 4;

  /// The random field element `elem` of a packed group reads from `word`.
  REPLAYSSM_HOST_DEVICE static uint32_t random_field(int elem, uint32_t word) {
    const uint32_t pair_bits = (elem < 2 ? word : word >> 16) & 0xFFFFu;
    return (elem & 1) != 0 ? detail::bit_reverse16(pair_bits) : pair_bits;
  }
  /// Rounds v with the random field in bits 15..0 of rbits.
  REPLAYSSM_HOST_DEVICE static float_e4m3_t apply(float v, uint32_t rbits) {
    using E = detail::encoding<float_e4m3_t>;
    const uint32_t nan_code = (math::float_bits(v) >> 31) != 0 ? 0xFFu : 0x7Fu;
    return float_e4m3_t::from_bits(
        static_cast<uint8_t>(detail::encode_bits<E>(v, detail::step_stochastic<random_bits>{rbits}, nan_code)));
  }
  /// in[0] .. in[3] -> bytes 0 .. 3 of the result.
  REPLAYSSM_HOST_DEVICE static uint32_t apply_packed(const float* in, uint32_t word) {
#if REPLAYSSM_HAS_HW_STOCHASTIC_ROUNDING
    uint32_t packed;
    asm("cvt.rs.satfinite.e4m3x4.f32 %0, {%1, %2, %3, %4}, %5;"
        : "=r"(packed)
        : "f"(in[3]), "f"(in[2]), "f"(in[1]), "f"(in[0]), "r"(word));
    return packed;
#else
    return detail::pack_stochastic<convert, 8>(in, word);
#endif
  }
};

/// fp32 -> float_e2m1_t with `cvt.rs.satfinite.e2m1x4.f32` semantics; 8 random bits per
/// element.
template <>
struct convert<float_e2m1_t, float, round_stochastic> {
  static constexpr int random_bits = 8;
  static constexpr int elems_per_word = 4;

  /// The random field element `elem` of a packed group reads from `word`: elements 0, 1
  /// (PTX operands f, e) the low bytes of the two halves, elements 2, 3 (b, a) the high.
  REPLAYSSM_HOST_DEVICE static uint32_t random_field(int elem, uint32_t word) {
    const int byte = (elem & 1) * 2 + (elem >> 1);
    return (word >> (8 * byte)) & 0xFFu;
  }
  /// Rounds v with the random field in bits 7..0 of rbits.
  REPLAYSSM_HOST_DEVICE static float_e2m1_t apply(float v, uint32_t rbits) {
    using E = detail::encoding<float_e2m1_t>;
    return float_e2m1_t::from_bits(
        static_cast<uint8_t>(detail::encode_bits<E>(v, detail::step_stochastic<random_bits>{rbits}, E::nan_code)));
  }
  /// in[0] .. in[3] -> nibbles 0 .. 3 (bits 3..0 .. 15..12) of the result.
  REPLAYSSM_HOST_DEVICE static uint32_t apply_packed(const float* in, uint32_t word) {
#if REPLAYSSM_HAS_HW_STOCHASTIC_ROUNDING
    uint16_t packed;
    asm("cvt.rs.satfinite.e2m1x4.f32 %0, {%1, %2, %3, %4}, %5;"
        : "=h"(packed)
        : "f"(in[3]), "f"(in[2]), "f"(in[1]), "f"(in[0]), "r"(word));
    return packed;
#else
    return detail::pack_stochastic<convert, 4>(in, word);
#endif
  }
};

}  // namespace replayssm
