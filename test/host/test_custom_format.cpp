// SPDX-License-Identifier: Apache-2.0
// A format defined outside the library (examples/custom_policy/mxfp4_format.hpp) works in
// the policy, the primitives and the ready-made CPU step without any change to the library.
#include <cmath>

#include "../../examples/custom_policy/mxfp4_format.hpp"
#include "../support/mamba2/decode_scenario.hpp"

using namespace replayssm;
using namespace replayssm_test;
using my_engine::mxfp4_format;

TEST_CASE("a user-defined format models the state-format concept", "[custom]") {
  STATIC_REQUIRE(state_format_v<mxfp4_format>);
  CHECK(describe<replay_policy<16, mxfp4_format, fp16_format, round_stochastic>>() ==
        "replay W=16 read=mxfp4 checkpoint=fp16 rounding=stochastic(philox-10)");
  CHECK(mamba2_buffers<replay_policy<16, mxfp4_format, fp16_format>>({4, 16, 64, 1}, 1, dtype::f32).read_copy_total() ==
        size_t(4) * 16 * 64 * 17 / 32);
}

TEST_CASE("the user-defined format round-trips its own grid and bounds its error", "[custom]") {
  std::mt19937 rng(3);
  std::normal_distribution<float> unit(0.0f, 1.0f);
  alignas(16) uint8_t data[16];
  uint8_t scale[1];
  for (int trial = 0; trial < 1000; ++trial) {
    float in[32], out[32], again[32];
    for (float& v : in) v = unit(rng) * std::ldexp(1.0f, trial % 40 - 20);
    mxfp4_format::encode<round_nearest_even>(in, nullptr, data, scale);
    mxfp4_format::decode(data, scale, out);
    float amax = 0;
    for (float v : in) amax = std::max(amax, std::fabs(v));
    for (int i = 0; i < 32; ++i) {
      // Half a step of the block's largest binade: the scale is 2^(floor(log2 amax) - 2)
      // and E2M1 steps are 2 there, so the error is at most one scale, plus saturation
      // above 6 scales (up to 2 more).
      const float s = mxfp4_format::scale_value(scale[0]);
      REQUIRE(std::fabs(out[i] - in[i]) <= 2.0f * s);
    }
    // A decoded block is on its own grid: it encodes back to itself.
    mxfp4_format::encode<round_nearest_even>(out, nullptr, data, scale);
    mxfp4_format::decode(data, scale, again);
    for (int i = 0; i < 32; ++i) REQUIRE(again[i] == out[i]);
    REQUIRE(amax > 0);
  }
}

TEST_CASE("the user-defined format runs in the ready-made CPU step", "[custom][mamba2]") {
  // Read copy in MXFP4 (one mantissa bit: 2^-2 per element relative to the block's
  // largest binade), checkpoint in FP32 or FP16: outputs within twice that, the FP32
  // checkpoint exact to float rounding.
  const mamba2_case c{{4, 24, 64, 2}, 3, 5, true, true, 71};
  cpu_mamba2_scenario<replay_policy<16, mxfp4_format, fp32_format>, float>(c, 8, true, {0.5, 1e-5});
  cpu_mamba2_scenario<replay_policy<16, mxfp4_format, fp32_format, round_stochastic>, float>(c, 8, false, {0.5, 1e-5});
  cpu_mamba2_scenario<replay_policy<8, mxfp4_format, fp16_format, round_stochastic>, bfloat16_t>(c, 8, true,
                                                                                                 {0.5, 4e-3});
}
