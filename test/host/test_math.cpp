// SPDX-License-Identifier: Apache-2.0
// The recurrences' scalar math against double precision: exp, log1p, softplus, silu,
// sigmoid, sqrt, the order-fixed decay composition, and the byte permute.
#include <replayssm/numeric/math.hpp>
#include <replayssm/replay/scalar_decay.hpp>

#include "../support/catch.hpp"

#include <cmath>
#include <random>

using namespace replayssm;

namespace {

double rel(double got, double want) { return std::fabs(got - want) / std::fabs(want); }
constexpr double ulp = 0x1p-24;  // half an ulp of 1 in fp32, relative

}  // namespace

TEST_CASE("exp is within 2 ulp over its range and saturates outside", "[math]") {
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> x(-87.0f, 88.0f);
  double worst = 0;
  for (int i = 0; i < 1000000; ++i) {
    const float v = x(rng);
    worst = std::max(worst, rel(math::exp(v), std::exp(double(v))));
  }
  CHECK(worst <= 4 * ulp);
  CHECK(math::exp(0.0f) == 1.0f);
  CHECK(math::exp(-100.0f) == 0.0f);
  CHECK(std::isinf(math::exp(100.0f)));
  CHECK(std::isnan(math::exp(NAN)));
}

TEST_CASE("log1p, softplus and silu are accurate to a few ulp", "[math]") {
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> wide(0.0f, 1e6f), tiny(0.0f, 1e-6f), arg(-30.0f, 30.0f);
  double worst_log = 0, worst_softplus = 0, worst_silu = 0;
  for (int i = 0; i < 1000000; ++i) {
    const float y = (i % 2) ? wide(rng) : tiny(rng);
    if (y > 0) worst_log = std::max(worst_log, rel(math::log1p_nonnegative(y), std::log1p(double(y))));
    const float v = arg(rng);
    worst_softplus = std::max(worst_softplus, rel(math::softplus(v), std::log1p(std::exp(double(v)))));
    if (std::fabs(v) > 1e-3f) worst_silu = std::max(worst_silu, rel(math::silu(v), v / (1 + std::exp(-double(v)))));
  }
  CHECK(worst_log <= 8 * ulp);
  CHECK(worst_softplus <= 16 * ulp);
  CHECK(worst_silu <= 8 * ulp);
  CHECK(math::softplus(25.0f) == 25.0f);
  CHECK(math::log1p_nonnegative(0.0f) == 0.0f);
}

TEST_CASE("sigmoid is accurate to a few ulp and saturates; sqrt is correctly rounded", "[math]") {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> arg(-87.0f, 87.0f), positive(0.0f, 1e30f);
  double worst = 0;
  for (int i = 0; i < 1000000; ++i) {
    const float v = (i % 2) ? arg(rng) : arg(rng) * 1e-6f;
    worst = std::max(worst, rel(math::sigmoid(v), 1 / (1 + std::exp(-double(v)))));
    // The float nearest to the root: no other float is closer.
    const float y = positive(rng), r = math::sqrt(y);
    const double exact = std::sqrt(double(y));
    CHECK(std::fabs(r - exact) <= std::fabs(double(std::nextafter(r, INFINITY)) - exact));
    CHECK(std::fabs(r - exact) <= std::fabs(double(std::nextafter(r, 0.0f)) - exact));
  }
  CHECK(worst <= 8 * ulp);
  CHECK(worst > 0);
  CHECK(math::sigmoid(0.0f) == 0.5f);
  CHECK(math::sigmoid(100.0f) == 1.0f);
  CHECK(math::sigmoid(-100.0f) == 0.0f);
  CHECK(std::isnan(math::sigmoid(NAN)));
  CHECK(math::sqrt(4.0f) == 2.0f);
}

TEST_CASE("window coefficients compose decays in a fixed order", "[math]") {
  const float log_decay[4] = {-0.1f, -0.2f, -0.3f, -0.4f};
  const float scale[4] = {1.0f, 2.0f, 3.0f, 4.0f};
  // Step j's contribution decays by the steps after it; the last step's not at all.
  CHECK(window_coefficient(log_decay, scale, 3, 4) == 4.0f);
  CHECK(window_coefficient(log_decay, scale, 0, 4) == Approx(std::exp(-0.9)).epsilon(1e-6));
  CHECK(checkpoint_decay(log_decay, 4) == Approx(std::exp(-1.0)).epsilon(1e-6));
  CHECK(suffix_log_decay(log_decay, -1, 4) == (((0.0f + -0.4f) + -0.3f) + -0.2f) + -0.1f);
}

TEST_CASE("byte_perm picks bytes of {lo, hi} by the selector's nibbles", "[math]") {
  const uint32_t lo = 0x33221100u, hi = 0x77665544u;  // byte k holds 0x11 * k
  CHECK(math::byte_perm(lo, hi, 0x3210u) == lo);
  CHECK(math::byte_perm(lo, hi, 0x7654u) == hi);
  CHECK(math::byte_perm(lo, hi, 0x0167u) == 0x00116677u);
  CHECK(math::byte_perm(lo, hi, 0x5555u) == 0x55555555u);
}
