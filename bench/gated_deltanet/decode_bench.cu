// SPDX-License-Identifier: Apache-2.0
// GPU benchmark of the Gated DeltaNet decode steps: write-back against replay in both
// window modes (corrected values; raw inputs), FP32 state and a BF16 read copy with an FP32
// checkpoint, W = 16, BF16 activations, the Qwen3.5-4B layer shape over batch and the
// Qwen3.5-122B shape at batch 256; the flush and read steps alone, and staggered phases.
//
// As for Mamba-2 (mamba2/decode_bench.cu): replay time per step is the mean over whole
// flush periods (a CUDA graph of the W - 1 steps from one flush to the next, flush included:
// `gdn_flush_period`; 16 steps for write-back), timed with
// CUDA events; state pools are several times the 60 MB L2 and requests map to permuted
// slots. Counters: modelled bytes per step (gdn_bytes_per_step), GB/s, and the percentage of
// the copy and read-only bandwidths measured by this binary.
#include "gated_deltanet/bench_layer.cuh"

namespace replayssm_bench {

/// Registers the Gated DeltaNet speculative-decoding benchmarks (gated_deltanet/spec_bench.cu).
void register_gdn_spec();

namespace {

template <class Policy>
void bm_gdn_step(benchmark::State& state, gdn_layer_shape shape) {
  gdn_bench_layer<Policy> layer(shape, int(state.range(0)), false);
  time_decode_steps(state, layer);
}

/// Replay's flush step and read steps, each timed alone (time_flush_and_read).
template <class Policy>
void bm_gdn_flush_and_read(benchmark::State& state, gdn_layer_shape shape) {
  gdn_bench_layer<Policy> layer(shape, int(state.range(0)), false);
  time_flush_and_read(state, layer);
}

/// Staggered phases, step by step (time_staggered).
template <class Policy>
void bm_gdn_staggered(benchmark::State& state, gdn_layer_shape shape) {
  gdn_bench_layer<Policy> layer(shape, int(state.range(0)), true);
  time_staggered(state, layer);
}

constexpr gdn_window corrected = gdn_window::corrected_values;
constexpr gdn_window raw = gdn_window::raw_inputs;

/// Write-back FP32 and replay at W = 16 with an FP32 state (`all_modes`: also raw inputs, and
/// the BF16 read copy with an FP32 checkpoint in both modes).
void register_shape(const named_shape<gdn_layer_shape>& m, const std::vector<int64_t>& batches, bool all_modes) {
  auto reg = [&](const std::string& name, auto fn) {
    register_batches("BM_gdn_" + name, fn, m.shape, batches)->MinTime(0.05);
  };
  const std::string shape = std::string("/") + m.name;
  using fp32_replay = replay_policy<16, fp32_format>;
  using split_replay = replay_policy<16, bf16_format, fp32_format>;
  reg("writeback" + shape + "/fp32", bm_gdn_step<writeback_policy<fp32_format>>);
  reg("replay" + shape + "/fp32/corrected_values/W16", bm_gdn_step<gdn_policy<fp32_replay, corrected>>);
  if (!all_modes) return;
  reg("replay" + shape + "/fp32/raw_inputs/W16", bm_gdn_step<gdn_policy<fp32_replay, raw>>);
  auto reg_steps = [&](const std::string& name, auto fn) {
    register_batches("BM_gdn_" + name, fn, m.shape, batches)->Iterations(200);
  };
  reg_steps("flush_and_read" + shape + "/fp32/corrected_values/W16",
            bm_gdn_flush_and_read<gdn_policy<fp32_replay, corrected>>);
  reg_steps("flush_and_read" + shape + "/fp32/raw_inputs/W16", bm_gdn_flush_and_read<gdn_policy<fp32_replay, raw>>);
  reg_steps("staggered" + shape + "/fp32/corrected_values/W16", bm_gdn_staggered<gdn_policy<fp32_replay, corrected>>);
  reg("replay" + shape + "/read_bf16_ckpt_fp32/corrected_values/W16", bm_gdn_step<gdn_policy<split_replay, corrected>>);
  reg("replay" + shape + "/read_bf16_ckpt_fp32/raw_inputs/W16", bm_gdn_step<gdn_policy<split_replay, raw>>);
}

}  // namespace

void register_gdn() {
  register_shape(qwen35_4b, {1, 128, 256, 512}, true);
  register_shape(qwen35_122b, {256}, false);
  register_gdn_spec();
}

}  // namespace replayssm_bench
