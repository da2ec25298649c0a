// SPDX-License-Identifier: Apache-2.0
// An engine's own CUDA kernel built on the library's warp primitive (warp::mamba2_warp_step):
// one warp per (request, head) runs the head's replay decode step, then the RMSNorm of
// Mamba-2's gated output over the head's channels, in place:
//
//   out = rmsnorm(y) * weight,   y = the step's output, its gate silu(z) included
//
// The norm reads back the outputs the warp has just written (each lane its own rows), so it
// needs no second launch and no pass of its own over the layer's outputs. Shared by the
// fused_kernel example, its benchmark (bench/mamba2/fused_bench.cu) and a GPU test.
#pragma once

#include <replayssm/cuda.cuh>

namespace replayssm_example {

/// Warps per block of the engine's kernels.
inline constexpr int engine_warps = 4;

/// RMSNorm in place of one head's `P` outputs at `y`, times `weight`; every lane of the warp
/// calls it, lane l taking rows l, l + 32, ... (the rows whose outputs it wrote).
template <class Act>
__device__ void warp_rmsnorm(Act* y, const float* weight, int32_t P, float eps) {
  using replayssm::from_float;
  using replayssm::to_float;
  const int lane = int(threadIdx.x % 32);
  float sum = 0.0f;
  for (int32_t p = lane; p < P; p += 32) {
    const float v = to_float(y[p]);
    sum = fmaf(v, v, sum);
  }
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  const float inverse = rsqrtf(sum / float(P) + eps);
  for (int32_t p = lane; p < P; p += 32) y[p] = from_float<Act>(to_float(y[p]) * inverse * weight[p]);
}

/// The decode step of one head as its plan's role says, on the warp's temp storage.
template <replayssm::warp::warp_role Role, class Policy, class Act>
__device__ void step_head(const replayssm::mamba2_head_views<Policy, Act>& v, replayssm::mamba2_layer_shape shape,
                          const replayssm::step_plan& plan, uint8_t* warp_storage) {
  replayssm::warp::mamba2_warp_step<Policy, Act, Role> step(warp_storage, v.state, shape);
  step.step(v.in, plan);
  step.advance_cursor(plan);  // the warp is the head's only one
}

/// Shared memory per warp: a warp reads or flushes, as its head's plan says.
template <class Policy, class Act>
uint32_t engine_warp_bytes(replayssm::mamba2_layer_shape s) {
  using replayssm::warp::mamba2_warp_step;
  using replayssm::warp::warp_role;
  return std::max(mamba2_warp_step<Policy, Act, warp_role::read>::temp_storage_bytes(s),
                  mamba2_warp_step<Policy, Act, warp_role::flush>::temp_storage_bytes(s));
}

/// One decode step of every request of `p` (grid: head blocks x batch), each head's output
/// then normalized with its `weight` rows (none: the step alone). Pad rows are skipped; the
/// engine validated `p` once on the host, and a head whose cursor no step could have left is
/// not stepped.
template <class Policy, class Act>
__global__ void __launch_bounds__(engine_warps * 32)
    replay_norm_kernel(const replayssm::mamba2_params<Act> p, const float* weight, float eps, uint32_t warp_bytes) {
  using namespace replayssm;
  extern __shared__ float4 storage[];
  const int32_t warp_index = int32_t(threadIdx.x / 32), h = int32_t(blockIdx.x) * engine_warps + warp_index;
  const int32_t b = int32_t(blockIdx.y);
  if (h >= p.heads) return;
  const int32_t slot = request_slot(p, b);
  if (slot == p.pad_slot_id) return;
  const mamba2_head_views<Policy, Act> v(p, b, h, slot);
  const step_plan plan = plan_step<step_kind::decode>(v.state, 1);
  if (plan.error != step_ok) return;
  uint8_t* warp_storage = reinterpret_cast<uint8_t*>(storage) + warp_index * warp_bytes;
  const mamba2_layer_shape shape = p.shape();
  if (warp::role_of(plan) == warp::warp_role::flush)
    step_head<warp::warp_role::flush>(v, shape, plan, warp_storage);
  else
    step_head<warp::warp_role::read>(v, shape, plan, warp_storage);
  if (weight != nullptr) warp_rmsnorm(v.in.y.at(0), weight + int64_t(h) * p.head_dim, p.head_dim, eps);
}

/// The norm alone, one warp per (request, head): what follows the ready-made step.
template <class Act>
__global__ void __launch_bounds__(engine_warps * 32)
    rmsnorm_kernel(const replayssm::mamba2_params<Act> p, const float* weight, float eps) {
  const int32_t h = int32_t(blockIdx.x) * engine_warps + int32_t(threadIdx.x / 32), b = int32_t(blockIdx.y);
  if (h >= p.heads) return;
  if (replayssm::request_slot(p, b) == p.pad_slot_id) return;
  warp_rmsnorm(p.y + int64_t(b) * p.y_batch_stride + int64_t(h) * p.y_head_stride, weight + int64_t(h) * p.head_dim,
               p.head_dim, eps);
}

inline replayssm::status launched(const char* what) {
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? replayssm::status{}
                          : replayssm::status::error(std::string(what) + ": " + cudaGetErrorString(e));
}

/// Launches `replay_norm_kernel` (device params; `weight` null: the step alone). Its
/// state pools must be 16-byte aligned per head (the bulk copy engine, sm_90 on).
template <class Policy, class Act>
replayssm::status launch_replay_norm(const replayssm::mamba2_params<Act>& p, const float* weight, float eps,
                                     cudaStream_t stream) {
  const uint32_t warp_bytes = engine_warp_bytes<Policy, Act>(p.shape());
  const int smem = int(engine_warps * warp_bytes);
  const auto kernel = replay_norm_kernel<Policy, Act>;
  if (const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
      e != cudaSuccess)
    return replayssm::status::error(std::string("replay_norm_kernel: ") + cudaGetErrorString(e));
  const dim3 grid((p.heads + engine_warps - 1) / engine_warps, p.batch);
  kernel<<<grid, engine_warps * 32, smem, stream>>>(p, weight, eps, warp_bytes);
  return launched("replay_norm_kernel");
}

/// Launches `rmsnorm_kernel` over the outputs of `p` (device params).
template <class Act>
replayssm::status launch_rmsnorm(const replayssm::mamba2_params<Act>& p, const float* weight, float eps,
                                 cudaStream_t stream) {
  const dim3 grid((p.heads + engine_warps - 1) / engine_warps, p.batch);
  rmsnorm_kernel<Act><<<grid, engine_warps * 32, 0, stream>>>(p, weight, eps);
  return launched("rmsnorm_kernel");
}

}  // namespace replayssm_example
