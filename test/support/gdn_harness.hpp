// SPDX-License-Identifier: Apache-2.0
// Test harness for Gated DeltaNet: random problems, the library's state held in host
// buffers, and the float64 reference driven step by step beside it. A step runner (the CPU
// launchers, or the device runner of the GPU tests) performs each step.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

#include "gdn_reference.hpp"
#include "mamba2_harness.hpp"
#include "replayssm/replayssm.hpp"

namespace replayssm_test {

using namespace replayssm;

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
  void bind(gdn_params& p, const gdn_case& c) {
    p = contiguous_gdn_params(c.shape, c.batch, activation_traits<Act>::tag, tokens);
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
    const size_t row = size_t(r) * tokens + t;
    auto copy = [row](const std::vector<Act>& from, size_t n) {
      std::vector<double> to(n);
      for (size_t i = 0; i < n; ++i) to[i] = to_float(from[row * n + i]);
      return to;
    };
    return {copy(q, size_t(s.key_heads) * s.key_dim), copy(k, size_t(s.key_heads) * s.key_dim),
            copy(v, size_t(s.value_heads) * s.value_dim), copy(a, size_t(s.value_heads)),
            copy(b, size_t(s.value_heads))};
  }
};

/// The library's state of one Gated DeltaNet layer for `Policy`, in host memory.
template <class Policy, class Act, gdn_window Mode = gdn_window::corrected_values>
struct host_gdn_state {
  gdn_layer_shape shape;
  int num_slots;
  int draft_tokens;
  gdn_buffer_sizes sizes;
  std::vector<block16> checkpoint, checkpoint_scales, read_copy, read_copy_scales, window_v;
  std::vector<float> window_u, window_k, window_g, window_beta;
  std::vector<replay_cursor> cursors;
  std::vector<int32_t> phase;

  host_gdn_state(gdn_layer_shape s, int slots, int drafts = 0)
      : shape(s),
        num_slots(slots),
        draft_tokens(drafts),
        sizes(gdn_buffers<Policy, Mode>(s, slots, activation_traits<Act>::tag, drafts)) {
    checkpoint = aligned_bytes(sizes.checkpoint);
    checkpoint_scales = aligned_bytes(sizes.checkpoint_scales);
    read_copy = aligned_bytes(sizes.read_copy);
    read_copy_scales = aligned_bytes(sizes.read_copy_scales);
    window_v = aligned_bytes(sizes.window_v);
    window_u.resize(sizes.window_u / sizeof(float));
    window_k.resize(sizes.window_k / sizeof(float));
    window_g.resize(sizes.window_g / sizeof(float));
    window_beta.resize(sizes.window_beta / sizeof(float));
    cursors.assign(size_t(slots) * s.value_heads, replay_cursor{});
    phase.assign(size_t(slots), 0);
  }

  static void* ptr(std::vector<block16>& v) { return v.empty() ? nullptr : v.data(); }
  static float* ptr(std::vector<float>& v) { return v.empty() ? nullptr : v.data(); }

  /// Fills the state fields of `p`.
  void bind(gdn_params& p, bool with_phase) {
    p.num_slots = num_slots;
    p.window_entries = draft_tokens > 0 ? Policy::window + draft_tokens : 0;
    p.checkpoint = ptr(checkpoint);
    p.checkpoint_scales = ptr(checkpoint_scales);
    p.read_copy = ptr(read_copy);
    p.read_copy_scales = ptr(read_copy_scales);
    p.window_u = ptr(window_u);
    p.window_k = ptr(window_k);
    p.window_g = ptr(window_g);
    p.window_v = ptr(window_v);
    p.window_beta = ptr(window_beta);
    p.cursors = cursors.data();
    p.flush_phase = with_phase ? phase.data() : nullptr;
  }

  int64_t head_elements() const { return int64_t(shape.value_dim) * shape.key_dim; }
  state_head_view<typename Policy::checkpoint_format> checkpoint_view(int slot, int h) {
    return state_head_view<typename Policy::checkpoint_format>::in_pool(
        ptr(checkpoint), ptr(checkpoint_scales), int64_t(slot) * shape.value_heads + h, head_elements());
  }
  state_head_view<typename Policy::read_format> read_view(int slot, int h) {
    return state_head_view<typename Policy::read_format>::in_pool(
        ptr(read_copy), ptr(read_copy_scales), int64_t(slot) * shape.value_heads + h, head_elements());
  }

  /// Sets slot `slot` to `values` ([HV][V][K] doubles) and empties its window.
  void set_state(int slot, const std::vector<double>& values) {
    const int64_t per_head = head_elements();
    std::vector<float> f(static_cast<size_t>(per_head));
    for (int h = 0; h < shape.value_heads; ++h) {
      for (int64_t i = 0; i < per_head; ++i) f[size_t(i)] = float(values[size_t(h * per_head + i)]);
      write_gdn_head_state<Policy>(serial_executor{}, f.data(), {shape.value_dim, shape.key_dim},
                                   checkpoint_view(slot, h), read_view(slot, h));
      cursors[size_t(slot) * shape.value_heads + h] = replay_cursor{};
    }
  }

