// SPDX-License-Identifier: Apache-2.0
// Float64 reference of the conventional Mamba-2 decode step, written from the recurrence
// itself, independently of the library's primitives.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace replayssm_test {

/// One layer's float64 state and weights for a set of slots.
struct mamba2_reference {
  int heads, head_dim, state_dim, groups;
  std::vector<double> A, D, dt_bias;
  bool softplus = true;
  std::vector<std::vector<double>> state;  // [slot] -> H * P * N

  /// One step of request `slot` with its inputs already widened to double.
  /// x, z: [H][P]; dt: [H]; B, C: [G][N]. Writes y: [H][P].
  void step(int slot, const double* x, const double* z, const double* dt_raw, const double* B,
            const double* C, double* y) {
    std::vector<double>& S = state[size_t(slot)];
    const int heads_per_group = heads / groups;
    for (int h = 0; h < heads; ++h) {
      const int g = h / heads_per_group;
      const double v = dt_raw[h] + dt_bias[size_t(h)];
      const double dt = softplus ? (v > 30 ? v : std::log1p(std::exp(v))) : v;
      const double a = std::exp(dt * A[size_t(h)]);
      for (int p = 0; p < head_dim; ++p) {
        double* row = S.data() + (size_t(h) * head_dim + p) * state_dim;
        const double xv = x[h * head_dim + p];
        double acc = 0;
        for (int n = 0; n < state_dim; ++n) {
          row[n] = a * row[n] + dt * xv * B[g * state_dim + n];
          acc += row[n] * C[g * state_dim + n];
        }
        double out = acc + D[size_t(h)] * xv;
        if (z != nullptr) {
          const double zv = z[h * head_dim + p];
          out *= zv / (1 + std::exp(-zv));
        }
        y[h * head_dim + p] = out;
      }
    }
  }
};

}  // namespace replayssm_test
