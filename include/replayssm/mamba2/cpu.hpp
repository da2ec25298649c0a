// SPDX-License-Identifier: Apache-2.0
/// \file cpu.hpp
/// The Mamba-2 steps on the CPU: `cpu::decode_step<Policy>(p)` and `cpu::verify_step<Policy>(p)`
/// (runtime/cpu_steps.hpp) on `mamba2_params`, from the same head step as the CUDA kernels,
/// run by `serial_executor`.
#pragma once

#include <cstddef>

#include "replayssm/mamba2/head_step.hpp"
#include "replayssm/mamba2/params.hpp"
#include "replayssm/mamba2/snapshot.hpp"
#include "replayssm/mamba2/validate.hpp"
#include "replayssm/replay/executor.hpp"
#include "replayssm/runtime/commit.hpp"
#include "replayssm/runtime/cpu_steps.hpp"

namespace replayssm {
namespace cpu {

/// How one (request, head) of a Mamba-2 step runs on the CPU (`head_steps`).
template <class Act>
struct head_steps<mamba2_params<Act>> {
  using params = mamba2_params<Act>;
  static constexpr const char* name = "mamba2";
  template <class Policy>
  static size_t scratch_bytes(const params& p) {
    return mamba2_scratch_layout<Policy>::make(p.shape(), p.tokens).bytes();
  }
  template <class StateFormat>
  static size_t snapshot_scratch_bytes(const params& p) {
    return mamba2_scratch_layout<writeback_policy<StateFormat>>::make(p.shape(), 1).bytes();
  }
  template <class Policy, step_kind Kind>
  static uint32_t step(const params& p, int32_t b, int32_t h, int32_t slot, float* scratch) {
    const mamba2_head_views<Policy, Act> v(p, b, h, slot);
    return mamba2_head_step<Kind>(serial_executor{}, v.in, v.state, p.shape(), scratch);
  }
  template <class StateFormat>
  static uint32_t snapshot(const params& p, int32_t b, int32_t h, int32_t slot, float* scratch) {
    return mamba2_snapshot_head_step<StateFormat>(serial_executor{}, p, b, h, slot, scratch);
  }
};

}  // namespace cpu
}  // namespace replayssm
