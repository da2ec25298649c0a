// SPDX-License-Identifier: Apache-2.0
// Property test of the CPU launchers of every recurrence: on seeded random parameter sets,
// valid ones and ones broken in random ways (slots out of range or shared, cursors, phases,
// token and acceptance counts, shapes, strides, null or misaligned pointers), a step either
// succeeds or returns an error with every byte of the state, the windows, the cursors and
// the outputs as it was. A failure prints the seed of the trial that broke it.
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "../support/gated_deltanet/harness.hpp"
#include "../support/mamba2/harness.hpp"

#include "../support/catch.hpp"

using namespace replayssm;
using namespace replayssm_test;

namespace {

/// A pointer `bytes` bytes past `p`: misaligned, but inside the buffer.
template <class T>
T* shifted(T* p, size_t bytes) {
  return p == nullptr ? p : reinterpret_cast<T*>(reinterpret_cast<uintptr_t>(p) + bytes);
}

/// Breaks what every recurrence's params share; returns false when `which` is not one of them.
template <class Params>
bool break_common(Params& p, std::vector<int32_t>& slots, std::vector<int32_t>& counts,
                  std::vector<int32_t>& accepted, std::vector<replay_cursor>& cursors, std::vector<int32_t>& phase,
                  int which, std::mt19937_64& rng) {
  auto pick = [&rng](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); };
  const int32_t huge = std::uniform_int_distribution<int32_t>(1, 1000)(rng);
  switch (which) {
    case 0: slots[pick(slots.size())] = p.num_slots + huge % 3; return true;        // out of range
    case 1: slots[pick(slots.size())] = -2 - huge % 3; return true;                  // negative, not the pad id
    case 2: if (slots.size() > 1) slots[1] = slots[0]; return true;                   // shared slot
    case 3: p.pad_slot_id = int32_t(pick(size_t(p.num_slots))); return true;         // pad id names a slot
    case 4: phase[pick(phase.size())] = huge % 2 == 0 ? -1 : 64 + huge; return true;  // phase
    case 5: cursors[pick(cursors.size())].length = 65 + huge; return true;           // cursor length
    case 6: cursors[pick(cursors.size())].length = -huge; return true;
    case 7: cursors[pick(cursors.size())].start = huge % 2 == 0 ? -huge : 1000 + huge; return true;  // ring start
    case 8: counts[pick(counts.size())] = huge % 2 == 0 ? 0 : 9 + huge; return true;  // draft counts
    case 9: accepted[pick(accepted.size())] = huge % 2 == 0 ? -huge : 9 + huge; return true;  // accepted counts
    case 10: p.num_slots = -huge % 2; return true;
    case 11: p.batch = -huge; return true;
    case 12: p.tokens = huge % 2 == 0 ? 0 : 9 + huge % 5; return true;
    case 13: p.window_entries = 1 + huge % 3; return true;                           // ring too short
    case 14: p.checkpoint = nullptr; return true;
    case 15: p.checkpoint = shifted(p.checkpoint, 4); return true;
    case 16: p.cursors = shifted(p.cursors, 2); return true;
    case 17: p.slot_indices = nullptr, p.batch = p.num_slots + 1; return true;     // implicit slots beyond the pool
    default: return false;
  }
}

/// Breaks a Mamba-2 params field of its own.
template <class Act>
void break_own(mamba2_params<Act>& p, int which, std::mt19937_64& rng) {
  switch (which % 8) {
    case 0: p.x = nullptr; break;
    case 1: p.C = shifted(p.C, 1); break;
    case 2: p.B_batch_stride = p.B_group_stride; break;   // requests overlap
    case 3: p.x_head_stride = p.head_dim - 1; break;       // rows overlap
    case 4: p.state_dim = std::uniform_int_distribution<int32_t>(0, 2)(rng) == 0 ? 8 : 272; break;
    case 5: p.groups = 3; break;                           // does not divide the heads
    case 6: p.window_dt = nullptr; break;
    default: p.A = nullptr; break;
  }
}

/// Breaks a Gated DeltaNet params field of its own.
template <class Act>
void break_own(gdn_params<Act>& p, int which, std::mt19937_64& rng) {
  switch (which % 8) {
    case 0: p.q = nullptr; break;
    case 1: p.v = shifted(p.v, 1); break;
    case 2: p.k_batch_stride = p.k_head_stride; break;
    case 3: p.o_head_stride = p.value_dim - 1; break;
    case 4: p.key_dim = std::uniform_int_distribution<int32_t>(0, 2)(rng) == 0 ? 24 : 256; break;
    case 5: p.key_heads = 3; break;
    case 6: p.window_g = nullptr; break;
    default: p.A_log = nullptr; break;
  }
}

/// Counts of one recurrence's trials.
struct trial_counts {
  int trials = 0, succeeded = 0, rejected = 0, broken = 0;
};

