// SPDX-License-Identifier: Apache-2.0
// The CPU decode steps against the float64 reference: naive and replay, many windows,
// model shapes and odd shapes, staggered flushes.
#include "../support/mamba2_scenario.hpp"

using namespace replayssm;
using namespace replayssm_test;

namespace {

template <class Policy, class Act>
scenario_result cpu_scenario(const mamba2_case& c, int windows, bool stagger,
                             tolerances tol = {output_tolerance<Act>(), 1e-5}) {
  using naive_policy = writeback_policy<typename Policy::checkpoint_format>;
  return run_scenario<Policy, Act>(
      c, windows, stagger, tol,
      [](const mamba2_params& p, host_layer_state<naive_policy, Act>&) { return cpu::mamba2_decode_step<naive_policy>(p); },
      [](const mamba2_params& p, host_layer_state<Policy, Act>&) { return cpu::mamba2_decode_step<Policy>(p); });
}

const mamba2_layer_shape odd_shape{2, 17, 48, 1};
const mamba2_layer_shape nano_shape{96, 80, 128, 8};
const mamba2_layer_shape super_shape{128, 64, 128, 8};

}  // namespace

TEST_CASE("cpu replay matches the reference on an odd shape for every window", "[cpu][mamba2]") {
  const mamba2_case c{odd_shape, 3, 5, true, true, 11};
  cpu_scenario<replay_policy<1, fp32_format>, float>(c, 8, false);
  cpu_scenario<replay_policy<8, fp32_format>, float>(c, 8, false);
  cpu_scenario<replay_policy<16, fp32_format>, float>(c, 8, true);
  cpu_scenario<replay_policy<32, fp32_format>, float>(c, 8, true);
}

TEST_CASE("cpu replay matches the reference on Nemotron-3 shapes", "[cpu][mamba2][model]") {
  SECTION("Nano 96 x 80 x 128, G=8") {
    cpu_scenario<replay_policy<16, fp32_format>, float>({nano_shape, 2, 3, true, true, 21}, 8, true);
  }
  SECTION("Super 128 x 64 x 128, G=8") {
    cpu_scenario<replay_policy<16, fp32_format>, float>({super_shape, 1, 3, true, true, 22}, 8, false);
  }
}

TEST_CASE("cpu replay with low-precision activations and options", "[cpu][mamba2]") {
  const mamba2_layer_shape s{4, 24, 64, 2};
  SECTION("bf16 activations") { cpu_scenario<replay_policy<16, fp32_format>, bfloat16_t>({s, 3, 5, true, true, 31}, 8, true); }
  SECTION("fp16 activations") { cpu_scenario<replay_policy<8, fp32_format>, half_t>({s, 3, 5, true, true, 32}, 8, false); }
  SECTION("no gate, no softplus") { cpu_scenario<replay_policy<8, fp32_format>, float>({s, 3, 5, false, false, 33}, 8, true); }
}

TEST_CASE("an fp32 checkpoint after a flush is exact to fp32 rounding", "[cpu][mamba2]") {
  const auto r = cpu_scenario<replay_policy<16, fp32_format>, float>({{8, 32, 128, 2}, 2, 3, true, true, 41}, 10, false,
                                                                   {1e-5, 1e-5});
  // bf16-level agreement would be 1e-3; fp32 rounding over 160 steps stays near 1e-6.
  CHECK(r.max_state_error < 5e-6);
}
