// SPDX-License-Identifier: Apache-2.0
// A Gated DeltaNet decode scenario run against the float64 reference: one policy over many
// windows on fresh random inputs, every output and the final checkpoint compared. The step
// runner is a parameter, so the CPU and CUDA tests share it.
#pragma once

#include "../catch.hpp"

#include <algorithm>

#include "harness.hpp"

namespace replayssm_test {

/// Errors of a decode scenario against the float64 reference.
struct gdn_scenario_result {
  double output = 0;      ///< largest relative output error of any step
  double checkpoint = 0;  ///< relative error of the final checkpoint against the state it holds
};

/// Decodes `steps` steps of random inputs with `run` over a batch on staggered slots (and
/// staggered flush phases), against the float64 reference. The final checkpoint is compared
/// with the reference state of its last flush: before that step's token under a replay
/// policy (`gdn_flush_folds_token`: the token opens the next window), after it under
/// write-back.
template <class Policy, class Act>
gdn_scenario_result run_gdn_scenario(const gdn_case& c, int steps, bool stagger,
                                     const step_runner<gdn_host_state<Policy, Act>>& run) {
  std::mt19937_64 rng(c.seed);
  gdn_inputs_host<Act> in(c, rng);
  gdn_host_state<Policy, Act> st(c.shape, c.num_slots);
  gdn_reference ref = gdn_harness::reference(c, in);
  for (int slot = 0; slot < c.num_slots; ++slot) {
    ref.state[size_t(slot)] = gdn_harness::random_state(c.shape, rng);
    // The reference starts from the state as the checkpoint format holds it.
    st.set_state(slot, ref.state[size_t(slot)]);
    const auto held = st.checkpoint_values(slot);
    ref.state[size_t(slot)].assign(held.begin(), held.end());
    st.phase[size_t(slot)] = stagger ? slot % Policy::window : 0;
  }
  std::vector<std::vector<double>> flushed = ref.state;  // [slot] the reference state the checkpoint holds
  const std::vector<int32_t> slots = request_slots(c);
  const size_t out_per_request = gdn_harness::outputs(c.shape);
  std::vector<Act> o(size_t(c.batch) * out_per_request);
  std::vector<double> expected(out_per_request);
  gdn_scenario_result errors;
  for (int step = 0; step < steps; ++step) {
    in.draw(rng);
    gdn_params<Act> p;
    in.bind(p, c);
    p.slot_indices = slots.data();
    p.seed = c.seed;
    p.o = o.data();
    st.bind(p, stagger);
    const std::vector<replay_cursor> cursors_before = st.cursors;
    const status s = run(p, st);
    INFO("step " << step << ": " << s.message());
    REQUIRE(s.ok());
    for (int b = 0; b < c.batch; ++b) {
      const size_t slot = size_t(slots[size_t(b)]), head0 = slot * size_t(c.shape.value_heads);
      const bool flushes = Policy::is_writeback || st.cursors[head0].flush_count != cursors_before[head0].flush_count;
      if (flushes && !gdn_flush_folds_token<Policy>) flushed[slot] = ref.state[slot];
      gdn_harness::reference_step(ref, in, c, b, 0, int(slot), expected.data());
      if (flushes && gdn_flush_folds_token<Policy>) flushed[slot] = ref.state[slot];
      errors.output = std::max(
          errors.output, relative_max_error(o.data() + size_t(b) * out_per_request, expected.data(), out_per_request));
    }
  }
  for (int b = 0; b < c.batch; ++b) {
    const int slot = slots[size_t(b)];
    const std::vector<float> held = st.checkpoint_values(slot);
    errors.checkpoint =
        std::max(errors.checkpoint, relative_max_error(held.data(), flushed[size_t(slot)].data(), held.size()));
  }
  return errors;
}

/// run_gdn_scenario on the CPU.
template <class Policy, class Act>
gdn_scenario_result cpu_gdn_scenario(const gdn_case& c, int steps, bool stagger) {
  return run_gdn_scenario<Policy, Act>(c, steps, stagger, [](const gdn_params<Act>& p, gdn_host_state<Policy, Act>&) {
    return cpu::decode_step<Policy>(p);
  });
}

}  // namespace replayssm_test
