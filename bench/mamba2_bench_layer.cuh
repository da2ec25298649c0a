// SPDX-License-Identifier: Apache-2.0
// One Mamba-2 layer's device buffers for a benchmark, CUDA-graph capture and timing, and the
// bandwidth counters, shared by the decode and the speculative-decoding benchmarks.
#pragma once

#include "bench_device.cuh"

#include <functional>
#include <string>

namespace replayssm_bench {

using act_t = bfloat16_t;
constexpr double l2_bytes = 60e6;

struct model_shape {
  const char* name;
  mamba2_layer_shape shape;
};
const model_shape nano{"nano", {96, 80, 128, 8}};
const model_shape super{"super", {128, 64, 128, 8}};

/// One layer's device buffers and parameters for a batch under `Policy`, with `tokens`
/// activation rows per request (speculative drafts) and, for the snapshot baseline,
/// `tokens` snapshot slots per request.
template <class Policy>
struct bench_layer {
  mamba2_layer_shape shape;
  int batch;
  int tokens;
  int num_slots;
  std::vector<device_buffer> owned;
  mamba2_params p;

  void* take(size_t bytes) {
    owned.emplace_back(bytes);
    return owned.back().get();
  }
  template <class T>
  T* random(size_t n, float scale, uint32_t seed) {
    T* ptr = static_cast<T*>(take(n * sizeof(T)));
    fill_uniform<T><<<256, 256>>>(ptr, n, seed, scale);
    return ptr;
  }

  bench_layer(mamba2_layer_shape s, int b, bool stagger, int drafts = 1, bool snapshots = false)
      : shape(s), batch(b), tokens(drafts) {
    const int window_drafts = drafts > 1 && !Policy::is_writeback ? drafts : 0;
    const auto one = mamba2_buffers<Policy>(s, 1, dtype::bf16, window_drafts);
    const double slot_bytes = double(one.checkpoint_total() + one.read_copy_total());
    const int needed = batch * (snapshots ? 1 + tokens : 1);
    num_slots = std::max(needed, int(4 * l2_bytes / slot_bytes) + 1);
    const auto sizes = mamba2_buffers<Policy>(s, num_slots, dtype::bf16, window_drafts);
    const size_t rows = size_t(batch) * tokens, d = size_t(s.heads) * s.head_dim, gn = size_t(s.groups) * s.state_dim;
    p = contiguous_mamba2_params(s, batch, dtype::bf16, tokens);
    p.window_entries = window_drafts > 0 ? Policy::window + window_drafts : 0;
    p.x = random<act_t>(rows * d, 1.0f, 1);
    p.z = random<act_t>(rows * d, 1.0f, 2);
    p.y = take(rows * d * sizeof(act_t));
    p.dt = random<act_t>(rows * s.heads, 0.3f, 3);
    p.B = random<act_t>(rows * gn, 1.0f, 4);
    p.C = random<act_t>(rows * gn, 1.0f, 5);
    std::vector<float> A(size_t(s.heads)), bias(size_t(s.heads), -4.0f);
    for (int h = 0; h < s.heads; ++h) A[size_t(h)] = -1.0f - float(h % 16);
    p.A = upload(A);
    p.D = upload(std::vector<float>(size_t(s.heads), 1.0f));
    p.dt_bias = upload(bias);
    // Requests (and snapshots) land on a random subset of slots, in random order.
    std::vector<int32_t> slots(static_cast<size_t>(num_slots));
    std::iota(slots.begin(), slots.end(), 0);
    std::shuffle(slots.begin(), slots.end(), std::mt19937(42));
    p.slot_indices = upload(std::vector<int32_t>(slots.begin(), slots.begin() + batch));
    if (snapshots) p.snapshot_slots = upload(std::vector<int32_t>(slots.begin() + batch, slots.begin() + needed));
    p.num_slots = num_slots;
    p.checkpoint = state_pool<typename Policy::checkpoint_format>(sizes.checkpoint, sizes.checkpoint_scales,
                                                                  &p.checkpoint_scales);
    if (!Policy::shared_state)
      p.read_copy = state_pool<typename Policy::read_format>(sizes.read_copy, sizes.read_copy_scales, &p.read_copy_scales);
    p.window_x = take(sizes.window_x);
    p.window_B = take(sizes.window_B);
    p.window_dt = static_cast<float*>(take(sizes.window_dt));
    p.cursors = static_cast<replay_cursor*>(take(sizes.cursors));
    cuda_check(cudaMemset(p.cursors, 0, sizes.cursors), "memset");
    std::vector<int32_t> phase(static_cast<size_t>(num_slots));
    for (int i = 0; i < num_slots; ++i) phase[size_t(i)] = stagger ? i % Policy::window : 0;
    p.flush_phase = Policy::is_writeback ? nullptr : upload(phase);
    p.error_flags = static_cast<uint32_t*>(take(4));
    cuda_check(cudaMemset(p.error_flags, 0, 4), "memset");
    cuda_check(cudaDeviceSynchronize(), "setup");
  }

