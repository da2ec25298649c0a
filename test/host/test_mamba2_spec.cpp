// SPDX-License-Identifier: Apache-2.0
// Speculative decoding on the CPU: verify + commit against sequential decoding of the
// accepted tokens over hundreds of rounds, the snapshot baseline beside it, the edge cases
// and every bad input.
#include <cstring>

#include "../support/mamba2_spec_scenario.hpp"

using namespace replayssm;
using namespace replayssm_test;

namespace {

template <class Policy, class Act>
spec_result cpu_spec(const mamba2_case& c, int tokens, int rounds, tolerances tol = {output_tolerance<Act>(), 1e-5}) {
  return run_spec_scenario<Policy, Act>(c, tokens, rounds, tol, cpu_spec_runners<Policy, Act>());
}

}  // namespace

TEST_CASE("cpu verify + commit equals sequential decoding of the accepted tokens", "[cpu][spec]") {
  SECTION("odd shape, W=8, up to 4 drafts, 300 rounds") {
    const auto r = cpu_spec<replay_policy<8, fp32_format>, float>({{2, 17, 48, 1}, 3, 5, true, true, 81}, 4, 300);
    CHECK(r.accepted > 0);
    CHECK(r.accepted < r.drafts);
  }
  SECTION("W=16, up to 8 drafts, bf16 activations, 200 rounds") {
    cpu_spec<replay_policy<16, fp32_format>, bfloat16_t>({{4, 24, 64, 2}, 3, 5, true, true, 82}, 8, 200);
  }
  SECTION("drafts as long as the window: every round flushes first") {
    const auto r = cpu_spec<replay_policy<4, fp32_format>, float>({{2, 16, 32, 1}, 2, 3, false, false, 83}, 4, 100);
    CHECK(r.flushing_rounds > r.rounds / 3);
  }
  SECTION("one draft per round") {
    cpu_spec<replay_policy<8, fp32_format>, half_t>({{2, 16, 32, 1}, 2, 3, true, true, 84}, 1, 100);
  }
  SECTION("Nemotron-3-Nano shape, W=16, 4 drafts") {
    cpu_spec<replay_policy<16, fp32_format>, float>({{96, 80, 128, 8}, 2, 3, true, true, 85}, 4, 24);
  }
  SECTION("fp16 read copy of an fp32 checkpoint") {
    cpu_spec<replay_policy<8, fp16_format, fp32_format>, float>({{4, 24, 64, 2}, 3, 5, true, true, 86}, 4, 100,
                                                              {2 * 0x1p-11 + 1e-5, 1e-5});
  }
}

TEST_CASE("decode steps continue a window left full by a commit", "[cpu][spec]") {
  using policy = replay_policy<4, fp32_format>;
  const mamba2_case c{{2, 16, 32, 1}, 1, 1, true, true, 87};
  std::mt19937_64 rng(c.seed);
  mamba2_case rows = c;
  rows.batch = 4;
  mamba2_inputs_host<float> in(rows, rng);
  in.draw(rng);
  host_layer_state<policy, float> st(c.shape, 1, 4);
  st.set_state(0, random_state(c.shape, rng));
  std::vector<float> y(size_t(4) * 32);
  const std::vector<int32_t> accepted{4};
  mamba2_params p;
  in.bind(p, rows);
  p.batch = 1;
  p.tokens = 4;
  p.accepted_counts = accepted.data();
  st.bind(p, false);
  p.y = y.data();
  REQUIRE(cpu::replay_verify_step<policy>(p).ok());
  REQUIRE(cpu::commit_drafts(p).ok());
  CHECK(st.cursors[0].length == 4);
  p.tokens = 1;
  p.batch = 1;
  p.accepted_counts = nullptr;
  REQUIRE(cpu::replay_decode_step<policy>(p).ok());  // the full window and the token are flushed
  CHECK(st.cursors[0].length == 0);
  CHECK(st.cursors[0].flushes == 1);
}

namespace {

using spec_policy = replay_policy<8, fp32_format>;

/// A valid verify round whose params each section then breaks in one way.
struct spec_fixture {
  mamba2_case c{{4, 16, 32, 2}, 2, 3, true, true, 88};
  mamba2_case rows{{4, 16, 32, 2}, 8, 3, true, true, 88};
  std::mt19937_64 rng{88};
  mamba2_inputs_host<float> in{rows, rng};
  host_layer_state<spec_policy, float> state{c.shape, c.num_slots, 4};
  std::vector<float> y = std::vector<float>(size_t(rows.batch) * 4 * 16);
  std::vector<int32_t> slots{2, 0}, drafts{4, 2}, accepted{3, 2};
  mamba2_params p;

