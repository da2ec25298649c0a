// SPDX-License-Identifier: Apache-2.0
// Gated DeltaNet speculative decoding on the CPU: verify + commit against sequential
// decoding of the accepted tokens, in both window modes and on the Qwen3.5-4B shape, the
// snapshot baseline beside it. Bad speculative input: test_validation.cpp.
#include "../../support/gated_deltanet/harness.hpp"
#include "../../support/spec_round.hpp"

using namespace replayssm;
using namespace replayssm_test;

TEST_CASE("gdn verify + commit equals sequential decoding of the accepted tokens", "[gdn][spec]") {
  using policy = replay_policy<8, fp32_format>;
  const gdn_case c{gdn_odd_shape, 3, 5, 41};
  SECTION("corrected values") { cpu_spec<gdn_harness, policy, float>(c, 4, 24); }
  SECTION("raw inputs") { cpu_spec<gdn_harness, gdn_policy<policy, gdn_window::raw_inputs>, float>(c, 4, 24); }
  SECTION("the Qwen3.5-4B shape, eight drafts, a window of 16") {
    cpu_spec<gdn_harness, replay_policy<16, fp32_format>, bfloat16_t>({qwen35_4b, 2, 3, 43}, 8, 10);
  }
}
