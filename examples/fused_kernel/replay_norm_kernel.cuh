// SPDX-License-Identifier: Apache-2.0
// An engine's own CUDA kernel built on the library's warp primitive (warp::mamba2_warp_step):
// one warp per (request, head) runs the head's replay decode step, then the RMSNorm of
// Mamba-2's gated output over the head's channels:
//
//   out = rmsnorm(y) * weight,   y = the step's output, its gate silu(z) included
//
// The step hands its outputs to the kernel (the primitive's output handler) rather than
// storing them: they wait in shared memory for the norm, and are written once, normalized;
// the norm's weight rows are copied into shared memory while the state streams.
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

/// The norm's share of one warp's temp storage, at its end: the head's weight rows (copied in
/// while the state streams) and its outputs as the step forms them (`kept`), `P` floats each
/// by row; and the lane's sum of squares of the outputs it formed.
struct norm_rows {
  float* weight;
  float* kept;
  float sum = 0.0f;
  /// Floats of each of the two rows of `P`: whole 128-byte lines.
  __host__ __device__ static constexpr uint32_t padded(int32_t P) { return (uint32_t(P) + 31u) / 32u * 32u; }
  __device__ norm_rows(uint8_t* warp_end, int32_t P)
      : weight(reinterpret_cast<float*>(warp_end) - 2 * padded(P)), kept(weight + padded(P)) {}
};

/// Bytes of each warp's temp storage: the primitive's (a warp reads or flushes, as its head's
/// plan says), then, with the norm, `norm_rows`.
template <class Policy, class Act>
uint32_t engine_warp_bytes(replayssm::mamba2_layer_shape s, step_epilogue epilogue) {
  using replayssm::warp::mamba2_warp_step;
  using replayssm::warp::warp_role;
  const uint32_t step = std::max(mamba2_warp_step<Policy, Act, warp_role::read>::temp_storage_bytes(s),
                                 mamba2_warp_step<Policy, Act, warp_role::flush>::temp_storage_bytes(s));
  return step + (epilogue == step_epilogue::rmsnorm ? 2u * norm_rows::padded(s.head_dim) * 4u : 0u);
}

/// Where a warp of the engine's kernel works: head `h` of request `b`, part `part` of the
/// head's `Parts` warps (a block holds `engine_warps / Parts` heads).
template <int Parts>
struct engine_place {
  static_assert(Parts == 1 || Parts == engine_warps, "engine_place: a head takes one warp or a block");
  int32_t b, h, part, warp;
  __device__ engine_place()
      : b(int32_t(blockIdx.y)),
        h(int32_t(blockIdx.x) * (engine_warps / Parts) + int32_t(threadIdx.x / 32) / Parts),
        part(int32_t(threadIdx.x / 32) % Parts),
        warp(int32_t(threadIdx.x / 32)) {}
};

/// The step of one warp's rows of a head as its plan's role says, on the warp's temp
/// storage: with the norm the head's `weight` rows are copied into `norm` behind the state's
/// stream, and the outputs stay in `norm.kept` (their squares summed), else they are stored;
/// then `meet()`, which returns once every warp of the head has stepped, then the cursor
/// moves. Returns the warp's rows.
template <step_epilogue Epilogue, int Parts, replayssm::warp::warp_role Role, class Policy, class Act, class Meet>
__device__ replayssm::warp::row_range step_rows(const replayssm::mamba2_head_views<Policy, Act>& v,
                                                replayssm::mamba2_layer_shape shape, const replayssm::step_plan& plan,
                                                int32_t part, uint8_t* warp_storage, const float* weight,
                                                norm_rows& norm, Meet&& meet) {
  using step_t = replayssm::warp::mamba2_warp_step<Policy, Act, Role>;
  const replayssm::warp::row_range rows =
      Parts == 1 ? replayssm::warp::row_range{0, shape.head_dim} : step_t::part_rows(shape, Parts, part);
  step_t step(warp_storage, v.state, shape, rows);
  if constexpr (Epilogue == step_epilogue::rmsnorm) {
    replayssm::warp::lanes_copy(norm.weight, weight, uint32_t(shape.head_dim) * 4u, int(threadIdx.x % 32));
    replayssm::warp::lanes_commit();
    step.step(v.in, plan, [&](int32_t, int32_t p, float y) {
      norm.kept[p] = y;
      norm.sum = fmaf(y, y, norm.sum);
    });
  } else {
    step.step(v.in, plan);
  }
  meet();
  if (part == 0) step.advance_cursor(plan);
  return rows;
}

