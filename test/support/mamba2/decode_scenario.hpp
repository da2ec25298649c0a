// SPDX-License-Identifier: Apache-2.0
// A Mamba-2 decode scenario run against the float64 reference: write-back and replay side
// by side over many windows on fresh random inputs, with every output and every flushed
// checkpoint compared. The step runners are parameters, so the CPU and CUDA tests share it.
#pragma once

#include "../catch.hpp"

#include <algorithm>
#include <functional>

#include "harness.hpp"

namespace replayssm_test {

/// What a scenario observed, for assertions beyond the built-in ones.
struct mamba2_scenario_result {
  int steps = 0;
  int flush_checks = 0;
  double max_output_error = 0;
  double max_state_error = 0;
  double max_replay_vs_writeback = 0;
};

/// Write-back under Policy's checkpoint format, and replay under Policy, against the
/// reference for `windows` windows. Request b uses slot (2b + 1) % num_slots; with
/// `stagger` each slot has its own flush phase. `reference_epilogue`, where given, maps each
/// request's reference outputs in place before they are compared (what the steps under test
/// apply after the recurrence, e.g. a norm).
template <class Policy, class Act>
mamba2_scenario_result run_mamba2_scenario(
    const mamba2_case& c, int windows, bool stagger, tolerances tol,
    step_runner<mamba2_host_state<writeback_policy<typename Policy::checkpoint_format>, Act>> run_writeback,
    step_runner<mamba2_host_state<Policy, Act>> run_replay,
    const std::function<void(double* y)>& reference_epilogue = {}) {
  using writeback_policy = writeback_policy<typename Policy::checkpoint_format>;
  std::mt19937_64 rng(c.seed);
  const auto& s = c.shape;
  mamba2_inputs_host<Act> in(c, rng);
  mamba2_reference ref = mamba2_harness::reference(c, in);
  mamba2_host_state<writeback_policy, Act> writeback(s, c.num_slots);
  mamba2_host_state<Policy, Act> replay(s, c.num_slots);
  for (int slot = 0; slot < c.num_slots; ++slot) {
    ref.state[size_t(slot)] = mamba2_harness::random_state(s, rng);
    writeback.set_state(slot, ref.state[size_t(slot)]);
    replay.set_state(slot, ref.state[size_t(slot)]);
    replay.phase[size_t(slot)] = stagger ? (slot * 5 + 3) % Policy::window : 0;
  }
  const std::vector<int32_t> slots = request_slots(c);

  const size_t ys = mamba2_harness::outputs(s);
  std::vector<Act> y_writeback(ys * size_t(c.batch)), y_replay(y_writeback.size());
  std::vector<double> y_ref(ys);
  mamba2_scenario_result r;
  for (int t = 0; t < windows * Policy::window; ++t, ++r.steps) {
    in.draw(rng);
    mamba2_params<Act> p;
    in.bind(p, c);
    p.slot_indices = slots.data();
    p.seed = c.seed;
    writeback.bind(p, false);
    p.y = y_writeback.data();
    const status sn = run_writeback(p, writeback);
    REQUIRE(sn.ok());
    replay.bind(p, stagger);
    p.y = y_replay.data();
    const status sr = run_replay(p, replay);
    INFO("step " << t << ": " << sr.message());
    REQUIRE(sr.ok());
    for (int b = 0; b < c.batch; ++b) {
      const int slot = slots[size_t(b)];
      mamba2_harness::reference_step(ref, in, c, b, 0, slot, y_ref.data());
      if (reference_epilogue) reference_epilogue(y_ref.data());
      const double e_replay = relative_error(y_replay.data() + b * ys, y_ref.data(), ys);
      const double e_writeback = relative_error(y_writeback.data() + b * ys, y_ref.data(), ys);
      r.max_output_error = std::max({r.max_output_error, e_replay, e_writeback});
      r.max_replay_vs_writeback = std::max(r.max_replay_vs_writeback,
                                           relative_error(y_replay.data() + b * ys, y_writeback.data() + b * ys, ys));
      if (replay.cursors[size_t(slot) * s.heads].length == 0) {
        const std::vector<float> got = replay.checkpoint_values(slot);
        r.max_state_error =
            std::max(r.max_state_error, relative_error(got.data(), ref.state[size_t(slot)].data(), got.size()));
        ++r.flush_checks;
      }
    }
  }
  for (int b = 0; b < c.batch; ++b) {
    const std::vector<float> got = writeback.checkpoint_values(slots[size_t(b)]);
    r.max_state_error = std::max(
        r.max_state_error, relative_error(got.data(), ref.state[size_t(slots[size_t(b)])].data(), got.size()));
  }
  INFO("steps=" << r.steps << " flush checks=" << r.flush_checks << " output err=" << r.max_output_error
                << " state err=" << r.max_state_error << " replay vs writeback=" << r.max_replay_vs_writeback);
  CHECK(r.flush_checks >= windows * c.batch - c.batch);
  CHECK(r.max_output_error <= tol.output);
  CHECK(r.max_replay_vs_writeback <= tol.output);
  CHECK(r.max_state_error <= tol.state);
  return r;
}

/// run_mamba2_scenario with both steps on the CPU path.
template <class Policy, class Act>
mamba2_scenario_result cpu_mamba2_scenario(const mamba2_case& c, int windows, bool stagger,
                                           tolerances tol = {output_tolerance<Act>(), 1e-5}) {
  using writeback_policy = writeback_policy<typename Policy::checkpoint_format>;
  return run_mamba2_scenario<Policy, Act>(
      c, windows, stagger, tol,
      [](const mamba2_params<Act>& p, mamba2_host_state<writeback_policy, Act>&) {
        return cpu::decode_step<writeback_policy>(p);
      },
      [](const mamba2_params<Act>& p, mamba2_host_state<Policy, Act>&) { return cpu::decode_step<Policy>(p); });
}

}  // namespace replayssm_test
