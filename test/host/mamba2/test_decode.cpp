// SPDX-License-Identifier: Apache-2.0
// The Mamba-2 decode steps on the CPU against the float64 reference: writeback and replay,
// many windows, model shapes and odd shapes, staggered flushes, every precision split.
#include <cmath>

#include "../../support/mamba2/decode_scenario.hpp"

using namespace replayssm;
using namespace replayssm_test;

TEST_CASE("mamba2 replay matches the reference on an odd shape for every window", "[mamba2][decode]") {
  const mamba2_case c{mamba2_odd_shape, 3, 5, true, true, 11};
  cpu_mamba2_scenario<replay_policy<1, fp32_format>, float>(c, 8, false);
  cpu_mamba2_scenario<replay_policy<8, fp32_format>, float>(c, 8, false);
  cpu_mamba2_scenario<replay_policy<16, fp32_format>, float>(c, 8, true);
  cpu_mamba2_scenario<replay_policy<32, fp32_format>, float>(c, 8, true);
}

TEST_CASE("mamba2 replay matches the reference on Nemotron-3 shapes", "[mamba2][decode][model]") {
  SECTION("Nano 96 x 80 x 128, G=8") {
    cpu_mamba2_scenario<replay_policy<16, fp32_format>, float>({nemotron3_nano, 2, 3, true, true, 21}, 8, true);
  }
  SECTION("Super 128 x 64 x 128, G=8") {
    cpu_mamba2_scenario<replay_policy<16, fp32_format>, float>({nemotron3_super, 1, 3, true, true, 22}, 8, false);
  }
}

TEST_CASE("mamba2 replay with low-precision activations and options", "[mamba2][decode]") {
  const mamba2_layer_shape s{4, 24, 64, 2};
  SECTION("bf16 activations") {
    cpu_mamba2_scenario<replay_policy<16, fp32_format>, bfloat16_t>({s, 3, 5, true, true, 31}, 8, true);
  }
  SECTION("fp16 activations") {
    cpu_mamba2_scenario<replay_policy<8, fp32_format>, half_t>({s, 3, 5, true, true, 32}, 8, false);
  }
  SECTION("no gate, no softplus") {
    cpu_mamba2_scenario<replay_policy<8, fp32_format>, float>({s, 3, 5, false, false, 33}, 8, true);
  }
}

TEST_CASE("mamba2: an fp32 checkpoint after a flush is exact to fp32 rounding", "[mamba2][decode]") {
  const auto r = cpu_mamba2_scenario<replay_policy<16, fp32_format>, float>({{8, 32, 128, 2}, 2, 3, true, true, 41}, 10,
                                                                            false, {1e-5, 1e-5});
  // bf16-level agreement would be 1e-3; fp32 rounding over 160 steps stays near 1e-6.
  CHECK(r.max_state_error < 5e-6);
}

namespace {

template <class Read, class Checkpoint, class Rounding>
void split_scenario() {
  using policy = replay_policy<16, Read, Checkpoint, Rounding>;
  const int windows = 8;
  INFO(describe<policy>());
  cpu_mamba2_scenario<policy, float>({{4, 24, 64, 2}, 3, 5, true, true, 61}, windows, true,
                                     split_bounds<policy>(windows));
}

template <class Checkpoint, class Rounding, class... Reads>
void split_scenarios() {
  (split_scenario<Reads, Checkpoint, Rounding>(), ...);
}

}  // namespace

TEST_CASE("mamba2: every read, checkpoint and rounding combination stays within its bound",
          "[mamba2][decode][precision]") {
  SECTION("fp32 checkpoint") {
    split_scenarios<fp32_format, round_nearest_even, fp16_format, bf16_format, fp8_e4m3_format, nvfp4_format>();
    split_scenarios<fp32_format, round_stochastic, fp16_format, bf16_format, fp8_e4m3_format, nvfp4_format>();
  }
  SECTION("fp16 checkpoint") {
    split_scenarios<fp16_format, round_nearest_even, fp16_format, fp8_e4m3_format, nvfp4_format>();
    split_scenarios<fp16_format, round_stochastic, fp16_format, fp8_e4m3_format, nvfp4_format>();
  }
  SECTION("bf16 checkpoint") {
    split_scenarios<bf16_format, round_nearest_even, bf16_format, fp8_e4m3_format, nvfp4_format>();
    split_scenarios<bf16_format, round_stochastic, bf16_format, fp8_e4m3_format, nvfp4_format>();
  }
}
