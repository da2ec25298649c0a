// SPDX-License-Identifier: Apache-2.0
// Gated DeltaNet on the device for the GPU tests: its buffers and decode launcher for
// ../device_runner.cuh, and its decode scenario on the device.
#pragma once

#include "../../support/gated_deltanet/decode_scenario.hpp"
#include "../device_runner.cuh"

namespace replayssm_test {

template <class Act>
struct device_recurrence<gdn_params<Act>> {
  template <class Policy>
  static void mirror(device_mirror& m, gdn_params<Act>& p, const gdn_host_state<Policy, Act>& st) {
    const size_t a = sizeof(Act), rows = size_t(p.batch) * size_t(p.tokens),
                 heads = size_t(st.shape.value_heads) * sizeof(float);
    p.q = m.upload(p.q, rows * p.q_batch_stride * a);
    p.k = m.upload(p.k, rows * p.k_batch_stride * a);
    p.v = m.upload(p.v, rows * p.v_batch_stride * a);
    p.o = m.mirror(p.o, rows * p.o_batch_stride * a);
    p.a = m.upload(p.a, rows * p.a_batch_stride * a);
    p.b = m.upload(p.b, rows * p.b_batch_stride * a);
    p.A_log = m.upload(p.A_log, heads);
    p.dt_bias = m.upload(p.dt_bias, heads);
    p.window_u = m.mirror(p.window_u, st.sizes.window_u);
    p.window_k = m.mirror(p.window_k, st.sizes.window_k);
    p.window_g = m.mirror(p.window_g, st.sizes.window_g);
    p.window_v = m.mirror(p.window_v, st.sizes.window_v);
    p.window_beta = m.mirror(p.window_beta, st.sizes.window_beta);
  }
  template <class Policy, int Threads>
  static status decode(const gdn_params<Act>& p) {
    if (!lanes_copy_engine) return replayssm::cuda::detail::tokens_step<Policy, Threads, step_kind::decode>(p, nullptr);
    const warp::copy_engine lanes = warp::copy_engine::lanes;
    return replayssm::cuda::detail::tokens_step<Policy, Threads, step_kind::decode>(p, nullptr, &lanes);
  }
  /// Set by a test: the warp read step copies with the lanes engine (the fallback of devices
  /// without bulk copies) instead of the bulk engine.
  static inline bool lanes_copy_engine = false;
};

/// run_gdn_scenario on the device.
template <class Policy, class Act>
gdn_scenario_result gpu_gdn_scenario(const gdn_case& c, int steps, bool stagger) {
  return run_gdn_scenario<Policy, Act>(c, steps, stagger, device_decode<gdn_host_state<Policy, Act>>());
}

}  // namespace replayssm_test
