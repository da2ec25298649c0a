// SPDX-License-Identifier: Apache-2.0
// Example: an engine's own fused kernel. One launch runs the replay decode step of each
// (request, head) and, in the same warp, the RMSNorm of Mamba-2's gated output over the
// head's channels:
//
//   out = rmsnorm(y) * weight,   y = the replay output, its gate silu(z) included
//
// With `--device cuda` the kernel is replay_norm_kernel.cuh, on the library's warp
// primitives (what the ready-made CUDA steps are built from): at this small batch a block
// per head in tiles (warp::mamba2_tile_step), at large ones a warp per head
// (warp::mamba2_warp_step). On the CPU the same step is the head step with the serial
// executor. It checks itself against the ready-made step followed by a separate
// normalization, and prints
//
//   fused_vs_readymade_max_rel_err=<value> steps=<n> device=<cpu|cuda>
#include <replayssm/replayssm.hpp>
#if REPLAYSSM_CUDA_COMPILER
#include "replay_norm_kernel.cuh"
#endif

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "../common/args.hpp"

using namespace replayssm;
namespace args = replayssm_example::args;

namespace {

using policy = replay_policy<16, fp32_format>;
constexpr mamba2_layer_shape shape{8, 64, 128, 2};
constexpr int batch = 4;
constexpr float norm_eps = 1e-6f;

/// RMSNorm in place of one head's outputs y[0, P), times `weight`, on the host.
void rmsnorm(float* y, const float* weight, int P) {
  float sum = 0.0f;
  for (int p = 0; p < P; ++p) sum = math::fma(y[p], y[p], sum);
  const float inverse = 1.0f / std::sqrt(math::add(sum / float(P), norm_eps));
  for (int p = 0; p < P; ++p) y[p] = math::mul(math::mul(y[p], inverse), weight[p]);
}

/// The fused step on the CPU, request b, head h: the head step, then the norm.
uint32_t fused_head_step(const mamba2_params<float>& p, const float* norm_weight, int b, int h, float* scratch) {
  const int32_t slot = request_slot(p, b);
  if (slot == p.pad_slot_id) return step_ok;
  const mamba2_head_views<policy, float> v(p, b, h, slot);
  const uint32_t errors = mamba2_head_step(serial_executor{}, v.in, v.state, p.shape(), scratch);
  rmsnorm(v.in.y.at(0), norm_weight + h * p.head_dim, p.head_dim);
  return errors;
}

#if REPLAYSSM_CUDA_COMPILER
void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}
#endif

/// Host buffers of one layer for `policy`, float activations, one slot per request.
struct layer {
  std::vector<float> checkpoint, window_x, window_B, window_dt;
  std::vector<replay_cursor> cursors;
  explicit layer(const std::vector<float>& initial) : checkpoint(initial) {
    const auto sizes = mamba2_buffers<policy>(shape, batch, dtype::f32);
    window_x.resize(sizes.window_x / 4);
    window_B.resize(sizes.window_B / 4);
    window_dt.resize(sizes.window_dt / 4);
    cursors.assign(sizes.cursors / sizeof(replay_cursor), replay_cursor{});
  }
  void bind(mamba2_params<float>& p) {
    p.checkpoint = checkpoint.data();
    p.window_x = window_x.data();
    p.window_B = window_B.data();
    p.window_dt = window_dt.data();
    p.cursors = cursors.data();
  }
};

/// Runs `step(params)` on the CPU or, for cuda, on device copies of every buffer it uses.
class runner {
 public:
  explicit runner(bool cuda) : cuda_(cuda) {}

  /// One fused step over host params `p` (device mirrors when running on the GPU).
  void fused(const mamba2_params<float>& p, const std::vector<float>& weight, [[maybe_unused]] layer& l) {
#if REPLAYSSM_CUDA_COMPILER
    if (cuda_)
      return on_device(p, l, [&](const mamba2_params<float>& d) {
        const float* w = upload(weight.data(), weight.size() * 4);
        replayssm_example::launch_replay_norm<policy>(d, w, norm_eps, nullptr).throw_if_error();
      });
#endif
    std::vector<float> scratch(mamba2_scratch_layout<policy>::make(shape).bytes() / 4);
    for (int b = 0; b < p.batch; ++b)
      for (int h = 0; h < p.heads; ++h)
        if (fused_head_step(p, weight.data(), b, h, scratch.data()) != step_ok)
          throw std::runtime_error("fused step reported an error");
  }

  /// One ready-made step (the gate inside), then the norm on the host.
  void ready_made(const mamba2_params<float>& p, const std::vector<float>& weight, [[maybe_unused]] layer& l) {
#if REPLAYSSM_CUDA_COMPILER
    if (cuda_) {
      on_device(p, l, [&](const mamba2_params<float>& d) { replayssm::cuda::decode_step<policy>(d).throw_if_error(); });
    } else
#endif
      cpu::decode_step<policy>(p).throw_if_error();
    for (int b = 0; b < p.batch; ++b)
      for (int h = 0; h < p.heads; ++h)
        rmsnorm(p.y + b * p.y_batch_stride + h * p.y_head_stride, weight.data() + size_t(h) * p.head_dim, p.head_dim);
  }

