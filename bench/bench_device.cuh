// SPDX-License-Identifier: Apache-2.0
// Device-side helpers of the GPU benchmarks, shared by every recurrence (Mamba-2, Gated
// DeltaNet): buffers, random inputs and state pools, requests placed in pools several times
// the L2, the measured copy and read bandwidths, timing with CUDA events and graphs, the
// bandwidth counters, and the speculative-decoding rounds with their acceptance model.
//
// A benchmark layer (mamba2/bench_layer.cuh, gated_deltanet/bench_layer.cuh) is a `device_arena` with
// `policy`, `batch`, `tokens`, params `p` (with `report` and `accepted_counts`),
// `step(stream)`, `bytes_per_step()`, `snapshot_bytes()` and `window_extra_bytes()`.
#pragma once

#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <replayssm/cuda.cuh>
#include <replayssm/replayssm.hpp>

namespace replayssm_bench {

using namespace replayssm;

/// The activations of every benchmark, and their runtime tag (for buffer sizes).
using act_t = bfloat16_t;
constexpr dtype act_tag = activation_traits<act_t>::tag;
/// L2 of the H200; state pools are made several times larger.
constexpr double l2_bytes = 60e6;

/// A model's layer shape with the name the benchmark names carry.
template <class Shape>
struct named_shape {
  const char* name;
  Shape shape;
};

inline void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

/// An owned device allocation.
class device_buffer {
 public:
  device_buffer() = default;
  explicit device_buffer(size_t bytes) : bytes_(bytes) {
    if (bytes > 0) cuda_check(cudaMalloc(&ptr_, bytes), "cudaMalloc");
  }
  device_buffer(device_buffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) { o.ptr_ = nullptr; }
  device_buffer& operator=(device_buffer&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  ~device_buffer() { cudaFree(ptr_); }
  template <class T = void>
  T* get() const {
    return static_cast<T*>(ptr_);
  }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

/// Fills `n` elements of type T with uniform values in [-scale, scale] from Philox.
template <class T>
__global__ void fill_uniform(T* out, size_t n, uint32_t seed, float scale) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const uint32x4 r = philox4x32_10({uint32_t(i), uint32_t(i >> 32), 0u, 0u}, seed, 0x5eedu);
    const float u = float(r.x >> 8) * (1.0f / 16777216.0f);
    out[i] = from_float<T>((2.0f * u - 1.0f) * scale);
  }
}

/// Fills `n` elements of type T with normal values of standard deviation `scale` from Philox
/// (Box-Muller).
template <class T>
__global__ void fill_normal(T* out, size_t n, uint32_t seed, float scale) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const uint32x4 r = philox4x32_10({uint32_t(i), uint32_t(i >> 32), 2u, 0u}, seed, 0x5eedu);
    const float u1 = float((r.x >> 8) + 1u) * (1.0f / 16777216.0f);  // (0, 1]
    const float u2 = float(r.y >> 8) * (1.0f / 16777216.0f);
    out[i] = from_float<T>(scale * sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2));
  }
}

/// Fills a state pool in `Format` (fewer than 2^31 chunks) with values of magnitude about 1,
/// encoded by the format.
template <class Format>
__global__ void fill_state_pool(void* data, void* scales, size_t chunks, uint32_t seed) {
  const state_head_view<Format> pool = state_head_view<Format>::in_pool(data, scales, 0, 0);
  for (size_t c = blockIdx.x * size_t(blockDim.x) + threadIdx.x; c < chunks; c += size_t(gridDim.x) * blockDim.x) {
    float v[Format::chunk_elems];
    for (int e = 0; e < Format::chunk_elems; ++e) {
      const uint32x4 r = philox4x32_10({uint32_t(c), uint32_t(e), 1u, 0u}, seed, 0x5eedu);
      v[e] = float(r.x >> 8) * (2.0f / 16777216.0f) - 1.0f;
    }
    pool.template store<round_nearest_even>(int32_t(c), v, random_stream_key{});
  }
}

