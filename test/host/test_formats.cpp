// SPDX-License-Identifier: Apache-2.0
// State formats: the concept check, byte layouts, round trips within each format's stated
// precision, exactness for representable blocks, zero / huge / tiny / non-finite blocks,
// saturation, and unbiased stochastic encoding. Scalar conversions are tested in
// test_rounding.cpp; here they serve as the reference.
#include <algorithm>
#include "../support/catch.hpp"
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <type_traits>
#include <vector>

#include "replayssm/numeric/formats.hpp"
#include "replayssm/numeric/philox.hpp"
#include "replayssm/replay/state_view.hpp"

using namespace replayssm;

namespace {

/// One encoded chunk, with storage aligned as the formats require.
template <class F>
struct chunk_storage {
  alignas(16) uint8_t data[F::data_bytes_per_chunk];
  alignas(16) uint8_t scale[F::scale_bytes_per_chunk > 0 ? F::scale_bytes_per_chunk : 1];
};

template <class F, class Round = round_nearest_even>
chunk_storage<F> encode(const std::vector<float>& in, const uint32_t* rbits = nullptr) {
  float chunk[F::chunk_elems];
  std::copy(in.begin(), in.end(), chunk);
  chunk_storage<F> s{};
  F::template encode<Round>(chunk, rbits, s.data, s.scale);
  return s;
}

template <class F>
std::vector<float> decode(const chunk_storage<F>& s) {
  float out[F::chunk_elems];
  F::decode(s.data, s.scale, out);
  return std::vector<float>(out, out + F::chunk_elems);
}

template <class F>
bool same_bytes(const chunk_storage<F>& a, const chunk_storage<F>& b) {
  return std::memcmp(a.data, b.data, sizeof a.data) == 0 &&
         std::memcmp(a.scale, b.scale, sizeof a.scale) == 0;
}

uint32_t bits_of(float v) {
  uint32_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

/// Whether `out` is `expected`: the same bits, or both NaN.
bool same_value(float out, float expected) {
  return (std::isnan(out) && std::isnan(expected)) || bits_of(out) == bits_of(expected);
}

float fp8_scale(const chunk_storage<fp8_e4m3_format>& s) {
  float scale;
  std::memcpy(&scale, s.scale, sizeof scale);
  return scale;
}

float nvfp4_scale(const chunk_storage<nvfp4_format>& s) {
  return convert<float, float_ue4m3_t>::apply(float_ue4m3_t::from_bits(s.scale[0]));
}

/// A block of `n` values with magnitudes spread over [2^lo_exp, 2^hi_exp], random signs.
std::vector<float> random_block(std::mt19937& rng, int n, int lo_exp, int hi_exp) {
  std::uniform_real_distribution<float> exponent(static_cast<float>(lo_exp),
                                                 static_cast<float>(hi_exp));
  std::vector<float> v(n);
  for (float& x : v) {
    x = std::exp2(exponent(rng));
    if ((rng() & 1u) != 0) x = -x;
  }
  return v;
}

std::vector<uint32_t> random_bits(std::mt19937& rng, int n) {
  std::vector<uint32_t> r(n);
  for (uint32_t& x : r) x = rng();
  return r;
}

}  // namespace

// ---- the concept -----------------------------------------------------------------------------

namespace {
struct missing_encode {
  static constexpr const char* name = "bad";
  static constexpr int chunk_elems = 4, block_elems = 1, data_bytes_per_chunk = 16,
                       scale_bytes_per_chunk = 0, random_words_per_chunk = 0;
  static constexpr double bytes_per_element = 4.0;
  static constexpr bool is_exact_fp32 = false;
  static void decode(const uint8_t*, const uint8_t*, float (&)[4]) {}
};
struct uneven_blocks : fp32_format {
  static constexpr int block_elems = 3;
};
}  // namespace

static_assert(state_format_v<fp32_format> && state_format_v<fp16_format> &&
                  state_format_v<bf16_format> && state_format_v<fp8_e4m3_format> &&
                  state_format_v<nvfp4_format>,
              "the library's formats model the state-format concept");
static_assert(!state_format_v<missing_encode> && !state_format_v<uneven_blocks> &&
                  !state_format_v<int>,
              "state_format_v rejects incomplete or inconsistent formats");
static_assert(fp32_format::is_exact_fp32 && !fp16_format::is_exact_fp32 &&
                  !nvfp4_format::is_exact_fp32,
              "only fp32 is exact");

TEMPLATE_TEST_CASE("format sizes add up", "[formats]", fp32_format, fp16_format, bf16_format,
                   fp8_e4m3_format, nvfp4_format) {
  using F = TestType;
  CHECK(F::bytes_per_element ==
        static_cast<double>(F::data_bytes_per_chunk + F::scale_bytes_per_chunk) / F::chunk_elems);
  CHECK(F::chunk_elems % F::block_elems == 0);
  CHECK(F::random_words_per_chunk == 4);
}

// ---- unscaled formats ------------------------------------------------------------------------

TEST_CASE("fp32_format is the identity, NaN payloads included", "[formats]") {
  const float nan_payload = [] {
    const uint32_t b = 0x7FA12345u;
    float f;
    std::memcpy(&f, &b, sizeof f);
    return f;
  }();
  const std::vector<float> in = {1.5f, -0.0f, nan_payload,
                                 std::numeric_limits<float>::denorm_min()};
  const uint32_t rbits[4] = {1u, 2u, 3u, 4u};
  const auto nearest = encode<fp32_format>(in);
  const auto stochastic = encode<fp32_format, round_stochastic>(in, rbits);
  CHECK(same_bytes(nearest, stochastic));
  const std::vector<float> out = decode(nearest);
  for (int i = 0; i < 4; ++i) CHECK(bits_of(out[i]) == bits_of(in[i]));
}

TEMPLATE_TEST_CASE("16-bit formats store element 2k in the low half of word k", "[formats]", half_t,
                   bfloat16_t) {
  using F = std::conditional_t<std::is_same_v<TestType, half_t>, fp16_format, bf16_format>;
  std::mt19937 rng(41u);
  for (int trial = 0; trial < 2000; ++trial) {
    const std::vector<float> in = random_block(rng, 8, -30, 20);
    const std::vector<uint32_t> rbits = random_bits(rng, 4);
    const auto nearest = encode<F>(in);
    const auto stochastic = encode<F, round_stochastic>(in, rbits.data());
    for (int i = 0; i < 8; ++i) {
      uint16_t stored_nearest, stored_stochastic;
      std::memcpy(&stored_nearest, nearest.data + 2 * i, 2);
      std::memcpy(&stored_stochastic, stochastic.data + 2 * i, 2);
      CHECK(stored_nearest == convert<TestType, float>::apply(in[i]).bits);
      const uint32_t field = rbits[i / 2] >> (16 * (i % 2));
      CHECK(stored_stochastic ==
            convert<TestType, float, round_stochastic>::apply(in[i], field).bits);
      CHECK(bits_of(decode(nearest)[i]) ==
            bits_of(convert<float, TestType>::apply(TestType::from_bits(stored_nearest))));
    }
  }
}

TEST_CASE("16-bit formats keep infinities, NaNs and subnormals", "[formats]") {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> in = {inf,
                                 -inf,
                                 std::numeric_limits<float>::quiet_NaN(),
                                 1e6f,
                                 std::ldexp(1.0f, -24),
                                 -std::ldexp(1.0f, -20),
                                 -0.0f,
                                 1.0f};
  const std::vector<float> half = decode(encode<fp16_format>(in));
  CHECK(half[0] == inf);
  CHECK(half[1] == -inf);
  CHECK(std::isnan(half[2]));
  CHECK(half[3] == inf);  // overflow
  CHECK(half[4] == std::ldexp(1.0f, -24));
  CHECK(half[5] == -std::ldexp(1.0f, -20));
  CHECK((half[6] == 0.0f && std::signbit(half[6])));
  const std::vector<float> bf = decode(encode<bf16_format>(in));
  CHECK(bf[0] == inf);
  CHECK(std::isnan(bf[2]));
  CHECK(bf[3] == 999424.0f);  // 1e6 to 8 significant bits
}

// ---- fp8_e4m3_format ------------------------------------------------------------------------

TEST_CASE("fp8 round trips within its stated precision", "[formats][fp8]") {
  std::mt19937 rng(51u);
  for (int trial = 0; trial < 5000; ++trial) {
    const int top = static_cast<int>(rng() % 200) - 100;
    const std::vector<float> in = random_block(rng, 16, top - 24, top);
    const std::vector<uint32_t> rbits = random_bits(rng, 4);
    const auto nearest = encode<fp8_e4m3_format>(in);
    const auto stochastic = encode<fp8_e4m3_format, round_stochastic>(in, rbits.data());
    const float scale = fp8_scale(nearest);
    float amax = 0.0f;
    for (float x : in) amax = std::max(amax, std::fabs(x));
    // The scale: amax / 448 rounded up to 20 significant bits (relative 2^-19).
    CHECK(scale >= amax / 448.0f);
    if (scale > std::ldexp(1.0f, -121))
      CHECK(scale <= amax / 448.0f * (1.0f + std::ldexp(1.0f, -18)));
    CHECK(fp8_scale(stochastic) == scale);
    const std::vector<float> a = decode(nearest);
    const std::vector<float> b = decode(stochastic);
    for (int i = 0; i < 16; ++i) {
      const float x = std::fabs(in[i]);
      // Half a step (nearest) or a step (stochastic) of e4m3: 2^-4 / 2^-3 relative in the
      // normal range, 2^-10 / 2^-9 of the scale in the subnormal one; 1e-6 covers v / scale.
      const float slack = 1.0f + 1e-6f;
      CHECK(std::fabs(a[i] - in[i]) <=
            std::max(x * 0.0625f, scale * std::ldexp(1.0f, -10)) * slack);
      CHECK(std::fabs(b[i] - in[i]) <= std::max(x * 0.125f, scale * std::ldexp(1.0f, -9)) * slack);
    }
    // A decoded block encodes back to the same bytes under nearest even.
    CHECK(same_bytes(encode<fp8_e4m3_format>(a), nearest));
  }
}

TEST_CASE("fp8 decodes every code at every position as code times scale", "[formats][fp8]") {
  int mismatches = 0;
  for (const float scale : {1.0f, 0.0f, 3.5f, 0x1p-121f, 0x1.fffffp100f, std::numeric_limits<float>::quiet_NaN()}) {
    chunk_storage<fp8_e4m3_format> s{};
    std::memcpy(s.scale, &scale, sizeof scale);
    for (int code = 0; code < 256; ++code) {
      std::memset(s.data, code, sizeof s.data);
      const float expected = convert<float, float_e4m3_t>::apply(float_e4m3_t::from_bits(uint8_t(code))) * scale;
      for (float out : decode(s)) mismatches += same_value(out, expected) ? 0 : 1;
    }
  }
  CHECK(mismatches == 0);
}

TEST_CASE("fp8 is exact for blocks on its grid", "[formats][fp8]") {
  std::mt19937 rng(52u);
  for (int trial = 0; trial < 2000; ++trial) {
    // A scale with 20 significant bits and codes including +-448 (so amax / 448 = scale).
    const float scale = std::ldexp(1.0f + std::ldexp(static_cast<float>(rng() & 0x7FFFFu), -19),
                                   static_cast<int>(rng() % 120) - 60);
    std::vector<float> in(16);
    for (float& x : in) {
      const uint8_t code = static_cast<uint8_t>(rng() % 0x7F) | ((rng() & 1u) << 7);
      x = convert<float, float_e4m3_t>::apply(float_e4m3_t::from_bits(code)) * scale;
    }
    in[rng() % 16] = (rng() & 1u) != 0 ? 448.0f * scale : -448.0f * scale;
    const std::vector<uint32_t> rbits = random_bits(rng, 4);
    const auto nearest = encode<fp8_e4m3_format>(in);
    CHECK(fp8_scale(nearest) == scale);
    CHECK(same_bytes(nearest, encode<fp8_e4m3_format, round_stochastic>(in, rbits.data())));
    const std::vector<float> out = decode(nearest);
    for (int i = 0; i < 16; ++i) CHECK(bits_of(out[i]) == bits_of(in[i]));
  }
}

TEST_CASE("fp8 zero, huge, tiny and non-finite blocks", "[formats][fp8]") {
  SECTION("an all-zero block stores scale 0 and keeps signed zeros") {
    std::vector<float> in(16, 0.0f);
    in[3] = -0.0f;
    const auto s = encode<fp8_e4m3_format>(in);
    CHECK(fp8_scale(s) == 0.0f);
    const std::vector<float> out = decode(s);
    for (int i = 0; i < 16; ++i) CHECK(bits_of(out[i]) == bits_of(in[i]));
  }
  SECTION("huge magnitudes stay finite and accurate") {
    std::mt19937 rng(53u);
    const std::vector<float> in = random_block(rng, 16, 100, 127);
    const std::vector<float> out = decode(encode<fp8_e4m3_format>(in));
    const float scale = fp8_scale(encode<fp8_e4m3_format>(in));
    for (int i = 0; i < 16; ++i) {
      CHECK(std::isfinite(out[i]));
      // The block spans 27 binades, more than e4m3's 15 normal ones: small elements fall
      // in its subnormal range.
      CHECK(std::fabs(out[i] - in[i]) <=
            std::max(std::fabs(in[i]) * 0.0625f, scale * std::ldexp(1.0f, -10)) * 1.000001f);
    }
  }
  SECTION("tiny blocks share the 2^-121 floor scale") {
    std::mt19937 rng(54u);
    const std::vector<float> in = random_block(rng, 16, -135, -126);
    const auto s = encode<fp8_e4m3_format>(in);
    CHECK(fp8_scale(s) == std::ldexp(1.0f, -121));
    const std::vector<float> out = decode(s);
    for (int i = 0; i < 16; ++i) CHECK(std::fabs(out[i] - in[i]) <= std::ldexp(1.0f, -131));
  }
  SECTION("an infinity or a NaN turns the whole block NaN") {
    for (float bad :
         {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
          std::numeric_limits<float>::quiet_NaN()}) {
      std::vector<float> in(16, 1.0f);
      in[7] = bad;
      const uint32_t rbits[4] = {0u, 0u, 0u, 0u};
      for (const auto& s :
           {encode<fp8_e4m3_format>(in), encode<fp8_e4m3_format, round_stochastic>(in, rbits)}) {
        CHECK(std::isnan(fp8_scale(s)));
        for (float x : decode(s)) CHECK(std::isnan(x));
      }
    }
  }
}

// ---- nvfp4_format ---------------------------------------------------------------------------

TEST_CASE("nvfp4 round trips within its stated precision", "[formats][nvfp4]") {
  std::mt19937 rng(61u);
  for (int trial = 0; trial < 5000; ++trial) {
    // amax mostly where the ue4m3 scale is normal, [6 * 2^-6, 2688].
    const int top = static_cast<int>(rng() % 14) - 3;
    const std::vector<float> in = random_block(rng, 16, top - 6, top);
    const std::vector<uint32_t> rbits = random_bits(rng, 4);
    const auto nearest = encode<nvfp4_format>(in);
    const auto stochastic = encode<nvfp4_format, round_stochastic>(in, rbits.data());
    const float s = nvfp4_scale(nearest);
    float amax = 0.0f;
    for (float x : in) amax = std::max(amax, std::fabs(x));
    // s is the smallest ue4m3 value with 6 s >= amax.
    CHECK(6.0f * s >= amax);
    CHECK(convert<float, float_ue4m3_t>::apply(float_ue4m3_t::from_bits(nearest.scale[0] - 1)) *
              6.0f <
          amax);
    const bool normal_scale = s >= std::ldexp(1.0f, -6);
    if (normal_scale) CHECK(s < amax / 6.0f * (8.0f / 7.0f));
    CHECK(stochastic.scale[0] == nearest.scale[0]);
    const std::vector<float> a = decode(nearest);
    const std::vector<float> b = decode(stochastic);
    for (int i = 0; i < 16; ++i) {
      CHECK(std::fabs(a[i] - in[i]) <= s);
      CHECK(std::fabs(b[i] - in[i]) <= 2.0f * s);
    }
    if (normal_scale) CHECK(same_bytes(encode<nvfp4_format>(a), nearest));
  }
}

TEST_CASE("nvfp4 stores element 2i in the low nibble and the scale in one byte",
          "[formats][nvfp4]") {
  // Scale 1 (amax 6): the codes are those of the values themselves.
  const std::vector<float> in = {0.5f,  -1.0f, 1.5f,  2.0f,  -3.0f, 4.0f,  6.0f,  0.0f,
                                 -0.5f, 1.0f,  -1.5f, -2.0f, 3.0f,  -4.0f, -6.0f, -0.0f};
  const auto s = encode<nvfp4_format>(in);
  CHECK(s.scale[0] == 0x38u);  // ue4m3 1.0
  for (int i = 0; i < 16; ++i) {
    const uint8_t code = (s.data[i / 2] >> (4 * (i % 2))) & 0xFu;
    CHECK(code == convert<float_e2m1_t, float>::apply(in[i]).bits);
  }
  const std::vector<float> out = decode(s);
  for (int i = 0; i < 16; ++i) CHECK(bits_of(out[i]) == bits_of(in[i]));
}

TEST_CASE("nvfp4 decodes every code at every position under every scale as code times scale",
          "[formats][nvfp4]") {
  int mismatches = 0;
  for (int scale_bits = 0; scale_bits < 0x80; ++scale_bits) {
    chunk_storage<nvfp4_format> s{};
    s.scale[0] = static_cast<uint8_t>(scale_bits);
    const float scale = nvfp4_scale(s);
    for (int code = 0; code < 16; ++code) {
      std::memset(s.data, code | code << 4, sizeof s.data);
      const float expected = convert<float, float_e2m1_t>::apply(float_e2m1_t::from_bits(uint8_t(code))) * scale;
      for (float out : decode(s)) mismatches += same_value(out, expected) ? 0 : 1;
    }
  }
  CHECK(mismatches == 0);
}

TEST_CASE("nvfp4 is exact for blocks on its grid", "[formats][nvfp4]") {
  std::mt19937 rng(62u);
  for (int trial = 0; trial < 2000; ++trial) {
    const uint8_t scale_code = static_cast<uint8_t>(1 + rng() % 0x7D);
    const float scale = convert<float, float_ue4m3_t>::apply(float_ue4m3_t::from_bits(scale_code));
    std::vector<float> in(16);
    for (float& x : in) {
      x = convert<float, float_e2m1_t>::apply(
              float_e2m1_t::from_bits(static_cast<uint8_t>(rng() & 0xFu))) *
          scale;
    }
    in[rng() % 16] = (rng() & 1u) != 0 ? 6.0f * scale : -6.0f * scale;
    const std::vector<uint32_t> rbits = random_bits(rng, 4);
    const auto nearest = encode<nvfp4_format>(in);
    CHECK(nearest.scale[0] == scale_code);
    CHECK(same_bytes(nearest, encode<nvfp4_format, round_stochastic>(in, rbits.data())));
    const std::vector<float> out = decode(nearest);
    for (int i = 0; i < 16; ++i) CHECK(bits_of(out[i]) == bits_of(in[i]));
  }
}

TEST_CASE("nvfp4 zero, saturating, tiny and non-finite blocks", "[formats][nvfp4]") {
  SECTION("an all-zero block stores scale 0 and keeps signed zeros") {
    std::vector<float> in(16, 0.0f);
    in[5] = -0.0f;
    const auto s = encode<nvfp4_format>(in);
    CHECK(s.scale[0] == 0u);
    const std::vector<float> out = decode(s);
    for (int i = 0; i < 16; ++i) CHECK(bits_of(out[i]) == bits_of(in[i]));
  }
  SECTION("past 6 * 448 the block saturates at +-2688") {
    std::vector<float> in(16, 100.0f);
    in[0] = 1e6f;
    in[1] = -5000.0f;
    const auto s = encode<nvfp4_format>(in);
    CHECK(s.scale[0] == 0x7Eu);
    const std::vector<float> out = decode(s);
    CHECK(out[0] == 2688.0f);
    CHECK(out[1] == -2688.0f);
    CHECK(out[2] == 0.0f);  // 100 / 448 rounds to zero next to them
  }
  SECTION("the scale floors at 2^-9; elements below 2^-11 flush to zero") {
    std::vector<float> in(16, std::ldexp(1.0f, -12));
    in[0] = std::ldexp(3.0f, -10);
    const auto s = encode<nvfp4_format>(in);
    CHECK(s.scale[0] == 0x01u);
    const std::vector<float> out = decode(s);
    CHECK(out[0] == std::ldexp(3.0f, -10));
    CHECK(out[1] == 0.0f);
    const auto tiny = encode<nvfp4_format>(std::vector<float>(16, 1e-30f));
    CHECK(tiny.scale[0] == 0x01u);
    for (float x : decode(tiny)) CHECK(x == 0.0f);
  }
  SECTION("an infinity or a NaN turns the whole block NaN") {
    for (float bad :
         {std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
      std::vector<float> in(16, 1.0f);
      in[9] = bad;
      const uint32_t rbits[4] = {~0u, ~0u, ~0u, ~0u};
      for (const auto& s :
           {encode<nvfp4_format>(in), encode<nvfp4_format, round_stochastic>(in, rbits)}) {
        CHECK(s.scale[0] == 0x7Fu);
        for (float x : decode(s)) CHECK(std::isnan(x));
      }
    }
  }
}

// ---- stochastic encoding through the formats -------------------------------------------------

// Each element's decoded mean over N draws lies within step (5 / (2 sqrt(N)) + 2^-n) of
// its value, step being the largest grid step of the block (the derivation is in
// test_rounding.cpp's check_stochastic_statistics); every element of the chunk reads a
// different random field.
namespace {
// The largest grid step for |v| <= 4 and the random bits each element reads.
double largest_step(fp16_format, float) { return std::ldexp(1.0, -8); }
double largest_step(bf16_format, float) { return std::ldexp(1.0, -5); }
double largest_step(fp8_e4m3_format, float amax) { return 32.0 * amax / 448.0 * 1.001; }
double largest_step(nvfp4_format, float amax) { return 2.0 * amax / 6.0 * (8.0 / 7.0); }
int field_bits(fp16_format) { return 13; }
int field_bits(bf16_format) { return 16; }
int field_bits(fp8_e4m3_format) { return 16; }
int field_bits(nvfp4_format) { return 8; }
}  // namespace

TEMPLATE_TEST_CASE("stochastic block encoding is unbiased for every element", "[formats]",
                   fp16_format, bf16_format, fp8_e4m3_format, nvfp4_format) {
  using F = TestType;
  constexpr int draws = 20000;
  std::mt19937 rng(71u);
  const std::vector<float> in = random_block(rng, F::chunk_elems, -2, 2);
  float amax = 0.0f;
  for (float x : in) amax = std::max(amax, std::fabs(x));
  std::vector<double> sum(F::chunk_elems, 0.0);
  const random_stream_key key{77u, 1u, 2u, 0u};
  for (int d = 0; d < draws; ++d) {
    uint32_t rbits[F::random_words_per_chunk];
    random_words(key, static_cast<uint32_t>(d * F::random_words_per_chunk), rbits);
    const std::vector<float> out = decode(encode<F, round_stochastic>(in, rbits));
    for (int i = 0; i < F::chunk_elems; ++i) sum[i] += out[i];
  }
  const double step = largest_step(F{}, amax);
  const double bound = step * (5.0 / (2.0 * std::sqrt(draws)) + std::ldexp(1.0, -field_bits(F{})));
  for (int i = 0; i < F::chunk_elems; ++i) {
    INFO("element " << i << " value " << in[i]);
    CHECK(std::fabs(sum[i] / draws - in[i]) <= bound);
  }
}

TEMPLATE_TEST_CASE("store_rounded stores what store does and hands back what load decodes", "[formats]",
                   fp32_format, fp16_format, bf16_format, fp8_e4m3_format, nvfp4_format) {
  using F = TestType;
  constexpr int chunks = 3, n = F::chunk_elems;
  std::mt19937 rng(72u);
  const random_stream_key key{78u, 2u, 3u, 4u};
  // Two pools of three chunks: `store` into one, `store_rounded` into the other.
  std::vector<uint8_t> data(2 * chunks * F::data_bytes_per_chunk), scales(2 * chunks * F::scale_bytes_per_chunk + 1);
  const auto view = [&](int pool) {
    return state_head_view<F>::in_pool(data.data(), scales.data(), pool, int64_t(chunks) * n);
  };
  for (int chunk = 0; chunk < chunks; ++chunk) {
    const std::vector<float> in = random_block(rng, n, -3, 3);
    float values[n], rounded[n], loaded[n];
    std::copy(in.begin(), in.end(), values);
    std::copy(in.begin(), in.end(), rounded);
    view(0).template store<round_stochastic>(chunk, values, key);
    view(1).template store_rounded<round_stochastic>(chunk, rounded, key);
    view(1).load(chunk, loaded);
    INFO("chunk " << chunk);
    CHECK(std::memcmp(rounded, loaded, sizeof loaded) == 0);
  }
  CHECK(std::equal(data.begin(), data.begin() + data.size() / 2, data.begin() + data.size() / 2));
  const size_t scale_bytes = size_t(chunks) * F::scale_bytes_per_chunk;
  CHECK(std::equal(scales.begin(), scales.begin() + scale_bytes, scales.begin() + scale_bytes));
}