 private:
#if REPLAYSSM_CUDA_COMPILER
  float* upload(const void* host, size_t bytes) {
    void* d = nullptr;
    check_cuda(cudaMalloc(&d, bytes), "cudaMalloc");
    check_cuda(cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice), "upload");
    owned_.push_back(d);
    return static_cast<float*>(d);
  }
  /// Mirrors p's buffers on the device, runs `launch`, copies outputs and state back.
  template <class Launch>
  void on_device(const mamba2_params<float>& p, layer& l, Launch launch) {
    const size_t act = size_t(batch) * shape.heads * shape.head_dim * 4, gn = size_t(batch) * shape.groups * shape.state_dim * 4;
    mamba2_params<float> d = p;
    d.x = upload(p.x, act);
    d.z = upload(p.z, act);
    d.y = upload(p.y, act);
    d.dt = upload(p.dt, size_t(batch) * shape.heads * 4);
    d.B = upload(p.B, gn);
    d.C = upload(p.C, gn);
    d.A = upload(p.A, shape.heads * 4);
    d.D = upload(p.D, shape.heads * 4);
    d.dt_bias = upload(p.dt_bias, shape.heads * 4);
    d.checkpoint = upload(l.checkpoint.data(), l.checkpoint.size() * 4);
    d.window_x = upload(l.window_x.data(), l.window_x.size() * 4);
    d.window_B = upload(l.window_B.data(), l.window_B.size() * 4);
    d.window_dt = upload(l.window_dt.data(), l.window_dt.size() * 4);
    d.cursors = reinterpret_cast<replay_cursor*>(upload(l.cursors.data(), l.cursors.size() * sizeof(replay_cursor)));
    const step_report no_errors{};
    d.report = reinterpret_cast<step_report*>(upload(&no_errors, sizeof no_errors));
    const std::vector<request_plan> plans(size_t(batch), request_plan::skip);
    d.request_plans = reinterpret_cast<request_plan*>(upload(plans.data(), plans.size() * sizeof(request_plan)));
    launch(d);
    check_cuda(cudaDeviceSynchronize(), "step");
    replayssm::cuda::take_step_errors(d.report).throw_if_error();
    auto back = [](void* host, const void* dev, size_t bytes) { check_cuda(cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost), "download"); };
    back(p.y, d.y, act);
    back(l.checkpoint.data(), d.checkpoint, l.checkpoint.size() * 4);
    back(l.window_x.data(), d.window_x, l.window_x.size() * 4);
    back(l.window_B.data(), d.window_B, l.window_B.size() * 4);
    back(l.window_dt.data(), d.window_dt, l.window_dt.size() * 4);
    back(l.cursors.data(), d.cursors, l.cursors.size() * sizeof(replay_cursor));
    for (void* ptr : owned_) cudaFree(ptr);
    owned_.clear();
  }
  std::vector<void*> owned_;
#endif
  bool cuda_;
};

int run(bool cuda, int steps) {
  std::mt19937 rng(7);
  std::normal_distribution<float> unit(0.0f, 1.0f), raw_dt(0.0f, 0.3f);
  const size_t d = size_t(shape.heads) * shape.head_dim, gn = size_t(shape.groups) * shape.state_dim;
  auto draw = [&](std::vector<float>& v, size_t n, std::normal_distribution<float>& dist) {
    v.resize(n);
    for (auto& e : v) e = dist(rng);
  };
  std::vector<float> x, z, dt, B, C, A(size_t(shape.heads)), D(size_t(shape.heads), 1.0f), bias(size_t(shape.heads)),
      weight, initial, y_fused(batch * d), y_ready(batch * d);
  for (int h = 0; h < shape.heads; ++h) {
    A[size_t(h)] = -1.0f - float(h);
    bias[size_t(h)] = -3.0f;
  }
  draw(weight, d, unit);
  draw(initial, size_t(batch) * shape.state_elements(), unit);
  layer fused_state(initial), ready_state(initial);
  runner steps_on(cuda);
  double max_err = 0;
  for (int t = 0; t < steps; ++t) {
    draw(x, batch * d, unit);
    draw(z, batch * d, unit);
    draw(dt, size_t(batch) * shape.heads, raw_dt);
    draw(B, batch * gn, unit);
    draw(C, batch * gn, unit);
    mamba2_params<float> p = contiguous_mamba2_params<float>(shape, batch);
    p.x = x.data();
    p.z = z.data();
    p.dt = dt.data();
    p.B = B.data();
    p.C = C.data();
    p.A = A.data();
    p.D = D.data();
    p.dt_bias = bias.data();
    p.num_slots = batch;
    p.y = y_fused.data();
    fused_state.bind(p);
    validate_mamba2<policy>(p, true).throw_if_error();
    steps_on.fused(p, weight, fused_state);
    p.y = y_ready.data();
    ready_state.bind(p);
    steps_on.ready_made(p, weight, ready_state);
    double num = 0, den = 0;
    for (size_t i = 0; i < y_fused.size(); ++i) {
      num += (double(y_fused[i]) - y_ready[i]) * (double(y_fused[i]) - y_ready[i]);
      den += double(y_ready[i]) * y_ready[i];
    }
    max_err = std::max(max_err, std::sqrt(num / den));
  }
  std::printf("fused_vs_readymade_max_rel_err=%.3e steps=%d device=%s\n", max_err, steps, cuda ? "cuda" : "cpu");
  // The fused step runs the ready-made step's arithmetic; only the norm's sum may add in
  // another order (the warp's), so anything beyond float rounding is a defect.
  return max_err <= 1e-6 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string device = "cpu";
  int steps = 40;  // two and a half windows: flushes and read steps
  args::parser cli("fused_kernel",
                   "usage: fused_kernel [--device cpu|cuda] [--steps T]\n"
                   "T in [1, 65536], default 40 (two and a half windows: flushes and read steps).\n");
  cli.choice("--device", device, {"cpu", "cuda"});
  cli.integer("--steps", steps, 1, 1 << 16);
  if (const int code = cli.parse(argc, argv); code != args::proceed) return code;
  if (const int code = cli.check_device(device); code != args::proceed) return code;
  try {
    return run(device == "cuda", steps);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
