// SPDX-License-Identifier: Apache-2.0
// Mamba-2 speculative decoding on the device: verify + commit and the snapshot baseline
// against the float64 reference over hundreds of rounds, bit for bit against the CPU path,
// the device-side errors of bad draft and acceptance counts, and a verify step whose scratch
// does not fit in shared memory rejected before launch.
#include "device_runner.cuh"

using namespace replayssm;
using namespace replayssm_test;

namespace {

/// Rounds of the snapshot baseline in `Format` on the CPU and on the GPU from the same states
/// and inputs: every slot's state, the drafts' snapshots included, must be the same bytes
/// (each draft goes on from the state as its predecessor stored it), outputs agree within
/// the activation's tolerance.
template <class Format, class Act>
void require_snapshot_bit_identical(const mamba2_case& c, int tokens, int rounds) {
  const int slots_total = c.num_slots + c.batch * tokens;
  twin_states<mamba2_harness, writeback_policy<Format>, Act> twins(c, tokens, slots_total, 0);
  auto &cpu_state = twins.cpu, &gpu_state = twins.gpu;
  std::vector<int32_t> cpu_slots = request_slots(c), cpu_snapshots;
  for (int i = 0; i < c.batch * tokens; ++i) cpu_snapshots.push_back(c.num_slots + i);
  std::vector<int32_t> gpu_slots = cpu_slots, gpu_snapshots = cpu_snapshots;
  const size_t ys = mamba2_harness::outputs(c.shape);
  std::vector<Act> y_cpu(size_t(c.batch) * tokens * ys), y_gpu(y_cpu.size());
  for (int round = 0; round < rounds; ++round) {
    twins.in.draw(twins.rng);
    const round_plan plan(c.batch, tokens, round, twins.rng);
    mamba2_params<Act> p;
    twins.in.bind(p, c);
    plan.apply(p);
    p.slot_indices = cpu_slots.data();
    p.snapshot_slots = cpu_snapshots.data();
    cpu_state.bind(p, true);
    p.y = y_cpu.data();
    REQUIRE(cpu::verify_step<writeback_policy<Format>>(p).ok());
    REQUIRE(cpu::snapshot_commit(p, cpu_slots.data(), cpu_snapshots.data()).ok());
    p.slot_indices = gpu_slots.data();
    p.snapshot_slots = gpu_snapshots.data();
    gpu_state.bind(p, true);
    p.y = y_gpu.data();
    REQUIRE(device_run(p, gpu_state, [](const auto& dp) {
              return replayssm::cuda::verify_step<writeback_policy<Format>>(dp);
            }).ok());
    REQUIRE(cpu::snapshot_commit(p, gpu_slots.data(), gpu_snapshots.data()).ok());  // host slot tables
    INFO("round " << round);
    require_round_outputs_agree(y_cpu, y_gpu, plan, tokens, ys);
    REQUIRE(cpu_slots == gpu_slots);
    for (int slot = 0; slot < slots_total; ++slot)
      REQUIRE(cpu_state.checkpoint_values(slot) == gpu_state.checkpoint_values(slot));
  }
}

}  // namespace

TEST_CASE("gpu and cpu mamba2 snapshot baselines are bit-identical", "[gpu][mamba2][spec]") {
  require_snapshot_bit_identical<fp32_format, float>({nemotron3_nano, 3, 5, true, true, 81}, 4, 12);
  require_snapshot_bit_identical<fp16_format, bfloat16_t>({{4, 24, 64, 2}, 3, 5, true, true, 82}, 8, 20);
  require_snapshot_bit_identical<bf16_format, float>({{2, 16, 32, 1}, 2, 3, false, false, 83}, 3, 20);
}

TEST_CASE("gpu mamba2 verify + commit equals sequential decoding of the accepted tokens", "[gpu][mamba2][spec]") {
  gpu_spec<mamba2_harness, replay_policy<8, fp32_format>, float>({mamba2_odd_shape, 3, 5, true, true, 91}, 4, 300);
  gpu_spec<mamba2_harness, replay_policy<16, fp32_format>, float>({{4, 24, 64, 2}, 3, 5, true, true, 92}, 8, 150);
  gpu_spec<mamba2_harness, replay_policy<4, fp32_format>, float>({{2, 16, 32, 1}, 2, 3, false, false, 93}, 4, 100);
  gpu_spec<mamba2_harness, replay_policy<16, fp32_format>, float>({nemotron3_nano, 3, 5, true, true, 94}, 4, 40);
  // An FP16 state rounded stochastically: within 16 of its half-ulps (2^-11), above the
  // random walk of the ~250 rounded stores per slot in 100 rounds (the snapshot baseline's).
  gpu_spec<mamba2_harness, replay_policy<8, fp16_format, fp16_format, round_stochastic>, float>(
      {{4, 24, 64, 2}, 3, 5, true, true, 98}, 4, 100, {16 * 0x1p-11, 16 * 0x1p-11});
}

TEST_CASE("gpu and cpu mamba2 verify + commit are bit-identical", "[gpu][mamba2][spec]") {
  require_spec_bit_identical<mamba2_harness, replay_policy<16, fp32_format>, float>(
      {{8, 80, 128, 2}, 3, 5, true, true, 95}, 4, 60);
  require_spec_bit_identical<mamba2_harness, replay_policy<8, nvfp4_format, fp16_format, round_stochastic>, bfloat16_t>(
      {{4, 24, 64, 2}, 3, 5, true, true, 96}, 8, 100);
  // A 16-bit state rounded stochastically, float outputs: the drafts after a flush must read
  // the state as stored, not as formed (their difference is above float's tolerance).
  require_spec_bit_identical<mamba2_harness, replay_policy<8, fp16_format, fp16_format, round_stochastic>, float>(
      {{4, 24, 64, 2}, 3, 5, true, true, 98}, 4, 100);
}

TEST_CASE("a step that needs more shared memory than the device has is rejected before launch",
          "[gpu][mamba2][validation]") {
  // head_dim = state_dim = 256 with 8 drafts: the verify step's scratch is above 227 KB.
  using policy = replay_policy<16, fp32_format>;
  const mamba2_case c{{1, 256, 256, 1}, 1, 1, true, true, 62};
  std::mt19937_64 rng(c.seed);
  mamba2_inputs_host<float> in(c, rng, 8);
  in.draw(rng);
  mamba2_host_state<policy, float> st(c.shape, 1, 8);
  std::vector<float> y(size_t(8) * 256, 7.0f);
  std::vector<int32_t> drafts{8};
  mamba2_params<float> p;
  in.bind(p, c);
  st.bind(p, false);
  p.y = y.data();
  p.token_counts = drafts.data();
  const size_t smem = mamba2_scratch_layout<policy>::make(p.shape(), 8).bytes();
  REQUIRE(smem > 227 * 1024);
  const status s =
      device_run(p, st, [](const mamba2_params<float>& d) { return replayssm::cuda::verify_step<policy>(d); });
  CHECK_THAT(s.message(), contains_text("bytes of shared memory per block"));
  CHECK(std::all_of(y.begin(), y.end(), [](float v) { return v == 7.0f; }));
}

TEST_CASE("the device reports bad mamba2 draft and acceptance counts and leaves their state alone",
          "[gpu][mamba2][spec][validation]") {
  require_device_rejects_bad_counts<mamba2_harness, replay_policy<8, fp32_format>>(
      {{4, 16, 32, 2}, 2, 3, true, true, 97});
}
