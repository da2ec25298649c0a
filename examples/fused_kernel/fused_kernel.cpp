// SPDX-License-Identifier: Apache-2.0
// Example: an engine's own fused kernel built from the replay primitives. One launch runs
// the replay step of each (request, head) and, in the same block, Mamba-2's gated RMSNorm
// over the head's channels:
//
//   out = rmsnorm(y * silu(z)) * weight,   y = the replay output without its gate
//
// The same fused function runs on the CPU (serial executor) and, with `--device cuda`, as a
// CUDA kernel (block executor). It checks itself against the ready-made step, which applies
// the gate, followed by a separate normalization, and prints
//
//   fused_vs_readymade_max_rel_err=<value> steps=<n> device=<cpu|cuda>
#include <replayssm/replayssm.hpp>
#if REPLAYSSM_CUDA_COMPILER
#include <replayssm/cuda.cuh>
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

/// Gated RMSNorm of one head, in place over y[0, P): y = rmsnorm(y * silu(z)) * weight.
/// `sum` is one float of scratch for the sum of squares.
template <class Exec>
REPLAYSSM_HOST_DEVICE void gated_rmsnorm(const Exec& ex, float* y, const float* z, const float* weight, int P,
                                         float* sum) {
  ex.for_each(P, [&](int p) { y[p] = math::mul(y[p], math::silu(z[p])); });
  ex.sync();
  if (ex.leader()) {
    float s = 0.0f;
    for (int p = 0; p < P; ++p) s = math::fma(y[p], y[p], s);
    *sum = s;
  }
  ex.sync();
  const float inv = 1.0f / std::sqrt(math::add(*sum / float(P), norm_eps));
  ex.for_each(P, [&](int p) { y[p] = math::mul(math::mul(y[p], inv), weight[p]); });
}

/// The fused step of request b, head h: the replay primitives without the gate, then the
/// norm on the head's output, all in one block (or one CPU call).
template <class Exec>
REPLAYSSM_HOST_DEVICE uint32_t fused_head_step(const Exec& ex, const mamba2_params<float>& p, const float* norm_weight,
                                               int b, int h, float* scratch) {
  const int32_t slot = p.slot_indices != nullptr ? p.slot_indices[b] : b;
  if (slot == p.pad_slot_id) return step_ok;
  mamba2_head_views<policy, float> v(p, b, h, slot);
  v.in.z = {};  // the gate moves into the norm
  const mamba2_layer_shape s = p.shape();
  const uint32_t errors = mamba2_head_step(ex, v.in, v.state, s, scratch);
  ex.sync();
  const float* z = p.z + b * p.z_batch_stride + h * p.z_head_stride;
  const float* weight = norm_weight + h * p.head_dim;
  gated_rmsnorm(ex, v.in.y.data, z, weight, p.head_dim, scratch + mamba2_scratch_layout<policy>::make(s).total);
  return errors;
}

size_t fused_scratch_bytes() {
  return mamba2_scratch_layout<policy>::make(shape).bytes() + sizeof(float);
}

#if REPLAYSSM_CUDA_COMPILER
__global__ void fused_kernel(const mamba2_params<float> p, const float* norm_weight) {
  extern __shared__ float4 scratch[];
  fused_head_step(block_executor{}, p, norm_weight, blockIdx.y, blockIdx.x, reinterpret_cast<float*>(scratch));
}

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
    if (cuda_) return on_device(p, l, [&](const mamba2_params<float>& d) {
      float* w = upload(weight.data(), weight.size() * 4);
      const size_t smem = fused_scratch_bytes();
      fused_kernel<<<dim3(shape.heads, batch), cuda::decode_block_threads, smem>>>(d, w);
      check_cuda(cudaGetLastError(), "fused kernel");
    });
#endif
    std::vector<float> scratch(fused_scratch_bytes() / 4);
    for (int b = 0; b < p.batch; ++b)
      for (int h = 0; h < p.heads; ++h)
        if (fused_head_step(serial_executor{}, p, weight.data(), b, h, scratch.data()) != step_ok)
          throw std::runtime_error("fused step reported an error");
  }

  /// One ready-made step (the gate inside), then the norm on the host.
  void ready_made(const mamba2_params<float>& p, const std::vector<float>& weight, [[maybe_unused]] layer& l) {
#if REPLAYSSM_CUDA_COMPILER
    if (cuda_) {
      on_device(p, l, [&](const mamba2_params<float>& d) { cuda::replay_decode_step<policy>(d).throw_if_error(); });
    } else
#endif
      cpu::replay_decode_step<policy>(p).throw_if_error();
    float* y = p.y;
    for (int b = 0; b < p.batch; ++b)
      for (int h = 0; h < p.heads; ++h) {
        float* yh = y + b * p.y_batch_stride + h * p.y_head_stride;
        // y already carries the gate: normalize it as the fused step does after gating.
        float sum = 0.0f;
        for (int i = 0; i < p.head_dim; ++i) sum = math::fma(yh[i], yh[i], sum);
        const float inv = 1.0f / std::sqrt(math::add(sum / float(p.head_dim), norm_eps));
        for (int i = 0; i < p.head_dim; ++i)
          yh[i] = math::mul(math::mul(yh[i], inv), weight[size_t(h) * p.head_dim + size_t(i)]);
      }
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
    cuda::take_step_errors(d.report).throw_if_error();
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
  // The fused kernel runs the same primitives in the same order: agreement is to the bit,
  // and anything beyond float rounding is a defect.
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
