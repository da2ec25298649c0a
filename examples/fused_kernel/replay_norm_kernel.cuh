// SPDX-License-Identifier: Apache-2.0
// An engine's own CUDA kernel built on the library's warp primitive (warp::mamba2_warp_step):
// one warp per (request, head) runs the head's replay decode step, then the RMSNorm of
// Mamba-2's gated output over the head's channels:
//
//   out = rmsnorm(y) * weight,   y = the step's output, its gate silu(z) included
//
// The step hands its outputs to the kernel (the primitive's output handler) rather than
// storing them: they wait in shared memory for the norm, and are written once, normalized.
// So the norm needs no second launch, no pass of its own over the layer's outputs and no
// read-back. At small batches a head's rows run over the four warps of a block, which meet
// once for the norm's sum. Shared by the fused_kernel example, its benchmark
// (bench/mamba2/fused_bench.cu) and a GPU test.
#pragma once

#include <replayssm/cuda.cuh>

namespace replayssm_example {

/// Warps per block of the engine's kernels.
inline constexpr int engine_warps = 4;

/// What the engine's kernel does after the step: nothing, or the RMSNorm of the outputs.
enum class step_epilogue { none, rmsnorm };

/// The sum of `value` over the warp, on every lane.
__device__ inline float warp_sum(float value) {
  for (int offset = 16; offset > 0; offset /= 2) value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

/// RMSNorm in place of one head's `P` outputs at `y`, times `weight`; every lane of the warp
/// calls it, lane l taking rows l, l + 32, ... (the separate norm kernel's).
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
  const float inverse = rsqrtf(warp_sum(sum) / float(P) + eps);
  for (int32_t p = lane; p < P; p += 32) y[p] = from_float<Act>(to_float(y[p]) * inverse * weight[p]);
}

/// Bytes of each warp's temp storage: the primitive's (a warp reads or flushes, as its head's
/// plan says), then the head's `P` outputs as floats, kept for the norm.
template <class Policy, class Act>
uint32_t engine_warp_bytes(replayssm::mamba2_layer_shape s) {
  using replayssm::warp::mamba2_warp_step;
  using replayssm::warp::warp_role;
  const uint32_t step = std::max(mamba2_warp_step<Policy, Act, warp_role::read>::temp_storage_bytes(s),
                                 mamba2_warp_step<Policy, Act, warp_role::flush>::temp_storage_bytes(s));
  return step + (uint32_t(s.head_dim) * 4u + 127u) / 128u * 128u;
}

/// Where a warp of the engine's kernel works: head `h` of request `b`, part `part` of the
/// head's `parts` (a block holds `engine_warps / parts` heads), on `storage`.
struct engine_place {
  int32_t b, h, part, warp;
  __device__ explicit engine_place(int32_t parts)
      : b(int32_t(blockIdx.y)),
        h(int32_t(blockIdx.x) * (engine_warps / parts) + int32_t(threadIdx.x / 32) / parts),
        part(int32_t(threadIdx.x / 32) % parts),
        warp(int32_t(threadIdx.x / 32)) {}
};

/// The step of one warp's rows of a head as its plan's role says, on the warp's temp
/// storage: with the norm its outputs stay in `kept` (as floats, by row) and `sum` gathers
/// the lane's squares, else they are stored; then `meet()`, which returns once every warp of
/// the head has stepped, then the cursor moves. Returns the warp's rows.
template <step_epilogue Epilogue, replayssm::warp::warp_role Role, class Policy, class Act, class Meet>
__device__ replayssm::warp::row_range step_rows(const replayssm::mamba2_head_views<Policy, Act>& v,
                                          replayssm::mamba2_layer_shape shape, const replayssm::step_plan& plan,
                                          int32_t parts, int32_t part, uint8_t* warp_storage, float* kept, float& sum,
                                          Meet&& meet) {
  using step_t = replayssm::warp::mamba2_warp_step<Policy, Act, Role>;
  const replayssm::warp::row_range rows = step_t::part_rows(shape, parts, part);
  step_t step(warp_storage, v.state, shape, rows);
  if constexpr (Epilogue == step_epilogue::rmsnorm)
    step.step(v.in, plan, [&](int32_t, int32_t p, float y) {
      kept[p] = y;
      sum = fmaf(y, y, sum);
    });
  else
    step.step(v.in, plan);
  meet();
  if (part == 0) step.advance_cursor(plan);
  return rows;
}

/// One decode step of every request of `p` (grid: head blocks x batch), a head's rows over
/// `parts` warps of a block (1 or `engine_warps`); with the norm each head's outputs are
/// normalized with its `weight` rows before they are stored, so that they are written once.
/// Pad rows are skipped; the engine validated `p` once on the host, and a head whose cursor
/// no step could have left is not stepped.
template <step_epilogue Epilogue, class Policy, class Act>
__global__ void __launch_bounds__(engine_warps * 32)
    replay_norm_kernel(const replayssm::mamba2_params<Act> p, const float* weight, float eps, uint32_t warp_bytes,
                       int32_t parts) {
  using namespace replayssm;
  extern __shared__ float4 storage[];
  __shared__ float sums[engine_warps];
  const engine_place at(parts);
  if (at.h >= p.heads) return;  // the same for every warp of a head
  const int32_t slot = request_slot(p, at.b);
  if (slot == p.pad_slot_id) return;
  const mamba2_head_views<Policy, Act> v(p, at.b, at.h, slot);
  const step_plan plan = plan_step<step_kind::decode>(v.state, 1);
  if (plan.error != step_ok) return;
  uint8_t* warp_storage = reinterpret_cast<uint8_t*>(storage) + at.warp * warp_bytes;
  // The kept outputs: the last P floats (rounded up to 32) of the warp's bytes.
  float* kept = reinterpret_cast<float*>(warp_storage + warp_bytes) - (p.head_dim + 31) / 32 * 32;
  const mamba2_layer_shape shape = p.shape();
  float sum = 0.0f;
  auto meet = [&] {  // the norm's sum of the head, and every warp of it done before the cursor moves
    if constexpr (Epilogue == step_epilogue::rmsnorm) sum = warp_sum(sum);
    if (parts == 1) return;
    if (threadIdx.x % 32 == 0) sums[at.warp] = sum;
    __syncthreads();
    sum = 0.0f;
    for (int32_t k = 0; k < parts; ++k) sum += sums[at.warp - at.part + k];
  };
  using warp::warp_role;
  [[maybe_unused]] const warp::row_range rows =
      warp::role_of(plan) == warp_role::flush
          ? step_rows<Epilogue, warp_role::flush>(v, shape, plan, parts, at.part, warp_storage, kept, sum, meet)
          : step_rows<Epilogue, warp_role::read>(v, shape, plan, parts, at.part, warp_storage, kept, sum, meet);
  if constexpr (Epilogue == step_epilogue::rmsnorm) {
    const float inverse = rsqrtf(sum / float(p.head_dim) + eps);
    const float* head_weight = weight + int64_t(at.h) * p.head_dim;
    Act* y = v.in.y.at(0);
    for (int32_t r = rows.first + int32_t(threadIdx.x % 32); r < rows.first + rows.count; r += 32)
      y[r] = from_float<Act>(kept[r] * inverse * head_weight[r]);
  }
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

/// Launches `replay_norm_kernel` (device params; `weight` null: the step alone), a head's
/// rows over `engine_warps` warps where the heads alone would leave most of the device's
/// warps idle. Its state pools must be 16-byte aligned per head (the bulk copy engine, sm_90
/// on).
template <class Policy, class Act>
replayssm::status launch_replay_norm(const replayssm::mamba2_params<Act>& p, const float* weight, float eps,
                                     cudaStream_t stream) {
  const uint32_t warp_bytes = engine_warp_bytes<Policy, Act>(p.shape());
  const int smem = int(engine_warps * warp_bytes);
  const auto kernel = weight != nullptr ? replay_norm_kernel<step_epilogue::rmsnorm, Policy, Act>
                                        : replay_norm_kernel<step_epilogue::none, Policy, Act>;
  if (const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
      e != cudaSuccess)
    return replayssm::status::error(std::string("replay_norm_kernel: ") + cudaGetErrorString(e));
  int device = 0, multiprocessors = 0, blocks_per_sm = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks_per_sm, kernel, engine_warps * 32, smem) != cudaSuccess)
    return replayssm::status::error("replay_norm_kernel: querying the device failed");
  const int64_t warps = int64_t(p.batch) * p.heads * engine_warps;
  const int32_t parts = warps <= int64_t(blocks_per_sm) * multiprocessors * engine_warps ? engine_warps : 1;
  const int32_t heads_per_block = engine_warps / parts;
  const dim3 grid((p.heads + heads_per_block - 1) / heads_per_block, p.batch);
  kernel<<<grid, engine_warps * 32, smem, stream>>>(p, weight, eps, warp_bytes, parts);
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
