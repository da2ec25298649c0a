// SPDX-License-Identifier: Apache-2.0
// The Gated DeltaNet steps on the CPU: naive write-back and replay (both window modes)
// against the float64 reference over many windows, on the Qwen3.5 shapes and an odd one.
#include <catch2/catch.hpp>

#include "../support/gdn_harness.hpp"
#include "../support/mamba2_scenario.hpp"

using namespace replayssm;
using namespace replayssm_test;

namespace {

constexpr gdn_layer_shape qwen35_4b{32, 16, 128, 128};
constexpr gdn_layer_shape qwen35_122b{64, 16, 128, 128};
constexpr gdn_layer_shape odd_shape{3, 3, 64, 64};

template <class Policy, class Act, gdn_window Mode = gdn_window::corrected_values>
gdn_errors cpu_gdn_scenario(const gdn_case& c, int steps, bool stagger) {
  return run_gdn_scenario<Policy, Act, Mode>(c, steps, stagger, cpu_gdn_decode<Policy, Act, Mode>());
}

}  // namespace

TEST_CASE("gdn naive write-back matches the float64 reference", "[gdn]") {
  for (const auto& shape : {odd_shape, gdn_layer_shape{4, 2, 32, 48}}) {
    const auto e = cpu_gdn_scenario<writeback_policy<fp32_format>, float>({shape, 3, 4, 7}, 40, false);
    CHECK(e.output < 1e-5);
    CHECK(e.checkpoint < 1e-5);
  }
}

TEST_CASE("gdn replay with an fp32 checkpoint keeps fp32 accuracy over many windows", "[gdn]") {
  const gdn_case c{odd_shape, 3, 4, 21};
  using policy = replay_policy<8, fp32_format>;
  SECTION("corrected values") {
    const auto e = cpu_gdn_scenario<policy, float>(c, 6 * 8, false);
    CHECK(e.output < 1e-5);
    CHECK(e.checkpoint < 1e-5);
  }
  SECTION("raw inputs") {
    const auto e = cpu_gdn_scenario<policy, float, gdn_window::raw_inputs>(c, 6 * 8, false);
    CHECK(e.output < 1e-5);
    CHECK(e.checkpoint < 1e-5);
  }
  SECTION("staggered flush phases") {
    CHECK(cpu_gdn_scenario<policy, float>(c, 5 * 8 + 3, true).output < 1e-5);
  }
}

TEST_CASE("gdn replay on the Qwen3.5 shapes", "[gdn]") {
  using policy = replay_policy<16, fp32_format>;
  for (const auto& shape : {qwen35_4b, qwen35_122b}) {
    const auto e = cpu_gdn_scenario<policy, bfloat16_t>({shape, 2, 2, 5}, 2 * 16, false);
    CHECK(e.output < output_tolerance<bfloat16_t>());
    CHECK(e.checkpoint < 1e-5);
  }
}
