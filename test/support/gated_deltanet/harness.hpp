// SPDX-License-Identifier: Apache-2.0
// Test harness of Gated DeltaNet: random problems, the library's state held in host
// buffers, and what the shared drivers (spec_round.hpp, the GPU tests' device_runner.cuh)
// need of the recurrence (gdn_harness).
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "../errors.hpp"
#include "../host_state.hpp"
#include "reference.hpp"

namespace replayssm_test {

/// Qwen3.5 shapes, and an odd one.
inline constexpr gdn_layer_shape qwen35_4b{32, 16, 128, 128};
inline constexpr gdn_layer_shape qwen35_122b{64, 16, 128, 128};
inline constexpr gdn_layer_shape gdn_odd_shape{3, 3, 64, 64};

/// A problem: a layer shape and a batch mapped onto slots.
struct gdn_case {
  gdn_layer_shape shape;
  int batch = 2;
  int num_slots = 3;
  uint64_t seed = 1;
};

/// Random step inputs of `tokens` tokens per request, in `Act`, with the statistics of a
/// trained layer: unit-variance q, k, v; decays exp(g) mostly in [0.6, 1); beta around 0.5.
template <class Act>
struct gdn_inputs_host {
  int tokens;
  std::vector<Act> q, k, v, a, b;  // [batch * tokens][...]
  std::vector<float> A_log, dt_bias;

  gdn_inputs_host(const gdn_case& c, std::mt19937_64& rng, int tokens_per_request = 1) : tokens(tokens_per_request) {
    const auto& s = c.shape;
    std::uniform_real_distribution<float> a_log(-2.0f, 0.5f), bias(-1.0f, 1.0f);
    for (int h = 0; h < s.value_heads; ++h) {
      A_log.push_back(a_log(rng));
      dt_bias.push_back(bias(rng));
    }
    const size_t rows = size_t(c.batch) * tokens;
    q.resize(rows * s.key_heads * s.key_dim);
    k.resize(q.size());
    v.resize(rows * s.value_heads * s.value_dim);
    a.resize(rows * s.value_heads);
    b.resize(a.size());
  }

  /// Draws fresh inputs for the next step.
  void draw(std::mt19937_64& rng) {
    std::normal_distribution<float> unit(0.0f, 1.0f);
    for (auto* x : {&q, &k, &v, &a, &b})
      for (auto& e : *x) e = from_float<Act>(unit(rng));
  }

  /// Sets `p` to contiguous params over these inputs (state and output fields unset).
  void bind(gdn_params<Act>& p, const gdn_case& c) {
    p = contiguous_gdn_params<Act>(c.shape, c.batch, tokens);
    p.q = q.data();
    p.k = k.data();
    p.v = v.data();
    p.a = a.data();
    p.b = b.data();
    p.A_log = A_log.data();
    p.dt_bias = dt_bias.data();
  }

  /// Token t of request r's inputs widened to double: q, k [HK][K], v [HV][V], a, b [HV].
  struct widened {
    std::vector<double> q, k, v, a, b;
  };
  widened widen(int r, int t, const gdn_case& c) const {
    const auto& s = c.shape;
    const size_t row = size_t(r) * tokens + t, ks = size_t(s.key_heads) * s.key_dim, hv = size_t(s.value_heads);
    return {widen_row(q, row, ks), widen_row(k, row, ks), widen_row(v, row, hv * s.value_dim), widen_row(a, row, hv),
            widen_row(b, row, hv)};
  }
};

/// The library's state of one Gated DeltaNet layer for `Policy`, in host memory.
template <class Policy, class Act>
struct gdn_host_state : host_state_pools<Policy, gdn_buffer_sizes, gdn_layer_shape> {
  using params = gdn_params<Act>;
  std::vector<block16> window_v;
  std::vector<float> window_u, window_k, window_g, window_beta;

  gdn_host_state(gdn_layer_shape s, int slots, int drafts = 0)
      : host_state_pools<Policy, gdn_buffer_sizes, gdn_layer_shape>(
            s.value_heads, s, int64_t(s.value_dim) * s.key_dim, slots, drafts,
            gdn_buffers<Policy>(s, slots, activation_traits<Act>::tag, drafts)),
        window_v(aligned_bytes(this->sizes.window_v)),
        window_u(this->sizes.window_u / sizeof(float)),
        window_k(this->sizes.window_k / sizeof(float)),
        window_g(this->sizes.window_g / sizeof(float)),
        window_beta(this->sizes.window_beta / sizeof(float)) {}

  /// Every byte of the state, windows included.
  std::vector<uint8_t> bytes() const { return this->bytes_with(window_v, window_u, window_k, window_g, window_beta); }

  /// Fills the state fields of `p`.
  void bind(gdn_params<Act>& p, bool with_phase) {
    this->bind_pools(p, with_phase);
    p.window_u = this->ptr(window_u);
    p.window_k = this->ptr(window_k);
    p.window_g = this->ptr(window_g);
    p.window_v = this->template typed<Act>(window_v);
    p.window_beta = this->ptr(window_beta);
  }
};

/// What the shared drivers need of Gated DeltaNet.
struct gdn_harness {
  using case_type = gdn_case;
  template <class Act>
  using inputs = gdn_inputs_host<Act>;
  template <class Policy, class Act>
  using state = gdn_host_state<Policy, Act>;

  /// Values per token of the output o, and where the params keep it.
  static size_t outputs(const gdn_layer_shape& s) { return size_t(s.value_heads) * s.value_dim; }
  template <class Act>
  static Act*& output(gdn_params<Act>& p) {
    return p.o;
  }

  template <class Policy, class Act, class ParallelFor = cpu::serial_for>
  static status cpu_decode(const gdn_params<Act>& p, ParallelFor&& parallel_for = {}) {
    return cpu::decode_step<Policy>(p, parallel_for);
  }

  /// A random initial state of magnitude about 0.3, as after a prefill of normalized keys.
  static std::vector<double> random_state(const gdn_layer_shape& s, std::mt19937_64& rng) {
    return random_normal(size_t(s.state_elements()), 0.3, rng);
  }

  /// The float64 reference of a case, with the weights of `in`, every slot zero.
  template <class Act>
  static gdn_reference reference(const gdn_case& c, const gdn_inputs_host<Act>& in) {
    gdn_reference ref;
    ref.value_heads = c.shape.value_heads;
    ref.key_heads = c.shape.key_heads;
    ref.key_dim = c.shape.key_dim;
    ref.value_dim = c.shape.value_dim;
    ref.A_log.assign(in.A_log.begin(), in.A_log.end());
    ref.dt_bias.assign(in.dt_bias.begin(), in.dt_bias.end());
    ref.clear(c.num_slots);
    return ref;
  }

  /// One reference step of slot `slot` on token t of request r's inputs; writes its output.
  template <class Act>
  static void reference_step(gdn_reference& ref, const gdn_inputs_host<Act>& in, const gdn_case& c, int r, int t,
                             int slot, double* out) {
    const auto w = in.widen(r, t, c);
    ref.step(slot, w.q.data(), w.k.data(), w.v.data(), w.a.data(), w.b.data(), out);
  }

  /// Outputs and states are compared by their largest error, relative to their largest value.
  template <class T, class U>
  static double error(const T* got, const U* want, size_t n) {
    return relative_max_error(got, want, n);
  }
};

}  // namespace replayssm_test
