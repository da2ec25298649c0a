// SPDX-License-Identifier: Apache-2.0
// The Gated DeltaNet decode steps on the CPU against the float64 reference: write-back and
// replay (both window modes) over many windows, on the Qwen3.5 shapes and an odd one, and
// the split precision of the read copy and the checkpoint.
#include "../../support/gated_deltanet/decode_scenario.hpp"

using namespace replayssm;
using namespace replayssm_test;

TEST_CASE("gdn write-back matches the float64 reference", "[gdn][decode]") {
  for (const auto& shape : {gdn_odd_shape, gdn_layer_shape{4, 2, 32, 48}}) {
    const auto e = cpu_gdn_scenario<writeback_policy<fp32_format>, float>({shape, 3, 5, 7}, 40, false);
    CHECK(e.output < 1e-5);
    CHECK(e.checkpoint < 1e-5);
  }
}

TEST_CASE("gdn replay with an fp32 checkpoint keeps fp32 accuracy over many windows", "[gdn][decode]") {
  const gdn_case c{gdn_odd_shape, 3, 5, 21};
  using policy = replay_policy<8, fp32_format>;
  SECTION("corrected values") {
    const auto e = cpu_gdn_scenario<policy, float>(c, 6 * 8, false);
    CHECK(e.output < 1e-5);
    CHECK(e.checkpoint < 1e-5);
  }
  SECTION("raw inputs") {
    const auto e = cpu_gdn_scenario<gdn_policy<policy, gdn_window::raw_inputs>, float>(c, 6 * 8, false);
    CHECK(e.output < 1e-5);
    CHECK(e.checkpoint < 1e-5);
  }
  SECTION("staggered flush phases") {
    CHECK(cpu_gdn_scenario<policy, float>(c, 5 * 8 + 3, true).output < 1e-5);
  }
}

TEST_CASE("gdn replay on the Qwen3.5 shapes", "[gdn][decode][model]") {
  using policy = replay_policy<16, fp32_format>;
  for (const auto& shape : {qwen35_4b, qwen35_122b}) {
    const auto e = cpu_gdn_scenario<policy, bfloat16_t>({shape, 2, 3, 5}, 2 * 16, false);
    CHECK(e.output < output_tolerance<bfloat16_t>());
    CHECK(e.checkpoint < 1e-5);
  }
}

TEST_CASE("gdn split precision: raw-input windows keep the read copy's error out of the checkpoint",
          "[gdn][decode][precision]") {
  // A bf16 read copy beside an fp32 checkpoint. Outputs carry the read copy's rounding
  // either way; the checkpoint does only when the window stores u computed from it.
  using policy = replay_policy<8, bf16_format, fp32_format>;
  const gdn_case c{gdn_odd_shape, 3, 5, 33};
  const auto corrected = cpu_gdn_scenario<policy, float>(c, 8 * 8, false);
  const auto raw = cpu_gdn_scenario<gdn_policy<policy, gdn_window::raw_inputs>, float>(c, 8 * 8, false);
  INFO("corrected: output " << corrected.output << " checkpoint " << corrected.checkpoint);
  INFO("raw inputs: output " << raw.output << " checkpoint " << raw.checkpoint);
  CHECK(corrected.output < 2e-2);
  CHECK(raw.output < 2e-2);
  CHECK(raw.checkpoint < 1e-5);
  CHECK(corrected.checkpoint > 10 * raw.checkpoint);
}
