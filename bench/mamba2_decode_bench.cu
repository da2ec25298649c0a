// SPDX-License-Identifier: Apache-2.0
// GPU benchmark of the Mamba-2 decode steps: naive write-back against replay over batch,
// model shape, window and state format, BF16 activations.
//
// Replay time per step is the mean over whole windows: a CUDA graph of W steps, flush
// included, timed with CUDA events (manual time). State pools are several times the 60 MB
// L2 and requests map to permuted slots. Counters: modelled bytes per step, GB/s, and the
// percentage of the copy and read-only bandwidths measured by this binary.
#include "mamba2_bench_layer.cuh"

namespace replayssm_bench {

/// Registers the speculative-decoding benchmarks (mamba2_spec_bench.cu).
void register_spec();

namespace {

/// Mean step time over whole windows: one iteration is a graph of W steps (16 for the
/// write-back step), its time divided by the step count.
template <class Policy>
void bm_step(benchmark::State& state, mamba2_layer_shape shape) {
  bench_layer<Policy> layer(shape, int(state.range(0)), false);
  const int steps = Policy::is_writeback ? 16 : Policy::window;
  cudaStream_t stream;
  cuda_check(cudaStreamCreate(&stream), "stream");
  cudaGraphExec_t graph = capture(steps, stream, [&](int, cudaStream_t s) { layer.step(s); });
  const double median = time_graph(state, graph, stream, steps);
  state.counters["median_us"] = median * 1e6;
  set_bandwidth_counters(state, layer.bytes_per_step(), median);
  require_no_step_errors(layer.p.error_flags, stream);
  cudaGraphExecDestroy(graph);
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
  register_spec();
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
