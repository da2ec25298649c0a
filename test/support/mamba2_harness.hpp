// SPDX-License-Identifier: Apache-2.0
// Test harness: random Mamba-2 problems, the library's state held in host buffers, and the
// float64 reference driven step by step beside it.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "mamba2_reference.hpp"
#include "replayssm/replayssm.hpp"

namespace replayssm_test {

using namespace replayssm;

/// A problem: a layer shape, a batch mapped onto slots, and options.
struct mamba2_case {
  mamba2_layer_shape shape;
  int batch = 2;
  int num_slots = 3;
  bool gate = true;
  bool softplus = true;
  uint64_t seed = 1;
};

/// 16-byte aligned storage for vector loads.
struct alignas(16) block16 {
  uint8_t bytes[16];
};
inline std::vector<block16> aligned_bytes(size_t n) { return std::vector<block16>((n + 15) / 16); }

/// Random step inputs in `Act`, with the statistics of a Mamba layer at initialization:
/// unit-variance x, z, B, C; dt after softplus between about 1e-3 and 1e-1.
template <class Act>
struct mamba2_inputs_host {
  std::vector<Act> x, z, dt, B, C;  // one step, [batch][...]
  std::vector<float> A, D, dt_bias;

  mamba2_inputs_host(const mamba2_case& c, std::mt19937_64& rng) {
    const auto& s = c.shape;
    std::uniform_real_distribution<float> log_a(0.0f, std::log(16.0f)), log_dt(std::log(1e-3f), std::log(1e-1f)),
        d(0.5f, 1.5f);
    for (int h = 0; h < s.heads; ++h) {
      A.push_back(-std::exp(log_a(rng)));
      D.push_back(d(rng));
      const float target = std::exp(log_dt(rng));
      dt_bias.push_back(c.softplus ? std::log(std::expm1(target)) : target);
    }
    x.resize(size_t(c.batch) * s.heads * s.head_dim);
    z.resize(x.size());
    dt.resize(size_t(c.batch) * s.heads);
    B.resize(size_t(c.batch) * s.groups * s.state_dim);
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
  void bind(mamba2_params& p, const mamba2_case& c) {
    p = contiguous_mamba2_params(c.shape, c.batch, activation_traits<Act>::tag);
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

  /// Request b's inputs widened to double.
  void widen(int b, const mamba2_case& c, std::vector<double>& xd, std::vector<double>& zd, std::vector<double>& dtd,
             std::vector<double>& Bd, std::vector<double>& Cd) const {
    const auto& s = c.shape;
    auto copy = [](const Act* from, size_t n, std::vector<double>& to) {
      to.resize(n);
      for (size_t i = 0; i < n; ++i) to[i] = to_float(from[i]);
    };
    const size_t xs = size_t(s.heads) * s.head_dim, bs = size_t(s.groups) * s.state_dim;
    copy(x.data() + b * xs, xs, xd);
    copy(z.data() + b * xs, xs, zd);
    copy(dt.data() + size_t(b) * s.heads, size_t(s.heads), dtd);
    copy(B.data() + b * bs, bs, Bd);
    copy(C.data() + b * bs, bs, Cd);
  }
};

/// The library's state of one layer for `Policy`, in host memory.
template <class Policy, class Act>
struct host_layer_state {
  mamba2_layer_shape shape;
  int num_slots;
  int draft_tokens;  ///< verify steps of up to this many drafts (0: decode steps only)
  mamba2_buffer_sizes sizes;
  std::vector<block16> checkpoint, checkpoint_scales, read_copy, read_copy_scales, window_x, window_B;
  std::vector<float> window_dt;
  std::vector<replay_cursor> cursors;
  std::vector<int32_t> phase;

  host_layer_state(mamba2_layer_shape s, int slots, int drafts = 0)
      : shape(s),
        num_slots(slots),
        draft_tokens(drafts),
        sizes(mamba2_buffers<Policy>(s, slots, activation_traits<Act>::tag, drafts)) {
    checkpoint = aligned_bytes(sizes.checkpoint);
    checkpoint_scales = aligned_bytes(sizes.checkpoint_scales);
    read_copy = aligned_bytes(sizes.read_copy);
    read_copy_scales = aligned_bytes(sizes.read_copy_scales);
    window_x = aligned_bytes(sizes.window_x);
    window_B = aligned_bytes(sizes.window_B);
    window_dt.resize(sizes.window_dt / sizeof(float));
    cursors.assign(size_t(slots) * s.heads, replay_cursor{});
    phase.assign(size_t(slots), 0);
  }

  static void* ptr(std::vector<block16>& v) { return v.empty() ? nullptr : v.data(); }

  /// Fills the state fields of `p`.
  void bind(mamba2_params& p, bool with_phase) {
    p.num_slots = num_slots;
    p.window_entries = draft_tokens > 0 ? Policy::window + draft_tokens : 0;
    p.checkpoint = ptr(checkpoint);
    p.checkpoint_scales = ptr(checkpoint_scales);
    p.read_copy = ptr(read_copy);
    p.read_copy_scales = ptr(read_copy_scales);
    p.window_x = ptr(window_x);
    p.window_B = ptr(window_B);
    p.window_dt = window_dt.empty() ? nullptr : window_dt.data();
    p.cursors = cursors.data();
    p.flush_phase = with_phase ? phase.data() : nullptr;
  }

  state_head_view<typename Policy::checkpoint_format> checkpoint_view(int slot, int h) {
    return state_head_view<typename Policy::checkpoint_format>::in_pool(
        ptr(checkpoint), ptr(checkpoint_scales), int64_t(slot) * shape.heads + h,
        int64_t(shape.head_dim) * shape.state_dim);
  }
  state_head_view<typename Policy::read_format> read_view(int slot, int h) {
    return state_head_view<typename Policy::read_format>::in_pool(
        ptr(read_copy), ptr(read_copy_scales), int64_t(slot) * shape.heads + h,
        int64_t(shape.head_dim) * shape.state_dim);
  }

  /// Sets slot `slot` to `values` ([H][P][N] doubles) and empties its window.
  void set_state(int slot, const std::vector<double>& values) {
    const int32_t per_head = shape.head_dim * shape.state_dim;
    std::vector<float> f(static_cast<size_t>(per_head));
    for (int h = 0; h < shape.heads; ++h) {
      for (int32_t i = 0; i < per_head; ++i) f[size_t(i)] = float(values[size_t(h) * per_head + size_t(i)]);
      write_head_state<Policy>(serial_executor{}, f.data(), per_head, checkpoint_view(slot, h), read_view(slot, h));
      cursors[size_t(slot) * shape.heads + h] = replay_cursor{};
    }
  }

  /// The decoded checkpoint of slot `slot`, [H][P][N].
  std::vector<float> checkpoint_values(int slot) {
    const int32_t per_head = shape.head_dim * shape.state_dim;
    std::vector<float> out(size_t(per_head) * shape.heads);
    for (int h = 0; h < shape.heads; ++h)
      read_head_state(serial_executor{}, checkpoint_view(slot, h), per_head, out.data() + size_t(h) * per_head);
    return out;
  }
};

/// Random initial states of magnitude about 1, as after a prefill.
inline std::vector<double> random_state(const mamba2_layer_shape& s, std::mt19937_64& rng) {
  std::normal_distribution<double> unit(0.0, 1.0);
  std::vector<double> v(size_t(s.state_elements()));
  for (auto& e : v) e = unit(rng);
  return v;
}

}  // namespace replayssm_test
