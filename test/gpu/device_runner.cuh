// SPDX-License-Identifier: Apache-2.0
// Runs a step on the device over the host harness's buffers: uploads inputs and state,
// launches, downloads outputs and state, and turns device error flags into a status.
#pragma once

#include <cuda_runtime.h>

#include <catch2/catch.hpp>

#include <replayssm/kernels/cuda_decode.cuh>

#include "../support/mamba2_spec_scenario.hpp"

namespace replayssm_test {

#define REPLAYSSM_CUDA_CHECK(call) REQUIRE((call) == cudaSuccess)

/// A device allocation mirroring a host range.
class device_copy {
 public:
  device_copy(const void* host, size_t bytes) : host_(host), bytes_(bytes) {
    if (host == nullptr || bytes == 0) return;
    REPLAYSSM_CUDA_CHECK(cudaMalloc(&device_, bytes));
    REPLAYSSM_CUDA_CHECK(cudaMemcpy(device_, host, bytes, cudaMemcpyHostToDevice));
  }
  device_copy(const device_copy&) = delete;
  device_copy& operator=(const device_copy&) = delete;
  ~device_copy() { cudaFree(device_); }
  template <class T>
  T* get() const {
    return static_cast<T*>(device_);
  }
  /// Copies the device contents back over the host range.
  void download() const {
    if (device_ != nullptr) REPLAYSSM_CUDA_CHECK(cudaMemcpy(const_cast<void*>(host_), device_, bytes_, cudaMemcpyDeviceToHost));
  }

 private:
  const void* host_;
  size_t bytes_;
  void* device_ = nullptr;
};

/// Runs `launch(p)` with device mirrors of every buffer the host params `hp` over `st` name,
/// then downloads what a step may write (outputs, state, window, cursors, slot tables) and
/// turns the device error flags into a status.
template <class Policy, class Act, class Launch>
status device_run(const mamba2_params& hp, host_layer_state<Policy, Act>& st, Launch&& launch) {
  const auto& s = st.shape;
  const size_t a = sizeof(Act), batch = size_t(hp.batch), rows = batch * size_t(hp.tokens), i32 = sizeof(int32_t);
  device_copy x(hp.x, rows * hp.x_batch_stride * a), z(hp.z, rows * hp.z_batch_stride * a),
      y(hp.y, rows * hp.y_batch_stride * a), dt(hp.dt, rows * hp.dt_batch_stride * a),
      B(hp.B, rows * hp.B_batch_stride * a), C(hp.C, rows * hp.C_batch_stride * a),
      A(hp.A, s.heads * sizeof(float)), D(hp.D, s.heads * sizeof(float)), bias(hp.dt_bias, s.heads * sizeof(float)),
      slots(hp.slot_indices, batch * i32), phase(hp.flush_phase, st.phase.size() * i32),
      counts(hp.token_counts, batch * i32), accepted(hp.accepted_counts, batch * i32),
      snapshots(hp.snapshot_slots, rows * i32), ckpt(hp.checkpoint, st.sizes.checkpoint),
      ckpt_s(hp.checkpoint_scales, st.sizes.checkpoint_scales), read(hp.read_copy, st.sizes.read_copy),
      read_s(hp.read_copy_scales, st.sizes.read_copy_scales), wx(hp.window_x, st.sizes.window_x),
      wB(hp.window_B, st.sizes.window_B), wdt(hp.window_dt, st.sizes.window_dt), cursors(hp.cursors, st.sizes.cursors);
  const uint32_t no_errors = 0;
  device_copy flags(&no_errors, sizeof no_errors);
  mamba2_params p = hp;
  p.x = x.get<void>(); p.z = z.get<void>(); p.y = y.get<void>(); p.dt = dt.get<void>();
  p.B = B.get<void>(); p.C = C.get<void>(); p.A = A.get<float>(); p.D = D.get<float>();
  p.dt_bias = bias.get<float>(); p.slot_indices = slots.get<int32_t>(); p.flush_phase = phase.get<int32_t>();
  p.token_counts = counts.get<int32_t>(); p.accepted_counts = accepted.get<int32_t>();
  p.snapshot_slots = snapshots.get<int32_t>();
  p.checkpoint = ckpt.get<void>(); p.checkpoint_scales = ckpt_s.get<void>();
  p.read_copy = read.get<void>(); p.read_copy_scales = read_s.get<void>();
  p.window_x = wx.get<void>(); p.window_B = wB.get<void>(); p.window_dt = wdt.get<float>();
  p.cursors = cursors.get<replay_cursor>(); p.error_flags = flags.get<uint32_t>();
  status launched = launch(p);
  if (!launched) return launched;
  REPLAYSSM_CUDA_CHECK(cudaDeviceSynchronize());
  for (const device_copy* out : {&y, &ckpt, &ckpt_s, &read, &read_s, &wx, &wB, &wdt, &cursors, &slots, &snapshots})
    out->download();
  return cuda::take_step_errors(p.error_flags);
}

/// One decode step of `Policy` on the device, in blocks of `Threads` threads.
template <class Policy, class Act, int Threads = cuda::decode_block_threads>
status device_step(const mamba2_params& hp, host_layer_state<Policy, Act>& st) {
  return device_run(hp, st, [](const mamba2_params& p) { return cuda::mamba2_decode_step<Policy, Threads>(p); });
}

/// The device runners of a speculative scenario.
template <class Policy, class Act>
spec_runners<Policy, Act> device_spec_runners() {
  using format = typename Policy::checkpoint_format;
  using snapshot_state = host_layer_state<writeback_policy<format>, Act>;
  return {[](const mamba2_params& hp, host_layer_state<Policy, Act>& st) {
            return device_run(hp, st, [](const mamba2_params& p) { return cuda::replay_verify_step<Policy>(p); });
          },
          [](const mamba2_params& hp, host_layer_state<Policy, Act>& st) {
            return device_run(hp, st, [](const mamba2_params& p) { return cuda::commit_drafts(p); });
          },
          [](const mamba2_params& hp, snapshot_state& st) {
            return device_run(hp, st, [](const mamba2_params& p) { return cuda::snapshot_verify_step<format>(p); });
          },
          [](const mamba2_params& hp, snapshot_state& st) {
            return device_run(hp, st, [](const mamba2_params& p) {
              return cuda::snapshot_commit(p, const_cast<int32_t*>(p.slot_indices), const_cast<int32_t*>(p.snapshot_slots));
            });
          }};
}

}  // namespace replayssm_test
