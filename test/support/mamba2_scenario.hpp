// SPDX-License-Identifier: Apache-2.0
// A decode scenario run against the float64 reference: naive write-back and replay side by
// side over many windows on fresh random inputs, with every output and every flushed
// checkpoint compared. The step runner is a parameter, so the CPU and CUDA tests share it.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <functional>

#include "mamba2_harness.hpp"

namespace replayssm_test {

/// Tolerances of a scenario, as normwise relative errors.
struct tolerances {
  double output;  ///< per step, outputs against the reference
  double state;   ///< per flush, checkpoint against the reference
};

/// Output tolerance of an activation type: its rounding of y (half an ulp, normwise well
/// below it) plus float32 arithmetic.
template <class Act>
constexpr double output_tolerance() {
  if constexpr (std::is_same_v<Act, float>) return 1e-5;
  else if constexpr (std::is_same_v<Act, half_t>) return 1e-3;  // 2^-11 = 4.9e-4 per element
  else return 8e-3;                                          // 2^-8 = 3.9e-3 per element
}

/// What a scenario observed, for assertions beyond the built-in ones.
struct scenario_result {
  int steps = 0;
  int flush_checks = 0;
  double max_output_error = 0;
  double max_state_error = 0;
  double max_replay_vs_naive = 0;
};

/// Runs a step of `Policy` on the buffers behind `p`; the CPU runner calls the CPU path,
/// the CUDA runner mirrors buffers to the device.
template <class Policy, class Act>
using step_runner = std::function<status(const mamba2_params&, host_layer_state<Policy, Act>&)>;

/// Naive write-back under Policy's checkpoint format, and replay under Policy, against the
/// reference for `windows` windows. Request b uses slot (2b + 1) % num_slots; with
/// `stagger` each slot has its own flush phase.
template <class Policy, class Act>
scenario_result run_scenario(const mamba2_case& c, int windows, bool stagger, tolerances tol,
                             step_runner<writeback_policy<typename Policy::checkpoint_format>, Act> run_naive,
                             step_runner<Policy, Act> run_replay) {
  using naive_policy = writeback_policy<typename Policy::checkpoint_format>;
  std::mt19937_64 rng(c.seed);
  const auto& s = c.shape;
  mamba2_inputs_host<Act> in(c, rng);
  mamba2_reference ref{s.heads, s.head_dim, s.state_dim, s.groups, {}, {}, {}, c.softplus, {}};
  for (int h = 0; h < s.heads; ++h) {
    ref.A.push_back(in.A[size_t(h)]);
    ref.D.push_back(in.D[size_t(h)]);
    ref.dt_bias.push_back(in.dt_bias[size_t(h)]);
  }
  host_layer_state<naive_policy, Act> naive(s, c.num_slots);
  host_layer_state<Policy, Act> replay(s, c.num_slots);
  for (int slot = 0; slot < c.num_slots; ++slot) {
    ref.state.push_back(random_state(s, rng));
    naive.set_state(slot, ref.state.back());
    replay.set_state(slot, ref.state.back());
    replay.phase[size_t(slot)] = stagger ? (slot * 5 + 3) % Policy::window : 0;
  }
  std::vector<int32_t> slots;
  for (int b = 0; b < c.batch; ++b) slots.push_back((2 * b + 1) % c.num_slots);

  const size_t ys = size_t(s.heads) * s.head_dim;
  std::vector<Act> y_naive(ys * size_t(c.batch)), y_replay(y_naive.size());
  std::vector<double> y_ref(ys), xd, zd, dtd, Bd, Cd;
  scenario_result r;
  for (int t = 0; t < windows * Policy::window; ++t, ++r.steps) {
    in.draw(rng);
    mamba2_params p;
    in.bind(p, c);
    p.slot_indices = slots.data();
    p.seed = c.seed;
    naive.bind(p, false);
    p.y = y_naive.data();
    const status sn = run_naive(p, naive);
    REQUIRE(sn.ok());
    replay.bind(p, stagger);
    p.y = y_replay.data();
    const status sr = run_replay(p, replay);
    INFO("step " << t << ": " << sr.message());
    REQUIRE(sr.ok());
    for (int b = 0; b < c.batch; ++b) {
      in.widen(b, c, xd, zd, dtd, Bd, Cd);
      ref.step(slots[size_t(b)], xd.data(), c.gate ? zd.data() : nullptr, dtd.data(), Bd.data(), Cd.data(),
               y_ref.data());
      const double e_replay = relative_error(y_replay.data() + b * ys, y_ref.data(), ys);
      const double e_naive = relative_error(y_naive.data() + b * ys, y_ref.data(), ys);
      r.max_output_error = std::max({r.max_output_error, e_replay, e_naive});
      r.max_replay_vs_naive =
          std::max(r.max_replay_vs_naive, relative_error(y_replay.data() + b * ys, y_naive.data() + b * ys, ys));
      const int slot = slots[size_t(b)];
      if (replay.cursors[size_t(slot) * s.heads].length == 0) {
        const std::vector<float> got = replay.checkpoint_values(slot);
        r.max_state_error = std::max(r.max_state_error, relative_error(got.data(), ref.state[size_t(slot)].data(), got.size()));
        ++r.flush_checks;
      }
    }
  }
  for (int b = 0; b < c.batch; ++b) {
    const std::vector<float> got = naive.checkpoint_values(slots[size_t(b)]);
    r.max_state_error = std::max(
        r.max_state_error, relative_error(got.data(), ref.state[size_t(slots[size_t(b)])].data(), got.size()));
  }
  INFO("steps=" << r.steps << " flush checks=" << r.flush_checks << " output err=" << r.max_output_error
                << " state err=" << r.max_state_error << " replay vs naive=" << r.max_replay_vs_naive);
  CHECK(r.flush_checks >= windows * c.batch - c.batch);
  CHECK(r.max_output_error <= tol.output);
  CHECK(r.max_replay_vs_naive <= tol.output);
  CHECK(r.max_state_error <= tol.state);
  return r;
}

/// run_scenario with both steps on the CPU path.
template <class Policy, class Act>
scenario_result cpu_scenario(const mamba2_case& c, int windows, bool stagger,
                             tolerances tol = {output_tolerance<Act>(), 1e-5}) {
  using naive_policy = writeback_policy<typename Policy::checkpoint_format>;
  return run_scenario<Policy, Act>(
      c, windows, stagger, tol,
      [](const mamba2_params& p, host_layer_state<naive_policy, Act>&) { return cpu::mamba2_decode_step<naive_policy>(p); },
      [](const mamba2_params& p, host_layer_state<Policy, Act>&) { return cpu::mamba2_decode_step<Policy>(p); });
}

}  // namespace replayssm_test
