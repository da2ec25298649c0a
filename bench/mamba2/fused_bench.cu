// SPDX-License-Identifier: Apache-2.0
// GPU benchmark of an engine's fused kernel (examples/fused_kernel/replay_norm_kernel.cuh):
// the replay decode step on the warp primitive with the RMSNorm of the head's gated output
// fused after it, against the ready-made step followed by a separate norm kernel; and the
// engine kernel's step alone against the ready-made step. Whole windows, timed as the decode
// benchmarks are (time_decode_steps).
#include "../examples/fused_kernel/replay_norm_kernel.cuh"
#include "mamba2/bench_layer.cuh"

namespace replayssm_bench {
namespace {

/// What one step runs.
enum class fused_variant {
  ready_made,             ///< the library's replay step
  ready_made_then_norm,   ///< the library's replay step, then the norm kernel
  engine_step,            ///< the engine's kernel without the norm
  engine_step_with_norm,  ///< the engine's kernel, the norm fused
};

constexpr float norm_eps = 1e-6f;

template <class Policy, fused_variant Variant>
struct fused_layer : mamba2_bench_layer<Policy> {
  const float* weight;
  fused_layer(mamba2_layer_shape s, int b)
      : mamba2_bench_layer<Policy>(s, b, false),
        weight(this->template random<float>(size_t(s.heads) * s.head_dim, 1.0f, 6)) {}
  void step(cudaStream_t stream) {
    using namespace replayssm_example;
    if constexpr (Variant == fused_variant::ready_made || Variant == fused_variant::ready_made_then_norm)
      replayssm::cuda::decode_step<Policy>(this->p, stream).throw_if_error();
    if constexpr (Variant == fused_variant::ready_made_then_norm)
      launch_rmsnorm(this->p, weight, norm_eps, stream).throw_if_error();
    if constexpr (Variant == fused_variant::engine_step)
      launch_replay_norm<Policy>(this->p, nullptr, norm_eps, stream).throw_if_error();
    if constexpr (Variant == fused_variant::engine_step_with_norm)
      launch_replay_norm<Policy>(this->p, weight, norm_eps, stream).throw_if_error();
  }
};

template <fused_variant Variant>
void bm_fused(benchmark::State& state, mamba2_layer_shape shape) {
  fused_layer<replay_policy<16, fp32_format>, Variant> layer(shape, int(state.range(0)));
  time_decode_steps(state, layer);
}

}  // namespace

void register_mamba2_fused() {
  const std::vector<int64_t> batches{1, 8, 32, 128, 256, 512};
  const std::string head = "fused/nano/fp32/W16/";
  register_batches(head + "ready_made", bm_fused<fused_variant::ready_made>, nano.shape, batches)->MinTime(0.05);
  register_batches(head + "ready_made_then_norm", bm_fused<fused_variant::ready_made_then_norm>, nano.shape, batches)
      ->MinTime(0.05);
  register_batches(head + "engine_step", bm_fused<fused_variant::engine_step>, nano.shape, batches)->MinTime(0.05);
  register_batches(head + "engine_step_with_norm", bm_fused<fused_variant::engine_step_with_norm>, nano.shape, batches)
      ->MinTime(0.05);
}

}  // namespace replayssm_bench