  template <class T>
  T* upload(const std::vector<T>& v) {
    T* ptr = static_cast<T*>(take(v.size() * sizeof(T)));
    cuda_check(cudaMemcpy(ptr, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice), "upload");
    return ptr;
  }
  template <class Format>
  void* state_pool(size_t data_bytes, size_t scale_bytes, void** scales) {
    void* data = take(data_bytes);
    *scales = scale_bytes > 0 ? take(scale_bytes) : nullptr;
    fill_state_pool<Format><<<1024, 256>>>(data, *scales, data_bytes / Format::data_bytes_per_chunk, 9);
    return data;
  }

  /// Every cursor at `length` entries with one flush done (a step then flushes or reads).
  void set_cursors(int32_t length) {
    std::vector<replay_cursor> c(size_t(num_slots) * shape.heads, replay_cursor{length, 1u, 0, 0});
    cuda_check(cudaMemcpy(p.cursors, c.data(), c.size() * sizeof(replay_cursor), cudaMemcpyHostToDevice), "cursors");
  }

  void step(cudaStream_t stream) { cuda::mamba2_decode_step<Policy>(p, stream).throw_if_error(); }

  /// Modelled bytes of one step, averaged over a window.
  double bytes_per_step() const { return mamba2_bytes_per_step<Policy>(shape, batch, dtype::bf16); }
};

/// A CUDA graph of `steps` calls of `step(i, stream)`.
inline cudaGraphExec_t capture(int steps, cudaStream_t stream, const std::function<void(int, cudaStream_t)>& step) {
  cudaGraph_t graph;
  cuda_check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "capture");
  for (int i = 0; i < steps; ++i) step(i, stream);
  cuda_check(cudaStreamEndCapture(stream, &graph), "capture");
  cudaGraphExec_t exec;
  cuda_check(cudaGraphInstantiate(&exec, graph, 0), "instantiate");
  cudaGraphDestroy(graph);
  return exec;
}

/// Times `graph` once per benchmark iteration with CUDA events (manual time per step of
/// `steps`), after one warm-up launch; returns the median seconds per step.
inline double time_graph(benchmark::State& state, cudaGraphExec_t graph, cudaStream_t stream, int steps) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  cuda_check(cudaGraphLaunch(graph, stream), "warm-up");
  std::vector<double> per_step;
  for (auto _ : state) {
    cudaEventRecord(a, stream);
    cudaGraphLaunch(graph, stream);
    cudaEventRecord(b, stream);
    cuda_check(cudaEventSynchronize(b), "graph");
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    per_step.push_back(ms * 1e-3 / steps);
    state.SetIterationTime(per_step.back());
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(per_step.begin(), per_step.end());
  return per_step[per_step.size() / 2];
}

/// Fails the run if a step reported an error on the device.
inline void require_no_step_errors(uint32_t* error_flags, cudaStream_t stream) {
  const status s = cuda::take_step_errors(error_flags, stream);
  if (!s) {
    std::fprintf(stderr, "%s\n", s.message().c_str());
    std::exit(1);
  }
}

inline void set_bandwidth_counters(benchmark::State& state, double bytes, double seconds) {
  const auto& bw = measured_bandwidth();
  const double gbs = bytes / seconds / 1e9;
  state.counters["bytes_per_step"] = bytes;
  state.counters["GBps"] = gbs;
  state.counters["pct_copy_bw"] = 100.0 * gbs / bw.copy_gbs;
  state.counters["pct_read_bw"] = 100.0 * gbs / bw.read_gbs;
  state.counters["copy_bw_GBps"] = bw.copy_gbs;
  state.counters["read_bw_GBps"] = bw.read_gbs;
}

}  // namespace replayssm_bench
