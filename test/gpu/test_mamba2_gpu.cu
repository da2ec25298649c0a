// SPDX-License-Identifier: Apache-2.0
// The CUDA decode steps: against the float64 reference over many windows, bit for bit
// against the CPU path, device-side error reporting, and pad rows.
#include "../../examples/custom_policy/mxfp4_format.hpp"
#include "../support/mamba2_scenario.hpp"
#include "device_runner.cuh"

using namespace replayssm;
using namespace replayssm_test;

namespace {

template <class Policy, class Act>
scenario_result gpu_scenario(const mamba2_case& c, int windows, bool stagger,
                             tolerances tol = {output_tolerance<Act>(), 1e-5}) {
  using naive_policy = writeback_policy<typename Policy::checkpoint_format>;
  return run_scenario<Policy, Act>(c, windows, stagger, tol, device_step<naive_policy, Act>, device_step<Policy, Act>);
}

/// Runs `steps` steps of Policy on the CPU and on the GPU (blocks of `Threads`) from the same
/// state and inputs and requires identical bytes: the same primitives, the same order.
template <class Policy, class Act, int Threads = cuda::decode_block_threads>
void require_bit_identical(const mamba2_case& c, int steps) {
  std::mt19937_64 rng(c.seed);
  mamba2_inputs_host<Act> in(c, rng);
  host_layer_state<Policy, Act> cpu_state(c.shape, c.num_slots), gpu_state(c.shape, c.num_slots);
  for (int slot = 0; slot < c.num_slots; ++slot) {
    const auto init = random_state(c.shape, rng);
    cpu_state.set_state(slot, init);
    gpu_state.set_state(slot, init);
    cpu_state.phase[size_t(slot)] = gpu_state.phase[size_t(slot)] = slot % Policy::window;
  }
  std::vector<int32_t> slots;
  for (int b = 0; b < c.batch; ++b) slots.push_back((2 * b + 1) % c.num_slots);
  std::vector<Act> y_cpu(size_t(c.batch) * c.shape.heads * c.shape.head_dim), y_gpu(y_cpu.size());
  for (int t = 0; t < steps; ++t) {
    in.draw(rng);
    mamba2_params p;
    in.bind(p, c);
    p.slot_indices = slots.data();
    p.seed = c.seed;
    cpu_state.bind(p, true);
    p.y = y_cpu.data();
    REQUIRE(cpu::mamba2_decode_step<Policy>(p).ok());
    gpu_state.bind(p, true);
    p.y = y_gpu.data();
    REQUIRE(device_step<Policy, Act, Threads>(p, gpu_state).ok());
    INFO("step " << t);
    REQUIRE(std::memcmp(y_cpu.data(), y_gpu.data(), y_cpu.size() * sizeof(Act)) == 0);
    REQUIRE(cpu_state.checkpoint_values(1) == gpu_state.checkpoint_values(1));
  }
}

}  // namespace

TEST_CASE("gpu replay matches the reference on an odd shape for every window", "[gpu][mamba2]") {
  const mamba2_case c{{2, 17, 48, 1}, 3, 5, true, true, 11};
  gpu_scenario<replay_policy<1, fp32_format>, float>(c, 8, false);
  gpu_scenario<replay_policy<8, fp32_format>, float>(c, 8, false);
  gpu_scenario<replay_policy<16, fp32_format>, float>(c, 8, true);
  gpu_scenario<replay_policy<32, fp32_format>, float>(c, 8, true);
}

TEST_CASE("gpu replay matches the reference on Nemotron-3 shapes", "[gpu][mamba2][model]") {
  gpu_scenario<replay_policy<16, fp32_format>, float>({{96, 80, 128, 8}, 3, 5, true, true, 21}, 8, true);
  gpu_scenario<replay_policy<16, fp32_format>, float>({{128, 64, 128, 8}, 2, 3, true, true, 22}, 8, false);
  gpu_scenario<replay_policy<16, fp32_format>, bfloat16_t>({{96, 80, 128, 8}, 2, 3, true, true, 23}, 8, true);
}

