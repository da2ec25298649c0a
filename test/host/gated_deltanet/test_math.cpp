// SPDX-License-Identifier: Apache-2.0
// Gated DeltaNet's scalar math and input preparation against double precision, and the
// float64 reference step against the delta rule's defining properties.
#include <replayssm/numeric/activation.hpp>
#include <replayssm/gated_deltanet/recurrence.hpp>
#include <replayssm/replay/executor.hpp>
#include <replayssm/gated_deltanet/inputs.hpp>

#include "../../support/catch.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "../../support/gated_deltanet/reference.hpp"

using namespace replayssm;
using namespace replayssm_test;

namespace {

double rel(double got, double want) { return std::fabs(got - want) / std::fabs(want); }
constexpr double ulp = 0x1p-24;  // half an ulp of 1 in fp32, relative

/// Runs every loop backwards: a legal executor whose order differs from the serial one, so
/// a result that depends on the loop order would differ between them.
struct reversed_executor {
  template <class F>
  void for_each(int count, F&& body) const {
    for (int i = count - 1; i >= 0; --i) body(i);
  }
  void sync() const {}
  bool leader() const { return true; }
};

/// Worst-case relative error of l2_normalize over n elements, in units of `ulp`: one
/// rounding per term of the longest summation path (a chunk, the chunk sums, eps), halved
/// by the root, plus the root and the division.
double l2_bound(int n) { return (l2_normalize_chunk + l2_normalize_scratch(n) + 1) / 2.0 + 1.0; }

/// A vector of n activations: normal values times 10^e, e uniform in [lo, hi].
template <class Act>
std::vector<Act> random_vector(std::mt19937& rng, int n, double lo, double hi) {
  std::normal_distribution<double> value;
  const double scale = std::pow(10.0, std::uniform_real_distribution<double>(lo, hi)(rng));
  std::vector<Act> x(static_cast<size_t>(n));
  for (Act& e : x) e = from_float<Act>(float(value(rng) * scale));
  return x;
}

template <class Act>
std::vector<double> widened(const std::vector<Act>& x) {
  std::vector<double> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = to_float(x[i]);
  return out;
}

/// Largest relative error of l2_normalize against double precision over many vectors of
/// each length, with magnitudes from 1e-20 (eps dominates) to 1e17 (near overflow).
template <class Act>
double l2_normalize_worst_error() {
  std::mt19937 rng(7);
  double worst_in_bound = 0;
  for (int n : {1, 5, 16, 17, 64, 128, 130, 256}) {
    for (int trial = 0; trial < 2000; ++trial) {
      const std::vector<Act> x = random_vector<Act>(rng, n, -20, 17);
      std::vector<float> out(static_cast<size_t>(n)), scratch(size_t(l2_normalize_scratch(n)));
      l2_normalize(serial_executor{}, x.data(), n, out.data(), scratch.data());
      const std::vector<double> xd = widened(x);
      std::vector<double> want(static_cast<size_t>(n));
      gdn_math::l2_normalize(xd.data(), n, 1e-6, want.data());
      double worst = 0;
      for (int i = 0; i < n; ++i)
        if (xd[size_t(i)] != 0) worst = std::max(worst, rel(out[size_t(i)], want[size_t(i)]));
      CHECK(worst <= l2_bound(n) * ulp);
      worst_in_bound = std::max(worst_in_bound, worst / (l2_bound(n) * ulp));
    }
  }
  return worst_in_bound;
}

}  // namespace

TEST_CASE("gdn layer shape: key head of a value head and state size (Qwen3-Next)", "[gdn][math]") {
  constexpr gdn_layer_shape s{32, 16, 128, 128};
  static_assert(s.value_heads_per_key_head() == 2);
  static_assert(s.state_elements() == 32 * 128 * 128);
  CHECK(s.key_head(0) == 0);
  CHECK(s.key_head(1) == 0);
  CHECK(s.key_head(2) == 1);
  CHECK(s.key_head(31) == 15);
  constexpr gdn_layer_shape one_to_one{4, 4, 64, 32};
  CHECK(one_to_one.key_head(3) == 3);
}

TEST_CASE("gdn log decay matches double precision within its conditioning", "[gdn][math]") {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> wide(-40.0f, 40.0f), tiny(-1e-6f, 1e-6f), A_log(-20.0f, 4.0f),
      bias(-5.0f, 5.0f);
  double worst = 0;
  for (int i = 0; i < 1000000; ++i) {
    const float a = (i % 4) ? wide(rng) : tiny(rng), al = A_log(rng), dtb = bias(rng);
    const double want = gdn_math::log_decay(a, al, dtb);
    // Rounding a + dt_bias to float moves softplus by up to |a + dt_bias| ulp relative
    // where softplus(x) ~ e^x: the input rounding the step is defined with.
    const double tol = (16 + std::fabs(double(a) + dtb)) * ulp;
    const double err = rel(gated_deltanet::log_decay(a, al, dtb), want);
    CHECK(err <= tol);
    worst = std::max(worst, err / tol);
  }
  CHECK(worst > 0);  // the comparison saw real rounding, not identical zeros
  CHECK(gated_deltanet::log_decay(0.0f, 0.0f, 0.0f) == Approx(-std::log(2.0)).epsilon(1e-6));
  CHECK(gated_deltanet::log_decay(100.0f, std::log(2.0f), 0.0f) == Approx(-200.0).epsilon(1e-6));
  CHECK(gated_deltanet::log_decay(-200.0f, 1.0f, 0.0f) == 0.0f);  // softplus underflows: no decay
}

