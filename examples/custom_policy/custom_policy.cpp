// SPDX-License-Identifier: Apache-2.0
// Example: plugging an engine's own state format into a policy. mxfp4_format.hpp (beside
// this file) defines OCP MXFP4 outside the library; here it becomes the read copy of a
// replay policy with an FP16 checkpoint and stochastic rounding, and a Mamba-2 layer
// decodes with it on the CPU next to the FP32 write-back step on the same inputs. It prints
// the mode, the memory per request, the modelled traffic and the agreement:
//
//   custom_vs_fp32_max_rel_err=<value> steps=<n> mode=<describe()>
#include <replayssm/replayssm.hpp>

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "../common/args.hpp"
#include "mxfp4_format.hpp"

using namespace replayssm;
namespace args = replayssm_example::args;

namespace {

using custom_policy = replay_policy<16, my_engine::mxfp4_format, fp16_format, round_stochastic>;
using reference_policy = writeback_policy<fp32_format>;
constexpr mamba2_layer_shape shape{8, 64, 128, 2};
constexpr int batch = 2;

/// 16-byte aligned storage: state chunks are loaded as vectors.
struct alignas(16) chunk16 {
  unsigned char bytes[16];
};
std::vector<chunk16> aligned_bytes(size_t n) { return std::vector<chunk16>((n + 15) / 16); }
void* data_or_null(std::vector<chunk16>& v) { return v.empty() ? nullptr : v.data(); }

/// One layer's state for `Policy` in host memory, one slot per request.
template <class Policy>
struct layer_state {
  mamba2_buffer_sizes sizes = mamba2_buffers<Policy>(shape, batch, dtype::f32);
  std::vector<chunk16> checkpoint = aligned_bytes(sizes.checkpoint);
  std::vector<chunk16> checkpoint_scales = aligned_bytes(sizes.checkpoint_scales);
  std::vector<chunk16> read_copy = aligned_bytes(sizes.read_copy);
  std::vector<chunk16> read_copy_scales = aligned_bytes(sizes.read_copy_scales);
  std::vector<chunk16> window_x = aligned_bytes(sizes.window_x);
  std::vector<chunk16> window_B = aligned_bytes(sizes.window_B);
  std::vector<float> window_dt = std::vector<float>(sizes.window_dt / sizeof(float));
  std::vector<replay_cursor> cursors = std::vector<replay_cursor>(sizes.cursors / sizeof(replay_cursor), replay_cursor{});

  /// Sets every slot from `initial` ([batch][H][P][N]), as after a prefill.
  explicit layer_state(const std::vector<float>& initial) {
    const int64_t per_head = int64_t(shape.head_dim) * shape.state_dim;
    for (int64_t head = 0; head < int64_t(batch) * shape.heads; ++head) {
      using ckpt_view = state_head_view<typename Policy::checkpoint_format>;
      using read_view = state_head_view<typename Policy::read_format>;
      write_head_state<Policy>(
          serial_executor{}, initial.data() + head * per_head, shape,
          ckpt_view::in_pool(data_or_null(checkpoint), data_or_null(checkpoint_scales), head, per_head),
          read_view::in_pool(data_or_null(read_copy), data_or_null(read_copy_scales), head, per_head));
    }
  }
  void bind(mamba2_params<float>& p) {
    p.num_slots = batch;
    p.checkpoint = data_or_null(checkpoint);
    p.checkpoint_scales = data_or_null(checkpoint_scales);
    p.read_copy = data_or_null(read_copy);
    p.read_copy_scales = data_or_null(read_copy_scales);
    p.window_x = static_cast<float*>(data_or_null(window_x));
    p.window_B = static_cast<float*>(data_or_null(window_B));
    p.window_dt = window_dt.empty() ? nullptr : window_dt.data();
    p.cursors = cursors.data();
    p.seed = 2026;
  }
};

double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / den);
}

}  // namespace

int main(int argc, char** argv) {
  int steps = 256;
  uint32_t seed = 11;
  args::parser cli("custom_policy",
                   "usage: custom_policy [--steps T] [--seed S]\n"
                   "Runs on the CPU. T in [1, 1048576], default 256; S, the seed of the inputs, in [0, 4294967295],\n"
                   "default 11.\n");
  cli.integer("--steps", steps, 1, 1 << 20);
  cli.integer<uint32_t>("--seed", seed, 0, UINT32_MAX);
  if (const int code = cli.parse(argc, argv); code != args::proceed) return code;
  std::mt19937 rng(seed);
  std::normal_distribution<float> unit(0.0f, 1.0f), raw_dt(0.0f, 0.3f);
  auto draw = [&](std::vector<float>& v, size_t n, std::normal_distribution<float>& dist) {
    v.resize(n);
    for (auto& e : v) e = dist(rng);
  };
  const size_t d = size_t(shape.heads) * shape.head_dim, gn = size_t(shape.groups) * shape.state_dim;
  std::vector<float> A, D(size_t(shape.heads), 1.0f), bias(size_t(shape.heads), -3.0f), initial, x, z, dt, B, C,
      y_custom(batch * d), y_reference(batch * d);
  for (int h = 0; h < shape.heads; ++h) A.push_back(-1.0f - float(h));
  draw(initial, size_t(batch) * shape.state_elements(), unit);
  layer_state<custom_policy> custom(initial);
  layer_state<reference_policy> reference(initial);

  std::printf("mode: %s (reference: %s)\n", describe<custom_policy>().c_str(), describe<reference_policy>().c_str());
  const auto per_request = mamba2_buffers<custom_policy>(shape, 1, dtype::f32);
  std::printf("memory per request per layer: checkpoint %zu B, read copy %zu B, window %zu B (fp32 state: %zu B)\n",
              per_request.checkpoint_total(), per_request.read_copy_total(), per_request.window_total(),
              mamba2_buffers<reference_policy>(shape, 1, dtype::f32).checkpoint_total());
  std::printf("modelled state traffic per element per step: %.3f B (fp32 write-back: %.3f B)\n",
              state_traffic_per_step<custom_policy>().total(), state_traffic_per_step<reference_policy>().total());

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
    custom.bind(p);
    p.y = y_custom.data();
    cpu::decode_step<custom_policy>(p).throw_if_error();
    reference.bind(p);
    p.y = y_reference.data();
    cpu::decode_step<writeback_policy<fp32_format>>(p).throw_if_error();
    max_err = std::max(max_err, relative_error(y_custom, y_reference));
  }
  std::printf("custom_vs_fp32_max_rel_err=%.3e steps=%d mode=%s\n", max_err, steps, describe<custom_policy>().c_str());
  // A 4-bit read copy costs accuracy (docs/precision.md); a blow-up or NaN is a defect.
  return std::isfinite(max_err) && max_err < 1.0 ? 0 : 1;
}
