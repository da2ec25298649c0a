// SPDX-License-Identifier: Apache-2.0
// convert<>: every code decodes to the value its format defines, round trips, nearest-even
// encoding against an independent reference, and stochastic rounding's semantics and
// statistics. The reference works in double from the formats' definitions (IEEE 754 /
// OCP MX), not from the library's integer code.
#include <algorithm>
#include "../support/catch.hpp"
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "replayssm/numeric/convert.hpp"
#include "replayssm/numeric/philox.hpp"

using namespace replayssm;

namespace {

float float_from_bits(uint32_t bits) {
  float v;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}

uint32_t bits_of(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  return bits;
}

/// A narrow binary format from its definition, with the encoder's documented choices.
struct target {
  int exp_bits;
  int man_bits;
  int bias;
  bool ieee_specials;  // the all-ones exponent holds infinities and NaNs
  bool e4m3_nan;       // S.1111.111 is NaN (OCP E4M3FN)
  bool has_sign;
  bool saturating;             // satfinite encode
  uint32_t nan_code;           // what nearest-even encodes NaN to
  std::vector<double> values;  // values[c]: the non-negative finite codes, ascending

  uint32_t sign_bit() const { return has_sign ? 1u << (exp_bits + man_bits) : 0u; }
  uint32_t max_code() const { return static_cast<uint32_t>(values.size() - 1); }
  uint32_t code_count() const { return 1u << (exp_bits + man_bits + (has_sign ? 1 : 0)); }
  /// 2^(emax + 1): where an IEEE format's grid would continue past its largest value.
  double overflow_value() const { return std::ldexp(1.0, (1 << exp_bits) - 1 - bias); }
};

/// The value of `code` by the format's definition (NaN, +-inf included).
double reference_value(const target& t, uint32_t code) {
  const uint32_t exp_mask = (1u << t.exp_bits) - 1u;
  const uint32_t man_mask = (1u << t.man_bits) - 1u;
  const bool negative = t.has_sign && ((code >> (t.exp_bits + t.man_bits)) & 1u) != 0;
  const uint32_t e = (code >> t.man_bits) & exp_mask;
  const uint32_t m = code & man_mask;
  double magnitude;
  if (t.ieee_specials && e == exp_mask) {
    magnitude =
        m == 0 ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  } else if (t.e4m3_nan && e == exp_mask && m == man_mask) {
    magnitude = std::numeric_limits<double>::quiet_NaN();
  } else if (e == 0) {
    magnitude = std::ldexp(static_cast<double>(m), 1 - t.bias - t.man_bits);
  } else {
    magnitude = std::ldexp(static_cast<double>((1u << t.man_bits) + m),
                           static_cast<int>(e) - t.bias - t.man_bits);
  }
  return negative ? -magnitude : magnitude;
}

target make_target(int exp_bits, int man_bits, int bias, bool ieee, bool e4m3_nan, bool has_sign,
                   bool saturating, uint32_t nan_code) {
  target t{exp_bits, man_bits, bias, ieee, e4m3_nan, has_sign, saturating, nan_code, {}};
  for (uint32_t code = 0; code < (1u << (exp_bits + man_bits)); ++code) {
    const double v = reference_value(t, code);
    if (!std::isfinite(v)) break;
    t.values.push_back(v);
  }
  return t;
}

const target& fp16_target() {
  static const target t = make_target(5, 10, 15, true, false, true, false, 0x7FFF);
  return t;
}
const target& bf16_target() {
  static const target t = make_target(8, 7, 127, true, false, true, false, 0x7FFF);
  return t;
}
const target& e4m3_target() {
  static const target t = make_target(4, 3, 7, false, true, true, true, 0x7F);
  return t;
}
const target& ue4m3_target() {
  static const target t = make_target(4, 3, 7, false, true, false, true, 0x7F);
  return t;
}
const target& e2m1_target() {
  static const target t = make_target(2, 1, 1, false, false, true, true, 0x7);
  return t;
}

/// The code of the larger of two neighbours lo = values[i] <= a < hi, or max_code + 1
/// (infinity) past an IEEE format's largest value. Requires a below overflow_value().
struct neighbours {
  uint32_t lo_code;
  double lo, hi;
};

neighbours find_neighbours(const target& t, double a) {
  if (a >= t.values.back()) return {t.max_code(), t.values.back(), t.overflow_value()};
  const auto it = std::upper_bound(t.values.begin(), t.values.end(), a);
  const auto i = static_cast<uint32_t>(it - t.values.begin() - 1);
  return {i, t.values[i], t.values[i + 1]};
}

/// Nearest-even encoding of a finite or infinite v, by distances in double.
uint32_t reference_nearest(const target& t, float v) {
  const double a = std::fabs(static_cast<double>(v));
  const uint32_t sign = std::signbit(v) ? t.sign_bit() : 0u;
  if (!t.has_sign && std::signbit(v)) return 0u;
  uint32_t magnitude;
  if (a >= t.values.back()) {
    if (t.saturating) return sign | t.max_code();
    if (a >= t.overflow_value()) return sign | (t.max_code() + 1);
  }
  const neighbours n = find_neighbours(t, a);
  const double below = a - n.lo;  // exact: a and n.lo lie within a binade or n.lo is 0
  const double above = n.hi - a;
  if (below < above) {
    magnitude = n.lo_code;
  } else if (below > above) {
    magnitude = n.lo_code + 1;
  } else {
    magnitude = (n.lo_code & 1u) == 0 ? n.lo_code : n.lo_code + 1;
  }
  return sign | magnitude;
}

/// cvt.rs: up when floor(f 2^n) + field >= 2^n, f the fraction of the step past lo.
uint32_t reference_stochastic(const target& t, float v, uint32_t field, int n_bits) {
  const double a = std::fabs(static_cast<double>(v));
  const uint32_t sign = std::signbit(v) ? t.sign_bit() : 0u;
  if (std::isinf(v)) return sign | (t.saturating ? t.max_code() : t.max_code() + 1);
  if (a >= t.values.back() && t.saturating) return sign | t.max_code();
  if (!t.saturating && a >= t.overflow_value()) return sign | (t.max_code() + 1);
  const neighbours n = find_neighbours(t, a);
  // Exact: the step is a power of two and a - lo is exact.
  const double scaled = std::floor((a - n.lo) * std::ldexp(1.0, n_bits) / (n.hi - n.lo));
  const bool up = scaled + field >= std::ldexp(1.0, n_bits);
  return sign | (n.lo_code + (up ? 1u : 0u));
}

/// A float with a uniformly drawn exponent in [min_exp, max_exp], random mantissa and
/// sign; one draw in 16 is an arbitrary bit pattern (NaN, infinities, subnormals).
float random_float(std::mt19937& rng, int min_exp, int max_exp) {
  if ((rng() & 15u) == 0) return float_from_bits(rng());
  std::uniform_int_distribution<int> exponent(min_exp, max_exp);
  const float significand = 1.0f + std::ldexp(static_cast<float>(rng() & 0x7FFFFFu), -23);
  const float v = std::ldexp(significand, exponent(rng));
  return (rng() & 1u) != 0 ? -v : v;
}

template <class T>
uint32_t encode_nearest(float v) {
  return convert<T, float>::apply(v).bits;
}

template <class T>
void check_nearest_on_random_floats(const target& t, int min_exp, int max_exp, int count,
                                    uint32_t seed) {
  std::mt19937 rng(seed);
  int mismatches = 0;
  float first_bad = 0.0f;
  for (int i = 0; i < count; ++i) {
    const float v = random_float(rng, min_exp, max_exp);
    const uint32_t expected = std::isnan(v) ? t.nan_code : reference_nearest(t, v);
    if (encode_nearest<T>(v) != expected && mismatches++ == 0) first_bad = v;
  }
  INFO("first mismatch at v = " << first_bad << " (bits 0x" << std::hex << bits_of(first_bad)
                                << ")");
  CHECK(mismatches == 0);
}

/// Every midpoint of two neighbouring values encodes to the even code of the pair.
template <class T>
void check_ties_to_even(const target& t) {
  int mismatches = 0;
  for (uint32_t c = 0; c + 1 < t.values.size(); ++c) {
    const float mid = static_cast<float>((t.values[c] + t.values[c + 1]) / 2);
    REQUIRE(static_cast<double>(mid) == (t.values[c] + t.values[c + 1]) / 2);
    const uint32_t even = (c & 1u) == 0 ? c : c + 1;
    if (encode_nearest<T>(mid) != even) ++mismatches;
    if (t.has_sign && encode_nearest<T>(-mid) != (even | t.sign_bit())) ++mismatches;
  }
  CHECK(mismatches == 0);
}

/// Decode of every code against the definition; NaN codes give NaN, zeros keep signs.
template <class T>
void check_decode_all_codes(const target& t) {
  int mismatches = 0;
  for (uint32_t code = 0; code < t.code_count(); ++code) {
    const float got = convert<float, T>::apply(T::from_bits(static_cast<decltype(T::bits)>(code)));
    const double want = reference_value(t, code);
    const bool ok = std::isnan(want) ? std::isnan(got)
                                     : (static_cast<double>(got) == want &&
                                        std::signbit(got) == std::signbit(want));
    if (!ok) ++mismatches;
  }
  CHECK(mismatches == 0);
}

/// decode -> encode gives every code back; NaN codes come back as a NaN.
template <class T>
void check_round_trip_all_codes(const target& t) {
  int mismatches = 0;
  for (uint32_t code = 0; code < t.code_count(); ++code) {
    const float value =
        convert<float, T>::apply(T::from_bits(static_cast<decltype(T::bits)>(code)));
    const T back = convert<T, float>::apply(value);
    const bool ok =
        std::isnan(value) ? std::isnan(convert<float, T>::apply(back)) : back.bits == code;
    if (!ok) ++mismatches;
  }
  CHECK(mismatches == 0);
}

/// The exact cvt.rs rule on random values and random fields, with garbage above the field.
template <class T>
void check_stochastic_rule(const target& t, int min_exp, int max_exp, int count, uint32_t seed) {
  using C = convert<T, float, round_stochastic>;
  std::mt19937 rng(seed);
  const uint32_t mask = (1u << C::random_bits) - 1u;
  int mismatches = 0;
  float first_bad = 0.0f;
  for (int i = 0; i < count; ++i) {
    const float v = random_float(rng, min_exp, max_exp);
    if (std::isnan(v)) continue;
    uint32_t field = rng() & mask;
    if (i % 7 == 0) field = (i % 14 == 0) ? 0u : mask;
    const uint32_t rbits = field | (rng() << C::random_bits);
    if (C::apply(v, rbits).bits != reference_stochastic(t, v, field, C::random_bits) &&
        mismatches++ == 0) {
      first_bad = v;
    }
  }
  INFO("first mismatch at v = " << first_bad);
  CHECK(mismatches == 0);
}

/// Grid values come back unchanged whatever the random bits.
template <class T>
void check_stochastic_keeps_grid_values(const target& t, uint32_t seed) {
  using C = convert<T, float, round_stochastic>;
  std::mt19937 rng(seed);
  const uint32_t step = t.values.size() > 4096 ? 7u : 1u;
  int mismatches = 0;
  for (uint32_t c = 0; c < t.values.size(); c += step) {
    const float v = static_cast<float>(t.values[c]);
    for (int k = 0; k < 4; ++k) {
      if (C::apply(v, rng()).bits != c) ++mismatches;
      if (C::apply(-v, rng()).bits != (c | t.sign_bit())) ++mismatches;
    }
  }
  CHECK(mismatches == 0);
}

std::vector<uint32_t> philox_words(int count, uint32_t flush) {
  std::vector<uint32_t> words(count);
  const random_stream_key key{0x5eed5eed12345678ull, 3u, 9u, flush};
  for (int i = 0; i < count; i += 4) {
    uint32_t block[4];
    random_words(key, static_cast<uint32_t>(i), block);
    for (int j = 0; j < 4 && i + j < count; ++j) words[i + j] = block[j];
  }
  return words;
}

/// Stochastic rounding's statistics at every element position of a packed group, for
/// values at fractions 0.1 .. 0.9 of the step above grid value `lo_code`.
///
/// With n random bits the result is lo + step with probability p = floor(f 2^n) / 2^n,
/// so f - 2^-n < p <= f. Over N independent draws the frequency of rounding up has
/// standard deviation sqrt(p (1 - p) / N) <= 1/(2 sqrt(N)); we allow 5 of them plus the
/// 2^-n truncation: |freq - f| <= 5 sqrt(f (1 - f) / N) + 2^-n (f (1 - f) bounds p (1 - p)
/// up to O(2^-n), which the slack covers). The mean of the rounded values is
/// lo + step freq, so |mean - v| <= step (5 / (2 sqrt(N)) + 2^-n).
template <class T, int Width>
void check_stochastic_statistics(const target& t, uint32_t lo_code, uint32_t flush) {
  using C = convert<T, float, round_stochastic>;
  constexpr int draws = 100000;
  const std::vector<uint32_t> words = philox_words(draws, flush);
  const double lo = t.values[lo_code];
  const double step = t.values[lo_code + 1] - lo;
  const double truncation = std::ldexp(1.0, -C::random_bits);
  for (int tenth = 1; tenth <= 9; ++tenth) {
    const float v = static_cast<float>(lo + step * tenth / 10.0);
    const double f = (static_cast<double>(v) - lo) / step;
    float in[C::elems_per_word];
    std::fill(in, in + C::elems_per_word, v);
    for (int position = 0; position < C::elems_per_word; ++position) {
      int ups = 0;
      double sum = 0.0;
      for (uint32_t word : words) {
        const uint32_t code =
            (C::apply_packed(in, word) >> (position * Width)) & ((1u << Width) - 1u);
        ups += code == lo_code + 1 ? 1 : 0;
        sum += static_cast<double>(
            convert<float, T>::apply(T::from_bits(static_cast<decltype(T::bits)>(code))));
      }
      const double freq = static_cast<double>(ups) / draws;
      const double mean = sum / draws;
      INFO("v = " << v << " f = " << f << " position " << position);
      CHECK(std::fabs(freq - f) <= 5.0 * std::sqrt(f * (1.0 - f) / draws) + truncation);
      CHECK(std::fabs(mean - v) <= step * (5.0 / (2.0 * std::sqrt(draws)) + truncation));
    }
  }
}

}  // namespace

