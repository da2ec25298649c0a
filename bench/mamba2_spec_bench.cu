// SPDX-License-Identifier: Apache-2.0
// GPU benchmark of speculative decoding: replay's verify + commit against the snapshot
// baseline (a state snapshot per draft, a slot swap on commit), T drafts per request.
//
// One iteration is a CUDA graph of `rounds` rounds (verify + commit each) with a fixed
// acceptance pattern; the time per round is its median over iterations. Accepted tokens/s =
// batch x mean accepted / time per round. State pools are several times the 60 MB L2.
#include "mamba2_bench_layer.cuh"

namespace replayssm_bench {
namespace {

constexpr int draft_tokens = 4;
/// Drafts accepted of 4, cycled per request and round: mean 2.5.
constexpr int32_t acceptance_pattern[] = {1, 2, 3, 4, 2, 3};
constexpr int pattern_length = 6;
/// Rounds per graph: two periods of the pattern, about two flushes per request at W = 16.
constexpr int rounds = 12;

/// accepted[round][request] of the fixed pattern, on the device.
template <class Policy>
const int32_t* upload_acceptance(bench_layer<Policy>& layer, double* mean) {
  std::vector<int32_t> accepted;
  for (int r = 0; r < rounds; ++r)
    for (int b = 0; b < layer.batch; ++b) accepted.push_back(acceptance_pattern[(b + r) % pattern_length]);
  double sum = 0;
  for (int32_t a : accepted) sum += a;
  *mean = sum / double(accepted.size());
  return layer.upload(accepted);
}

/// Times a graph of `rounds` rounds of `round(params, stream)` and sets the counters.
template <class Policy, class Round>
void time_rounds(benchmark::State& state, bench_layer<Policy>& layer, Round&& round) {
  double mean_accepted = 0;
  const int32_t* accepted = upload_acceptance(layer, &mean_accepted);
  cudaStream_t stream;
  cuda_check(cudaStreamCreate(&stream), "stream");
  cudaGraphExec_t graph = capture(rounds, stream, [&](int r, cudaStream_t s) {
    mamba2_params p = layer.p;
    p.accepted_counts = accepted + r * layer.batch;
    round(p, s);
  });
  const double median = time_graph(state, graph, stream, rounds);
  require_no_step_errors(layer.p.error_flags, stream);
  state.counters["round_us"] = median * 1e6;
  state.counters["mean_accepted"] = mean_accepted;
  state.counters["accepted_tokens_per_s"] = layer.batch * mean_accepted / median;
  state.counters["snapshot_bytes"] = double(mamba2_snapshot_bytes<fp32_format>(layer.shape, layer.batch, draft_tokens));
  cudaGraphExecDestroy(graph);
  cudaStreamDestroy(stream);
}

/// Replay: verify all drafts from checkpoint + window, commit by moving the cursors.
/// (Blocks of 256 threads were 20% slower than 128 at batch 256 and 512 on the H200.)
void bm_replay(benchmark::State& state, mamba2_layer_shape shape) {
  using policy = replay_policy<16, fp32_format>;
  bench_layer<policy> layer(shape, int(state.range(0)), true, draft_tokens);
  time_rounds(state, layer, [](const mamba2_params& p, cudaStream_t s) {
    cuda::replay_verify_step<policy>(p, s).throw_if_error();
    cuda::commit_drafts(p, s).throw_if_error();
  });
  const auto decode = mamba2_buffers<policy>(shape, layer.batch, dtype::bf16);
  const auto spec = mamba2_buffers<policy>(shape, layer.batch, dtype::bf16, draft_tokens);
  state.counters["window_extra_bytes"] = double(spec.window_total() - decode.window_total());
}

/// The snapshot baseline: every draft's state written to its own slot, the accepted one
/// swapped in.
void bm_snapshot(benchmark::State& state, mamba2_layer_shape shape) {
  bench_layer<writeback_policy<fp32_format>> layer(shape, int(state.range(0)), false, draft_tokens, true);
  int32_t* slots = const_cast<int32_t*>(layer.p.slot_indices);
  int32_t* snapshots = const_cast<int32_t*>(layer.p.snapshot_slots);
  time_rounds(state, layer, [&](const mamba2_params& p, cudaStream_t s) {
    cuda::snapshot_verify_step<fp32_format>(p, s).throw_if_error();
    cuda::snapshot_commit(p, slots, snapshots, s).throw_if_error();
  });
}

}  // namespace

void register_spec() {
  for (const model_shape& m : {nano, super}) {
    for (auto [name, fn] : {std::pair{"spec_replay", bm_replay}, std::pair{"spec_snapshot", bm_snapshot}}) {
      const std::string full = std::string(name) + "/" + m.name + "/fp32/W16/T4";
      auto* b = benchmark::RegisterBenchmark(full.c_str(), fn, m.shape);
      for (int64_t batch : {1, 64, 256, 512}) b->Arg(batch);
      b->ArgName("batch")->UseManualTime()->Unit(benchmark::kMicrosecond)->MinTime(0.05);
    }
  }
}

}  // namespace replayssm_bench
