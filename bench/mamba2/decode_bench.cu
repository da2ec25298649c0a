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
/// Registers an engine's fused kernel against the ready-made step (mamba2/fused_bench.cu).
void register_mamba2_fused();

namespace {

/// Mean step time over whole windows (time_decode_steps), every request in the same phase.
template <class Policy>
void bm_step(benchmark::State& state, mamba2_layer_shape shape) {
  mamba2_bench_layer<Policy> layer(shape, int(state.range(0)), false);
  time_decode_steps(state, layer);
}

/// The same with staggered phases: every step has 1/W of the requests flushing.
template <class Policy>
void bm_staggered_step(benchmark::State& state, mamba2_layer_shape shape) {
  mamba2_bench_layer<Policy> layer(shape, int(state.range(0)), true);
  time_decode_steps(state, layer);
}

/// Replay's flush step and read steps, each timed alone (time_flush_and_read).
template <class Policy>
void bm_flush_and_read(benchmark::State& state, mamba2_layer_shape shape) {
  mamba2_bench_layer<Policy> layer(shape, int(state.range(0)), false);
  time_flush_and_read(state, layer);
}

/// Staggered phases, step by step (time_staggered).
template <class Policy>
void bm_staggered(benchmark::State& state, mamba2_layer_shape shape) {
  mamba2_bench_layer<Policy> layer(shape, int(state.range(0)), true);
  time_staggered(state, layer);
}

const std::vector<int64_t> batches{1, 8, 32, 64, 128, 256, 512};

/// One state format: write-back, replay at W = 8, 16 and 32, and the W = 16 flush and read
/// steps alone.
template <class Format>
void register_format(const named_shape<mamba2_layer_shape>& m) {
  const std::string tail = std::string("/") + m.name + "/" + Format::name;
  auto reg = [&](const std::string& name, auto fn) { register_batches(name, fn, m.shape, batches)->MinTime(0.05); };
  reg("writeback" + tail, bm_step<writeback_policy<Format>>);
  reg("replay" + tail + "/W8", bm_step<replay_policy<8, Format>>);
  reg("replay" + tail + "/W16", bm_step<replay_policy<16, Format>>);
  reg("replay" + tail + "/W32", bm_step<replay_policy<32, Format>>);
  register_batches("flush_and_read" + tail + "/W16", bm_flush_and_read<replay_policy<16, Format>>, m.shape, batches)
      ->Iterations(200);
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
  register_mamba2_fused();
  register_split(nano);
  for (const auto& m : {nano, super}) {
    register_format<fp32_format>(m);
    register_format<fp16_format>(m);
    register_format<bf16_format>(m);
    const std::string tail = std::string("/") + m.name + "/fp32/W16";
    register_batches("replay_staggered" + tail, bm_staggered_step<replay_policy<16, fp32_format>>, m.shape, batches)
        ->MinTime(0.05);
    register_batches("staggered" + tail, bm_staggered<replay_policy<16, fp32_format>>, m.shape, batches)
        ->Iterations(200);
  }
  // The read step's cost over the window, at every window length.
  for (auto [name, fn] : {std::pair{"flush_and_read/nano/fp32/W8", bm_flush_and_read<replay_policy<8, fp32_format>>},
                          std::pair{"flush_and_read/nano/fp32/W32", bm_flush_and_read<replay_policy<32, fp32_format>>}})
    register_batches(name, fn, nano.shape, batches)->Iterations(200);
}

}  // namespace replayssm_bench
