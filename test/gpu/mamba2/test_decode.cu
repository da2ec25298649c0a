// SPDX-License-Identifier: Apache-2.0
// The Mamba-2 CUDA decode steps: against the float64 reference over many windows, bit for
// bit against the CPU path (every launch configuration, a user-defined format), and
// device-side error reporting.
#include "../../../examples/custom_policy/mxfp4_format.hpp"
#include "../../../examples/fused_kernel/replay_norm_kernel.cuh"
#include "device_runner.cuh"

using namespace replayssm;
using namespace replayssm_test;

TEST_CASE("gpu mamba2 replay matches the reference on an odd shape for every window", "[gpu][mamba2][decode]") {
  const mamba2_case c{mamba2_odd_shape, 3, 5, true, true, 11};
  gpu_mamba2_scenario<replay_policy<1, fp32_format>, float>(c, 8, false);
  gpu_mamba2_scenario<replay_policy<8, fp32_format>, float>(c, 8, false);
  gpu_mamba2_scenario<replay_policy<16, fp32_format>, float>(c, 8, true);
  gpu_mamba2_scenario<replay_policy<32, fp32_format>, float>(c, 8, true);
}

TEST_CASE("gpu mamba2 replay matches the reference at a batch of many blocks", "[gpu][mamba2][decode]") {
  // 70 requests over 91 slots: the planner and the steps span several blocks.
  gpu_mamba2_scenario<replay_policy<8, fp32_format>, float>({{4, 16, 32, 2}, 70, 91, true, true, 12}, 8, true);
  gpu_mamba2_scenario<replay_policy<1, fp32_format>, bfloat16_t>({{4, 16, 32, 2}, 70, 91, true, true, 13}, 8, false);
}

TEST_CASE("gpu mamba2 replay matches the reference at a batch beyond one wave", "[gpu][mamba2][decode]") {
  // 240 requests x 16 heads: more warps than the device holds at once, so that a step's
  // one launch runs in waves, later ones starting after the planner has ended (the batches
  // above fit at once), or, for W = 32, its flush launch runs beside its read launch
  // (`mamba2_large_batch_launches`); and more heads than the write-back tiles hold at once,
  // so that write-back streams its rows.
  gpu_mamba2_scenario<replay_policy<8, fp32_format>, float>({{16, 16, 32, 2}, 240, 301, true, true, 18}, 4, true);
  gpu_mamba2_scenario<replay_policy<32, fp32_format>, float>({{16, 16, 32, 2}, 240, 301, true, true, 19}, 2, true);
}

/// One request's outputs `y` (heads x head_dim) normalized head by head in float64: RMSNorm
/// times `weight` (examples/fused_kernel's norm, written from its formula).
template <class T>
void rmsnorm_reference(T* y, const std::vector<float>& weight, const mamba2_layer_shape& s, double eps) {
  for (int h = 0; h < s.heads; ++h) {
    T* head = y + size_t(h) * s.head_dim;
    double sum = 0.0;
    for (int p = 0; p < s.head_dim; ++p) sum += widen(head[p]) * widen(head[p]);
    const double inverse = 1.0 / std::sqrt(sum / s.head_dim + eps);
    for (int p = 0; p < s.head_dim; ++p) {
      const double normalized = widen(head[p]) * inverse * double(weight[size_t(h) * s.head_dim + p]);
      if constexpr (std::is_same_v<T, double>)
        head[p] = normalized;
      else
        head[p] = from_float<T>(float(normalized));
    }
  }
}

/// run_mamba2_scenario with the replay step an engine's kernel on the warp primitives
/// (examples/fused_kernel's): one warp per head, or a block per head in tiles where the
/// batch's heads fit the device at once, reads or flushes as the head's plan says. With
/// `norm` the kernel normalizes each head's outputs before storing them; the reference's
/// outputs and the write-back step's are then normalized in float64 on the host.
template <class Policy, class Act>
void engine_kernel_scenario(const mamba2_case& c, int windows, bool norm) {
  using writeback = mamba2_host_state<writeback_policy<typename Policy::checkpoint_format>, Act>;
  constexpr float eps = 1e-6f;
  std::mt19937_64 rng(c.seed + 1000);
  std::uniform_real_distribution<float> draw(0.5f, 1.5f);
  std::vector<float> weight(size_t(c.shape.heads) * c.shape.head_dim);
  for (float& w : weight) w = draw(rng);
  const size_t ys = mamba2_harness::outputs(c.shape);
  step_runner<writeback> run_writeback = [&](const mamba2_params<Act>& hp, writeback& st) {
    const status s = device_decode<writeback>()(hp, st);
    for (int b = 0; norm && b < hp.batch; ++b) rmsnorm_reference(hp.y + size_t(b) * ys, weight, c.shape, eps);
    return s;
  };
  std::function<void(double*)> normalize;
  if (norm) normalize = [&](double* y) { rmsnorm_reference(y, weight, c.shape, eps); };
  run_mamba2_scenario<Policy, Act>(
      c, windows, true, {output_tolerance<Act>(), 1e-5}, run_writeback,
      [&](const mamba2_params<Act>& hp, mamba2_host_state<Policy, Act>& st) {
        return device_run(hp, st, [&](const mamba2_params<Act>& p) {
          const device_copy w(weight.data(), weight.size() * sizeof(float));
          const status launched =
              replayssm_example::launch_replay_norm<Policy>(p, norm ? w.get<float>() : nullptr, eps, nullptr);
          REPLAYSSM_CUDA_CHECK(cudaDeviceSynchronize());
          return launched;
        });
      },
      normalize);
}

