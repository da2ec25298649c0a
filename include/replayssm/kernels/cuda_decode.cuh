// SPDX-License-Identifier: Apache-2.0
/// \file cuda_decode.cuh
/// Layer 6: the ready-made CUDA kernels of the Mamba-2 decode steps and their launchers,
/// built from the primitives (run by `block_executor`). One block per (request, head).
///
/// A step is one launch, makes no host round trip and no allocation, and is CUDA-graph
/// capturable: window lengths and flush counts live on the device in `cursors`.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "replayssm/kernels/mamba2_params.hpp"
#include "replayssm/kernels/mamba2_validate.hpp"
#include "replayssm/kernels/status.hpp"
#include "replayssm/replay/executor.hpp"
#include "replayssm/replay/mamba2_head_step.hpp"

namespace replayssm {
namespace cuda {

/// Threads per block of the ready-made kernels by default. The step's results do not depend
/// on it (the random bits and every reduction order are fixed by the data layout).
inline constexpr int decode_block_threads = 128;

// No minimum of blocks per SM: capping registers at 64 (8 blocks) spilled the fp32 flush and
// made the write-back step 10% slower on the H200 (625 against 571 us at batch 256).
// Carving all of L1 out as shared memory changed nothing measurable (492 against 485 us).
/// One block runs one head of one request.
template <class Policy, class Act, int Threads = decode_block_threads>
__global__ void __launch_bounds__(Threads) mamba2_decode_kernel(const mamba2_params p) {
  static_assert(Threads % 32 == 0 && Threads <= 1024, "mamba2_decode_kernel: Threads must be whole warps");
  extern __shared__ float4 scratch_storage[];
  const int32_t h = blockIdx.x, b = blockIdx.y;
  const int32_t slot = p.slot_indices != nullptr ? p.slot_indices[b] : b;
  if (slot == p.pad_slot_id) return;
  uint32_t errors = error_slot_out_of_range;
  if (slot >= 0 && slot < p.num_slots) {
    const mamba2_head_views<Policy, Act> v(p, b, h, slot);
    errors = mamba2_head_step(block_executor{}, v.in, v.state, mamba2_shape{p.head_dim, p.state_dim},
                              reinterpret_cast<float*>(scratch_storage));
  }
  if (errors != step_ok && threadIdx.x == 0 && p.error_flags != nullptr) atomicOr(p.error_flags, errors);
}

namespace detail {

inline status cuda_error(const char* what, cudaError_t e) {
  return status::error(std::string("mamba2: ") + what + ": " + cudaGetErrorString(e));
}

}  // namespace detail

/// One decode step for every request of `p` (device memory), under `Policy`, on `stream`,
/// with `Threads` threads per (request, head) block.
template <class Policy, int Threads = decode_block_threads>
[[nodiscard]] status mamba2_decode_step(const mamba2_params& p, cudaStream_t stream = nullptr) {
  if (status s = validate_mamba2<Policy>(p, /*host_memory=*/false); !s) return s;
  if (p.batch == 0) return {};
  const size_t smem = mamba2_scratch_layout<Policy>::make({p.head_dim, p.state_dim}).bytes();
  status result;
  dispatch_dtype(p.act_dtype, [&](auto act) {
    using Act = decltype(act);
    auto kernel = mamba2_decode_kernel<Policy, Act, Threads>;
    if (smem > 48 * 1024) {
      const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
      if (e != cudaSuccess) {
        result = detail::cuda_error("the step's shared memory exceeds the device limit", e);
        return;
      }
    }
    kernel<<<dim3(p.heads, p.batch), Threads, smem, stream>>>(p);
    if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) result = detail::cuda_error("launch failed", e);
  });
  return result;
}

/// The conventional step: read, update and write the whole state.
template <class StateFormat, class Rounding = round_nearest_even>
[[nodiscard]] status naive_decode_step(const mamba2_params& p, cudaStream_t stream = nullptr) {
  return mamba2_decode_step<writeback_policy<StateFormat, Rounding>>(p, stream);
}

/// The replay step: output from checkpoint + window, the flush folded into the step on
/// which a request's window fills.
template <class Policy>
[[nodiscard]] status replay_decode_step(const mamba2_params& p, cudaStream_t stream = nullptr) {
  static_assert(!Policy::is_writeback, "replay_decode_step needs a window longer than 1");
  return mamba2_decode_step<Policy>(p, stream);
}

/// Reads and clears the device error flags; an error status describes what was skipped.
[[nodiscard]] inline status take_step_errors(uint32_t* error_flags, cudaStream_t stream = nullptr) {
  uint32_t bits = 0;
  if (cudaError_t e = cudaMemcpyAsync(&bits, error_flags, sizeof bits, cudaMemcpyDeviceToHost, stream); e != cudaSuccess)
    return detail::cuda_error("reading error flags", e);
  if (cudaError_t e = cudaMemsetAsync(error_flags, 0, sizeof bits, stream); e != cudaSuccess)
    return detail::cuda_error("clearing error flags", e);
  if (cudaError_t e = cudaStreamSynchronize(stream); e != cudaSuccess) return detail::cuda_error("synchronizing", e);
  return bits == 0 ? status{} : status::error("mamba2: " + describe_step_errors(bits));
}

}  // namespace cuda
}  // namespace replayssm
