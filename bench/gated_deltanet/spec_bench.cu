// SPDX-License-Identifier: Apache-2.0
// GPU benchmark of Gated DeltaNet speculative decoding: replay's verify + commit (FP32
// state, W = 16, corrected-values window) against the snapshot baseline (a state snapshot
// per draft, a slot swap on commit), T = 4 drafts per request, the Qwen3.5-4B layer shape.
//
// The rounds, the acceptance pattern (mean 2.5 of 4) and the counters are those of the
// Mamba-2 benchmark (time_rounds, bench_device.cuh); state pools are several times the L2.
#include "gated_deltanet/bench_layer.cuh"

namespace replayssm_bench {
namespace {

/// Replay: verify all drafts from checkpoint + window, commit by moving the cursors.
void bm_gdn_replay(benchmark::State& state, gdn_layer_shape shape) {
  using policy = replay_policy<16, fp32_format>;
  gdn_bench_layer<policy> layer(shape, int(state.range(0)), true, draft_tokens);
  time_rounds(state, layer, [](const gdn_params<act_t>& p, cudaStream_t s) {
    replayssm::cuda::verify_step<policy>(p, s).throw_if_error();
    replayssm::cuda::commit_drafts(p, s).throw_if_error();
  });
}

/// The snapshot baseline: every draft's state written to its own slot, the accepted one
/// swapped in.
void bm_gdn_snapshot(benchmark::State& state, gdn_layer_shape shape) {
  gdn_bench_layer<writeback_policy<fp32_format>> layer(shape, int(state.range(0)), false, draft_tokens, true);
  int32_t* slots = const_cast<int32_t*>(layer.p.slot_indices);
  int32_t* snapshots = const_cast<int32_t*>(layer.p.snapshot_slots);
  time_rounds(state, layer, [&](const gdn_params<act_t>& p, cudaStream_t s) {
    replayssm::cuda::verify_step<writeback_policy<fp32_format>>(p, s).throw_if_error();
    replayssm::cuda::snapshot_commit(p, slots, snapshots, s).throw_if_error();
  });
}

}  // namespace

void register_gdn_spec() {
  const auto& m = qwen35_4b;
  for (auto [name, fn] : {std::pair{"BM_gdn_spec_replay", bm_gdn_replay}, std::pair{"BM_gdn_spec_snapshot", bm_gdn_snapshot}})
    register_batches(std::string(name) + "/" + m.name + "/fp32/W16/T4", fn, m.shape, {64, 256, 512})->MinTime(0.05);
}

}  // namespace replayssm_bench