TEST_CASE("gpu and cpu steps are bit-identical", "[gpu][mamba2]") {
  require_bit_identical<replay_policy<16, fp32_format>, float>({{8, 80, 128, 2}, 3, 5, true, true, 51}, 40);
  require_bit_identical<replay_policy<8, fp32_format>, bfloat16_t>({{4, 17, 48, 1}, 3, 5, true, true, 52}, 20);
  require_bit_identical<writeback_policy<fp32_format>, half_t>({{4, 64, 64, 2}, 3, 5, false, true, 53}, 10);
}

TEST_CASE("stochastic-rounding states are bit-identical on cpu and gpu after 64 flushes", "[gpu][precision]") {
  // W = 4 and 260 steps: every slot flushes 64 times or more.
  require_bit_identical<replay_policy<4, nvfp4_format, fp16_format, round_stochastic>, bfloat16_t>(
      {{4, 24, 64, 2}, 3, 5, true, true, 54}, 260);
  require_bit_identical<replay_policy<4, fp8_e4m3_format, bf16_format, round_stochastic>, float>(
      {{2, 17, 48, 1}, 3, 5, true, true, 55}, 260);
  require_bit_identical<writeback_policy<fp16_format, round_stochastic>, float>({{4, 32, 64, 2}, 3, 5, true, true, 56}, 64);
}

TEST_CASE("the device reports bad slots and cursors and skips their rows", "[gpu][validation]") {
  using policy = replay_policy<8, fp32_format>;
  const mamba2_case c{{4, 16, 32, 2}, 2, 3, true, true, 5};
  std::mt19937_64 rng(5);
  mamba2_inputs_host<float> in(c, rng);
  in.draw(rng);
  host_layer_state<policy, float> st(c.shape, c.num_slots);
  for (int s = 0; s < c.num_slots; ++s) st.set_state(s, random_state(c.shape, rng));
  std::vector<float> y(size_t(c.batch) * 64, 7.0f);
  std::vector<int32_t> slots{5, -1};
  mamba2_params p;
  in.bind(p, c);
  st.bind(p, false);
  p.y = y.data();
  p.slot_indices = slots.data();
  const auto before = st.checkpoint_values(0);
  status s = device_step(p, st);
  CHECK_THAT(s.message(), Catch::Matchers::Contains("slot index was outside"));
  CHECK(std::all_of(y.begin(), y.end(), [](float v) { return v == 7.0f; }));
  slots = {0, -1};
  st.cursors[1].length = 9;
  s = device_step(p, st);
  CHECK_THAT(s.message(), Catch::Matchers::Contains("window cursor held a length"));
  CHECK(st.checkpoint_values(0) == before);
}

TEST_CASE("the device launcher validates like the CPU one", "[gpu][validation]") {
  mamba2_params p;
  p.batch = 1;
  p.heads = 2;
  p.groups = 1;
  p.head_dim = 8;
  p.state_dim = 40;
  const status s = cuda::replay_decode_step<replay_policy<16, fp32_format>>(p);
  CHECK_THAT(s.message(), Catch::Matchers::Contains("unsupported state_dim=40"));
}

TEST_CASE("a user-defined format runs in the ready-made CUDA step, bit for bit as on the CPU", "[gpu][custom]") {
  using policy = replay_policy<8, my_engine::mxfp4_format, fp16_format, round_stochastic>;
  require_bit_identical<policy, bfloat16_t>({{4, 24, 64, 2}, 3, 5, true, true, 72}, 40);
  gpu_scenario<replay_policy<16, my_engine::mxfp4_format, fp32_format>, float>({{4, 24, 64, 2}, 3, 5, true, true, 73}, 8,
                                                                                true, {0.5, 1e-5});
}

TEST_CASE("stochastic-rounding states do not depend on the launch configuration", "[gpu][precision]") {
  // The CPU runs one thread; the GPU blocks of 64 and of 256: all must give the same bytes.
  using policy = replay_policy<4, nvfp4_format, fp16_format, round_stochastic>;
  const mamba2_case c{{4, 24, 64, 2}, 3, 5, true, true, 57};
  require_bit_identical<policy, bfloat16_t, 64>(c, 260);
  require_bit_identical<policy, bfloat16_t, 256>(c, 260);
}
