// SPDX-License-Identifier: Apache-2.0
// GPU benchmark of the Mamba-2 decode steps: naive write-back against replay over batch,
// model shape, window and state format, BF16 activations.
//
// Replay time per step is the mean over whole windows: a CUDA graph of W steps, flush
// included, timed with CUDA events (manual time). State pools are several times the 60 MB
// L2 and requests map to permuted slots. Counters: modelled bytes per step, GB/s, and the
// percentage of the copy and read-only bandwidths measured by this binary.
#include "bench_device.cuh"

#include <string>

namespace replayssm_bench {
namespace {

using act_t = bfloat16_t;
constexpr double l2_bytes = 60e6;

struct model_shape {
  const char* name;
  mamba2_layer_shape shape;
};
const model_shape nano{"nano", {96, 80, 128, 8}};
const model_shape super{"super", {128, 64, 128, 8}};

/// One layer's device buffers and parameters for a batch under `Policy`.
template <class Policy>
struct bench_layer {
  mamba2_layer_shape shape;
  int batch;
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

  bench_layer(mamba2_layer_shape s, int b, bool stagger) : shape(s), batch(b) {
    const auto one = mamba2_buffers<Policy>(s, 1, dtype::bf16);
    const double slot_bytes = double(one.checkpoint_total() + one.read_copy_total());
    num_slots = std::max(batch, int(4 * l2_bytes / slot_bytes) + 1);
    const auto sizes = mamba2_buffers<Policy>(s, num_slots, dtype::bf16);
    const size_t d = size_t(s.heads) * s.head_dim, gn = size_t(s.groups) * s.state_dim;
    p = contiguous_mamba2_params(s, batch, dtype::bf16);
    p.x = random<act_t>(batch * d, 1.0f, 1);
    p.z = random<act_t>(batch * d, 1.0f, 2);
    p.y = take(batch * d * sizeof(act_t));
    p.dt = random<act_t>(size_t(batch) * s.heads, 0.3f, 3);
    p.B = random<act_t>(batch * gn, 1.0f, 4);
    p.C = random<act_t>(batch * gn, 1.0f, 5);
    std::vector<float> A(size_t(s.heads)), bias(size_t(s.heads), -4.0f);
    for (int h = 0; h < s.heads; ++h) A[size_t(h)] = -1.0f - float(h % 16);
    p.A = upload(A);
    p.D = upload(std::vector<float>(size_t(s.heads), 1.0f));
    p.dt_bias = upload(bias);
    // Requests land on a random subset of slots, in random order.
    std::vector<int32_t> slots(static_cast<size_t>(num_slots));
    std::iota(slots.begin(), slots.end(), 0);
    std::shuffle(slots.begin(), slots.end(), std::mt19937(42));
    slots.resize(size_t(batch));
    p.slot_indices = upload(slots);
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

/// A CUDA graph of `steps` consecutive steps.
template <class Policy>
cudaGraphExec_t capture(bench_layer<Policy>& layer, int steps, cudaStream_t stream) {
  cudaGraph_t graph;
  cuda_check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "capture");
  for (int i = 0; i < steps; ++i) layer.step(stream);
  cuda_check(cudaStreamEndCapture(stream, &graph), "capture");
  cudaGraphExec_t exec;
  cuda_check(cudaGraphInstantiate(&exec, graph, 0), "instantiate");
  cudaGraphDestroy(graph);
  return exec;
}

void set_bandwidth_counters(benchmark::State& state, double bytes, double seconds) {
  const auto& bw = measured_bandwidth();
  const double gbs = bytes / seconds / 1e9;
  state.counters["bytes_per_step"] = bytes;
  state.counters["GBps"] = gbs;
  state.counters["pct_copy_bw"] = 100.0 * gbs / bw.copy_gbs;
  state.counters["pct_read_bw"] = 100.0 * gbs / bw.read_gbs;
  state.counters["copy_bw_GBps"] = bw.copy_gbs;
  state.counters["read_bw_GBps"] = bw.read_gbs;
}

/// Mean step time over whole windows: one iteration is a graph of W steps (16 for the
/// write-back step), its time divided by the step count.
template <class Policy>
void bm_step(benchmark::State& state, mamba2_layer_shape shape) {
  bench_layer<Policy> layer(shape, int(state.range(0)), false);
  const int steps = Policy::is_writeback ? 16 : Policy::window;
  cudaStream_t stream;
  cuda_check(cudaStreamCreate(&stream), "stream");
  cudaGraphExec_t graph = capture(layer, steps, stream);
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
  std::sort(per_step.begin(), per_step.end());
  const double median = per_step[per_step.size() / 2];
  state.counters["median_us"] = median * 1e6;
  set_bandwidth_counters(state, layer.bytes_per_step(), median);
  cuda_check(cuda::take_step_errors(layer.p.error_flags, stream).ok() ? cudaSuccess : cudaErrorUnknown, "step errors");
  cudaGraphExecDestroy(graph);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  cudaStreamDestroy(stream);
}

/// Replay's flush step and read step, each timed alone (all requests in the same phase).
template <class Policy>
void bm_flush_and_read(benchmark::State& state, mamba2_layer_shape shape) {
  bench_layer<Policy> layer(shape, int(state.range(0)), false);
  std::vector<double> flush, read;
  for (auto _ : state) {
    layer.set_cursors(Policy::window - 1);
    flush.push_back(median_ms(1, [&] { layer.step(nullptr); }, false));
    layer.set_cursors(0);
    read.push_back(median_ms(1, [&] { layer.step(nullptr); }, false));
    state.SetIterationTime((flush.back() + read.back()) * 1e-3);
  }
  std::sort(flush.begin(), flush.end());
  std::sort(read.begin(), read.end());
  state.counters["flush_us"] = flush[flush.size() / 2] * 1e3;
  state.counters["read_us"] = read[read.size() / 2] * 1e3;
}

/// Staggered phases: every step has 1/W of the requests flushing. Per-step times of many
/// consecutive steps, timed one by one: mean and 99th percentile.
template <class Policy>
void bm_staggered(benchmark::State& state, mamba2_layer_shape shape) {
  bench_layer<Policy> layer(shape, int(state.range(0)), true);
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

const std::vector<int64_t> batches{1, 8, 32, 64, 128, 256, 512};

template <class Format>
void register_format(const model_shape& m) {
  const std::string tail = std::string("/") + m.name + "/" + Format::name;
  auto reg = [&](const std::string& name, auto fn) {
    auto* b = benchmark::RegisterBenchmark(name.c_str(), fn, m.shape);
    for (int64_t batch : batches) b->Arg(batch);
    b->ArgName("batch")->UseManualTime()->Unit(benchmark::kMicrosecond)->MinTime(0.05);
  };
  reg("naive" + tail, bm_step<writeback_policy<Format>>);
  reg("replay" + tail + "/W8", bm_step<replay_policy<8, Format>>);
  reg("replay" + tail + "/W16", bm_step<replay_policy<16, Format>>);
  reg("replay" + tail + "/W32", bm_step<replay_policy<32, Format>>);
}

/// Separate read copies, compared against the FP32 write-back step.
void register_split(const model_shape& m) {
  auto reg = [&](const std::string& name, auto fn) {
    auto* b = benchmark::RegisterBenchmark(name.c_str(), fn, m.shape);
    for (int64_t batch : batches) b->Arg(batch);
    b->ArgName("batch")->UseManualTime()->Unit(benchmark::kMicrosecond)->MinTime(0.05);
  };
  const std::string tail = std::string("/") + m.name;
  reg("replay" + tail + "/read_nvfp4_ckpt_fp16_sr/W16", bm_step<replay_policy<16, nvfp4_format, fp16_format, round_stochastic>>);
  reg("replay" + tail + "/read_fp16_ckpt_fp32_sr/W16", bm_step<replay_policy<16, fp16_format, fp32_format, round_stochastic>>);
  reg("replay" + tail + "/read_fp8_ckpt_fp16_sr/W16", bm_step<replay_policy<16, fp8_e4m3_format, fp16_format, round_stochastic>>);
}

void register_all() {
  register_split(nano);
  for (const model_shape& m : {nano, super}) {
    register_format<fp32_format>(m);
    register_format<fp16_format>(m);
    register_format<bf16_format>(m);
    const std::string tail = std::string("/") + m.name + "/fp32/W16";
    for (auto [name, fn] : {std::pair{"flush_and_read", bm_flush_and_read<replay_policy<16, fp32_format>>},
                            std::pair{"staggered", bm_staggered<replay_policy<16, fp32_format>>}}) {
      auto* b = benchmark::RegisterBenchmark((std::string(name) + tail).c_str(), fn, m.shape);
      for (int64_t batch : batches) b->Arg(batch);
      b->ArgName("batch")->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(200);
    }
  }
}

}  // namespace
}  // namespace replayssm_bench

int main(int argc, char** argv) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("REPLAYSSM_SKIP_NO_GPU: no CUDA device, nothing to measure\n");
    return 0;
  }
  benchmark::Initialize(&argc, argv);
  replayssm_bench::register_all();
  const auto& bw = replayssm_bench::measured_bandwidth();
  benchmark::AddCustomContext("copy_bandwidth_GBps", std::to_string(bw.copy_gbs));
  benchmark::AddCustomContext("read_bandwidth_GBps", std::to_string(bw.read_gbs));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
