// SPDX-License-Identifier: Apache-2.0
/// \file cpu_backend.hpp
/// The CPU launchers, for `mamba2_step` and `gdn_step` (steps.hpp).
#pragma once

#include <cstdint>

#include "steps.hpp"

namespace replayssm_python {

struct cpu_backend {
  using activations = type_list<float, rs::half_t, rs::bfloat16_t>;
  using policy_list = policies;
  template <class Policy, class Params>
  static rs::status decode(const Params& p, uintptr_t) {
    return rs::cpu::decode_step<Policy>(p);
  }
  template <class Policy, class Params>
  static rs::status verify(const Params& p, uintptr_t) {
    return rs::cpu::verify_step<Policy>(p);
  }
};

}  // namespace replayssm_python
