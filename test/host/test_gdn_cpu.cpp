// SPDX-License-Identifier: Apache-2.0
// The Gated DeltaNet steps on the CPU: naive write-back and replay (both window modes)
// against the float64 reference over many windows, on the Qwen3.5 shapes and an odd one.
#include <catch2/catch.hpp>

#include "../support/gdn_harness.hpp"
#include "../support/gdn_spec_scenario.hpp"
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
    const auto e = cpu_gdn_scenario<writeback_policy<fp32_format>, float>({shape, 3, 5, 7}, 40, false);
    CHECK(e.output < 1e-5);
    CHECK(e.checkpoint < 1e-5);
  }
}

TEST_CASE("gdn replay with an fp32 checkpoint keeps fp32 accuracy over many windows", "[gdn]") {
  const gdn_case c{odd_shape, 3, 5, 21};
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
    const auto e = cpu_gdn_scenario<policy, bfloat16_t>({shape, 2, 3, 5}, 2 * 16, false);
    CHECK(e.output < output_tolerance<bfloat16_t>());
    CHECK(e.checkpoint < 1e-5);
  }
}

TEST_CASE("gdn split precision: raw-input windows keep the read copy's error out of the checkpoint", "[gdn]") {
  // A bf16 read copy beside an fp32 checkpoint. Outputs carry the read copy's rounding
  // either way; the checkpoint does only when the window stores u computed from it.
  using policy = replay_policy<8, bf16_format, fp32_format>;
  const gdn_case c{odd_shape, 3, 5, 33};
  const auto corrected = cpu_gdn_scenario<policy, float>(c, 8 * 8, false);
  const auto raw = cpu_gdn_scenario<policy, float, gdn_window::raw_inputs>(c, 8 * 8, false);
  INFO("corrected: output " << corrected.output << " checkpoint " << corrected.checkpoint);
  INFO("raw inputs: output " << raw.output << " checkpoint " << raw.checkpoint);
  CHECK(corrected.output < 2e-2);
  CHECK(raw.output < 2e-2);
  CHECK(raw.checkpoint < 1e-5);
  CHECK(corrected.checkpoint > 10 * raw.checkpoint);
}

TEST_CASE("gdn speculative rounds match sequential decoding of the accepted tokens", "[gdn][spec]") {
  using policy = replay_policy<8, fp32_format>;
  const tolerances tol{1e-5, 1e-5};
  const gdn_case c{odd_shape, 3, 5, 41};
  SECTION("corrected values") {
    run_gdn_spec_scenario(c, 4, 24, tol, cpu_gdn_spec_runners<policy, float>());
  }
  SECTION("raw inputs") {
    run_gdn_spec_scenario(c, 4, 24, tol, cpu_gdn_spec_runners<policy, float, gdn_window::raw_inputs>());
  }
  SECTION("the Qwen3.5-4B shape, eight drafts, a window of 16") {
    const gdn_case big{qwen35_4b, 2, 3, 43};
    run_gdn_spec_scenario(big, 8, 10, {output_tolerance<bfloat16_t>(), 1e-5},
                          cpu_gdn_spec_runners<replay_policy<16, fp32_format>, bfloat16_t>());
  }
}