TEST_CASE("gdn write strength and query scale match double precision", "[gdn][math]") {
  std::mt19937 rng(4);
  std::uniform_real_distribution<float> b(-80.0f, 80.0f), tiny(-1e-6f, 1e-6f);
  double worst = 0;
  for (int i = 0; i < 1000000; ++i) {
    const float v = (i % 4) ? b(rng) : tiny(rng);
    worst = std::max(worst, rel(gated_deltanet::write_strength(v), gdn_math::write_strength(v)));
  }
  CHECK(worst <= 8 * ulp);
  CHECK(gated_deltanet::write_strength(0.0f) == 0.5f);
  for (int K = 1; K <= 1024; ++K) CHECK(rel(gated_deltanet::query_scale(K), 1 / std::sqrt(double(K))) <= 2 * ulp);
  CHECK(gated_deltanet::query_scale(64) == 0.125f);
  CHECK(gated_deltanet::query_scale(256) == 0.0625f);
}

TEST_CASE("l2_normalize matches double precision from tiny to huge magnitudes", "[gdn][math]") {
  // The worst error as a fraction of the bound: above zero, so the bound was exercised.
  CHECK(l2_normalize_worst_error<float>() > 0.01);
  CHECK(l2_normalize_worst_error<bfloat16_t>() > 0.01);
}

TEST_CASE("l2_normalize output has unit norm", "[gdn][math]") {
  std::mt19937 rng(8);
  for (int n : {1, 16, 100, 128, 256}) {
    for (int trial = 0; trial < 2000; ++trial) {
      const std::vector<float> x = random_vector<float>(rng, n, 1, 17);
      std::vector<float> out(static_cast<size_t>(n)), scratch(size_t(l2_normalize_scratch(n)));
      l2_normalize(serial_executor{}, x.data(), n, out.data(), scratch.data());
      double sum_x = 0, sum_out = 0;
      for (int i = 0; i < n; ++i) {
        sum_x += double(x[size_t(i)]) * x[size_t(i)];
        sum_out += double(out[size_t(i)]) * out[size_t(i)];
      }
      // eps shortens the vector by eps / (2 sum x^2); each element carries the bound.
      CHECK(std::fabs(std::sqrt(sum_out) - 1) <= l2_bound(n) * ulp + 1e-6 / (2 * sum_x));
    }
  }
  // Below sqrt(eps) the vector is not normalized but shrunk: x / sqrt(eps).
  const float small[2] = {3e-5f, 4e-5f};
  float out[2], scratch[1];
  l2_normalize(serial_executor{}, small, 2, out, scratch);
  CHECK(out[1] == Approx(4e-5 / std::sqrt(25e-10 + 1e-6)).epsilon(1e-6));
}

TEST_CASE("l2_normalize: loop order, scale and in-place give the defined bits", "[gdn][math]") {
  std::mt19937 rng(9);
  const int n = 130;
  const float scale = gated_deltanet::query_scale(n);
  for (int trial = 0; trial < 100; ++trial) {
    std::vector<float> x = random_vector<float>(rng, n, -3, 3);
    std::vector<float> serial(static_cast<size_t>(n)), reversed(static_cast<size_t>(n)), scaled(static_cast<size_t>(n)),
        scratch(size_t(l2_normalize_scratch(n)));
    l2_normalize(serial_executor{}, x.data(), n, serial.data(), scratch.data());
    l2_normalize(reversed_executor{}, x.data(), n, reversed.data(), scratch.data());
    l2_normalize(serial_executor{}, x.data(), n, scaled.data(), scratch.data(), scale);
    CHECK(std::memcmp(serial.data(), reversed.data(), serial.size() * sizeof(float)) == 0);
    for (int i = 0; i < n; ++i) CHECK(scaled[size_t(i)] == math::mul(serial[size_t(i)], scale));
    l2_normalize(serial_executor{}, x.data(), n, x.data(), scratch.data());
    CHECK(std::memcmp(serial.data(), x.data(), x.size() * sizeof(float)) == 0);
  }
}

