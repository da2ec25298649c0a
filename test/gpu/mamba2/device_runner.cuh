// SPDX-License-Identifier: Apache-2.0
// Mamba-2 on the device for the GPU tests: its buffers and decode launcher for
// ../device_runner.cuh, and its decode scenario with both steps on the device.
#pragma once

#include "../../support/mamba2/decode_scenario.hpp"
#include "../device_runner.cuh"

namespace replayssm_test {

template <class Act>
struct device_recurrence<mamba2_params<Act>> {
  template <class Policy>
  static void mirror(device_mirror& m, mamba2_params<Act>& p, const mamba2_host_state<Policy, Act>& st) {
    const size_t a = sizeof(Act), rows = size_t(p.batch) * size_t(p.tokens),
                 heads = size_t(st.shape.heads) * sizeof(float);
    p.x = m.upload(p.x, rows * p.x_batch_stride * a);
    p.z = m.upload(p.z, rows * p.z_batch_stride * a);
    p.y = m.mirror(p.y, rows * p.y_batch_stride * a);
    p.dt = m.upload(p.dt, rows * p.dt_batch_stride * a);
    p.B = m.upload(p.B, rows * p.B_batch_stride * a);
    p.C = m.upload(p.C, rows * p.C_batch_stride * a);
    p.A = m.upload(p.A, heads);
    p.D = m.upload(p.D, heads);
    p.dt_bias = m.upload(p.dt_bias, heads);
    p.window_x = m.mirror(p.window_x, st.sizes.window_x);
    p.window_B = m.mirror(p.window_B, st.sizes.window_B);
    p.window_dt = m.mirror(p.window_dt, st.sizes.window_dt);
  }
  template <class Policy, int Threads>
  static status decode(const mamba2_params<Act>& p) {
    if (!lanes_copy_engine) return replayssm::cuda::detail::tokens_step<Policy, Threads, step_kind::decode>(p, nullptr);
    const warp::copy_engine lanes = warp::copy_engine::lanes;
    return replayssm::cuda::detail::tokens_step<Policy, Threads, step_kind::decode>(p, nullptr, &lanes);
  }
  /// Set by a test: the warp steps copy with the lanes engine (the fallback of devices
  /// without bulk copies) instead of the bulk engine.
  static inline bool lanes_copy_engine = false;
};

/// run_mamba2_scenario with both steps on the device.
template <class Policy, class Act>
mamba2_scenario_result gpu_mamba2_scenario(const mamba2_case& c, int windows, bool stagger,
                                           tolerances tol = {output_tolerance<Act>(), 1e-5}) {
  using writeback_policy = writeback_policy<typename Policy::checkpoint_format>;
  return run_mamba2_scenario<Policy, Act>(c, windows, stagger, tol,
                                          device_decode<mamba2_host_state<writeback_policy, Act>>(),
                                          device_decode<mamba2_host_state<Policy, Act>>());
}

}  // namespace replayssm_test
