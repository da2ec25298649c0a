// SPDX-License-Identifier: Apache-2.0
// Must fail to compile with one clear message: writeback_policy takes a state format, not a
// policy.
#include <replayssm/mamba2/cpu.hpp>

int main() {
  using policy = replayssm::writeback_policy<replayssm::replay_policy<16, replayssm::fp32_format>>;
  replayssm::mamba2_params<float> p;
  return replayssm::cpu::decode_step<policy>(p).ok();
}
