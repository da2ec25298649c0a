// SPDX-License-Identifier: Apache-2.0
// Must fail to compile with one clear message: the write-back step takes a state format,
// not a policy.
#include <replayssm/mamba2/cpu.hpp>

int main() {
  replayssm::mamba2_params<float> p;
  return replayssm::cpu::writeback_decode_step<replayssm::replay_policy<16, replayssm::fp32_format>>(p).ok();
}