TEST_CASE("gdn reference: a hand-computed two-step example from raw inputs", "[gdn][math]") {
  // K = 2, V = 1, one key head shared by two value heads; A_log = dt_bias = a = 0 gives
  // g = -ln 2 (decay 1/2), b = 0 gives beta = 1/2; head 1 writes fully (b = 40).
  gdn_reference ref{2, 1, 2, 1, {0, 0}, {0, 0}, 0.0, {}};
  ref.clear(1);
  const double q[2] = {3, 4}, k[2] = {5, 0}, v[2] = {2, 2}, a[2] = {0, 0}, b[2] = {0, 40};
  double o[2];
  ref.step(0, q, k, v, a, b, o);
  // S = [1, 0] (head 0), [2, 0] (head 1); o = S (0.6, 0.8) / sqrt 2.
  CHECK(o[0] == Approx(0.6 / std::sqrt(2.0)).epsilon(1e-12));
  CHECK(o[1] == Approx(1.2 / std::sqrt(2.0)).epsilon(1e-12));
  ref.step(0, q, k, v, a, b, o);
  // Head 0: S' = [0.5, 0], u = 0.5 (2 - 0.5) = 0.75, S = [1.25, 0]. Head 1: S' k = 1, u = 1, S = [2, 0].
  CHECK(ref.state[0][0] == Approx(1.25).epsilon(1e-12));
  CHECK(o[0] == Approx(1.25 * 0.6 / std::sqrt(2.0)).epsilon(1e-12));
  CHECK(o[1] == Approx(1.2 / std::sqrt(2.0)).epsilon(1e-12));
}

TEST_CASE("gdn reference: the delta rule stores, recalls and overwrites by key", "[gdn][math]") {
  const int K = 8, V = 3;
  gdn_reference ref{1, 1, K, V, {0}, {0}, 1e-6, {}};
  ref.clear(2);
  // An orthonormal basis of keys (Gram-Schmidt) and a random value for each.
  std::mt19937 rng(11);
  std::normal_distribution<double> normal;
  std::vector<std::vector<double>> keys, values;
  for (int j = 0; j < K; ++j) {
    std::vector<double> k(K), v(V);
    for (double& e : k) e = normal(rng);
    for (const auto& prev : keys) {
      double d = 0;
      for (int n = 0; n < K; ++n) d += k[size_t(n)] * prev[size_t(n)];
      for (int n = 0; n < K; ++n) k[size_t(n)] -= d * prev[size_t(n)];
    }
    gdn_math::l2_normalize(k.data(), K, 0, k.data());
    for (double& e : v) e = normal(rng);
    keys.push_back(k);
    values.push_back(v);
  }
  const double root_k = std::sqrt(double(K));
  // Reads S k_j (o scaled back by sqrt K); beta = 0 and g = 0 leave the state unchanged.
  auto recall = [&](int slot, int j) {
    const double g = 0, beta = 0, zero[V] = {};
    std::vector<double> o(V);
    ref.step_prepared(slot, keys[size_t(j)].data(), keys[size_t(j)].data(), zero, &g, &beta, o.data());
    for (double& e : o) e *= root_k;
    return o;
  };
  auto write = [&](int j, const std::vector<double>& v, double g, double beta) {
    std::vector<double> o(V);
    ref.step_prepared(0, keys[size_t(j)].data(), keys[size_t(j)].data(), v.data(), &g, &beta, o.data());
    return o;
  };
  for (int j = 0; j < K; ++j) {
    const std::vector<double> o = write(j, values[size_t(j)], 0, 1);
    for (int p = 0; p < V; ++p) CHECK(o[size_t(p)] * root_k == Approx(values[size_t(j)][size_t(p)]).margin(1e-12));
  }
  // Orthogonal keys do not disturb each other: every value is recalled.
  for (int j = 0; j < K; ++j) {
    const std::vector<double> o = recall(0, j);
    for (int p = 0; p < V; ++p) CHECK(o[size_t(p)] == Approx(values[size_t(j)][size_t(p)]).margin(1e-12));
  }
  // A second write to a key replaces its value (plain linear attention would add).
  const std::vector<double> w = {10, -20, 30};
  write(0, w, 0, 1);
  CHECK(recall(0, 0)[1] == Approx(-20).margin(1e-12));
  CHECK(recall(0, 1)[1] == Approx(values[1][1]).margin(1e-12));
  // beta = 1/2 moves halfway; a decay of 1/4 scales every stored value.
  write(1, w, 0, 0.5);
  CHECK(recall(0, 1)[2] == Approx((values[1][2] + 30) / 2).margin(1e-12));
  write(2, values[2], std::log(0.25), 0);
  CHECK(recall(0, 2)[0] == Approx(values[2][0] / 4).margin(1e-12));
  CHECK(recall(0, 0)[0] == Approx(10.0 / 4).margin(1e-12));
  // The other slot never saw a write.
  CHECK(recall(1, 0)[0] == 0.0);
}