  spec_fixture() {
    in.draw(rng);
    for (int s = 0; s < c.num_slots; ++s) state.set_state(s, random_state(c.shape, rng));
    in.bind(p, rows);
    state.bind(p, true);
    p.batch = 2;
    p.tokens = 4;
    p.token_counts = drafts.data();
    p.accepted_counts = accepted.data();
    p.y = y.data();
    p.slot_indices = slots.data();
  }
  std::string verify_error() {
    const status s = cpu::replay_verify_step<spec_policy>(p);
    REQUIRE_FALSE(s.ok());
    return s.message();
  }
};

}  // namespace

TEST_CASE("bad speculative input is rejected with a descriptive error", "[cpu][spec][validation]") {
  using Catch::Matchers::Contains;
  spec_fixture f;
  SECTION("the valid round runs") {
    CHECK(cpu::replay_verify_step<spec_policy>(f.p).ok());
    CHECK(cpu::commit_drafts(f.p).ok());
  }
  SECTION("more drafts than the supported maximum") {
    f.p.tokens = 9;
    CHECK_THAT(f.verify_error(), Contains("tokens=9 is outside [1, max_draft_tokens=8]"));
  }
  SECTION("more drafts than the window holds") {
    f.p.tokens = 5;
    const status s = cpu::replay_verify_step<replay_policy<4, fp32_format>>(f.p);
    CHECK_THAT(s.message(), Contains("tokens=5 drafts do not fit the window of 4"));
  }
  SECTION("a window ring too short for the drafts") {
    f.p.window_entries = 8;
    CHECK_THAT(f.verify_error(), Contains("window_entries=8 is too short for a verify step: it needs window + tokens = 12"));
  }
  SECTION("a request's draft count beyond tokens") {
    f.drafts[1] = 5;
    CHECK_THAT(f.verify_error(), Contains("token_counts[1]=5 is outside [1, tokens=4]"));
  }
  SECTION("no drafts") {
    f.drafts[0] = 0;
    CHECK_THAT(f.verify_error(), Contains("token_counts[0]=0"));
  }
  SECTION("drafts through the decode step") {
    const status s = cpu::replay_decode_step<spec_policy>(f.p);
    CHECK_THAT(s.message(), Contains("a decode step takes one token per request"));
  }
  SECTION("the verify step under a write-back policy") {
    const status s = cpu::replay_verify_step<writeback_policy<fp32_format>>(f.p);
    CHECK_THAT(s.message(), Contains("the verify step needs a replay policy"));
  }
  SECTION("accepting more drafts than were verified") {
    REQUIRE(cpu::replay_verify_step<spec_policy>(f.p).ok());
    const auto cursors = f.state.cursors;
    f.accepted[1] = 3;  // request 1 verified 2
    const status s = cpu::commit_drafts(f.p);
    CHECK_THAT(s.message(), Contains("accepted_counts[1]=3 is outside [0, 2]"));
    f.accepted[1] = -1;
    CHECK_THAT(cpu::commit_drafts(f.p).message(), Contains("accepted_counts[1]=-1"));
    CHECK(std::memcmp(cursors.data(), f.state.cursors.data(), cursors.size() * sizeof(replay_cursor)) == 0);
  }
  SECTION("committing twice: the second finds no pending drafts") {
    REQUIRE(cpu::replay_verify_step<spec_policy>(f.p).ok());
    REQUIRE(cpu::commit_drafts(f.p).ok());
    const int32_t length = f.state.cursors[size_t(2) * 4].length;
    CHECK_THAT(cpu::commit_drafts(f.p).message(), Contains("commit accepted more drafts than were verified"));
    CHECK(f.state.cursors[size_t(2) * 4].length == length);
  }
  SECTION("a commit without accepted counts") {
    f.p.accepted_counts = nullptr;
    CHECK_THAT(cpu::commit_drafts(f.p).message(), Contains("accepted_counts are null"));
  }
  SECTION("the snapshot baseline without snapshot slots") {
    CHECK_THAT(cpu::snapshot_verify_step<fp32_format>(f.p).message(), Contains("snapshot_slots are null"));
  }
}

TEST_CASE("snapshot memory avoided is the drafts' states", "[cpu][spec][memory]") {
  const mamba2_layer_shape nano{96, 80, 128, 8};
  // 4 fp32 snapshots of 96 x 80 x 128 per request: 15.7 MB, 8 GB per layer at batch 512.
  CHECK(mamba2_snapshot_bytes<fp32_format>(nano, 1, 4) == size_t(4) * 96 * 80 * 128 * 4);
  CHECK(mamba2_snapshot_bytes<fp32_format>(nano, 512, 4) == size_t(512) * 4 * 96 * 80 * 128 * 4);
  // The verify ring holds T more entries than the window: far less than one state.
  const auto decode = mamba2_buffers<replay_policy<16, fp32_format>>(nano, 1, dtype::bf16);
  const auto spec = mamba2_buffers<replay_policy<16, fp32_format>>(nano, 1, dtype::bf16, 4);
  CHECK(spec.window_total() - decode.window_total() == size_t(4) * ((96 * 80 + 8 * 128) * 2 + 96 * 4));
  CHECK(spec.window_total() < spec.checkpoint_total() / 10);
}
