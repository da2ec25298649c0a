// SPDX-License-Identifier: Apache-2.0
// Mamba-2 speculative decoding on the CPU: verify + commit against sequential decoding of the
// accepted tokens over hundreds of rounds, the snapshot baseline beside it, the edge cases,
// and the snapshot memory replay avoids. Bad speculative input: test_validation.cpp.
#include "../../support/mamba2/harness.hpp"
#include "../../support/spec_round.hpp"

using namespace replayssm;
using namespace replayssm_test;

TEST_CASE("mamba2 verify + commit equals sequential decoding of the accepted tokens", "[mamba2][spec]") {
  SECTION("odd shape, W=8, up to 4 drafts, 300 rounds") {
    const auto r = cpu_spec<mamba2_harness, replay_policy<8, fp32_format>, float>(
        {mamba2_odd_shape, 3, 5, true, true, 81}, 4, 300);
    CHECK(r.accepted > 0);
    CHECK(r.accepted < r.drafts);
  }
  SECTION("W=16, up to 8 drafts, bf16 activations, 200 rounds") {
    cpu_spec<mamba2_harness, replay_policy<16, fp32_format>, bfloat16_t>(
        {{4, 24, 64, 2}, 3, 5, true, true, 82}, 8, 200);
  }
  SECTION("drafts as long as the window: every round flushes first") {
    const auto r = cpu_spec<mamba2_harness, replay_policy<4, fp32_format>, float>(
        {{2, 16, 32, 1}, 2, 3, false, false, 83}, 4, 100);
    CHECK(r.flushing_rounds > r.rounds / 3);
  }
  SECTION("one draft per round") {
    cpu_spec<mamba2_harness, replay_policy<8, fp32_format>, half_t>({{2, 16, 32, 1}, 2, 3, true, true, 84}, 1, 100);
  }
  SECTION("Nemotron-3-Nano shape, W=16, 4 drafts") {
    cpu_spec<mamba2_harness, replay_policy<16, fp32_format>, float>({nemotron3_nano, 2, 3, true, true, 85}, 4, 24);
  }
  SECTION("fp16 read copy of an fp32 checkpoint") {
    cpu_spec<mamba2_harness, replay_policy<8, fp16_format, fp32_format>, float>(
        {{4, 24, 64, 2}, 3, 5, true, true, 86}, 4, 100, {2 * 0x1p-11 + 1e-5, 1e-5});
  }
  SECTION("fp16 state rounded stochastically") {  // 16 half-ulps: above the walk of ~250 stores
    cpu_spec<mamba2_harness, replay_policy<8, fp16_format, fp16_format, round_stochastic>, float>(
        {{4, 24, 64, 2}, 3, 5, true, true, 98}, 4, 100, {16 * 0x1p-11, 16 * 0x1p-11});
  }
}

TEST_CASE("mamba2: decode steps continue a window left full by a commit", "[mamba2][spec]") {
  using policy = replay_policy<4, fp32_format>;
  const mamba2_case c{{2, 16, 32, 1}, 1, 1, true, true, 87};
  std::mt19937_64 rng(c.seed);
  mamba2_inputs_host<float> in(c, rng, 4);
  in.draw(rng);
  mamba2_host_state<policy, float> st(c.shape, 1, 4);
  st.set_state(0, mamba2_harness::random_state(c.shape, rng));
  std::vector<float> y(size_t(4) * 32);
  const std::vector<int32_t> accepted{4};
  mamba2_params<float> p;
  in.bind(p, c);  // one request of 4 drafts
  p.accepted_counts = accepted.data();
  st.bind(p, false);
  p.y = y.data();
  REQUIRE(cpu::verify_step<policy>(p).ok());
  REQUIRE(cpu::commit_drafts(p).ok());
  CHECK(st.cursors[0].length == 4);
  p.tokens = 1;
  p.batch = 1;
  p.accepted_counts = nullptr;
  REQUIRE(cpu::decode_step<policy>(p).ok());  // the full window and the token are flushed
  CHECK(st.cursors[0].length == 0);
  CHECK(st.cursors[0].flush_count == 1);
}

TEST_CASE("mamba2: snapshot memory avoided is the drafts' states", "[mamba2][spec][memory]") {
  const mamba2_layer_shape nano = nemotron3_nano;
  // 4 fp32 snapshots of 96 x 80 x 128 per request: 15.7 MB, 8 GB per layer at batch 512.
  CHECK(mamba2_snapshot_bytes<fp32_format>(nano, 1, 4) == size_t(4) * 96 * 80 * 128 * 4);
  CHECK(mamba2_snapshot_bytes<fp32_format>(nano, 512, 4) == size_t(512) * 4 * 96 * 80 * 128 * 4);
  // The verify ring holds T more entries than the window: far less than one state.
  const auto decode = mamba2_buffers<replay_policy<16, fp32_format>>(nano, 1, dtype::bf16);
  const auto spec = mamba2_buffers<replay_policy<16, fp32_format>>(nano, 1, dtype::bf16, 4);
  CHECK(spec.window_total() - decode.window_total() == size_t(4) * ((96 * 80 + 8 * 128) * 2 + 96 * 4));
  CHECK(spec.window_total() < spec.checkpoint_total() / 10);
}