TEST_CASE("an engine's kernel on the mamba2 warp primitives matches the reference", "[gpu][mamba2][decode]") {
  // 5 requests x 8 heads and 6 x 4 (P = 20: a last tile of 4 rows): tiles; 70 x 4 of state
  // dimension 32, which tiles do not take: a warp per head.
  for (const bool norm : {false, true}) {
    INFO("norm " << norm);
    engine_kernel_scenario<replay_policy<16, fp32_format>, float>({{8, 80, 128, 2}, 5, 9, true, true, 81}, 4, norm);
    engine_kernel_scenario<replay_policy<8, fp32_format>, bfloat16_t>({{4, 20, 128, 2}, 6, 11, true, true, 83}, 4,
                                                                      norm);
    engine_kernel_scenario<replay_policy<8, fp32_format>, bfloat16_t>({{4, 16, 32, 2}, 70, 91, true, true, 82}, 4,
                                                                      norm);
  }
}

TEST_CASE("gpu mamba2 warp steps at the edges of their shapes", "[gpu][mamba2][decode]") {
  // State dims 16 (four lanes per row) and 256 (16-bit: 32 lanes per row; FP32: the block
  // kernels), an odd head dim (rows copied byte by byte: not 16-byte aligned).
  gpu_mamba2_scenario<replay_policy<8, fp32_format>, float>({{4, 17, 16, 2}, 3, 5, true, true, 14}, 6, true);
  // A BF16 state rounds at each of the 6 flushes: the host test's bound for it (4 u windows
  // on the state, twice that plus the read's rounding on the outputs, u = 2^-8).
  gpu_mamba2_scenario<replay_policy<8, bf16_format>, float>({{2, 24, 256, 1}, 3, 5, true, true, 15}, 6, true,
                                                            {0.2, 0.1});
  gpu_mamba2_scenario<replay_policy<8, fp32_format>, float>({{2, 24, 256, 1}, 3, 5, true, true, 16}, 6, false);
  require_bit_identical<mamba2_harness, replay_policy<8, fp32_format>, bfloat16_t>(
      {{4, 17, 16, 2}, 3, 5, true, true, 17}, 20);
}

TEST_CASE("gpu mamba2 replay matches the reference on Nemotron-3 shapes", "[gpu][mamba2][decode][model]") {
  gpu_mamba2_scenario<replay_policy<16, fp32_format>, float>({nemotron3_nano, 3, 5, true, true, 21}, 8, true);
  gpu_mamba2_scenario<replay_policy<16, fp32_format>, float>({nemotron3_super, 2, 3, true, true, 22}, 8, false);
  gpu_mamba2_scenario<replay_policy<16, fp32_format>, bfloat16_t>({nemotron3_nano, 2, 3, true, true, 23}, 8, true);
}

TEST_CASE("gpu and cpu mamba2 steps are bit-identical", "[gpu][mamba2][decode]") {
  require_bit_identical<mamba2_harness, replay_policy<16, fp32_format>, float>(
      {{8, 80, 128, 2}, 3, 5, true, true, 51}, 40);
  require_bit_identical<mamba2_harness, replay_policy<8, fp32_format>, bfloat16_t>(
      {{4, 17, 48, 1}, 3, 5, true, true, 52}, 20);
  require_bit_identical<mamba2_harness, writeback_policy<fp32_format>, half_t>(
      {{4, 64, 64, 2}, 3, 5, false, true, 53}, 10);
}

TEST_CASE("mamba2 stochastic-rounding states are bit-identical on cpu and gpu after 64 flushes",
          "[gpu][mamba2][decode][precision]") {
  // W = 4 and 260 steps: every slot flushes 64 times or more.
  require_bit_identical<mamba2_harness, replay_policy<4, nvfp4_format, fp16_format, round_stochastic>, bfloat16_t>(
      {{4, 24, 64, 2}, 3, 5, true, true, 54}, 260);
  require_bit_identical<mamba2_harness, replay_policy<4, fp8_e4m3_format, bf16_format, round_stochastic>, float>(
      {{2, 17, 48, 1}, 3, 5, true, true, 55}, 260);
  require_bit_identical<mamba2_harness, writeback_policy<fp16_format, round_stochastic>, float>(
      {{4, 32, 64, 2}, 3, 5, true, true, 56}, 64);
}

