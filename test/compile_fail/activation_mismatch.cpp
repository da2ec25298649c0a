// SPDX-License-Identifier: Apache-2.0
// Must fail to compile: params of bf16 activations take no float buffers (a dtype tag used
// to let this through and corrupt the outputs, state and window).
#include <replayssm/mamba2/params.hpp>

int main() {
  static const float x[16] = {};
  replayssm::mamba2_params<replayssm::bfloat16_t> p;
  p.x = x;
  return p.batch;
}
