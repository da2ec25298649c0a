// SPDX-License-Identifier: Apache-2.0
/// \file warp_role.hpp
/// What a warp does with its rows of a head in a replay step, read or flush, for every
/// recurrence's warp steps and for the launch geometry chosen per role
/// (runtime/gpu_tuning.hpp). Host and device.
#pragma once

#include <cstdint>

#include "replayssm/config.hpp"
#include "replayssm/replay/step_plan.hpp"

namespace replayssm {
namespace warp {

/// What a warp's step does with its rows of a head; the step's plan decides it (`role_of`).
enum class warp_role : uint8_t {
  read,   ///< the window does not fill: y from the read copy and the window, no state written
  flush,  ///< the window fills (every write-back step): the checkpoint formed, y from it
};

/// The role `plan` gives the warps of a head's step.
REPLAYSSM_HOST_DEVICE warp_role role_of(const step_plan& plan) {
  return plan.writes_checkpoint ? warp_role::flush : warp_role::read;
}

}  // namespace warp
}  // namespace replayssm
