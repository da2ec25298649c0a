// SPDX-License-Identifier: Apache-2.0
// Must fail to compile with one clear message: the steps take a policy, not a state format.
#include <replayssm/mamba2/cpu.hpp>

int main() {
  replayssm::mamba2_params<float> p;
  return replayssm::cpu::decode_step<replayssm::fp32_format>(p).ok();
}
