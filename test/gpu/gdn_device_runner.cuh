// SPDX-License-Identifier: Apache-2.0
// Runs a Gated DeltaNet step on the device over the host harness's buffers: uploads inputs
// and state, launches, downloads outputs and state, and turns device error flags into a
// status (device_runner.cuh does the same for Mamba-2, with the same device_copy).
#pragma once

#include "../support/gdn_spec_scenario.hpp"
#include "device_runner.cuh"

namespace replayssm_test {

/// Runs `launch(p)` with device mirrors of every buffer the host params `hp` over `st` name,
/// then downloads what a step may write and turns the device error flags into a status.
template <class Policy, class Act, gdn_window Mode, class Launch>
status gdn_device_run(const gdn_params& hp, host_gdn_state<Policy, Act, Mode>& st, Launch&& launch) {
  const auto& s = st.shape;
  const size_t a = sizeof(Act), batch = size_t(hp.batch), rows = batch * size_t(hp.tokens), i32 = sizeof(int32_t),
               heads = size_t(s.value_heads) * sizeof(float);
  device_copy q(hp.q, rows * hp.q_batch_stride * a), k(hp.k, rows * hp.k_batch_stride * a),
      v(hp.v, rows * hp.v_batch_stride * a), o(hp.o, rows * hp.o_batch_stride * a),
      ga(hp.a, rows * hp.a_batch_stride * a), gb(hp.b, rows * hp.b_batch_stride * a), A_log(hp.A_log, heads),
      bias(hp.dt_bias, heads), slots(hp.slot_indices, batch * i32), phase(hp.flush_phase, st.phase.size() * i32),
      counts(hp.token_counts, batch * i32), accepted(hp.accepted_counts, batch * i32),
      snapshots(hp.snapshot_slots, rows * i32), ckpt(hp.checkpoint, st.sizes.checkpoint),
      ckpt_s(hp.checkpoint_scales, st.sizes.checkpoint_scales), read(hp.read_copy, st.sizes.read_copy),
      read_s(hp.read_copy_scales, st.sizes.read_copy_scales), wu(hp.window_u, st.sizes.window_u),
      wk(hp.window_k, st.sizes.window_k), wg(hp.window_g, st.sizes.window_g), wv(hp.window_v, st.sizes.window_v),
      wbeta(hp.window_beta, st.sizes.window_beta), cursors(hp.cursors, st.sizes.cursors);
  const uint32_t no_errors = 0;
  device_copy flags(&no_errors, sizeof no_errors);
  gdn_params p = hp;
  p.q = q.get<void>(); p.k = k.get<void>(); p.v = v.get<void>(); p.o = o.get<void>();
  p.a = ga.get<void>(); p.b = gb.get<void>(); p.A_log = A_log.get<float>(); p.dt_bias = bias.get<float>();
  p.slot_indices = slots.get<int32_t>(); p.flush_phase = phase.get<int32_t>();
  p.token_counts = counts.get<int32_t>(); p.accepted_counts = accepted.get<int32_t>();
  p.snapshot_slots = snapshots.get<int32_t>();
  p.checkpoint = ckpt.get<void>(); p.checkpoint_scales = ckpt_s.get<void>();
  p.read_copy = read.get<void>(); p.read_copy_scales = read_s.get<void>();
  p.window_u = wu.get<float>(); p.window_k = wk.get<float>(); p.window_g = wg.get<float>();
  p.window_v = wv.get<void>(); p.window_beta = wbeta.get<float>();
  p.cursors = cursors.get<replay_cursor>(); p.error_flags = flags.get<uint32_t>();
  status launched = launch(p);
  if (!launched) return launched;
  REPLAYSSM_CUDA_CHECK(cudaDeviceSynchronize());
  for (const device_copy* out : {&o, &ckpt, &ckpt_s, &read, &read_s, &wu, &wk, &wg, &wv, &wbeta, &cursors, &slots, &snapshots})
    out->download();
  return cuda::take_step_errors(p.error_flags);
}

/// The device decode runner.
template <class Policy, class Act, gdn_window Mode = gdn_window::corrected_values>
gdn_runner<Policy, Act, Mode> device_gdn_decode() {
  return [](const gdn_params& hp, host_gdn_state<Policy, Act, Mode>& st) {
    return gdn_device_run(hp, st, [](const gdn_params& p) { return cuda::gdn_decode_step<Policy, Mode>(p); });
  };
}

/// The device runners of a speculative scenario.
template <class Policy, class Act, gdn_window Mode = gdn_window::corrected_values>
gdn_spec_runners<Policy, Act, Mode> device_gdn_spec_runners() {
  using format = typename Policy::checkpoint_format;
  using snapshot_state = host_gdn_state<writeback_policy<format>, Act>;
  return {[](const gdn_params& hp, host_gdn_state<Policy, Act, Mode>& st) {
            return gdn_device_run(hp, st, [](const gdn_params& p) { return cuda::replay_verify_step<Policy, Mode>(p); });
          },
          [](const gdn_params& hp, host_gdn_state<Policy, Act, Mode>& st) {
            return gdn_device_run(hp, st, [](const gdn_params& p) { return cuda::commit_drafts(p); });
          },
          [](const gdn_params& hp, snapshot_state& st) {
            return gdn_device_run(hp, st, [](const gdn_params& p) { return cuda::snapshot_verify_step<format>(p); });
          },
          [](const gdn_params& hp, snapshot_state& st) {
            return gdn_device_run(hp, st, [](const gdn_params& p) {
              return cuda::snapshot_commit(p, const_cast<int32_t*>(p.slot_indices), const_cast<int32_t*>(p.snapshot_slots));
            });
          }};
}

}  // namespace replayssm_test