/// Bytes of a vectorized copy, a read-only stream and an in-place update, measured on this
/// device.
struct device_bandwidth {
  double copy_gbs = 0;     ///< better of cudaMemcpy D2D and a float4 copy kernel, read + write counted
  double read_gbs = 0;     ///< a float4 read-only reduction
  double inplace_gbs = 0;  ///< a float4 read + write of the same bytes (a write-back step's pattern)
};

// Kernels of a header are templates, so that several translation units may include it.
template <class Vec>
__global__ void copy_kernel(const Vec* in, Vec* out, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    out[i] = in[i];
}

/// Reads and rewrites every vector in place: the ceiling of a step that updates its state
/// where it lies (slower than a copy between two buffers on HBM).
template <class Vec>
__global__ void inplace_kernel(Vec* data, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    Vec v = data[i];
    v.x = -v.x, v.y = -v.y, v.z = -v.z, v.w = -v.w;
    data[i] = v;
  }
}

template <class Vec>
__global__ void read_kernel(const Vec* in, size_t n, float* sink) {
  float acc = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const Vec v = in[i];
    acc += v.x + v.y + v.z + v.w;
  }
  if (acc == 1.2345f) *sink = acc;  // keeps the loads; never true on the random data
}

/// Median milliseconds of `reps` runs of `work` on the default stream, timed with events,
/// after one untimed warm-up run when `warm_up`.
template <class Work>
double median_ms(int reps, Work work, bool warm_up = true) {
  cudaEvent_t a, b;
  cuda_check(cudaEventCreate(&a), "event");
  cuda_check(cudaEventCreate(&b), "event");
  std::vector<double> ms;
  if (warm_up) work();
  for (int r = 0; r < reps; ++r) {
    cudaEventRecord(a);
    work();
    cudaEventRecord(b);
    cuda_check(cudaEventSynchronize(b), "sync");
    float t = 0;
    cudaEventElapsedTime(&t, a, b);
    ms.push_back(t);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

/// Measured once per process, on 2 GiB buffers (far beyond the 60 MB L2).
inline const device_bandwidth& measured_bandwidth() {
  static const device_bandwidth bw = [] {
    const size_t bytes = size_t(2) << 30, n = bytes / 16;
    device_buffer in(bytes), out(bytes), sink(4);
    fill_uniform<float><<<1024, 256>>>(in.get<float>(), bytes / 4, 7, 1.0f);
    const double memcpy_ms = median_ms(10, [&] { cudaMemcpy(out.get(), in.get(), bytes, cudaMemcpyDeviceToDevice); });
    const double kernel_ms = median_ms(10, [&] { copy_kernel<float4><<<132 * 16, 256>>>(in.get<float4>(), out.get<float4>(), n); });
    const double read_ms = median_ms(10, [&] { read_kernel<float4><<<132 * 16, 256>>>(in.get<float4>(), n, sink.get<float>()); });
    const double inplace_ms = median_ms(10, [&] { inplace_kernel<float4><<<132 * 16, 256>>>(out.get<float4>(), n); });
    device_bandwidth r;
    r.copy_gbs = 2.0 * bytes / (std::min(memcpy_ms, kernel_ms) * 1e6);
    r.read_gbs = double(bytes) / (read_ms * 1e6);
    r.inplace_gbs = 2.0 * bytes / (inplace_ms * 1e6);
    return r;
  }();
  return bw;
}

/// The owned device buffers of a benchmark layer.
struct device_arena {
  std::vector<device_buffer> owned;

  /// `bytes` of uninitialized device memory (null for 0).
  void* take(size_t bytes) {
    owned.emplace_back(bytes);
    return owned.back().get();
  }
  /// `n` zeroed values of T.
  template <class T>
  T* zeroed(size_t n) {
    T* ptr = static_cast<T*>(take(n * sizeof(T)));
    if (n > 0) cuda_check(cudaMemset(ptr, 0, n * sizeof(T)), "memset");
    return ptr;
  }
  /// `n` values of T, uniform in [-scale, scale].
  template <class T>
  T* random(size_t n, float scale, uint32_t seed) {
    T* ptr = static_cast<T*>(take(n * sizeof(T)));
    fill_uniform<T><<<256, 256>>>(ptr, n, seed, scale);
    return ptr;
  }
  /// `n` values of T, normal with standard deviation `scale`.
  template <class T>
  T* random_normal(size_t n, float scale, uint32_t seed) {
    T* ptr = static_cast<T*>(take(n * sizeof(T)));
    fill_normal<T><<<256, 256>>>(ptr, n, seed, scale);
    return ptr;
  }
  template <class T>
  T* upload(const std::vector<T>& v) {
    T* ptr = static_cast<T*>(take(v.size() * sizeof(T)));
    cuda_check(cudaMemcpy(ptr, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice), "upload");
    return ptr;
  }
  /// A state pool in `Format` of random values of magnitude about 1; `*scales` gets its scales.
  template <class Format>
  void* state_pool(size_t data_bytes, size_t scale_bytes, void** scales) {
    void* data = take(data_bytes);
    *scales = scale_bytes > 0 ? take(scale_bytes) : nullptr;
    fill_state_pool<Format><<<1024, 256>>>(data, *scales, data_bytes / Format::data_bytes_per_chunk, 9);
    return data;
  }
};

/// Where a batch's requests live in a state pool (device arrays).
struct slot_placement {
  int num_slots = 0;
  const int32_t* slot_indices = nullptr;    ///< [batch]
  const int32_t* snapshot_slots = nullptr;  ///< [batch][snapshots per request], or null
  const int32_t* flush_phase = nullptr;     ///< [num_slots], or null for write-back
};

/// A pool of at least four times the L2 (more slots than requests, `slot_bytes` of state
/// each), with the requests (and their snapshots) on a random subset of slots in random
/// order. Replay (`window` > 1) gets flush phases: slot i's is i mod window with `stagger`,
/// else 0.
inline slot_placement place_requests(device_arena& mem, int batch, int snapshots_per_request, double slot_bytes,
                                     int window, bool stagger) {
  slot_placement r;
  const int needed = batch * (1 + snapshots_per_request);
  r.num_slots = std::max(needed, int(4 * l2_bytes / slot_bytes) + 1);
  std::vector<int32_t> slots(static_cast<size_t>(r.num_slots));
  std::iota(slots.begin(), slots.end(), 0);
  std::shuffle(slots.begin(), slots.end(), std::mt19937(42));
  r.slot_indices = mem.upload(std::vector<int32_t>(slots.begin(), slots.begin() + batch));
  if (snapshots_per_request > 0)
    r.snapshot_slots = mem.upload(std::vector<int32_t>(slots.begin() + batch, slots.begin() + needed));
  if (window > 1) {
    std::vector<int32_t> phase(static_cast<size_t>(r.num_slots));
    for (int i = 0; i < r.num_slots; ++i) phase[size_t(i)] = stagger ? i % window : 0;
    r.flush_phase = mem.upload(phase);
  }
  return r;
}

/// Points a layer's params (either recurrence's) at the requests' slots and at fresh state
/// pools of `sizes` for `Policy`: the checkpoint, and the read copy unless it is shared.
template <class Policy, class Params>
void bind_slots_and_pools(device_arena& mem, Params& p, const slot_placement& placed,
                          const replayssm::state_pool_sizes& sizes) {
  p.slot_indices = placed.slot_indices;
  p.snapshot_slots = placed.snapshot_slots;
  p.flush_phase = placed.flush_phase;
  p.num_slots = placed.num_slots;
  p.checkpoint = mem.state_pool<typename Policy::checkpoint_format>(sizes.checkpoint, sizes.checkpoint_scales,
                                                                    &p.checkpoint_scales);
  if (!Policy::shared_state)
    p.read_copy =
        mem.state_pool<typename Policy::read_format>(sizes.read_copy, sizes.read_copy_scales, &p.read_copy_scales);
}

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
inline void require_no_step_errors(step_report* report, cudaStream_t stream) {
  const status s = replayssm::cuda::take_step_errors(report, stream);
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
  state.counters["pct_inplace_bw"] = 100.0 * gbs / bw.inplace_gbs;
  state.counters["copy_bw_GBps"] = bw.copy_gbs;
  state.counters["read_bw_GBps"] = bw.read_gbs;
  state.counters["inplace_bw_GBps"] = bw.inplace_gbs;
}

/// Steps per timed graph: from one flush to the next for replay (the layer's
/// `flush_period`), 16 for the write-back step.
template <class Layer>
constexpr int graph_steps = Layer::policy::is_writeback ? 16 : Layer::flush_period;

/// Mean step time over whole flush periods: one iteration is a graph of `graph_steps`
/// decode steps of `layer`, its time divided by the step count. Sets `median_us` and the
/// bandwidth counters of the layer's modelled bytes per step.
template <class Layer>
void time_decode_steps(benchmark::State& state, Layer& layer) {
  const int steps = graph_steps<Layer>;
  cudaStream_t stream;
  cuda_check(cudaStreamCreate(&stream), "stream");
  cudaGraphExec_t graph = capture(steps, stream, [&](int, cudaStream_t s) { layer.step(s); });
  const double median = time_graph(state, graph, stream, steps);
  state.counters["median_us"] = median * 1e6;
  set_bandwidth_counters(state, layer.bytes_per_step(), median);
  require_no_step_errors(layer.p.report, stream);
  cudaGraphExecDestroy(graph);
  cudaStreamDestroy(stream);
}

/// Every cursor of `layer` at `length` entries with one flush done (a step then flushes or
/// reads).
template <class Layer>
void set_cursors(Layer& layer, int32_t length) {
  std::vector<replay_cursor> c(size_t(layer.num_slots) * size_t(layer.p.heads), replay_cursor{length, 1u, 0, 0});
  cuda_check(cudaMemcpy(layer.p.cursors, c.data(), c.size() * sizeof(replay_cursor), cudaMemcpyHostToDevice),
             "cursors");
}

/// Replay's flush step and read steps, each timed alone (all requests in the same phase):
/// the read step at the start of a window (its token the only entry) and at its end (the
/// window's last read step, W - 1 entries before the token). Counters flush_us, read_us and
/// late_read_us.
template <class Layer>
void time_flush_and_read(benchmark::State& state, Layer& layer) {
  constexpr int W = Layer::policy::window;
  std::vector<double> flush, read, late_read;
  auto time_step_at = [&](int32_t length, std::vector<double>& into) {
    set_cursors(layer, length);
    into.push_back(median_ms(1, [&] { layer.step(nullptr); }, false));
  };
  for (auto _ : state) {
    time_step_at(W - 1, flush);
    time_step_at(0, read);
    time_step_at(W - 2, late_read);
    state.SetIterationTime((flush.back() + read.back()) * 1e-3);
  }
  auto median_us = [](std::vector<double>& v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2] * 1e3;
  };
  state.counters["flush_us"] = median_us(flush);
  state.counters["read_us"] = median_us(read);
  state.counters["late_read_us"] = median_us(late_read);
}

/// Staggered phases (a layer built with `stagger`): every step has 1/W of the requests
/// flushing. Per-step times of many consecutive steps, timed one by one: counters mean_us,
/// p99_us and p99_over_mean.
template <class Layer>
void time_staggered(benchmark::State& state, Layer& layer) {
  cudaEvent_t marks[2];
  cudaEventCreate(&marks[0]);
  cudaEventCreate(&marks[1]);
  std::vector<double> steps;
  layer.step(nullptr);
  for (auto _ : state) {
    cudaEventRecord(marks[0]);
    layer.step(nullptr);
    cudaEventRecord(marks[1]);
    cuda_check(cudaEventSynchronize(marks[1]), "step");
    float ms = 0;
    cudaEventElapsedTime(&ms, marks[0], marks[1]);
    steps.push_back(ms * 1e-3);
    state.SetIterationTime(steps.back());
  }
  std::sort(steps.begin(), steps.end());
  const double mean = std::accumulate(steps.begin(), steps.end(), 0.0) / double(steps.size());
  const double p99 = steps[std::min(steps.size() - 1, size_t(0.99 * double(steps.size())))];
  state.counters["mean_us"] = mean * 1e6;
  state.counters["p99_us"] = p99 * 1e6;
  state.counters["p99_over_mean"] = p99 / mean;
  cudaEventDestroy(marks[0]);
  cudaEventDestroy(marks[1]);
}

/// Registers `fn(state, shape)` at each batch as `name/batch:N`, in manual time and
/// microseconds; the caller sets how long it runs.
template <class Fn, class Shape>
benchmark::internal::Benchmark* register_batches(const std::string& name, Fn fn, const Shape& shape,
                                                 const std::vector<int64_t>& batches) {
  auto* b = benchmark::RegisterBenchmark(name.c_str(), fn, shape);
  for (int64_t batch : batches) b->Arg(batch);
  return b->ArgName("batch")->UseManualTime()->Unit(benchmark::kMicrosecond);
}

// Speculative decoding: one iteration is a CUDA graph of `spec_rounds` rounds (a verify
// step and a commit each) with a fixed acceptance pattern; the time per round is its median
// over iterations. Accepted tokens/s = batch x mean accepted / time per round.

constexpr int draft_tokens = 4;
/// Drafts accepted of 4, cycled per request and round: mean 2.5.
constexpr int32_t acceptance_pattern[] = {1, 2, 3, 4, 2, 3};
constexpr int pattern_length = 6;
/// Rounds per graph: two periods of the pattern, about two flushes per request at W = 16.
constexpr int spec_rounds = 12;

/// accepted[round][request] of the fixed pattern, on the device.
template <class Layer>
const int32_t* upload_acceptance(Layer& layer, double* mean) {
  std::vector<int32_t> accepted;
  for (int r = 0; r < spec_rounds; ++r)
    for (int b = 0; b < layer.batch; ++b) accepted.push_back(acceptance_pattern[(b + r) % pattern_length]);
  double sum = 0;
  for (int32_t a : accepted) sum += a;
  *mean = sum / double(accepted.size());
  return layer.upload(accepted);
}

/// Times a graph of `spec_rounds` rounds of `round(params, stream)` and sets the counters:
/// time per round, accepted tokens/s, the snapshot memory the baseline keeps and, for
/// replay, the window ring's extra bytes for the drafts.
template <class Layer, class Round>
void time_rounds(benchmark::State& state, Layer& layer, Round&& round) {
  double mean_accepted = 0;
  const int32_t* accepted = upload_acceptance(layer, &mean_accepted);
  cudaStream_t stream;
  cuda_check(cudaStreamCreate(&stream), "stream");
  cudaGraphExec_t graph = capture(spec_rounds, stream, [&](int r, cudaStream_t s) {
    auto p = layer.p;
    p.accepted_counts = accepted + r * layer.batch;
    round(p, s);
  });
  const double median = time_graph(state, graph, stream, spec_rounds);
  require_no_step_errors(layer.p.report, stream);
  state.counters["round_us"] = median * 1e6;
  state.counters["mean_accepted"] = mean_accepted;
  state.counters["accepted_tokens_per_s"] = layer.batch * mean_accepted / median;
  state.counters["snapshot_bytes"] = layer.snapshot_bytes();
  if constexpr (Layer::policy::is_writeback) {
    // The baseline's state traffic per round: the state read once, every draft's written.
    set_bandwidth_counters(state, layer.snapshot_bytes() * (layer.tokens + 1) / layer.tokens, median);
  } else {
    state.counters["window_extra_bytes"] = layer.window_extra_bytes();
  }
  cudaGraphExecDestroy(graph);
  cudaStreamDestroy(stream);
}

}  // namespace replayssm_bench
