// SPDX-License-Identifier: Apache-2.0
// Gated DeltaNet speculative decoding on the device: verify + commit and the snapshot
// baseline against the float64 reference, in both window modes and on the Qwen3.5-4B shape
// (drafts read on the warp read up to 4, on the head step past it), and bit for bit against
// the CPU path.
#include "device_runner.cuh"

using namespace replayssm;
using namespace replayssm_test;

TEST_CASE("gpu gdn verify + commit equals sequential decoding of the accepted tokens", "[gpu][gdn][spec]") {
  using policy = replay_policy<8, fp32_format>;
  const gdn_case c{gdn_odd_shape, 3, 5, 41};
  gpu_spec<gdn_harness, policy, float>(c, 4, 24);
  gpu_spec<gdn_harness, gdn_policy<policy, gdn_window::raw_inputs>, float>(c, 4, 24);
  gpu_spec<gdn_harness, replay_policy<16, fp32_format>, bfloat16_t>({qwen35_4b, 4, 9, 43}, 8, 10);
}

TEST_CASE("gpu gdn verify + commit on the warp read equals sequential decoding", "[gpu][gdn][spec][model]") {
  gpu_spec<gdn_harness, replay_policy<16, fp32_format>, float>({qwen35_4b, 5, 9, 44}, 4, 40);
  gpu_spec<gdn_harness, gdn_policy<replay_policy<8, fp32_format>, gdn_window::raw_inputs>, bfloat16_t>(
      {qwen35_4b, 3, 5, 45}, 3, 30);
}

TEST_CASE("gpu and cpu gdn verify + commit are bit-identical", "[gpu][gdn][spec]") {
  const gdn_case c{qwen35_4b, 3, 5, 46};
  require_spec_bit_identical<gdn_harness, replay_policy<16, fp32_format>, float>(c, 4, 40);
  require_spec_bit_identical<gdn_harness, replay_policy<8, nvfp4_format, fp16_format, round_stochastic>, bfloat16_t>(
      c, 4, 30);
  using raw_bf16_read = gdn_policy<replay_policy<8, bf16_format, fp32_format>, gdn_window::raw_inputs>;
  require_spec_bit_identical<gdn_harness, raw_bf16_read, bfloat16_t>(c, 3, 30);
  require_spec_bit_identical<gdn_harness, replay_policy<16, fp32_format>, bfloat16_t>({gdn_odd_shape, 3, 5, 47}, 4, 30);
}

TEST_CASE("the device reports bad gdn draft and acceptance counts and leaves their state alone",
          "[gpu][gdn][spec][validation]") {
  require_device_rejects_bad_counts<gdn_harness, replay_policy<8, fp32_format>>({qwen35_4b, 2, 3, 48});
}
