// SPDX-License-Identifier: Apache-2.0
// The speculative-decoding scenario of every recurrence against its float64 reference:
// rounds of verify + commit with random draft counts, random acceptance and a padded request
// every fourth round, for replay and for the snapshot baseline side by side. Every draft's output is checked against
// sequential decoding of the tokens before it, and the state against the sequential
// decoding of the accepted tokens only. What differs between recurrences (the case, inputs,
// host state, reference and error measure) comes from a harness `R`: mamba2_harness
// (mamba2/harness.hpp), gdn_harness (gated_deltanet/harness.hpp).
#pragma once

#include "catch.hpp"

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "errors.hpp"
#include "host_state.hpp"

namespace replayssm_test {

/// The four operations of a round under `Policy`, on the CPU or the device.
template <class R, class Policy, class Act>
struct spec_runners {
  using replay_state = typename R::template state<Policy, Act>;
  using snapshot_state = typename R::template state<writeback_policy<typename Policy::checkpoint_format>, Act>;
  step_runner<replay_state> verify, commit;
  step_runner<snapshot_state> snapshot_verify, snapshot_commit;
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
  /// Points the draft and acceptance counts of `p` at this plan (it must outlive the params).
  template <class Params>
  void apply(Params& p) const {
    p.token_counts = drafts.data();
    p.accepted_counts = accepted.data();
  }
};

/// What a speculative scenario observed.
struct spec_result {
  int rounds = 0, drafts = 0, accepted = 0;
  int flushing_rounds = 0;    ///< verify steps that flushed the committed entries first
  bool ring_wrapped = false;  ///< some window started past ring slot 0 (its entries wrap around)
  double max_output_error = 0, max_snapshot_output_error = 0, max_state_error = 0;
};

/// `rounds` rounds of up to `tokens` drafts per request under `Policy` and under the
/// snapshot baseline, against the reference; returns what it observed. Every fourth round
/// request 0 is padding (the pad slot id): nothing of it may change.
template <class R, class Policy, class Act>
spec_result run_spec_scenario(const typename R::case_type& c, int tokens, int rounds, tolerances tol,
                              const spec_runners<R, Policy, Act>& run) {
  std::mt19937_64 rng(c.seed);
  const auto& s = c.shape;
  typename R::template inputs<Act> in(c, rng, tokens);
  auto ref = R::reference(c, in);
  typename spec_runners<R, Policy, Act>::replay_state replay(s, c.num_slots, tokens);
  // The baseline's pool: the requests' states plus `tokens` snapshot slots per request.
  typename spec_runners<R, Policy, Act>::snapshot_state snap(s, c.num_slots + c.batch * tokens);
  for (int slot = 0; slot < c.num_slots; ++slot) {
    ref.state[size_t(slot)] = R::random_state(s, rng);
    replay.set_state(slot, ref.state[size_t(slot)]);
    snap.set_state(slot, ref.state[size_t(slot)]);
    // The reference starts from the state as the checkpoint format holds it.
    const auto held = replay.checkpoint_values(slot);
    ref.state[size_t(slot)].assign(held.begin(), held.end());
    replay.phase[size_t(slot)] = (slot * 3 + 1) % Policy::window;
  }
  const std::vector<int32_t> slots = request_slots(c);
  std::vector<int32_t> snap_slots = slots, snapshot_slots;
  for (int i = 0; i < c.batch * tokens; ++i) snapshot_slots.push_back(c.num_slots + i);
  // The first head of request b's slot: its cursor counts the request's flushes.
  auto first_cursor = [&](int b) -> const replay_cursor& {
    return replay.cursors[size_t(slots[size_t(b)]) * replay.heads];
  };

  const size_t os = R::outputs(s);
  std::vector<Act> out_replay(os * size_t(c.batch) * tokens), out_snap(out_replay.size());
  std::vector<double> out_ref(os);
  spec_result r;
  for (int round = 0; round < rounds; ++round, ++r.rounds) {
    in.draw(rng);
    const round_plan plan(c.batch, tokens, round, rng);
    typename decltype(replay)::params p;
    in.bind(p, c);
    plan.apply(p);
    p.seed = c.seed;
    const bool padded = round % 4 == 3 && c.batch > 1;
    auto with_padding = [&](std::vector<int32_t> v) {
      if (padded) v[0] = p.pad_slot_id;
      return v;
    };
    auto stepped = [&](int b) { return !(padded && b == 0); };

    // Replay: verify, then commit. The checkpoint changes only when a verify flushes.
    const std::vector<int32_t> replay_slots = with_padding(slots);
    p.slot_indices = replay_slots.data();
    replay.bind(p, true);
    R::output(p) = out_replay.data();
    std::vector<std::vector<float>> before;
    std::vector<uint32_t> flushes_before;
    for (int b = 0; b < c.batch; ++b) {
      before.push_back(replay.checkpoint_values(slots[size_t(b)]));
      flushes_before.push_back(first_cursor(b).flush_count);
    }
    const replay_cursor cursor0 = first_cursor(0);
    status st = run.verify(p, replay);
    INFO("round " << round << ": " << st.message());
    REQUIRE(st.ok());
    bool flushed = false;
    for (int b = 0; b < c.batch; ++b) {
      const int slot = slots[size_t(b)];
      const std::vector<float> after = replay.checkpoint_values(slot);
      if (first_cursor(b).flush_count == flushes_before[size_t(b)]) {
        REQUIRE(after == before[size_t(b)]);  // drafts never touch the checkpoint
      } else {
        flushed = true;  // the committed entries, and nothing else, were folded in
        r.max_state_error =
            std::max(r.max_state_error, R::error(after.data(), ref.state[size_t(slot)].data(), after.size()));
        before[size_t(b)] = after;
      }
    }
    r.flushing_rounds += flushed ? 1 : 0;
    for (int b = 0; b < c.batch; ++b) r.ring_wrapped |= first_cursor(b).start > 0;
    st = run.commit(p, replay);
    INFO(st.message());
    REQUIRE(st.ok());
    for (int b = 0; b < c.batch; ++b) REQUIRE(replay.checkpoint_values(slots[size_t(b)]) == before[size_t(b)]);
    if (padded) REQUIRE(std::memcmp(&first_cursor(0), &cursor0, sizeof cursor0) == 0);

    // The snapshot baseline: one state per draft, a slot swap on commit.
    std::vector<int32_t> snap_round = with_padding(snap_slots);
    p.slot_indices = snap_round.data();
    p.snapshot_slots = snapshot_slots.data();
    snap.bind(p, false);
    R::output(p) = out_snap.data();
    REQUIRE(run.snapshot_verify(p, snap).ok());
    REQUIRE(run.snapshot_commit(p, snap).ok());
    for (int b = 0; b < c.batch; ++b)
      if (stepped(b)) snap_slots[size_t(b)] = snap_round[size_t(b)];

    // The reference decodes each request's drafts in order and keeps the accepted prefix.
    for (int b = 0; b < c.batch; ++b) {
      if (!stepped(b)) continue;
      const int slot = slots[size_t(b)];
      std::vector<double> kept = ref.state[size_t(slot)];
      for (int t = 0; t < plan.drafts[size_t(b)]; ++t) {
        R::reference_step(ref, in, c, b, t, slot, out_ref.data());
        const size_t row = size_t(b) * tokens + t;
        r.max_output_error = std::max(r.max_output_error, R::error(out_replay.data() + row * os, out_ref.data(), os));
        r.max_snapshot_output_error =
            std::max(r.max_snapshot_output_error, R::error(out_snap.data() + row * os, out_ref.data(), os));
        if (t + 1 == plan.accepted[size_t(b)]) kept = ref.state[size_t(slot)];
      }
      ref.state[size_t(slot)] = kept;
      r.drafts += plan.drafts[size_t(b)];
      r.accepted += plan.accepted[size_t(b)];
      const std::vector<float> conventional = snap.checkpoint_values(snap_slots[size_t(b)]);
      r.max_state_error = std::max(r.max_state_error, R::error(conventional.data(), kept.data(), conventional.size()));
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
template <class R, class Policy, class Act>
spec_runners<R, Policy, Act> cpu_spec_runners() {
  using format = typename Policy::checkpoint_format;
  using params = typename spec_runners<R, Policy, Act>::replay_state::params;
  return {[](const params& p, auto&) { return cpu::verify_step<Policy>(p); },
          [](const params& p, auto&) { return cpu::commit_drafts(p); },
          [](const params& p, auto&) { return cpu::verify_step<writeback_policy<format>>(p); },
          [](const params& p, auto&) {
            return cpu::snapshot_commit(p, const_cast<int32_t*>(p.slot_indices),
                                        const_cast<int32_t*>(p.snapshot_slots));
          }};
}

/// run_spec_scenario on the CPU, by default within the activation's output tolerance and
/// fp32 accuracy of the state.
template <class R, class Policy, class Act>
spec_result cpu_spec(const typename R::case_type& c, int tokens, int rounds,
                     tolerances tol = {output_tolerance<Act>(), 1e-5}) {
  return run_spec_scenario(c, tokens, rounds, tol, cpu_spec_runners<R, Policy, Act>());
}

}  // namespace replayssm_test
