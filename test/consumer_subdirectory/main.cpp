// SPDX-License-Identifier: Apache-2.0
// Uses the headers of a source tree added with add_subdirectory: a policy and its description.
#include <replayssm/replayssm.hpp>

#include <cstdio>

int main() {
  using policy = replayssm::replay_policy<16, replayssm::fp16_format, replayssm::fp32_format>;
  const auto name = replayssm::describe<policy>();
  std::printf("%s\n", name.c_str());
  return name.empty() ? 1 : 0;
}
