// SPDX-License-Identifier: Apache-2.0
// One Gated DeltaNet layer's device buffers for a benchmark, and the modelled bytes of its
// decode step, shared by the GDN decode and speculative-decoding benchmarks (graph capture,
// timing and counters: bench_device.cuh).
#pragma once

#include "bench_device.cuh"

namespace replayssm_bench {

/// Qwen3.5's Gated DeltaNet layers: value heads, key heads, key and value head dimensions.
const named_shape<gdn_layer_shape> qwen35_4b{"qwen3.5-4b", {32, 16, 128, 128}};
const named_shape<gdn_layer_shape> qwen35_122b{"qwen3.5-122b", {64, 16, 128, 128}};

/// One Gated DeltaNet layer's device buffers and parameters for a batch under `Policy` (in
/// its window mode), BF16 activations with `tokens` rows per request (speculative drafts)
/// and, for the snapshot baseline, `tokens` snapshot slots per request. Inputs are unit
/// normal; A_log spreads over [-1, 0.5] and dt_bias over [-0.1, 0.1] across heads.
template <class Policy>
struct gdn_bench_layer : device_arena {
  using policy = Policy;
  static constexpr int flush_period = gdn_flush_period<Policy>;
  gdn_layer_shape shape;
  int batch;
  int tokens;
  int num_slots;
  gdn_params<act_t> p;

  gdn_bench_layer(gdn_layer_shape s, int b, bool stagger, int drafts = 1, bool snapshots = false)
      : shape(s), batch(b), tokens(drafts) {
    const int window_drafts = drafts > 1 && !Policy::is_writeback ? drafts : 0;
    const auto one = gdn_buffers<Policy>(s, 1, act_tag, window_drafts);
    const slot_placement placed = place_requests(*this, batch, snapshots ? tokens : 0,
                                                 double(one.checkpoint_total() + one.read_copy_total()),
                                                 Policy::window, stagger);
    num_slots = placed.num_slots;
    const auto sizes = gdn_buffers<Policy>(s, num_slots, act_tag, window_drafts);
    const size_t rows = size_t(batch) * tokens, hv = size_t(s.value_heads);
    const size_t keys = size_t(s.key_heads) * s.key_dim, values = hv * s.value_dim;
    p = contiguous_gdn_params<act_t>(s, batch, tokens);
    p.window_entries = window_drafts > 0 ? Policy::window + window_drafts : 0;
    p.q = random_normal<act_t>(rows * keys, 1.0f, 11);
    p.k = random_normal<act_t>(rows * keys, 1.0f, 12);
    p.v = random_normal<act_t>(rows * values, 1.0f, 13);
    p.a = random_normal<act_t>(rows * hv, 1.0f, 14);
    p.b = random_normal<act_t>(rows * hv, 1.0f, 15);
    p.o = static_cast<act_t*>(take(rows * values * sizeof(act_t)));
    std::vector<float> A_log(hv), dt_bias(hv);
    for (size_t h = 0; h < hv; ++h) {
      const float x = hv > 1 ? float(h) / float(hv - 1) : 0.5f;
      A_log[h] = -1.0f + 1.5f * x;
      dt_bias[h] = 0.1f * float(int(h % 3) - 1);
    }
    p.A_log = upload(A_log);
    p.dt_bias = upload(dt_bias);
    bind_slots_and_pools<Policy>(*this, p, placed, sizes);
    p.window_u = static_cast<float*>(take(sizes.window_u));
    p.window_k = static_cast<float*>(take(sizes.window_k));
    p.window_g = static_cast<float*>(take(sizes.window_g));
    p.window_v = static_cast<act_t*>(take(sizes.window_v));  // raw_inputs only (0 bytes: null)
    p.window_beta = static_cast<float*>(take(sizes.window_beta));
    p.cursors = zeroed<replay_cursor>(sizes.cursors / sizeof(replay_cursor));
    p.report = zeroed<step_report>(1);
    p.request_plans = zeroed<request_plan>(size_t(batch));
    cuda_check(cudaDeviceSynchronize(), "setup");
  }

  void step(cudaStream_t stream) { replayssm::cuda::decode_step<Policy>(p, stream).throw_if_error(); }

  /// Modelled bytes of one step, averaged over a window.
  double bytes_per_step() const { return gdn_bytes_per_step<Policy>(shape, batch, act_tag); }
  /// The snapshot baseline's memory for `tokens` drafts per request, in the checkpoint format.
  double snapshot_bytes() const {
    return double(gdn_snapshot_bytes<typename Policy::checkpoint_format>(shape, batch, tokens));
  }
  /// Window ring bytes a verify step of `tokens` drafts needs beyond a decode step's.
  double window_extra_bytes() const {
    return double(gdn_buffers<Policy>(shape, batch, act_tag, tokens).window_total() -
                  gdn_buffers<Policy>(shape, batch, act_tag).window_total());
  }
};

}  // namespace replayssm_bench