TEST_CASE("the device reports bad mamba2 slots and cursors and skips their requests", "[gpu][mamba2][validation]") {
  require_device_skips_bad_rows<mamba2_harness, replay_policy<8, fp32_format>>({{4, 16, 32, 2}, 2, 3, true, true, 5},
                                                                                true);
  // The write-back warp step checks whole requests itself, without the planner.
  require_device_skips_bad_rows<mamba2_harness, writeback_policy<fp32_format>>({{4, 16, 32, 2}, 2, 3, true, true, 6},
                                                                              true);
  // A small batch of the common state dimension steps in tiles, both policies.
  require_device_skips_bad_rows<mamba2_harness, replay_policy<8, fp32_format>>({{4, 16, 128, 2}, 2, 3, true, true, 8},
                                                                               true);
  require_device_skips_bad_rows<mamba2_harness, writeback_policy<fp32_format>>({{4, 16, 128, 2}, 2, 3, true, true, 9},
                                                                               true);
  // The block kernels (a state dimension the warp steps do not take) run planned.
  require_device_skips_bad_rows<mamba2_harness, replay_policy<8, fp32_format>>({{4, 16, 48, 2}, 2, 3, true, true, 7},
                                                                                true);
}

TEST_CASE("the mamba2 device launcher validates like the CPU one", "[gpu][mamba2][validation]") {
  mamba2_params<float> p;
  p.batch = 1;
  p.heads = 2;
  p.groups = 1;
  p.head_dim = 8;
  p.state_dim = 40;
  const status s = replayssm::cuda::decode_step<replay_policy<16, fp32_format>>(p);
  CHECK_THAT(s.message(), contains_text("unsupported state_dim=40"));
}

TEST_CASE("a user-defined format runs in the ready-made CUDA step, bit for bit as on the CPU",
          "[gpu][mamba2][custom]") {
  using policy = replay_policy<8, my_engine::mxfp4_format, fp16_format, round_stochastic>;
  require_bit_identical<mamba2_harness, policy, bfloat16_t>({{4, 24, 64, 2}, 3, 5, true, true, 72}, 40);
  // Against the float64 reference over 8 windows, within its formats' bounds.
  gpu_mamba2_scenario<policy, bfloat16_t>({{4, 24, 64, 2}, 3, 5, true, true, 73}, 8, true, split_bounds<policy>(8));
}

TEST_CASE("the warp steps' lanes copy engine matches the CPU as the bulk engine does", "[gpu][mamba2][decode]") {
  // The fallback for devices without bulk copies, run on this one.
  using runner = device_recurrence<mamba2_params<bfloat16_t>>;
  runner::lanes_copy_engine = true;
  require_bit_identical<mamba2_harness, replay_policy<8, fp32_format>, bfloat16_t>(
      {{8, 80, 128, 2}, 3, 5, true, true, 58}, 20);
  require_bit_identical<mamba2_harness, replay_policy<4, nvfp4_format, fp16_format, round_stochastic>, bfloat16_t>(
      {{4, 24, 64, 2}, 3, 5, true, true, 59}, 40);
  runner::lanes_copy_engine = false;
}

TEST_CASE("mamba2 stochastic-rounding states do not depend on the launch configuration",
          "[gpu][mamba2][decode][precision]") {
  // The CPU runs one thread; the GPU blocks of 64 and of 256: all must give the same bytes.
  using policy = replay_policy<4, nvfp4_format, fp16_format, round_stochastic>;
  const mamba2_case c{{4, 24, 64, 2}, 3, 5, true, true, 57};
  require_bit_identical<mamba2_harness, policy, bfloat16_t, 64>(c, 260);
  require_bit_identical<mamba2_harness, policy, bfloat16_t, 256>(c, 260);
}

TEST_CASE("an engine's __nv_bfloat16 activations run the steps bit for bit as bfloat16_t", "[gpu][mamba2][decode]") {
  // The same problem through CUDA's type and the library's: the same draws (the bits of the
  // same bf16 values), the same kernels' arithmetic, so the same errors to the last bit.
  using policy = replay_policy<8, fp32_format>;
  const mamba2_case c{{4, 16, 32, 2}, 3, 5, true, true, 61};
  const auto engine = gpu_mamba2_scenario<policy, __nv_bfloat16>(c, 4, true);
  const auto library = gpu_mamba2_scenario<policy, bfloat16_t>(c, 4, true);
  CHECK(engine.max_output_error == library.max_output_error);
  CHECK(engine.max_state_error == library.max_state_error);
  CHECK(engine.max_replay_vs_writeback == library.max_replay_vs_writeback);
}