/// `trials` seeded trials of `R` under `Policy` with float activations: a few valid decode or
/// verify + commit steps move the cursors somewhere random, then one step on params broken
/// in 0 to 2 random ways; a rejected step must leave every byte as it was.
template <class R, class Policy>
trial_counts run_trials(const typename R::case_type& base, int trials) {
  trial_counts n;
  for (int trial = 0; trial < trials; ++trial) {
    const uint64_t seed = base.seed * 1000003u + uint64_t(trial);
    std::mt19937_64 rng(seed);
    typename R::case_type c = base;
    c.seed = seed;
    const int tokens = std::uniform_int_distribution<int>(1, 4)(rng);
    typename R::template inputs<float> in(c, rng, tokens);
    typename R::template state<Policy, float> st(c.shape, c.num_slots, tokens);
    for (int s = 0; s < c.num_slots; ++s) {
      st.set_state(s, R::random_state(c.shape, rng));
      st.phase[size_t(s)] = std::uniform_int_distribution<int32_t>(0, Policy::window - 1)(rng);
    }
    std::vector<int32_t> slots = request_slots(c);
    std::vector<float> out(size_t(c.batch) * tokens * R::outputs(c.shape), 3.0f);
    std::vector<int32_t> counts(size_t(c.batch), tokens), accepted(size_t(c.batch), 0);
    // Params of fresh inputs over the state.
    const auto next_params = [&] {
      in.draw(rng);
      typename R::template state<Policy, float>::params p;
      in.bind(p, c);
      st.bind(p, true);
      p.slot_indices = slots.data();
      R::output(p) = out.data();
      return p;
    };
    // Valid steps first, so that windows and cursors are somewhere random.
    const int warmup = std::uniform_int_distribution<int>(0, 2 * Policy::window)(rng);
    for (int step = 0; step < warmup; ++step) {
      auto p = next_params();
      const bool verify = step % 3 == 2;
      if (verify) {
        for (auto& a : accepted) a = std::uniform_int_distribution<int32_t>(0, tokens)(rng);
        p.token_counts = counts.data();
        p.accepted_counts = accepted.data();
        REQUIRE(cpu::verify_step<Policy>(p).ok());
        REQUIRE(cpu::commit_drafts(p).ok());
      } else {
        p.tokens = 1;
        REQUIRE(R::template cpu_decode<Policy>(p).ok());
      }
    }
    // One step on params broken in 0 to 2 ways.
    auto p = next_params();
    const int kind = std::uniform_int_distribution<int>(0, 2)(rng);  // decode, verify, commit
    for (auto& a : accepted) a = std::uniform_int_distribution<int32_t>(0, tokens)(rng);
    if (kind == 0) {
      p.tokens = 1;
    } else {
      p.token_counts = counts.data();
      p.accepted_counts = accepted.data();
      if (kind == 2) REQUIRE(cpu::verify_step<Policy>(p).ok());
    }
    const int breaks = std::uniform_int_distribution<int>(0, 2)(rng);
    std::string what;
    for (int i = 0; i < breaks; ++i) {
      const int which = std::uniform_int_distribution<int>(0, 25)(rng);
      if (!break_common(p, slots, counts, accepted, st.cursors, st.phase, which, rng)) break_own(p, which, rng);
      what += std::to_string(which) + " ";
    }
    const std::vector<uint8_t> state_before = st.bytes();
    const std::vector<float> out_before = out;
    const std::vector<int32_t> slots_before = slots;
    const status s = kind == 0   ? R::template cpu_decode<Policy>(p)
                     : kind == 1 ? cpu::verify_step<Policy>(p)
                                 : cpu::commit_drafts(p);
    ++n.trials;
    n.broken += breaks > 0;
    if (s.ok()) {
      ++n.succeeded;
      if (breaks == 0) continue;
    } else {
      ++n.rejected;
      INFO("trial seed " << seed << ", kind " << kind << ", breaks " << what << ": " << s.message());
      REQUIRE(st.bytes() == state_before);
      REQUIRE(std::memcmp(out.data(), out_before.data(), out.size() * sizeof(float)) == 0);
      REQUIRE(slots == slots_before);
    }
    // Valid params must never be rejected.
    if (breaks == 0) {
      INFO("trial seed " << seed << ", kind " << kind << ": " << s.message());
      REQUIRE(s.ok());
    }
  }
  return n;
}

}  // namespace

TEST_CASE("mamba2: every step on random params succeeds or changes nothing", "[mamba2][validation][property]") {
  const auto n = run_trials<mamba2_harness, replay_policy<8, fp32_format>>({{4, 8, 16, 2}, 3, 5, true, true, 7}, 1500);
  const auto m =
      run_trials<mamba2_harness, replay_policy<4, bf16_format, fp32_format, round_stochastic>>({{2, 5, 32, 1}, 2, 4, false, true, 8},
                                                                                             1500);
  CHECK(n.rejected > 300);  // the broken params were found
  CHECK(n.succeeded > 300);
  CHECK(m.rejected > 300);
}

TEST_CASE("gdn: every step on random params succeeds or changes nothing", "[gdn][validation][property]") {
  const auto n = run_trials<gdn_harness, replay_policy<8, fp32_format>>({{4, 2, 16, 8}, 3, 5, 9}, 1500);
  const auto m = run_trials<gdn_harness, gdn_policy<replay_policy<4, bf16_format, fp32_format>, gdn_window::raw_inputs>>(
      {{2, 1, 32, 5}, 2, 4, 10}, 1500);
  CHECK(n.rejected > 300);
  CHECK(n.succeeded > 300);
  CHECK(m.rejected > 300);
}
