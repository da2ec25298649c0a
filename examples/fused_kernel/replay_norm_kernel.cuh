// SPDX-License-Identifier: Apache-2.0
// An engine's own CUDA kernels built on the library's warp primitives: each runs the replay
// decode step of every (request, head), then the RMSNorm of Mamba-2's gated output over the
// head's channels:
//
//   out = rmsnorm(y) * weight,   y = the step's output, its gate silu(z) included
//
// The step hands its outputs to the kernel (the primitives' output handler) rather than
// storing them: they wait in shared memory for the norm, and are written once, normalized.
// So the norm needs no second launch, no pass of its own over the layer's outputs and no
// read-back. One warp per head (warp::mamba2_warp_step, the state streamed; the norm's
// weight rows are copied into shared memory behind it), or, where a batch's heads fit the
// device at once, a block per head in tiles (warp::mamba2_tile_step, its rows in
// registers), whose warps meet once for the norm's sum. Shared by the fused_kernel example,
// its benchmark (bench/mamba2/fused_bench.cu) and a GPU test.
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

/// The step of a whole head by one warp as its plan's role says, on the warp's temp storage:
/// with the norm the head's `weight` row is copied into `norm` behind the state's stream,
/// and the outputs stay in `norm.kept` (their squares summed), else they are stored; then
/// the cursor moves.
template <step_epilogue Epilogue, replayssm::warp::warp_role Role, class Policy, class Act>
__device__ void step_head(const replayssm::mamba2_head_views<Policy, Act>& v, replayssm::mamba2_layer_shape shape,
                          const replayssm::step_plan& plan, uint8_t* warp_storage, const float* weight,
                          norm_rows& norm) {
  replayssm::warp::mamba2_warp_step<Policy, Act, Role> step(warp_storage, v.state, shape);
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
  step.advance_cursor(plan);
}

/// One decode step of every request of `p` (grid: head blocks x batch), one warp per head;
/// with the norm each head's outputs are normalized with its `weight` row before they are
/// stored, so that they are written once. Pad rows are skipped; the engine validated `p`
/// once on the host, and a head whose cursor no step could have left is not stepped.
template <step_epilogue Epilogue, class Policy, class Act>
__global__ void __launch_bounds__(engine_warps * 32)
    replay_norm_kernel(const replayssm::mamba2_params<Act> p, const float* weight, float eps, uint32_t warp_bytes) {
  using namespace replayssm;
  extern __shared__ float4 storage[];
  const int32_t warp_index = int32_t(threadIdx.x / 32), b = int32_t(blockIdx.y);
  const int32_t h = int32_t(blockIdx.x) * engine_warps + warp_index;
  if (h >= p.heads) return;
  const int32_t slot = request_slot(p, b);
  if (slot == p.pad_slot_id) return;
  const mamba2_head_views<Policy, Act> v(p, b, h, slot);
  const step_plan plan = plan_step<step_kind::decode>(v.state, 1);
  if (plan.error != step_ok) return;
  uint8_t* warp_storage = reinterpret_cast<uint8_t*>(storage) + warp_index * warp_bytes;
  const float* head_weight = Epilogue == step_epilogue::rmsnorm ? weight + int64_t(h) * p.head_dim : nullptr;
  norm_rows norm(warp_storage + warp_bytes, p.head_dim);
  using warp::warp_role;
  if (warp::role_of(plan) == warp_role::flush)
    step_head<Epilogue, warp_role::flush>(v, p.shape(), plan, warp_storage, head_weight, norm);
  else
    step_head<Epilogue, warp_role::read>(v, p.shape(), plan, warp_storage, head_weight, norm);
  if constexpr (Epilogue == step_epilogue::rmsnorm) {
    const float inverse = rsqrtf(warp_sum(norm.sum) / float(p.head_dim) + eps);
    warp::lanes_wait<0>();  // the weight row (long since landed)
    __syncwarp();
    Act* y = v.in.y.at(0);
    for (int32_t r = int32_t(threadIdx.x % 32); r < p.head_dim; r += 32)
      y[r] = from_float<Act>(norm.kept[r] * inverse * norm.weight[r]);
  }
}

/// Tiles (warps) per block of the tile kernel, at most: a head of up to 16 tiles.
inline constexpr int max_tiles = 16;

