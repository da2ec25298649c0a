// SPDX-License-Identifier: Apache-2.0
// A Gated DeltaNet speculative-decoding scenario against the float64 reference: rounds of
// verify + commit with random draft counts and acceptance (mamba2_spec_scenario.hpp's
// round_plan), for replay and for the snapshot baseline side by side. Every draft's output
// is checked against sequential decoding of the tokens before it, and the state against the
// sequential decoding of the accepted tokens only.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>

#include "gdn_harness.hpp"
#include "mamba2_spec_scenario.hpp"

namespace replayssm_test {

/// The four operations of a round, on the CPU or the device.
template <class Policy, class Act, gdn_window Mode>
struct gdn_spec_runners {
  using snapshot_policy = writeback_policy<typename Policy::checkpoint_format>;
  gdn_runner<Policy, Act, Mode> verify, commit;
  gdn_runner<snapshot_policy, Act> snapshot_verify, snapshot_commit;
};

/// The CPU runners.
template <class Policy, class Act, gdn_window Mode = gdn_window::corrected_values>
gdn_spec_runners<Policy, Act, Mode> cpu_gdn_spec_runners() {
  using format = typename Policy::checkpoint_format;
  using snapshot_state = host_gdn_state<writeback_policy<format>, Act>;
  return {[](const gdn_params& p, host_gdn_state<Policy, Act, Mode>&) { return cpu::replay_verify_step<Policy, Mode>(p); },
          [](const gdn_params& p, host_gdn_state<Policy, Act, Mode>&) { return cpu::commit_drafts(p); },
          [](const gdn_params& p, snapshot_state&) { return cpu::snapshot_verify_step<format>(p); },
          [](const gdn_params& p, snapshot_state&) {
            return cpu::snapshot_commit(p, const_cast<int32_t*>(p.slot_indices), const_cast<int32_t*>(p.snapshot_slots));
          }};
}

/// `rounds` rounds of up to `tokens` drafts per request under `Policy` and under the
/// snapshot baseline, against the reference; returns what it observed.
template <class Policy, class Act, gdn_window Mode>
spec_result run_gdn_spec_scenario(const gdn_case& c, int tokens, int rounds, tolerances tol,
                                  const gdn_spec_runners<Policy, Act, Mode>& run) {
  using snapshot_policy = writeback_policy<typename Policy::checkpoint_format>;
  std::mt19937_64 rng(c.seed);
  const auto& s = c.shape;
  gdn_inputs_host<Act> in(c, rng, tokens);
  gdn_reference ref = reference_for(c, in);
  host_gdn_state<Policy, Act, Mode> replay(s, c.num_slots, tokens);
  // The baseline's pool: the requests' states plus `tokens` snapshot slots per request.
  host_gdn_state<snapshot_policy, Act> snap(s, c.num_slots + c.batch * tokens);
  for (int slot = 0; slot < c.num_slots; ++slot) {
    ref.state[size_t(slot)] = random_gdn_state(s, rng);
    replay.set_state(slot, ref.state[size_t(slot)]);
    snap.set_state(slot, ref.state[size_t(slot)]);
    const auto held = replay.checkpoint_values(slot);
    ref.state[size_t(slot)].assign(held.begin(), held.end());
    replay.phase[size_t(slot)] = (slot * 3 + 1) % Policy::window;
  }
  const std::vector<int32_t> slots = request_slots(c);
  std::vector<int32_t> snapshot_slots;
  std::vector<int32_t> snap_slots = slots;
  for (int i = 0; i < c.batch * tokens; ++i) snapshot_slots.push_back(c.num_slots + i);

  const size_t os = size_t(s.value_heads) * s.value_dim;
  std::vector<Act> o_replay(os * size_t(c.batch) * tokens), o_snap(o_replay.size());
  std::vector<double> o_ref(os);
  spec_result r;
  for (int round = 0; round < rounds; ++round, ++r.rounds) {
    in.draw(rng);
    const round_plan plan(c.batch, tokens, round, rng);
    gdn_params p;
    in.bind(p, c);
    p.token_counts = plan.drafts.data();
    p.accepted_counts = plan.accepted.data();
    p.seed = c.seed;

    // Replay: verify, then commit. The checkpoint changes only when a verify flushes.
    p.slot_indices = slots.data();
    replay.bind(p, true);
    p.o = o_replay.data();
    std::vector<std::vector<float>> before;
    std::vector<uint32_t> flushes_before;
    for (int b = 0; b < c.batch; ++b) {
      before.push_back(replay.checkpoint_values(slots[size_t(b)]));
      flushes_before.push_back(replay.cursors[size_t(slots[size_t(b)]) * s.value_heads].flushes);
    }
    status st = run.verify(p, replay);
    INFO("round " << round << ": " << st.message());
    REQUIRE(st.ok());
    bool flushed = false;
    for (int b = 0; b < c.batch; ++b) {
      const int slot = slots[size_t(b)];
      const std::vector<float> after = replay.checkpoint_values(slot);
      if (replay.cursors[size_t(slot) * s.value_heads].flushes == flushes_before[size_t(b)]) {
        REQUIRE(after == before[size_t(b)]);  // drafts never touch the checkpoint
      } else {
        flushed = true;  // the committed entries, and nothing else, were folded in
        r.max_state_error = std::max(r.max_state_error, relative_max_error(after, ref.state[size_t(slot)]));
        before[size_t(b)] = after;
      }
    }
    r.flushing_rounds += flushed ? 1 : 0;
    for (int b = 0; b < c.batch; ++b) r.ring_wrapped |= replay.cursors[size_t(slots[size_t(b)]) * s.value_heads].start > 0;
    st = run.commit(p, replay);
    INFO(st.message());
    REQUIRE(st.ok());
    for (int b = 0; b < c.batch; ++b) REQUIRE(replay.checkpoint_values(slots[size_t(b)]) == before[size_t(b)]);

    // The snapshot baseline: one state per draft, a slot swap on commit.
    p.slot_indices = snap_slots.data();
    p.snapshot_slots = snapshot_slots.data();
    snap.bind(p, false);
    p.o = o_snap.data();
    REQUIRE(run.snapshot_verify(p, snap).ok());
    REQUIRE(run.snapshot_commit(p, snap).ok());

    // The reference decodes each request's drafts in order and keeps the accepted prefix.
    for (int b = 0; b < c.batch; ++b) {
      const int slot = slots[size_t(b)];
      std::vector<double> kept = ref.state[size_t(slot)];
      for (int t = 0; t < plan.drafts[size_t(b)]; ++t) {
        const auto w = in.widen(b, t, c);
        ref.step(slot, w.q.data(), w.k.data(), w.v.data(), w.a.data(), w.b.data(), o_ref.data());
        const size_t row = size_t(b) * tokens + t;
        auto output = [&](const std::vector<Act>& o) {
          std::vector<double> got(os);
          for (size_t i = 0; i < os; ++i) got[i] = to_float(o[row * os + i]);
          return got;
        };
        r.max_output_error = std::max(r.max_output_error, relative_max_error(output(o_replay), o_ref));
        r.max_snapshot_output_error = std::max(r.max_snapshot_output_error, relative_max_error(output(o_snap), o_ref));
        if (t + 1 == plan.accepted[size_t(b)]) kept = ref.state[size_t(slot)];
      }
      ref.state[size_t(slot)] = kept;
      r.drafts += plan.drafts[size_t(b)];
      r.accepted += plan.accepted[size_t(b)];
      r.max_state_error = std::max(r.max_state_error, relative_max_error(snap.checkpoint_values(snap_slots[size_t(b)]), kept));
    }
  }
  INFO("rounds=" << r.rounds << " drafts=" << r.drafts << " accepted=" << r.accepted << " flushing rounds="
                 << r.flushing_rounds << " output err=" << r.max_output_error << " snapshot output err="
                 << r.max_snapshot_output_error << " state err=" << r.max_state_error);
  CHECK(r.flushing_rounds > 0);
  CHECK(r.ring_wrapped);
  CHECK(r.max_output_error <= tol.output);
  CHECK(r.max_snapshot_output_error <= tol.output);
  CHECK(r.max_state_error <= tol.state);
  return r;
}

}  // namespace replayssm_test
