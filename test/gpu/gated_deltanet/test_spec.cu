// SPDX-License-Identifier: Apache-2.0
// Gated DeltaNet speculative decoding on the device: verify + commit and the snapshot
// baseline against the float64 reference, in both window modes and on the Qwen3.5-4B shape.
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
