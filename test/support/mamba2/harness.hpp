// SPDX-License-Identifier: Apache-2.0
// Test harness of Mamba-2: random problems, the library's state held in host buffers, and
// what the shared drivers (spec_round.hpp, the GPU tests' device_runner.cuh) need of the
// recurrence (mamba2_harness).
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "../errors.hpp"
#include "../host_state.hpp"
#include "reference.hpp"

namespace replayssm_test {

/// Nemotron-3 shapes, and an odd one.
inline constexpr mamba2_layer_shape mamba2_odd_shape{2, 17, 48, 1};
inline constexpr mamba2_layer_shape nemotron3_nano{96, 80, 128, 8};
inline constexpr mamba2_layer_shape nemotron3_super{128, 64, 128, 8};

/// A problem: a layer shape, a batch mapped onto slots, and options.
struct mamba2_case {
  mamba2_layer_shape shape;
  int batch = 2;
  int num_slots = 3;
  bool gate = true;
  bool softplus = true;
  uint64_t seed = 1;
};

/// Random step inputs of `tokens` tokens per request, in `Act`, with the statistics of a
/// Mamba layer at initialization: unit-variance x, z, B, C; dt after softplus between about
/// 1e-3 and 1e-1.
template <class Act>
struct mamba2_inputs_host {
  int tokens;
  std::vector<Act> x, z, dt, B, C;  // [batch * tokens][...]
  std::vector<float> A, D, dt_bias;

  mamba2_inputs_host(const mamba2_case& c, std::mt19937_64& rng, int tokens_per_request = 1)
      : tokens(tokens_per_request) {
    const auto& s = c.shape;
    std::uniform_real_distribution<float> log_a(0.0f, std::log(16.0f)), log_dt(std::log(1e-3f), std::log(1e-1f)),
        d(0.5f, 1.5f);
    for (int h = 0; h < s.heads; ++h) {
      A.push_back(-std::exp(log_a(rng)));
      D.push_back(d(rng));
      const float target = std::exp(log_dt(rng));
      dt_bias.push_back(c.softplus ? std::log(std::expm1(target)) : target);
    }
    const size_t rows = size_t(c.batch) * tokens;
    x.resize(rows * s.heads * s.head_dim);
    z.resize(x.size());
    dt.resize(rows * s.heads);
    B.resize(rows * s.groups * s.state_dim);
    C.resize(B.size());
  }

  /// Draws fresh inputs for the next step.
  void draw(std::mt19937_64& rng) {
    std::normal_distribution<float> unit(0.0f, 1.0f), small(0.0f, 0.3f);
    for (auto* v : {&x, &z, &B, &C})
      for (auto& e : *v) e = from_float<Act>(unit(rng));
    for (auto& e : dt) e = from_float<Act>(small(rng));
  }

  /// Sets `p` to contiguous params over these inputs (state and output fields unset).
  void bind(mamba2_params<Act>& p, const mamba2_case& c) {
    p = contiguous_mamba2_params<Act>(c.shape, c.batch, tokens);
    p.x = x.data();
    p.z = c.gate ? z.data() : nullptr;
    p.dt = dt.data();
    p.B = B.data();
    p.C = C.data();
    p.A = A.data();
    p.D = D.data();
    p.dt_bias = dt_bias.data();
    p.dt_softplus = c.softplus;
  }

  /// Token t of request r's inputs widened to double: x, z [H][P], dt [H], B, C [G][N].
  struct widened {
    std::vector<double> x, z, dt, B, C;
  };
  widened widen(int r, int t, const mamba2_case& c) const {
    const auto& s = c.shape;
    const size_t row = size_t(r) * tokens + t, xs = size_t(s.heads) * s.head_dim, bs = size_t(s.groups) * s.state_dim;
    return {widen_row(x, row, xs), widen_row(z, row, xs), widen_row(dt, row, size_t(s.heads)), widen_row(B, row, bs),
            widen_row(C, row, bs)};
  }
};

/// The library's state of one Mamba-2 layer for `Policy`, in host memory.
template <class Policy, class Act>
struct mamba2_host_state : host_state_pools<Policy, mamba2_buffer_sizes, mamba2_layer_shape> {
  using params = mamba2_params<Act>;
  std::vector<block16> window_x, window_B;
  std::vector<float> window_dt;

