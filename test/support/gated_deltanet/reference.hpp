// SPDX-License-Identifier: Apache-2.0
// Float64 reference of the conventional Gated DeltaNet decode step, written from the
// recurrence and its input preparation, independently of the library's primitives.
#pragma once

#include <cmath>
#include <cstddef>
#include <vector>

namespace replayssm_test {

/// The input preparation of a Gated DeltaNet step in double, from the definitions.
namespace gdn_math {

inline double softplus(double x) { return x > 30 ? x : std::log1p(std::exp(x)); }

/// g = -exp(A_log) softplus(a + dt_bias).
inline double log_decay(double a, double A_log, double dt_bias) { return -std::exp(A_log) * softplus(a + dt_bias); }

/// beta = sigmoid(b).
inline double write_strength(double b) { return 1 / (1 + std::exp(-b)); }

/// out = x / sqrt(sum x^2 + eps) over n values.
inline void l2_normalize(const double* x, int n, double eps, double* out) {
  double sum = 0;
  for (int i = 0; i < n; ++i) sum += x[i] * x[i];
  const double norm = std::sqrt(sum + eps);
  for (int i = 0; i < n; ++i) out[i] = x[i] / norm;
}

}  // namespace gdn_math

/// One layer's float64 state and weights for a set of slots.
struct gdn_reference {
  int value_heads, key_heads, key_dim, value_dim;  // HV, HK, K, V
  std::vector<double> A_log, dt_bias;              // [HV]
  double eps = 1e-6;                               // of the q and k L2 normalization
  std::vector<std::vector<double>> state;          // [slot] -> HV * V * K, each head V x K row-major

  /// Gives `slots` requests a zero state.
  void clear(int slots) { state.assign(size_t(slots), std::vector<double>(size_t(value_heads) * value_dim * key_dim)); }

  /// One step of request `slot` from raw inputs widened to double: q, k: [HK][K];
  /// v: [HV][V]; a, b: [HV]. Normalizes q and k, forms g and beta, and writes o: [HV][V].
  void step(int slot, const double* q, const double* k, const double* v, const double* a, const double* b, double* o) {
    std::vector<double> qn(size_t(key_heads) * key_dim), kn(qn.size()), g(static_cast<size_t>(value_heads)),
        beta(g.size());
    for (int hk = 0; hk < key_heads; ++hk) {
      gdn_math::l2_normalize(q + hk * key_dim, key_dim, eps, qn.data() + hk * key_dim);
      gdn_math::l2_normalize(k + hk * key_dim, key_dim, eps, kn.data() + hk * key_dim);
    }
    for (int h = 0; h < value_heads; ++h) {
      g[size_t(h)] = gdn_math::log_decay(a[h], A_log[size_t(h)], dt_bias[size_t(h)]);
      beta[size_t(h)] = gdn_math::write_strength(b[h]);
    }
    step_prepared(slot, qn.data(), kn.data(), v, g.data(), beta.data(), o);
  }

  /// One step of request `slot` from prepared inputs: q, k: [HK][K], L2-normalized (q not
  /// yet scaled by K^-1/2); v: [HV][V]; g (log decay), beta: [HV]. Writes o: [HV][V].
  void step_prepared(int slot, const double* q, const double* k, const double* v, const double* g, const double* beta,
                     double* o) {
    std::vector<double>& S = state[size_t(slot)];
    const int heads_per_key_head = value_heads / key_heads;
    const double scale = 1 / std::sqrt(double(key_dim));
    for (int h = 0; h < value_heads; ++h) {
      const double* kh = k + (h / heads_per_key_head) * key_dim;
      const double* qh = q + (h / heads_per_key_head) * key_dim;
      const double decay = std::exp(g[h]);
      for (int p = 0; p < value_dim; ++p) {
        double* row = S.data() + (size_t(h) * value_dim + p) * key_dim;
        double sk = 0;
        for (int n = 0; n < key_dim; ++n) {
          row[n] *= decay;
          sk += row[n] * kh[n];
        }
        const double u = beta[h] * (v[h * value_dim + p] - sk);
        double acc = 0;
        for (int n = 0; n < key_dim; ++n) {
          row[n] += u * kh[n];
          acc += row[n] * qh[n];
        }
        o[h * value_dim + p] = acc * scale;
      }
    }
  }
};

}  // namespace replayssm_test
