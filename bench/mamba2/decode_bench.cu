// SPDX-License-Identifier: Apache-2.0
// GPU benchmark of the Mamba-2 decode steps: write-back against replay over batch,
// model shape, window and state format, BF16 activations. (main: bench_main.cu.)
//
// Replay time per step is the mean over whole windows: a CUDA graph of W steps, flush
// included, timed with CUDA events (manual time). State pools are several times the 60 MB
// L2 and requests map to permuted slots. Counters: modelled bytes per step, GB/s, and the
// percentage of the copy and read-only bandwidths measured by this binary.
#include "mamba2/bench_layer.cuh"

namespace replayssm_bench {

/// Registers the speculative-decoding benchmarks (mamba2/spec_bench.cu).
void register_mamba2_spec();

namespace {

/// Mean step time over whole windows (time_decode_steps).
template <class Policy>
void bm_step(benchmark::State& state, mamba2_layer_shape shape) {
  mamba2_bench_layer<Policy> layer(shape, int(state.range(0)), false);
  time_decode_steps(state, layer);
}

/// Replay's flush step and read steps, each timed alone (all requests in the same phase):
/// the read step at the start of a window (its token the only entry) and at its end (the
/// window's last read step, W - 1 entries before the token).
template <class Policy>
void bm_flush_and_read(benchmark::State& state, mamba2_layer_shape shape) {
  mamba2_bench_layer<Policy> layer(shape, int(state.range(0)), false);
  std::vector<double> flush, read, late_read;
  auto time_step_at = [&](int32_t length, std::vector<double>& into) {
    layer.set_cursors(length);
    into.push_back(median_ms(1, [&] { layer.step(nullptr); }, false));
  };
  for (auto _ : state) {
    time_step_at(Policy::window - 1, flush);
    time_step_at(0, read);
    time_step_at(Policy::window - 2, late_read);
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

/// Staggered phases: every step has 1/W of the requests flushing. Per-step times of many
/// consecutive steps, timed one by one: mean and 99th percentile.
template <class Policy>
void bm_staggered(benchmark::State& state, mamba2_layer_shape shape) {
  mamba2_bench_layer<Policy> layer(shape, int(state.range(0)), true);
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
void register_format(const named_shape<mamba2_layer_shape>& m) {
  const std::string tail = std::string("/") + m.name + "/" + Format::name;
  auto reg = [&](const std::string& name, auto fn) { register_batches(name, fn, m.shape, batches)->MinTime(0.05); };
  reg("writeback" + tail, bm_step<writeback_policy<Format>>);
  reg("replay" + tail + "/W8", bm_step<replay_policy<8, Format>>);
  reg("replay" + tail + "/W16", bm_step<replay_policy<16, Format>>);
  reg("replay" + tail + "/W32", bm_step<replay_policy<32, Format>>);
}

/// A separate read copy, compared against the FP32 write-back step: whole windows, and its
/// flush and read steps alone.
template <class Policy>
void register_split_mode(const named_shape<mamba2_layer_shape>& m, const std::string& mode) {
  const std::string tail = std::string("/") + m.name + "/" + mode + "/W16";
  register_batches("replay" + tail, bm_step<Policy>, m.shape, batches)->MinTime(0.05);
  register_batches("flush_and_read" + tail, bm_flush_and_read<Policy>, m.shape, batches)->Iterations(200);
}

void register_split(const named_shape<mamba2_layer_shape>& m) {
  register_split_mode<replay_policy<16, nvfp4_format, fp16_format, round_stochastic>>(m, "read_nvfp4_ckpt_fp16_sr");
  register_split_mode<replay_policy<16, fp16_format, fp32_format, round_stochastic>>(m, "read_fp16_ckpt_fp32_sr");
  register_split_mode<replay_policy<16, fp8_e4m3_format, fp16_format, round_stochastic>>(m, "read_fp8_ckpt_fp16_sr");
}

}  // namespace

void register_mamba2() {
  register_mamba2_spec();
  register_split(nano);
  for (const auto& m : {nano, super}) {
    register_format<fp32_format>(m);
    register_format<fp16_format>(m);
    register_format<bf16_format>(m);
    const std::string tail = std::string("/") + m.name + "/fp32/W16";
    for (auto [name, fn] : {std::pair{"flush_and_read", bm_flush_and_read<replay_policy<16, fp32_format>>},
                            std::pair{"staggered", bm_staggered<replay_policy<16, fp32_format>>}})
      register_batches(std::string(name) + tail, fn, m.shape, batches)->Iterations(200);
  }
}

}  // namespace replayssm_bench
