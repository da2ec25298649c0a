// SPDX-License-Identifier: Apache-2.0
// CPU benchmark of the Mamba-2 decode steps at small sizes: the traffic effect of replay
// without a GPU. One iteration is a whole window of steps, so flushes are included.
#include <benchmark/benchmark.h>

#include <replayssm/replayssm.hpp>

#include <random>
#include <vector>

using namespace replayssm;

namespace {

constexpr mamba2_layer_shape shape{8, 64, 128, 2};
constexpr int window = 16;

/// A layer's host buffers for a batch under `Policy`, float activations.
template <class Policy>
struct cpu_layer {
  std::vector<float> x, z, y, dt, B, C, A, D, bias, window_dt;
  std::vector<float> checkpoint, read_copy, window_x, window_B;  // float storage is 16-byte aligned enough here
  std::vector<replay_cursor> cursors;
  mamba2_params<float> p;

  explicit cpu_layer(int batch) {
    std::mt19937 rng(1);
    std::normal_distribution<float> unit(0.0f, 1.0f);
    const size_t d = size_t(shape.heads) * shape.head_dim, gn = size_t(shape.groups) * shape.state_dim;
    auto fill = [&](std::vector<float>& v, size_t n) {
      v.resize(n);
      for (auto& e : v) e = unit(rng);
    };
    fill(x, batch * d);
    fill(z, batch * d);
    fill(dt, size_t(batch) * shape.heads);
    fill(B, batch * gn);
    fill(C, batch * gn);
    y.resize(batch * d);
    A.assign(size_t(shape.heads), -2.0f);
    D.assign(size_t(shape.heads), 1.0f);
    bias.assign(size_t(shape.heads), -3.0f);
    const auto sizes = mamba2_buffers<Policy>(shape, batch, dtype::f32);
    fill(checkpoint, sizes.checkpoint / 4);
    read_copy.resize(sizes.read_copy / 4);
    window_x.resize(sizes.window_x / 4);
    window_B.resize(sizes.window_B / 4);
    window_dt.resize(sizes.window_dt / 4);
    cursors.assign(size_t(batch) * shape.heads, replay_cursor{});
    p = contiguous_mamba2_params<float>(shape, batch);
    p.x = x.data();
    p.z = z.data();
    p.y = y.data();
    p.dt = dt.data();
    p.B = B.data();
    p.C = C.data();
    p.A = A.data();
    p.D = D.data();
    p.dt_bias = bias.data();
    p.num_slots = batch;
    p.checkpoint = checkpoint.data();
    p.read_copy = read_copy.empty() ? nullptr : read_copy.data();
    p.window_x = window_x.empty() ? nullptr : window_x.data();
    p.window_B = window_B.empty() ? nullptr : window_B.data();
    p.window_dt = window_dt.empty() ? nullptr : window_dt.data();
    p.cursors = cursors.data();
  }
};

/// A whole window of steps per iteration, the (request, head) pairs spread over `threads`
/// threads (the second argument; `cpu::thread_for` runs one on the calling thread alone).
template <class Policy>
void bm_cpu_step(benchmark::State& state) {
  const int batch = int(state.range(0));
  const cpu::thread_for threads{int(state.range(1))};
  cpu_layer<Policy> layer(batch);
  for (auto _ : state) {
    for (int i = 0; i < window; ++i) cpu::decode_step<Policy>(layer.p, threads).throw_if_error();
    benchmark::DoNotOptimize(layer.y.data());
  }
  // Seconds per step (printed with an SI prefix: 233u is 233 microseconds).
  state.counters["time_per_step"] =
      benchmark::Counter(double(window), benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
  state.counters["modelled_bytes_per_step"] = mamba2_bytes_per_step<Policy>(shape, batch, dtype::f32);
}

BENCHMARK(bm_cpu_step<writeback_policy<fp32_format>>)
    ->Name("cpu/writeback/fp32")
    ->ArgNames({"batch", "threads"})
    ->ArgsProduct({{1, 4, 8}, {1, 2}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(bm_cpu_step<replay_policy<window, fp32_format>>)
    ->Name("cpu/replay/fp32/W16")
    ->ArgNames({"batch", "threads"})
    ->ArgsProduct({{1, 4, 8}, {1, 2}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