  mamba2_host_state(mamba2_layer_shape s, int slots, int drafts = 0)
      : host_state_pools<Policy, mamba2_buffer_sizes, mamba2_layer_shape>(
            s.heads, s, int64_t(s.head_dim) * s.state_dim, slots, drafts,
            mamba2_buffers<Policy>(s, slots, activation_traits<Act>::tag, drafts)),
        window_x(aligned_bytes(this->sizes.window_x)),
        window_B(aligned_bytes(this->sizes.window_B)),
        window_dt(this->sizes.window_dt / sizeof(float)) {}

  /// Every byte of the state, windows included.
  std::vector<uint8_t> bytes() const { return this->bytes_with(window_x, window_B, window_dt); }

  /// Fills the state fields of `p`.
  void bind(mamba2_params<Act>& p, bool with_phase) {
    this->bind_pools(p, with_phase);
    p.window_x = this->template typed<Act>(window_x);
    p.window_B = this->template typed<Act>(window_B);
    p.window_dt = this->ptr(window_dt);
  }
};

/// What the shared drivers need of Mamba-2.
struct mamba2_harness {
  using case_type = mamba2_case;
  template <class Act>
  using inputs = mamba2_inputs_host<Act>;
  template <class Policy, class Act>
  using state = mamba2_host_state<Policy, Act>;

  /// Values per token of the output y, and where the params keep it.
  static size_t outputs(const mamba2_layer_shape& s) { return size_t(s.heads) * s.head_dim; }
  template <class Act>
  static Act*& output(mamba2_params<Act>& p) {
    return p.y;
  }

  template <class Policy, class Act, class ParallelFor = cpu::serial_for>
  static status cpu_decode(const mamba2_params<Act>& p, ParallelFor&& parallel_for = {}) {
    return cpu::decode_step<Policy>(p, parallel_for);
  }

  /// A random initial state of magnitude about 1, as after a prefill.
  static std::vector<double> random_state(const mamba2_layer_shape& s, std::mt19937_64& rng) {
    return random_normal(size_t(s.state_elements()), 1.0, rng);
  }

  /// The float64 reference of a case, with the weights of `in`, every slot zero.
  template <class Act>
  static mamba2_reference reference(const mamba2_case& c, const mamba2_inputs_host<Act>& in) {
    const auto& s = c.shape;
    mamba2_reference ref{s.heads, s.head_dim, s.state_dim, s.groups, {}, {}, {}, c.softplus, {}};
    ref.A.assign(in.A.begin(), in.A.end());
    ref.D.assign(in.D.begin(), in.D.end());
    ref.dt_bias.assign(in.dt_bias.begin(), in.dt_bias.end());
    ref.state.assign(size_t(c.num_slots), std::vector<double>(size_t(s.state_elements())));
    return ref;
  }

  /// One reference step of slot `slot` on token t of request r's inputs; writes its output.
  template <class Act>
  static void reference_step(mamba2_reference& ref, const mamba2_inputs_host<Act>& in, const mamba2_case& c, int r,
                             int t, int slot, double* out) {
    const auto w = in.widen(r, t, c);
    ref.step(slot, w.x.data(), c.gate ? w.z.data() : nullptr, w.dt.data(), w.B.data(), w.C.data(), out);
  }

  /// Outputs and states are compared normwise.
  template <class T, class U>
  static double error(const T* got, const U* want, size_t n) {
    return relative_error(got, want, n);
  }
};

}  // namespace replayssm_test
