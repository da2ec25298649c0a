// SPDX-License-Identifier: Apache-2.0
// A speculative-decoding scenario against the float64 reference: rounds of verify + commit
// with random draft counts and random acceptance, for replay and for the snapshot baseline
// side by side. Every draft's output is checked against sequential decoding of the tokens
// before it, and the state against the sequential decoding of the accepted tokens only.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <functional>

#include "mamba2_scenario.hpp"

namespace replayssm_test {

/// The four operations of a round, on the CPU or the device.
template <class Policy, class Act>
struct spec_runners {
  using snapshot_policy = writeback_policy<typename Policy::checkpoint_format>;
  step_runner<Policy, Act> verify, commit;
  step_runner<snapshot_policy, Act> snapshot_verify, snapshot_commit;
};

/// Drafts and acceptance of a round: random, with whole rounds of all-rejected and
/// all-accepted drafts mixed in.
struct round_plan {
  std::vector<int32_t> drafts, accepted;
  round_plan(int batch, int tokens, int round, std::mt19937_64& rng) {
    for (int b = 0; b < batch; ++b) {
      const int32_t d = round % 3 == 0 ? tokens : std::uniform_int_distribution<int32_t>(1, tokens)(rng);
      int32_t a = std::uniform_int_distribution<int32_t>(0, d)(rng);
      if (round % 5 == 1) a = 0;
      if (round % 7 == 2) a = d;
      drafts.push_back(d);
      accepted.push_back(a);
    }
  }
};

/// The params of a round: `in` holds `tokens` rows per request of `c`, `plan` the draft and
/// acceptance counts (it must outlive the params).
template <class Act>
mamba2_params round_params(mamba2_inputs_host<Act>& in, const mamba2_case& c, int tokens, const round_plan& plan) {
  mamba2_case rows = c;
  rows.batch = c.batch * tokens;
  mamba2_params p;
  in.bind(p, rows);
  p.batch = c.batch;
  p.tokens = tokens;
  p.token_counts = plan.drafts.data();
  p.accepted_counts = plan.accepted.data();
  p.seed = c.seed;
  return p;
}

/// What a speculative scenario observed.
struct spec_result {
  int rounds = 0, drafts = 0, accepted = 0;
  int flushing_rounds = 0;  ///< verify steps that flushed the committed entries first
  bool ring_wrapped = false;  ///< some window started past ring slot 0 (its entries wrap around)
  double max_output_error = 0, max_snapshot_output_error = 0, max_state_error = 0;
};

/// `rounds` rounds of up to `tokens` drafts per request under `Policy` and under the
/// snapshot baseline, against the reference.
template <class Policy, class Act>
spec_result run_spec_scenario(const mamba2_case& c, int tokens, int rounds, tolerances tol,
                              const spec_runners<Policy, Act>& run) {
  using snapshot_policy = writeback_policy<typename Policy::checkpoint_format>;
  std::mt19937_64 rng(c.seed);
  const auto& s = c.shape;
  mamba2_case rows = c;  // one input row per draft
  rows.batch = c.batch * tokens;
  mamba2_inputs_host<Act> in(rows, rng);
  mamba2_reference ref{s.heads, s.head_dim, s.state_dim, s.groups, {}, {}, {}, c.softplus, {}};
  for (int h = 0; h < s.heads; ++h) {
    ref.A.push_back(in.A[size_t(h)]);
    ref.D.push_back(in.D[size_t(h)]);
    ref.dt_bias.push_back(in.dt_bias[size_t(h)]);
  }
  host_layer_state<Policy, Act> replay(s, c.num_slots, tokens);
  // The baseline's pool: the requests' states plus `tokens` snapshot slots per request.
  host_layer_state<snapshot_policy, Act> snap(s, c.num_slots + c.batch * tokens);
  std::vector<int32_t> slots, snap_slots, snapshot_slots;
  for (int slot = 0; slot < c.num_slots; ++slot) {
    ref.state.push_back(random_state(s, rng));
    replay.set_state(slot, ref.state.back());
    snap.set_state(slot, ref.state.back());
    replay.phase[size_t(slot)] = (slot * 3 + 1) % Policy::window;
  }
  for (int b = 0; b < c.batch; ++b) slots.push_back((2 * b + 1) % c.num_slots);
  std::vector<int32_t> distinct = slots;
  std::sort(distinct.begin(), distinct.end());
  REQUIRE(std::unique(distinct.begin(), distinct.end()) == distinct.end());  // one request per slot
  snap_slots = slots;
  for (int i = 0; i < c.batch * tokens; ++i) snapshot_slots.push_back(c.num_slots + i);

  const size_t ys = size_t(s.heads) * s.head_dim;
  std::vector<Act> y_replay(ys * size_t(rows.batch)), y_snap(y_replay.size());
  std::vector<double> y_ref(ys), xd, zd, dtd, Bd, Cd;
  spec_result r;
  for (int round = 0; round < rounds; ++round, ++r.rounds) {
    in.draw(rng);
    const round_plan plan(c.batch, tokens, round, rng);
    mamba2_params p = round_params(in, c, tokens, plan);

    // Replay: verify, then commit. The checkpoint changes only when a verify flushes.
    p.slot_indices = slots.data();
    replay.bind(p, true);
    p.y = y_replay.data();
    std::vector<std::vector<float>> before;
    std::vector<uint32_t> flushes_before;
    for (int b = 0; b < c.batch; ++b) {
      before.push_back(replay.checkpoint_values(slots[size_t(b)]));
      flushes_before.push_back(replay.cursors[size_t(slots[size_t(b)]) * s.heads].flushes);
    }
    status st = run.verify(p, replay);
    INFO("round " << round << ": " << st.message());
    REQUIRE(st.ok());
    bool flushed = false;
    for (int b = 0; b < c.batch; ++b) {
      const int slot = slots[size_t(b)];
      const std::vector<float> after = replay.checkpoint_values(slot);
      if (replay.cursors[size_t(slot) * s.heads].flushes == flushes_before[size_t(b)]) {
        REQUIRE(after == before[size_t(b)]);  // drafts never touch the checkpoint
      } else {
        flushed = true;  // the committed entries, and nothing else, were folded in
        r.max_state_error =
            std::max(r.max_state_error, relative_error(after.data(), ref.state[size_t(slot)].data(), after.size()));
        before[size_t(b)] = after;
      }
    }
    r.flushing_rounds += flushed ? 1 : 0;
    for (int b = 0; b < c.batch; ++b) r.ring_wrapped |= replay.cursors[size_t(slots[size_t(b)]) * s.heads].start > 0;
    st = run.commit(p, replay);
    INFO(st.message());
    REQUIRE(st.ok());
    for (int b = 0; b < c.batch; ++b) REQUIRE(replay.checkpoint_values(slots[size_t(b)]) == before[size_t(b)]);

    // The snapshot baseline: one state per draft, a slot swap on commit.
    p.slot_indices = snap_slots.data();
    p.snapshot_slots = snapshot_slots.data();
    snap.bind(p, false);
    p.y = y_snap.data();
    REQUIRE(run.snapshot_verify(p, snap).ok());
    REQUIRE(run.snapshot_commit(p, snap).ok());

    // The reference decodes each request's drafts in order and keeps the accepted prefix.
    for (int b = 0; b < c.batch; ++b) {
      const int slot = slots[size_t(b)];
      std::vector<double> kept = ref.state[size_t(slot)];
      for (int t = 0; t < plan.drafts[size_t(b)]; ++t) {
        const int row = b * tokens + t;
        in.widen(row, rows, xd, zd, dtd, Bd, Cd);
        ref.step(slot, xd.data(), c.gate ? zd.data() : nullptr, dtd.data(), Bd.data(), Cd.data(), y_ref.data());
        r.max_output_error = std::max(r.max_output_error, relative_error(y_replay.data() + row * ys, y_ref.data(), ys));
        r.max_snapshot_output_error =
            std::max(r.max_snapshot_output_error, relative_error(y_snap.data() + row * ys, y_ref.data(), ys));
        if (t + 1 == plan.accepted[size_t(b)]) kept = ref.state[size_t(slot)];
      }
      ref.state[size_t(slot)] = kept;
      r.drafts += plan.drafts[size_t(b)];
      r.accepted += plan.accepted[size_t(b)];
      const std::vector<float> conventional = snap.checkpoint_values(snap_slots[size_t(b)]);
      r.max_state_error = std::max(r.max_state_error,
                                   relative_error(conventional.data(), kept.data(), conventional.size()));
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

/// The CPU runners.
template <class Policy, class Act>
spec_runners<Policy, Act> cpu_spec_runners() {
  using format = typename Policy::checkpoint_format;
  using snapshot_state = host_layer_state<writeback_policy<format>, Act>;
  return {[](const mamba2_params& p, host_layer_state<Policy, Act>&) { return cpu::replay_verify_step<Policy>(p); },
          [](const mamba2_params& p, host_layer_state<Policy, Act>&) { return cpu::commit_drafts(p); },
          [](const mamba2_params& p, snapshot_state&) { return cpu::snapshot_verify_step<format>(p); },
          [](const mamba2_params& p, snapshot_state&) {
            return cpu::snapshot_commit(p, const_cast<int32_t*>(p.slot_indices), const_cast<int32_t*>(p.snapshot_slots));
          }};
}

}  // namespace replayssm_test
