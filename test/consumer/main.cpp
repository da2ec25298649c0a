// SPDX-License-Identifier: Apache-2.0
// Uses the installed headers: a policy, its description and its traffic model.
#include <replayssm/replayssm.hpp>

#include <cstdio>

int main() {
  using policy = replayssm::replay_policy<16, replayssm::fp16_format, replayssm::fp32_format>;
  const auto traffic = replayssm::state_traffic_per_step<policy>();
  std::printf("%s: %.3f bytes per element per step\n", replayssm::describe<policy>().c_str(), traffic.total());
  return traffic.total() > 0 ? 0 : 1;
}
