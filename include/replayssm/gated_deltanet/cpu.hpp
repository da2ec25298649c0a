// SPDX-License-Identifier: Apache-2.0
/// \file cpu.hpp
/// The Gated DeltaNet steps on the CPU: `cpu::decode_step<Policy>(p)` and
/// `cpu::verify_step<Policy>(p)` (runtime/cpu_steps.hpp) on `gdn_params`, from the same head
/// step as the CUDA kernels, run by `serial_executor`. A policy's window mode is its
/// `gdn_window_mode` (gated_deltanet/recurrence.hpp).
#pragma once

#include <cstddef>

#include "replayssm/gated_deltanet/head_step.hpp"
#include "replayssm/gated_deltanet/params.hpp"
#include "replayssm/gated_deltanet/snapshot.hpp"
#include "replayssm/gated_deltanet/validate.hpp"
#include "replayssm/replay/executor.hpp"
#include "replayssm/runtime/commit.hpp"
#include "replayssm/runtime/cpu_steps.hpp"

namespace replayssm {
namespace cpu {

/// How one (request, value head) of a Gated DeltaNet step runs on the CPU (`head_steps`).
template <class Act>
struct head_steps<gdn_params<Act>> {
  using params = gdn_params<Act>;
  static constexpr const char* name = "gated_deltanet";
  template <class Policy>
  static size_t scratch_bytes(const params& p) {
    return gdn_scratch_layout::make(p.shape(), Policy::window, p.tokens).bytes();
  }
  template <class StateFormat>
  static size_t snapshot_scratch_bytes(const params& p) {
    return gdn_scratch_layout::make(p.shape(), 0, p.tokens).bytes();
  }
  template <class Policy, step_kind Kind>
  static uint32_t step(const params& p, int32_t b, int32_t h, int32_t slot, float* scratch) {
    const gdn_head_views<Policy, Act> v(p, b, h, slot);
    return gdn_head_step<Kind>(serial_executor{}, v.in, v.state, p.shape(), scratch);
  }
  template <class StateFormat>
  static uint32_t snapshot(const params& p, int32_t b, int32_t h, int32_t slot, float* scratch) {
    return gdn_snapshot_head_step<StateFormat>(serial_executor{}, p, b, h, slot, scratch);
  }
};

}  // namespace cpu
}  // namespace replayssm