/// One decode step of every request of `p` (grid: head blocks x batch), a head's rows over
/// `Parts` warps of a block (1 or `engine_warps`); with the norm each head's outputs are
/// normalized with its `weight` rows before they are stored, so that they are written once.
/// Pad rows are skipped; the engine validated `p` once on the host, and a head whose cursor
/// no step could have left is not stepped.
template <step_epilogue Epilogue, int Parts, class Policy, class Act>
__global__ void __launch_bounds__(engine_warps * 32)
    replay_norm_kernel(const replayssm::mamba2_params<Act> p, const float* weight, float eps, uint32_t warp_bytes) {
  using namespace replayssm;
  extern __shared__ float4 storage[];
  __shared__ float sums[engine_warps];
  const engine_place<Parts> at;
  if (at.h >= p.heads) return;  // the same for every warp of a head
  const int32_t slot = request_slot(p, at.b);
  if (slot == p.pad_slot_id) return;
  const mamba2_head_views<Policy, Act> v(p, at.b, at.h, slot);
  const step_plan plan = plan_step<step_kind::decode>(v.state, 1);
  if (plan.error != step_ok) return;
  uint8_t* warp_storage = reinterpret_cast<uint8_t*>(storage) + at.warp * warp_bytes;
  const float* head_weight = Epilogue == step_epilogue::rmsnorm ? weight + int64_t(at.h) * p.head_dim : nullptr;
  norm_rows norm(warp_storage + warp_bytes, p.head_dim);
  const mamba2_layer_shape shape = p.shape();
  float sum = 0.0f;  // the head's sum of squares
  auto meet = [&] {  // the norm's sum of the head, and every warp of it done before the cursor moves
    if constexpr (Epilogue == step_epilogue::rmsnorm) sum = warp_sum(norm.sum);
    if constexpr (Parts > 1) {
      if (threadIdx.x % 32 == 0) sums[at.warp] = sum;
      __syncthreads();
      sum = 0.0f;
      for (int32_t k = 0; k < Parts; ++k) sum += sums[at.warp - at.part + k];
    }
  };
  using warp::warp_role;
  [[maybe_unused]] const warp::row_range rows =
      warp::role_of(plan) == warp_role::flush
          ? step_rows<Epilogue, Parts, warp_role::flush>(v, shape, plan, at.part, warp_storage, head_weight, norm, meet)
          : step_rows<Epilogue, Parts, warp_role::read>(v, shape, plan, at.part, warp_storage, head_weight, norm, meet);
  if constexpr (Epilogue == step_epilogue::rmsnorm) {
    const float inverse = rsqrtf(sum / float(p.head_dim) + eps);
    warp::lanes_wait<0>();  // the weight rows (long since landed)
    __syncwarp();
    Act* y = v.in.y.at(0);
    for (int32_t r = rows.first + int32_t(threadIdx.x % 32); r < rows.first + rows.count; r += 32)
      y[r] = from_float<Act>(norm.kept[r] * inverse * norm.weight[r]);
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

/// Launches `replay_norm_kernel` for `Epilogue` over every request of `p` (device params), a
/// head's rows over `engine_warps` warps where the heads alone would leave most of the
/// device's warps idle. Its state pools must be 16-byte aligned per head (the bulk copy
/// engine, sm_90 on).
template <step_epilogue Epilogue, class Policy, class Act>
replayssm::status launch_engine_kernel(const replayssm::mamba2_params<Act>& p, const float* weight, float eps,
                                       cudaStream_t stream) {
  const uint32_t warp_bytes = engine_warp_bytes<Policy, Act>(p.shape(), Epilogue);
  const int smem = int(engine_warps * warp_bytes);
  const auto whole_heads = replay_norm_kernel<Epilogue, 1, Policy, Act>;
  const auto split_heads = replay_norm_kernel<Epilogue, engine_warps, Policy, Act>;
  for (const auto kernel : {whole_heads, split_heads})
    if (const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
        e != cudaSuccess)
      return replayssm::status::error(std::string("replay_norm_kernel: ") + cudaGetErrorString(e));
  int device = 0, multiprocessors = 0, blocks_per_sm = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks_per_sm, split_heads, engine_warps * 32, smem) !=
          cudaSuccess)
    return replayssm::status::error("replay_norm_kernel: querying the device failed");
  const bool split = int64_t(p.batch) * p.heads <= int64_t(blocks_per_sm) * multiprocessors;
  const int32_t heads_per_block = split ? 1 : engine_warps;
  const dim3 grid((p.heads + heads_per_block - 1) / heads_per_block, p.batch);
  (split ? split_heads : whole_heads)<<<grid, engine_warps * 32, smem, stream>>>(p, weight, eps, warp_bytes);
  return launched("replay_norm_kernel");
}

/// Launches `replay_norm_kernel` (device params; `weight` null: the step alone).
template <class Policy, class Act>
replayssm::status launch_replay_norm(const replayssm::mamba2_params<Act>& p, const float* weight, float eps,
                                     cudaStream_t stream) {
  return weight != nullptr ? launch_engine_kernel<step_epilogue::rmsnorm, Policy>(p, weight, eps, stream)
                           : launch_engine_kernel<step_epilogue::none, Policy>(p, weight, eps, stream);
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
