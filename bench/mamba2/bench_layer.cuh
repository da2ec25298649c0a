// SPDX-License-Identifier: Apache-2.0
// One Mamba-2 layer's device buffers for a benchmark, shared by the decode and the
// speculative-decoding benchmarks (graph capture, timing and counters: bench_device.cuh).
#pragma once

#include "bench_device.cuh"

namespace replayssm_bench {

const named_shape<mamba2_layer_shape> nano{"nano", {96, 80, 128, 8}};
const named_shape<mamba2_layer_shape> super{"super", {128, 64, 128, 8}};

/// One layer's device buffers and parameters for a batch under `Policy`, with `tokens`
/// activation rows per request (speculative drafts) and, for the snapshot baseline,
/// `tokens` snapshot slots per request.
template <class Policy>
struct mamba2_bench_layer : device_arena {
  using policy = Policy;
  static constexpr int flush_period = Policy::window;
  mamba2_layer_shape shape;
  int batch;
  int tokens;
  int num_slots;
  mamba2_params<act_t> p;

  mamba2_bench_layer(mamba2_layer_shape s, int b, bool stagger, int drafts = 1, bool snapshots = false)
      : shape(s), batch(b), tokens(drafts) {
    const int window_drafts = drafts > 1 && !Policy::is_writeback ? drafts : 0;
    const auto one = mamba2_buffers<Policy>(s, 1, act_tag, window_drafts);
    const slot_placement placed = place_requests(*this, batch, snapshots ? tokens : 0,
                                                 double(one.checkpoint_total() + one.read_copy_total()),
                                                 Policy::window, stagger);
    num_slots = placed.num_slots;
    const auto sizes = mamba2_buffers<Policy>(s, num_slots, act_tag, window_drafts);
    const size_t rows = size_t(batch) * tokens, d = size_t(s.heads) * s.head_dim, gn = size_t(s.groups) * s.state_dim;
    p = contiguous_mamba2_params<act_t>(s, batch, tokens);
    p.window_entries = window_drafts > 0 ? Policy::window + window_drafts : 0;
    p.x = random<act_t>(rows * d, 1.0f, 1);
    p.z = random<act_t>(rows * d, 1.0f, 2);
    p.y = static_cast<act_t*>(take(rows * d * sizeof(act_t)));
    p.dt = random<act_t>(rows * s.heads, 0.3f, 3);
    p.B = random<act_t>(rows * gn, 1.0f, 4);
    p.C = random<act_t>(rows * gn, 1.0f, 5);
    std::vector<float> A(size_t(s.heads)), bias(size_t(s.heads), -4.0f);
    for (int h = 0; h < s.heads; ++h) A[size_t(h)] = -1.0f - float(h % 16);
    p.A = upload(A);
    p.D = upload(std::vector<float>(size_t(s.heads), 1.0f));
    p.dt_bias = upload(bias);
    bind_slots_and_pools<Policy>(*this, p, placed, sizes);
    p.window_x = static_cast<act_t*>(take(sizes.window_x));
    p.window_B = static_cast<act_t*>(take(sizes.window_B));
    p.window_dt = static_cast<float*>(take(sizes.window_dt));
    p.cursors = zeroed<replay_cursor>(sizes.cursors / sizeof(replay_cursor));
    p.report = zeroed<step_report>(1);
    p.request_plans = zeroed<request_plan>(size_t(batch));
    cuda_check(cudaDeviceSynchronize(), "setup");
  }

  void step(cudaStream_t stream) { replayssm::cuda::decode_step<Policy>(p, stream).throw_if_error(); }

  /// Modelled bytes of one step, averaged over a window.
  double bytes_per_step() const { return mamba2_bytes_per_step<Policy>(shape, batch, act_tag); }
  /// The snapshot baseline's memory for `tokens` drafts per request, in the checkpoint format.
  double snapshot_bytes() const {
    return double(mamba2_snapshot_bytes<typename Policy::checkpoint_format>(shape, batch, tokens));
  }
  /// Window ring bytes a verify step of `tokens` drafts needs beyond a decode step's.
  double window_extra_bytes() const {
    return double(mamba2_buffers<Policy>(shape, batch, act_tag, tokens).window_total() -
                  mamba2_buffers<Policy>(shape, batch, act_tag).window_total());
  }
};

}  // namespace replayssm_bench
