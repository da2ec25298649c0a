// SPDX-License-Identifier: Apache-2.0
// GPU benchmark of speculative decoding: replay's verify + commit against the snapshot
// baseline (a state snapshot per draft, a slot swap on commit), T drafts per request.
//
// One iteration is a CUDA graph of `spec_rounds` rounds (verify + commit each) with a fixed
// acceptance pattern (time_rounds, bench_device.cuh); the time per round is its median over
// iterations. State pools are several times the 60 MB L2.
#include "mamba2/bench_layer.cuh"

namespace replayssm_bench {
namespace {

/// Replay: verify all drafts from checkpoint + window, commit by moving the cursors.
/// (Blocks of 256 threads were 20% slower than 128 at batch 256 and 512 on the H200.)
void bm_replay(benchmark::State& state, mamba2_layer_shape shape) {
  using policy = replay_policy<16, fp32_format>;
  mamba2_bench_layer<policy> layer(shape, int(state.range(0)), true, draft_tokens);
  time_rounds(state, layer, [](const mamba2_params<act_t>& p, cudaStream_t s) {
    replayssm::cuda::verify_step<policy>(p, s).throw_if_error();
    replayssm::cuda::commit_drafts(p, s).throw_if_error();
  });
}

/// The snapshot baseline: every draft's state written to its own slot, the accepted one
/// swapped in.
void bm_snapshot(benchmark::State& state, mamba2_layer_shape shape) {
  mamba2_bench_layer<writeback_policy<fp32_format>> layer(shape, int(state.range(0)), false, draft_tokens, true);
  int32_t* slots = const_cast<int32_t*>(layer.p.slot_indices);
  int32_t* snapshots = const_cast<int32_t*>(layer.p.snapshot_slots);
  time_rounds(state, layer, [&](const mamba2_params<act_t>& p, cudaStream_t s) {
    replayssm::cuda::verify_step<writeback_policy<fp32_format>>(p, s).throw_if_error();
    replayssm::cuda::snapshot_commit(p, slots, snapshots, s).throw_if_error();
  });
}

}  // namespace

void register_mamba2_spec() {
  for (const auto& m : {nano, super}) {
    for (auto [name, fn] : {std::pair{"spec_replay", bm_replay}, std::pair{"spec_snapshot", bm_snapshot}})
      register_batches(std::string(name) + "/" + m.name + "/fp32/W16/T4", fn, m.shape, {1, 64, 256, 512})->MinTime(0.05);
  }
}

}  // namespace replayssm_bench