// ---- decode ----------------------------------------------------------------------------------

TEST_CASE("every E4M3 code decodes to its OCP value", "[convert][codes]") {
  check_decode_all_codes<float_e4m3_t>(e4m3_target());
  CHECK(convert<float, float_e4m3_t>::apply(float_e4m3_t::from_bits(0x7E)) == 448.0f);
  CHECK(convert<float, float_e4m3_t>::apply(float_e4m3_t::from_bits(0x01)) == std::ldexp(1.0f, -9));
  CHECK(std::isnan(convert<float, float_e4m3_t>::apply(float_e4m3_t::from_bits(0xFF))));
}

TEST_CASE("every E2M1 code decodes to its OCP value", "[convert][codes]") {
  check_decode_all_codes<float_e2m1_t>(e2m1_target());
  const float magnitudes[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  for (uint8_t code = 0; code < 16; ++code) {
    const float want = (code & 8u) != 0 ? -magnitudes[code & 7u] : magnitudes[code & 7u];
    CHECK(convert<float, float_e2m1_t>::apply(float_e2m1_t::from_bits(code)) == want);
    // The high nibble is ignored.
    CHECK(convert<float, float_e2m1_t>::apply(float_e2m1_t::from_bits(code | 0xA0u)) == want);
  }
}

TEST_CASE("every UE4M3 code decodes to its value; bit 7 is ignored", "[convert][codes]") {
  check_decode_all_codes<float_ue4m3_t>(ue4m3_target());
  for (uint32_t code = 0; code < 128; ++code) {
    const float low = convert<float, float_ue4m3_t>::apply(float_ue4m3_t::from_bits(uint8_t(code)));
    const float high =
        convert<float, float_ue4m3_t>::apply(float_ue4m3_t::from_bits(uint8_t(code | 0x80u)));
    CHECK((low == high || (std::isnan(low) && std::isnan(high))));
  }
}

TEST_CASE("every FP16 and BF16 code decodes to its IEEE value", "[convert][codes]") {
  check_decode_all_codes<half_t>(fp16_target());
  check_decode_all_codes<bfloat16_t>(bf16_target());
}

// ---- round trips -----------------------------------------------------------------------------

TEST_CASE("decode then nearest-even encode returns every code", "[convert][roundtrip]") {
  check_round_trip_all_codes<half_t>(fp16_target());
  check_round_trip_all_codes<bfloat16_t>(bf16_target());
  check_round_trip_all_codes<float_e4m3_t>(e4m3_target());
  check_round_trip_all_codes<float_ue4m3_t>(ue4m3_target());
  check_round_trip_all_codes<float_e2m1_t>(e2m1_target());
}

// ---- nearest even ------------------------------------------------------------------------------

TEST_CASE("nearest-even encode matches the reference on random floats", "[convert][nearest]") {
  // Exponent ranges run from well below the smallest subnormal to past the largest value.
  check_nearest_on_random_floats<half_t>(fp16_target(), -28, 17, 2000000, 1u);
  check_nearest_on_random_floats<bfloat16_t>(bf16_target(), -140, 127, 2000000, 2u);
  check_nearest_on_random_floats<float_e4m3_t>(e4m3_target(), -13, 10, 1000000, 3u);
  check_nearest_on_random_floats<float_ue4m3_t>(ue4m3_target(), -13, 10, 500000, 4u);
  check_nearest_on_random_floats<float_e2m1_t>(e2m1_target(), -4, 4, 500000, 5u);
}

#ifdef __FLT16_MAX__
TEST_CASE("fp16 nearest-even encode matches the compiler's _Float16", "[convert][nearest]") {
  std::mt19937 rng(6u);
  int mismatches = 0;
  for (int i = 0; i < 2000000; ++i) {
    const float v = random_float(rng, -28, 17);
    if (std::isnan(v)) continue;
    const _Float16 h = static_cast<_Float16>(v);
    uint16_t want;
    std::memcpy(&want, &h, sizeof want);
    if (encode_nearest<half_t>(v) != want) ++mismatches;
  }
  CHECK(mismatches == 0);
}
#endif

TEST_CASE("nearest-even encode breaks exact ties to even", "[convert][nearest]") {
  check_ties_to_even<half_t>(fp16_target());
  check_ties_to_even<bfloat16_t>(bf16_target());
  check_ties_to_even<float_e4m3_t>(e4m3_target());
  check_ties_to_even<float_ue4m3_t>(ue4m3_target());
  check_ties_to_even<float_e2m1_t>(e2m1_target());
}

TEST_CASE("nearest-even encode: subnormals, overflow, infinities, NaN", "[convert][nearest]") {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  SECTION("fp16: overflow to infinity, canonical NaN") {
    CHECK(encode_nearest<half_t>(65504.0f) == 0x7BFFu);
    CHECK(encode_nearest<half_t>(65519.996f) == 0x7BFFu);
    CHECK(encode_nearest<half_t>(65520.0f) == 0x7C00u);  // the tie goes to the even "65536"
    CHECK(encode_nearest<half_t>(1e6f) == 0x7C00u);
    CHECK(encode_nearest<half_t>(-1e6f) == 0xFC00u);
    CHECK(encode_nearest<half_t>(inf) == 0x7C00u);
    CHECK(encode_nearest<half_t>(-inf) == 0xFC00u);
    CHECK(encode_nearest<half_t>(nan) == 0x7FFFu);
    CHECK(encode_nearest<half_t>(-nan) == 0x7FFFu);
    CHECK(encode_nearest<half_t>(std::ldexp(1.0f, -24)) == 0x0001u);
    CHECK(encode_nearest<half_t>(std::ldexp(1.0f, -25)) == 0x0000u);
    CHECK(encode_nearest<half_t>(std::ldexp(1.0000001f, -25)) == 0x0001u);
    CHECK(encode_nearest<half_t>(std::ldexp(3.0f, -25)) == 0x0002u);
    CHECK(encode_nearest<half_t>(-0.0f) == 0x8000u);
    CHECK(encode_nearest<half_t>(std::ldexp(1.0f, -14) * 0.99999994f) == 0x0400u);
  }
  SECTION("bf16: overflow to infinity, NaN payloads below bit 16 stay NaN") {
    CHECK(encode_nearest<bfloat16_t>(float_from_bits(0x7F7F7FFFu)) == 0x7F7Fu);
    CHECK(encode_nearest<bfloat16_t>(float_from_bits(0x7F7F8000u)) == 0x7F80u);
    CHECK(encode_nearest<bfloat16_t>(std::numeric_limits<float>::max()) == 0x7F80u);
    CHECK(encode_nearest<bfloat16_t>(float_from_bits(0x7F800001u)) == 0x7FFFu);
    CHECK(encode_nearest<bfloat16_t>(float_from_bits(0xFF800001u)) == 0x7FFFu);
    CHECK(encode_nearest<bfloat16_t>(float_from_bits(0x00008000u)) == 0x0000u);
    CHECK(encode_nearest<bfloat16_t>(float_from_bits(0x00018000u)) == 0x0002u);
    CHECK(encode_nearest<bfloat16_t>(-inf) == 0xFF80u);
  }
  SECTION("e4m3: satfinite") {
    CHECK(encode_nearest<float_e4m3_t>(448.0f) == 0x7Eu);
    CHECK(encode_nearest<float_e4m3_t>(464.0f) == 0x7Eu);  // the would-be neighbour 480 is NaN
    CHECK(encode_nearest<float_e4m3_t>(1e9f) == 0x7Eu);
    CHECK(encode_nearest<float_e4m3_t>(-1e9f) == 0xFEu);
    CHECK(encode_nearest<float_e4m3_t>(inf) == 0x7Eu);
    CHECK(encode_nearest<float_e4m3_t>(-inf) == 0xFEu);
    CHECK(encode_nearest<float_e4m3_t>(nan) == 0x7Fu);
    CHECK(encode_nearest<float_e4m3_t>(-nan) == 0x7Fu);
    CHECK(encode_nearest<float_e4m3_t>(232.0f) == 0x76u);
    CHECK(encode_nearest<float_e4m3_t>(std::ldexp(1.0f, -10)) == 0x00u);
    CHECK(encode_nearest<float_e4m3_t>(std::ldexp(3.0f, -10)) == 0x02u);
  }
  SECTION("ue4m3: satfinite, negatives to zero") {
    CHECK(encode_nearest<float_ue4m3_t>(-1.0f) == 0x00u);
    CHECK(encode_nearest<float_ue4m3_t>(-0.0f) == 0x00u);
    CHECK(encode_nearest<float_ue4m3_t>(-inf) == 0x00u);
    CHECK(encode_nearest<float_ue4m3_t>(0.5f) == 0x30u);
    CHECK(encode_nearest<float_ue4m3_t>(1000.0f) == 0x7Eu);
    CHECK(encode_nearest<float_ue4m3_t>(inf) == 0x7Eu);
    CHECK(encode_nearest<float_ue4m3_t>(nan) == 0x7Fu);
    CHECK(encode_nearest<float_ue4m3_t>(-nan) == 0x7Fu);
  }
  SECTION("e2m1: satfinite, NaN to +6") {
    const float inputs[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 5.01f, 7.0f, 100.0f};
    const uint32_t codes[] = {0x0u, 0x2u, 0x2u, 0x4u, 0x4u, 0x6u, 0x6u, 0x7u, 0x7u, 0x7u};
    for (int i = 0; i < 10; ++i) {
      CHECK(encode_nearest<float_e2m1_t>(inputs[i]) == codes[i]);
      CHECK(encode_nearest<float_e2m1_t>(-inputs[i]) == (codes[i] | 0x8u));
    }
    CHECK(encode_nearest<float_e2m1_t>(inf) == 0x7u);
    CHECK(encode_nearest<float_e2m1_t>(-inf) == 0xFu);
    CHECK(encode_nearest<float_e2m1_t>(nan) == 0x7u);
    CHECK(encode_nearest<float_e2m1_t>(-0.0f) == 0x8u);
  }
}

// ---- stochastic ------------------------------------------------------------------------------

TEST_CASE("stochastic rounding follows the cvt.rs carry rule exactly", "[convert][stochastic]") {
  // The rule: up iff floor(f 2^n) + field >= 2^n. The result is therefore always one of
  // the two neighbours of v (or the clamp / infinity past the largest value).
  check_stochastic_rule<half_t>(fp16_target(), -28, 17, 500000, 11u);
  check_stochastic_rule<bfloat16_t>(bf16_target(), -140, 127, 500000, 12u);
  check_stochastic_rule<float_e4m3_t>(e4m3_target(), -13, 10, 500000, 13u);
  check_stochastic_rule<float_e2m1_t>(e2m1_target(), -4, 4, 500000, 14u);
}

TEST_CASE("stochastic rounding: the field sits just below the kept bits", "[convert][stochastic]") {
  // v exactly halfway between two grid values: the top field bit alone decides.
  SECTION("fp16, normal and subnormal") {
    using C = convert<half_t, float, round_stochastic>;
    CHECK(C::apply(1.0f + std::ldexp(1.0f, -11), 0x1000u).bits == 0x3C01u);
    CHECK(C::apply(1.0f + std::ldexp(1.0f, -11), 0x0FFFu).bits == 0x3C00u);
    CHECK(C::apply(std::ldexp(3.0f, -25), 0x1000u).bits == 0x0002u);
    CHECK(C::apply(std::ldexp(3.0f, -25), 0x0FFFu).bits == 0x0001u);
    CHECK(C::apply(-std::ldexp(3.0f, -25), 0x0FFFu).bits == 0x8001u);
    CHECK(C::apply(1.0f + std::ldexp(1.0f, -11), 0xFFFFE000u).bits ==
          0x3C00u);  // bits 31..13 ignored
  }
  SECTION("bf16") {
    using C = convert<bfloat16_t, float, round_stochastic>;
    CHECK(C::apply(1.0f + std::ldexp(1.0f, -8), 0x8000u).bits == 0x3F81u);
    CHECK(C::apply(1.0f + std::ldexp(1.0f, -8), 0x7FFFu).bits == 0x3F80u);
    CHECK(C::apply(float_from_bits(0x00018000u), 0x8000u).bits == 0x0002u);
  }
  SECTION("e4m3, normal and subnormal") {
    using C = convert<float_e4m3_t, float, round_stochastic>;
    CHECK(C::apply(1.0f + std::ldexp(1.0f, -4), 0x8000u).bits == 0x39u);
    CHECK(C::apply(1.0f + std::ldexp(1.0f, -4), 0x7FFFu).bits == 0x38u);
    CHECK(C::apply(std::ldexp(3.0f, -10), 0x8000u).bits == 0x02u);
    CHECK(C::apply(std::ldexp(3.0f, -10), 0x7FFFu).bits == 0x01u);
  }
  SECTION("e2m1") {
    using C = convert<float_e2m1_t, float, round_stochastic>;
    CHECK(C::apply(1.25f, 0x80u).bits == 0x3u);
    CHECK(C::apply(1.25f, 0x7Fu).bits == 0x2u);
    CHECK(C::apply(0.25f, 0x80u).bits == 0x1u);
    CHECK(C::apply(0.25f, 0x7Fu).bits == 0x0u);
    CHECK(C::apply(-5.0f, 0x80u).bits == 0xFu);
  }
}

TEST_CASE("stochastic rounding: saturation, overflow, infinities, NaN", "[convert][stochastic]") {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  using H = convert<half_t, float, round_stochastic>;
  using B = convert<bfloat16_t, float, round_stochastic>;
  using E = convert<float_e4m3_t, float, round_stochastic>;
  using F = convert<float_e2m1_t, float, round_stochastic>;
  // fp16 / bf16 have no .satfinite: past the largest value, the carry reaches infinity.
  CHECK(H::apply(65519.0f, 0u).bits == 0x7BFFu);
  CHECK(H::apply(65519.0f, 0x1FFFu).bits == 0x7C00u);
  CHECK(H::apply(1e6f, 0u).bits == 0x7C00u);
  CHECK(B::apply(std::numeric_limits<float>::max(), 0u).bits == 0x7F7Fu);
  CHECK(B::apply(std::numeric_limits<float>::max(), 1u).bits == 0x7F80u);
  CHECK(H::apply(-inf, 0u).bits == 0xFC00u);
  CHECK(H::apply(nan, 0x1234u).bits == 0x7FFFu);
  CHECK(B::apply(nan, 0x1234u).bits == 0x7FFFu);
  // e4m3 / e2m1 saturate whatever the bits.
  for (uint32_t r : {0u, 0xFFFFu, 0x8000u}) {
    CHECK(E::apply(447.0f, r).bits == (r == 0 ? 0x7Du : 0x7Eu));
    CHECK(E::apply(470.0f, r).bits == 0x7Eu);
    CHECK(E::apply(-1e30f, r).bits == 0xFEu);
    CHECK(E::apply(inf, r).bits == 0x7Eu);
    CHECK(F::apply(5.9f, r | 0xFFu).bits == 0x7u);
    CHECK(F::apply(6.5f, r).bits == 0x7u);
    CHECK(F::apply(-inf, r).bits == 0xFu);
    CHECK(F::apply(nan, r).bits == 0x7u);
  }
  // e4m3's NaN keeps the sign, as cvt.rs does.
  CHECK(E::apply(nan, 0u).bits == 0x7Fu);
  CHECK(E::apply(-nan, 0u).bits == 0xFFu);
}

TEST_CASE("stochastic rounding leaves grid values unchanged", "[convert][stochastic]") {
  check_stochastic_keeps_grid_values<half_t>(fp16_target(), 21u);
  check_stochastic_keeps_grid_values<bfloat16_t>(bf16_target(), 22u);
  check_stochastic_keeps_grid_values<float_e4m3_t>(e4m3_target(), 23u);
  check_stochastic_keeps_grid_values<float_e2m1_t>(e2m1_target(), 24u);
}

TEST_CASE("packed stochastic groups use the cvt.rs field layout", "[convert][stochastic]") {
  const uint32_t word = 0x12345678u;
  using H = convert<half_t, float, round_stochastic>;
  using B = convert<bfloat16_t, float, round_stochastic>;
  using E = convert<float_e4m3_t, float, round_stochastic>;
  using F = convert<float_e2m1_t, float, round_stochastic>;
  CHECK(H::random_field(0, word) == 0x1678u);
  CHECK(H::random_field(1, word) == 0x1234u);
  CHECK(B::random_field(0, word) == 0x5678u);
  CHECK(B::random_field(1, word) == 0x1234u);
  CHECK(E::random_field(0, word) == 0x5678u);
  CHECK(E::random_field(1, word) == 0x1E6Au);  // 0x5678 reversed
  CHECK(E::random_field(2, word) == 0x1234u);
  CHECK(E::random_field(3, word) == 0x2C48u);  // 0x1234 reversed
  CHECK(F::random_field(0, word) == 0x78u);
  CHECK(F::random_field(1, word) == 0x34u);
  CHECK(F::random_field(2, word) == 0x56u);
  CHECK(F::random_field(3, word) == 0x12u);

  // A group is each element rounded with its own field, element 0 in the low bits.
  std::mt19937 rng(31u);
  for (int trial = 0; trial < 1000; ++trial) {
    float in[4];
    for (float& x : in) x = random_float(rng, -10, 3);
    const uint32_t w = rng();
    CHECK(H::apply_packed(in, w) ==
          (uint32_t(H::apply(in[0], w).bits) | uint32_t(H::apply(in[1], w >> 16).bits) << 16));
    CHECK(B::apply_packed(in, w) ==
          (uint32_t(B::apply(in[0], w).bits) | uint32_t(B::apply(in[1], w >> 16).bits) << 16));
    uint32_t e_expected = 0, f_expected = 0;
    for (int i = 0; i < 4; ++i) {
      e_expected |= uint32_t(E::apply(in[i], E::random_field(i, w)).bits) << (8 * i);
      f_expected |= uint32_t(F::apply(in[i], F::random_field(i, w)).bits) << (4 * i);
    }
    CHECK(E::apply_packed(in, w) == e_expected);
    CHECK(F::apply_packed(in, w) == f_expected);
  }
}

TEST_CASE("stochastic rounding is unbiased at every packed position", "[convert][stochastic]") {
  SECTION("fp16") {
    check_stochastic_statistics<half_t, 16>(fp16_target(), 0x3C00u, 1u);  // 1.0, step 2^-10
    check_stochastic_statistics<half_t, 16>(fp16_target(), 0x0005u, 2u);  // subnormal
  }
  SECTION("bf16") {
    check_stochastic_statistics<bfloat16_t, 16>(bf16_target(), 0x4040u, 3u);  // 3.0
    check_stochastic_statistics<bfloat16_t, 16>(bf16_target(), 0x0003u, 4u);  // subnormal
  }
  SECTION("e4m3") {
    check_stochastic_statistics<float_e4m3_t, 8>(e4m3_target(), 0x3Au, 5u);  // 1.25
    check_stochastic_statistics<float_e4m3_t, 8>(e4m3_target(), 0x03u, 6u);  // subnormal
  }
  SECTION("e2m1") {
    check_stochastic_statistics<float_e2m1_t, 4>(e2m1_target(), 0x1u, 7u);  // 0.5 .. 1
    check_stochastic_statistics<float_e2m1_t, 4>(e2m1_target(), 0x6u, 8u);  // 4 .. 6
  }
}
