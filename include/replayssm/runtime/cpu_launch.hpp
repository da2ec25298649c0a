// SPDX-License-Identifier: Apache-2.0
/// \file cpu_launch.hpp
/// How every recurrence's CPU launchers run a step: one head step per (request,
/// head) of the batch, serially, on a scratch buffer of their own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "replayssm/runtime/requests.hpp"
#include "replayssm/runtime/status.hpp"

namespace replayssm {
namespace cpu {
namespace detail {

/// Runs `head(b, h, slot, scratch)` for every (request, head) of `p` that is not padding,
/// with `scratch_bytes` of scratch; `who` starts the error message.
template <class Params, class HeadStep>
status for_each_request_head(const Params& p, size_t scratch_bytes, const char* who, HeadStep&& head) {
  std::vector<float> scratch(scratch_bytes / sizeof(float));
  uint32_t errors = 0;
  for (int32_t b = 0; b < p.batch; ++b) {
    const int32_t slot = request_slot(p, b);
    if (slot == p.pad_slot_id) continue;
    for (int32_t h = 0; h < p.heads; ++h) errors |= head(b, h, slot, scratch.data());
  }
  if (errors != 0) return status::error(std::string(who) + ": " + describe_step_errors(errors));
  return {};
}

}  // namespace detail
}  // namespace cpu
}  // namespace replayssm