  /// The decoded checkpoint of slot `slot`, [HV][V][K].
  std::vector<float> checkpoint_values(int slot) {
    const int64_t per_head = head_elements();
    std::vector<float> out(size_t(per_head * shape.value_heads));
    for (int h = 0; h < shape.value_heads; ++h)
      read_gdn_head_state(serial_executor{}, checkpoint_view(slot, h), {shape.value_dim, shape.key_dim},
                          out.data() + h * per_head);
    return out;
  }
};

/// The slots of a case's requests: distinct (a step must not see one slot twice), spread out.
inline std::vector<int32_t> request_slots(const gdn_case& c) {
  std::vector<int32_t> slots;
  for (int b = 0; b < c.batch; ++b) slots.push_back((b * 2 + 1) % c.num_slots);
  std::vector<int32_t> distinct = slots;
  std::sort(distinct.begin(), distinct.end());
  REQUIRE(std::unique(distinct.begin(), distinct.end()) == distinct.end());
  return slots;
}

/// Random initial states of magnitude about 0.3, as after a prefill of normalized keys.
inline std::vector<double> random_gdn_state(const gdn_layer_shape& s, std::mt19937_64& rng) {
  std::normal_distribution<double> unit(0.0, 0.3);
  std::vector<double> v(size_t(s.state_elements()));
  for (auto& e : v) e = unit(rng);
  return v;
}

/// Largest |a - b| over max |b| (a relative error that ignores near-zero entries).
template <class A, class B>
double relative_max_error(const A& a, const B& b) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    diff = std::max(diff, std::abs(double(a[i]) - double(b[i])));
    scale = std::max(scale, std::abs(double(b[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

/// A step runner: performs one step of `p` over a host state (the CPU launchers, or a
/// device runner that mirrors the buffers).
template <class Policy, class Act, gdn_window Mode = gdn_window::corrected_values>
using gdn_runner = std::function<status(const gdn_params&, host_gdn_state<Policy, Act, Mode>&)>;

/// The CPU runners: decode, verify, commit.
template <class Policy, class Act, gdn_window Mode = gdn_window::corrected_values>
gdn_runner<Policy, Act, Mode> cpu_gdn_decode() {
  return [](const gdn_params& p, host_gdn_state<Policy, Act, Mode>&) { return cpu::gdn_decode_step<Policy, Mode>(p); };
}

/// The float64 reference of a case, with the weights of `in`, every slot zero.
template <class Act>
gdn_reference reference_for(const gdn_case& c, const gdn_inputs_host<Act>& in) {
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

/// Errors of a decode scenario against the float64 reference.
struct gdn_errors {
  double output = 0;      ///< largest relative output error of any step
  double checkpoint = 0;  ///< relative error of the final decoded checkpoint (after a flush)
};

/// Decodes `steps` steps of random inputs with `run` over a batch on staggered slots (and
/// staggered flush phases), against the float64 reference. Ends on a flush of every head
/// when `steps` is a multiple of the window and the phases are 0.
template <class Policy, class Act, gdn_window Mode = gdn_window::corrected_values>
gdn_errors run_gdn_scenario(const gdn_case& c, int steps, bool stagger, const gdn_runner<Policy, Act, Mode>& run) {
  std::mt19937_64 rng(c.seed);
  gdn_inputs_host<Act> in(c, rng);
  host_gdn_state<Policy, Act, Mode> st(c.shape, c.num_slots);
  gdn_reference ref = reference_for(c, in);
  for (int slot = 0; slot < c.num_slots; ++slot) {
    ref.state[size_t(slot)] = random_gdn_state(c.shape, rng);
    // The reference starts from the state as the checkpoint format holds it.
    st.set_state(slot, ref.state[size_t(slot)]);
    const auto held = st.checkpoint_values(slot);
    ref.state[size_t(slot)].assign(held.begin(), held.end());
    st.phase[size_t(slot)] = stagger ? slot % Policy::window : 0;
  }
  const std::vector<int32_t> slots = request_slots(c);
  const size_t out_per_request = size_t(c.shape.value_heads) * c.shape.value_dim;
  std::vector<Act> o(size_t(c.batch) * out_per_request);
  std::vector<double> expected(out_per_request);
  gdn_errors errors;
  for (int step = 0; step < steps; ++step) {
    in.draw(rng);
    gdn_params p;
    in.bind(p, c);
    p.slot_indices = slots.data();
    p.seed = c.seed;
    p.o = o.data();
    st.bind(p, stagger);
    const status s = run(p, st);
    INFO("step " << step << ": " << s.message());
    REQUIRE(s.ok());
    for (int b = 0; b < c.batch; ++b) {
      const auto w = in.widen(b, 0, c);
      ref.step(slots[size_t(b)], w.q.data(), w.k.data(), w.v.data(), w.a.data(), w.b.data(), expected.data());
      std::vector<double> got(out_per_request);
      for (size_t i = 0; i < got.size(); ++i) got[i] = to_float(o[size_t(b) * out_per_request + i]);
      errors.output = std::max(errors.output, relative_max_error(got, expected));
    }
  }
  for (int b = 0; b < c.batch; ++b) {
    const int slot = slots[size_t(b)];
    errors.checkpoint = std::max(errors.checkpoint, relative_max_error(st.checkpoint_values(slot), ref.state[size_t(slot)]));
  }
  return errors;
}

}  // namespace replayssm_test
