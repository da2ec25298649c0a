// SPDX-License-Identifier: Apache-2.0
// The Gated DeltaNet CUDA steps: against the float64 reference over many windows, bit for
// bit against the CPU path, speculative rounds, and device-side error reporting.
#include <cstring>

#include "../support/mamba2_scenario.hpp"
#include "gdn_device_runner.cuh"

using namespace replayssm;
using namespace replayssm_test;

namespace {

constexpr gdn_layer_shape qwen35_4b{32, 16, 128, 128};
constexpr gdn_layer_shape qwen35_122b{64, 16, 128, 128};
constexpr gdn_layer_shape odd_shape{3, 3, 64, 64};

template <class Policy, class Act, gdn_window Mode = gdn_window::corrected_values>
gdn_errors gpu_gdn_scenario(const gdn_case& c, int steps, bool stagger) {
  return run_gdn_scenario<Policy, Act, Mode>(c, steps, stagger, device_gdn_decode<Policy, Act, Mode>());
}

/// Runs `steps` decode steps on the CPU and the GPU from the same state and inputs and
/// requires identical bytes of outputs and checkpoints.
template <class Policy, class Act, gdn_window Mode = gdn_window::corrected_values>
void require_bit_identical(const gdn_case& c, int steps) {
  std::mt19937_64 rng(c.seed);
  gdn_inputs_host<Act> in(c, rng);
  host_gdn_state<Policy, Act, Mode> cpu_state(c.shape, c.num_slots), gpu_state(c.shape, c.num_slots);
  for (int slot = 0; slot < c.num_slots; ++slot) {
    const auto init = random_gdn_state(c.shape, rng);
    cpu_state.set_state(slot, init);
    gpu_state.set_state(slot, init);
    cpu_state.phase[size_t(slot)] = gpu_state.phase[size_t(slot)] = slot % Policy::window;
  }
  const std::vector<int32_t> slots = request_slots(c);
  std::vector<Act> o_cpu(size_t(c.batch) * c.shape.value_heads * c.shape.value_dim), o_gpu(o_cpu.size());
  for (int t = 0; t < steps; ++t) {
    in.draw(rng);
    gdn_params p;
    in.bind(p, c);
    p.slot_indices = slots.data();
    p.seed = c.seed;
    cpu_state.bind(p, true);
    p.o = o_cpu.data();
    REQUIRE(cpu::gdn_decode_step<Policy, Mode>(p).ok());
    gpu_state.bind(p, true);
    p.o = o_gpu.data();
    REQUIRE(device_gdn_decode<Policy, Act, Mode>()(p, gpu_state).ok());
    INFO("step " << t);
    REQUIRE(std::memcmp(o_cpu.data(), o_gpu.data(), o_cpu.size() * sizeof(Act)) == 0);
    REQUIRE(cpu_state.checkpoint_values(slots[0]) == gpu_state.checkpoint_values(slots[0]));
  }
}

}  // namespace

TEST_CASE("gpu gdn naive and replay match the reference over many windows", "[gpu][gdn]") {
  const gdn_case c{odd_shape, 3, 5, 11};
  for (const auto& e : {gpu_gdn_scenario<writeback_policy<fp32_format>, float>(c, 24, false),
                        gpu_gdn_scenario<replay_policy<8, fp32_format>, float>(c, 6 * 8, false),
                        gpu_gdn_scenario<replay_policy<8, fp32_format>, float, gdn_window::raw_inputs>(c, 6 * 8, false)}) {
    CHECK(e.output < 1e-5);
    CHECK(e.checkpoint < 1e-5);
  }
  CHECK(gpu_gdn_scenario<replay_policy<16, fp32_format>, float>(c, 3 * 16 + 5, true).output < 1e-5);
}

TEST_CASE("gpu gdn replay on the Qwen3.5 shapes", "[gpu][gdn][model]") {
  for (const auto& shape : {qwen35_4b, qwen35_122b}) {
    const auto e = gpu_gdn_scenario<replay_policy<16, fp32_format>, bfloat16_t>({shape, 4, 9, 5}, 3 * 16, false);
    CHECK(e.output < output_tolerance<bfloat16_t>());
    CHECK(e.checkpoint < 1e-5);
  }
}

TEST_CASE("gpu and cpu gdn steps are bit-identical", "[gpu][gdn]") {
  const gdn_case c{qwen35_4b, 3, 5, 17};
  require_bit_identical<writeback_policy<fp32_format>, bfloat16_t>(c, 3);
  require_bit_identical<replay_policy<16, fp32_format>, bfloat16_t>(c, 20);
  require_bit_identical<replay_policy<8, bf16_format, fp32_format, round_stochastic>, bfloat16_t,
                        gdn_window::raw_inputs>(c, 20);
  require_bit_identical<replay_policy<8, nvfp4_format, fp16_format>, float>({odd_shape, 3, 5, 19}, 20);
}

TEST_CASE("gpu gdn speculative rounds match sequential decoding", "[gpu][gdn][spec]") {
  using policy = replay_policy<8, fp32_format>;
  const gdn_case c{odd_shape, 3, 5, 41};
  run_gdn_spec_scenario(c, 4, 24, {1e-5, 1e-5}, device_gdn_spec_runners<policy, float>());
  run_gdn_spec_scenario(c, 4, 24, {1e-5, 1e-5}, device_gdn_spec_runners<policy, float, gdn_window::raw_inputs>());
  run_gdn_spec_scenario({qwen35_4b, 4, 9, 43}, 8, 10, {output_tolerance<bfloat16_t>(), 1e-5},
                        device_gdn_spec_runners<replay_policy<16, fp32_format>, bfloat16_t>());
}

TEST_CASE("the device reports bad gdn slots and cursors and skips their rows", "[gpu][gdn][validation]") {
  using policy = replay_policy<8, fp32_format>;
  const gdn_case c{odd_shape, 2, 3, 5};
  std::mt19937_64 rng(5);
  gdn_inputs_host<float> in(c, rng);
  in.draw(rng);
  host_gdn_state<policy, float> st(c.shape, c.num_slots);
  for (int s = 0; s < c.num_slots; ++s) st.set_state(s, random_gdn_state(c.shape, rng));
  std::vector<float> o(size_t(c.batch) * c.shape.value_heads * c.shape.value_dim, 7.0f);
  std::vector<int32_t> slots{5, -1};
  gdn_params p;
  in.bind(p, c);
  st.bind(p, false);
  p.o = o.data();
  p.slot_indices = slots.data();
  const auto before = st.checkpoint_values(0);
  status s = device_gdn_decode<policy, float>()(p, st);
  CHECK_THAT(s.message(), Catch::Matchers::Contains("slot index was outside"));
  CHECK(std::all_of(o.begin(), o.end(), [](float v) { return v == 7.0f; }));
  slots = {0, -1};
  st.cursors[1].length = 9;
  s = device_gdn_decode<policy, float>()(p, st);
  CHECK_THAT(s.message(), Catch::Matchers::Contains("window cursor held a length"));
  CHECK(st.checkpoint_values(0) == before);
}