/// The same step where a batch's heads fit the device at once: block (i, g, b) holds head
/// h = g H / G + i (of group g, so that its views divide nothing) of request b, warp t its
/// tile t (`warp::mamba2_tile_step`: rows held in registers, no stream). With the norm the
/// outputs wait in shared memory, each warp's sum of squares meets the others' at one
/// barrier, and each warp stores its own rows, normalized.
template <step_epilogue Epilogue, class Policy, class Act>
__global__ void __launch_bounds__(max_tiles * 32)
    replay_norm_tiles_kernel(const replayssm::mamba2_params<Act> p, const float* weight, float eps) {
  using namespace replayssm;
  using tile_step = warp::mamba2_tile_step<Policy, Act>;
  __shared__ typename tile_step::TempStorage storage[max_tiles];
  __shared__ float kept[max_tiles * tile_step::tile_rows];
  __shared__ float sums[max_tiles];
  const int32_t tile = int32_t(threadIdx.x / 32), tiles = int32_t(blockDim.x / 32);
  const int32_t g = int32_t(blockIdx.y), h = g * int32_t(gridDim.x) + int32_t(blockIdx.x), b = int32_t(blockIdx.z);
  const int32_t slot = request_slot(p, b);
  if (slot == p.pad_slot_id) return;
  const mamba2_head_views<Policy, Act> v(p, b, h, g, slot);
  const step_plan plan = plan_step<step_kind::decode>(v.state, 1);
  if (plan.error != step_ok) return;  // the same for every warp of the block
  tile_step step(storage[tile], v.state, p.shape(), tile);
  if constexpr (Epilogue == step_epilogue::rmsnorm) {
    float sum = 0.0f;
    step.step(v.in, plan, [&](int32_t, int32_t r, float y) {
      kept[r] = y;
      sum = fmaf(y, y, sum);
    });
    sum = warp_sum(sum);
    if (threadIdx.x % 32 == 0) sums[tile] = sum;
    __syncthreads();  // every tile stepped, every sum in
    sum = 0.0f;
    for (int32_t t = 0; t < tiles; ++t) sum += sums[t];
    const float inverse = rsqrtf(sum / float(p.head_dim) + eps);
    const int32_t r = tile * tile_step::tile_rows + int32_t(threadIdx.x % 32);  // a row of the warp's tile
    if (threadIdx.x % 32 < tile_step::tile_rows && r < p.head_dim)
      v.in.y.at(0)[r] = from_float<Act>(kept[r] * inverse * weight[int64_t(h) * p.head_dim + r]);
  } else {
    step.step(v.in, plan);
    __syncthreads();  // every tile stepped
  }
  if (tile == 0) step.advance_cursor(plan);
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

/// Launches the tile kernel for `Epilogue` over every request of `p` (device params) if the
/// policy and the shape step in tiles and every block of the batch is resident at once;
/// `tiled` says whether it did.
template <step_epilogue Epilogue, class Policy, class Act>
replayssm::status launch_tiles(const replayssm::mamba2_params<Act>& p, const float* weight, float eps,
                               cudaStream_t stream, bool& tiled) {
  using tile_step = replayssm::warp::mamba2_tile_step<Policy, Act>;
  tiled = false;
  if constexpr (tile_step::policy_supported) {
    const int32_t tiles = tile_step::tiles(p.shape());
    if (!tile_step::supported(p.shape()) || tiles > max_tiles) return {};
    const auto kernel = replay_norm_tiles_kernel<Epilogue, Policy, Act>;
    int device = 0, multiprocessors = 0, blocks_per_sm = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks_per_sm, kernel, tiles * 32, 0) != cudaSuccess)
      return replayssm::status::error("replay_norm_tiles_kernel: querying the device failed");
    if (int64_t(p.batch) * p.heads > int64_t(blocks_per_sm) * multiprocessors) return {};
    kernel<<<dim3(p.heads / p.groups, p.groups, p.batch), tiles * 32, 0, stream>>>(p, weight, eps);
    tiled = true;
    return launched("replay_norm_tiles_kernel");
  }
  return {};
}

/// Launches the engine's step for `Epilogue` over every request of `p` (device params): in
/// tiles where a batch's heads fit the device at once, else `replay_norm_kernel`. Its
/// state pools must be 16-byte aligned per head (the bulk copy engine, sm_90 on).
template <step_epilogue Epilogue, class Policy, class Act>
replayssm::status launch_engine_kernel(const replayssm::mamba2_params<Act>& p, const float* weight, float eps,
                                       cudaStream_t stream) {
  bool tiles = false;
  if (replayssm::status s = launch_tiles<Epilogue, Policy>(p, weight, eps, stream, tiles); !s || tiles) return s;
  const uint32_t warp_bytes = engine_warp_bytes<Policy, Act>(p.shape(), Epilogue);
  const int smem = int(engine_warps * warp_bytes);
  const auto kernel = replay_norm_kernel<Epilogue, Policy, Act>;
  if (const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
      e != cudaSuccess)
    return replayssm::status::error(std::string("replay_norm_kernel: ") + cudaGetErrorString(e));
  const dim3 grid((p.heads + engine_warps - 1) / engine_warps, p.batch);
  kernel<<<grid, engine_warps * 32, smem, stream>>>(p, weight, eps, warp_bytes);
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
