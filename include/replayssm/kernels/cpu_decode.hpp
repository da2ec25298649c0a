// SPDX-License-Identifier: Apache-2.0
/// \file cpu_decode.hpp
/// Layer 6: the CPU implementation of the Mamba-2 decode steps, from the same primitives
/// as the CUDA kernels (run by `serial_executor`).
#pragma once

#include <vector>

#include "replayssm/kernels/mamba2_params.hpp"
#include "replayssm/kernels/mamba2_validate.hpp"
#include "replayssm/kernels/status.hpp"
#include "replayssm/replay/executor.hpp"
#include "replayssm/replay/mamba2_head_step.hpp"

namespace replayssm {
namespace cpu {

/// One decode step for every request of `p` (host memory), under `Policy`.
template <class Policy>
[[nodiscard]] status mamba2_decode_step(const mamba2_params& p) {
  if (status s = validate_mamba2<Policy>(p, /*host_memory=*/true); !s) return s;
  const mamba2_shape shape{p.head_dim, p.state_dim};
  std::vector<float> scratch(mamba2_scratch_layout<Policy>::make(shape).bytes() / sizeof(float));
  uint32_t errors = 0;
  dispatch_dtype(p.act_dtype, [&](auto act) {
    using Act = decltype(act);
    for (int32_t b = 0; b < p.batch; ++b) {
      const int32_t slot = p.slot_indices != nullptr ? p.slot_indices[b] : b;
      if (slot == p.pad_slot_id) continue;
      for (int32_t h = 0; h < p.heads; ++h) {
        const mamba2_head_views<Policy, Act> v(p, b, h, slot);
        errors |= mamba2_head_step(serial_executor{}, v.in, v.state, shape, scratch.data());
      }
    }
  });
  if (errors != 0) return status::error("mamba2: " + describe_step_errors(errors));
  return {};
}

/// The conventional step: read, update and write the whole state.
template <class StateFormat, class Rounding = round_nearest_even>
[[nodiscard]] status naive_decode_step(const mamba2_params& p) {
  return mamba2_decode_step<writeback_policy<StateFormat, Rounding>>(p);
}

/// The replay step: output from checkpoint + window, flush when the window fills.
template <class Policy>
[[nodiscard]] status replay_decode_step(const mamba2_params& p) {
  static_assert(!Policy::is_writeback, "replay_decode_step needs a window longer than 1");
  return mamba2_decode_step<Policy>(p);
}

}  // namespace cpu
}  // namespace replayssm
