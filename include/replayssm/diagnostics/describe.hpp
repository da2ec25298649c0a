// SPDX-License-Identifier: Apache-2.0
/// \file describe.hpp
/// A policy's mode as text, for logs and reports.
#pragma once

#include <string>

#include "replayssm/policy/policy.hpp"

namespace replayssm {

/// The active mode as text, e.g.
/// `replay W=16 read=nvfp4 checkpoint=fp16 rounding=stochastic(philox-10)`.
template <class Policy>
std::string describe() {
  std::string rounding = Policy::rounding::name;
  if constexpr (Policy::is_writeback) {
    return std::string("write-back state=") + Policy::checkpoint_format::name + " rounding=" + rounding;
  } else {
    std::string text = "replay W=" + std::to_string(Policy::window);
    if constexpr (Policy::shared_state) {
      text += std::string(" shared=") + Policy::checkpoint_format::name;
    } else {
      text += std::string(" read=") + Policy::read_format::name + " checkpoint=" + Policy::checkpoint_format::name;
    }
    return text + " rounding=" + rounding;
  }
}

}  // namespace replayssm
