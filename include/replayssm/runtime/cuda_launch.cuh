// SPDX-License-Identifier: Apache-2.0
/// \file cuda_launch.cuh
/// What every recurrence's CUDA launchers share: the body of a per-(request, head)
/// kernel, launch helpers, the commit kernels and their launchers, and the device error
/// flags. Every launch is asynchronous on the caller's stream, allocates nothing and is
/// CUDA-graph capturable: window lengths, pending drafts and flush counts live on the device.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "replayssm/runtime/commit.hpp"
#include "replayssm/runtime/gpu_tuning.hpp"
#include "replayssm/runtime/requests.hpp"
#include "replayssm/runtime/status.hpp"

namespace replayssm {
namespace cuda {
namespace detail {

/// The body of every per-(request, head) kernel, the device twin of the CPU's
/// `for_each_request_head`: block (h, b) runs `head(b, h, slot, scratch)` on its dynamic shared
/// memory unless request b is padding, reports a slot out of range, and ORs the step's error
/// bits into `p.error_flags`.
template <class Params, class HeadStep>
__device__ __forceinline__ void run_request_head(const Params& p, HeadStep&& head) {
  extern __shared__ float4 scratch_storage[];
  const int32_t h = blockIdx.x, b = blockIdx.y;
  const int32_t slot = request_slot(p, b);
  if (slot == p.pad_slot_id) return;
  const uint32_t errors = slot >= 0 && slot < p.num_slots
                              ? head(b, h, slot, reinterpret_cast<float*>(scratch_storage))
                              : uint32_t(error_slot_out_of_range);
  if (errors != step_ok && threadIdx.x == 0 && p.error_flags != nullptr) atomicOr(p.error_flags, errors);
}

inline status cuda_error(const char* what, cudaError_t e) {
  return status::error(std::string("replayssm: ") + what + ": " + cudaGetErrorString(e));
}

/// Launches `kernel` over (heads, batch) blocks with `smem` bytes of dynamic shared memory.
template <class Kernel, class Params>
status launch_head_blocks(Kernel kernel, const Params& p, size_t smem, int threads, cudaStream_t stream) {
  if (smem > 48 * 1024) {
    if (const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
        e != cudaSuccess)
      return cuda_error("the step's shared memory exceeds the device limit", e);
  }
  kernel<<<dim3(p.heads, p.batch), threads, smem, stream>>>(p);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return cuda_error("launch failed", e);
  return {};
}

/// Launches a one-dimensional kernel over `count` threads.
template <class Kernel, class... Args>
status launch_threads(Kernel kernel, int64_t count, cudaStream_t stream, const Args&... args) {
  if (count == 0) return {};
  constexpr int threads = 256;
  kernel<<<unsigned((count + threads - 1) / threads), threads, 0, stream>>>(args...);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return cuda_error("launch failed", e);
  return {};
}

}  // namespace detail

/// Commits the accepted drafts of every (request, head): one thread each.
template <class Params>
__global__ void commit_drafts_kernel(const Params p) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= int64_t(p.batch) * p.heads) return;
  const uint32_t errors = commit_request_head(p, int32_t(i / p.heads), int32_t(i % p.heads));
  if (errors != step_ok && p.error_flags != nullptr) atomicOr(p.error_flags, errors);
}

/// The snapshot baseline's commit: one thread per request. (A template, as every kernel of a
/// header must be, so that several translation units may include it.)
template <class Params>
__global__ void snapshot_commit_kernel(const Params p, int32_t* slot_indices, int32_t* snapshot_slots) {
  const int32_t b = blockIdx.x * blockDim.x + threadIdx.x;
  if (b >= p.batch) return;
  const uint32_t errors = snapshot_commit_request(p, slot_indices, snapshot_slots, b);
  if (errors != step_ok && p.error_flags != nullptr) atomicOr(p.error_flags, errors);
}

/// Commits `p.accepted_counts[b]` drafts of every request of any recurrence: moves the
/// committed lengths on the device (a commit beyond the verified drafts is reported through
/// `error_flags`).
template <class Params>
[[nodiscard]] status commit_drafts(const Params& p, cudaStream_t stream = nullptr) {
  if (status s = validate_commit(p, /*host_memory=*/false); !s) return s;
  return detail::launch_threads(commit_drafts_kernel<Params>, int64_t(p.batch) * p.heads, stream, p);
}

/// The conventional commit: request b's slot becomes the snapshot slot of its last accepted
/// draft (`slot_indices` and `snapshot_slots`, device memory, are updated in place).
template <class Params>
[[nodiscard]] status snapshot_commit(const Params& p, int32_t* slot_indices, int32_t* snapshot_slots,
                                     cudaStream_t stream = nullptr) {
  if (status s = validate_snapshot_commit(p, slot_indices, snapshot_slots, /*host_memory=*/false); !s) return s;
  return detail::launch_threads(snapshot_commit_kernel<Params>, p.batch, stream, p, slot_indices, snapshot_slots);
}

/// Reads and clears the device error flags; an error status describes what was skipped.
[[nodiscard]] inline status take_step_errors(uint32_t* error_flags, cudaStream_t stream = nullptr) {
  uint32_t bits = 0;
  if (cudaError_t e = cudaMemcpyAsync(&bits, error_flags, sizeof bits, cudaMemcpyDeviceToHost, stream); e != cudaSuccess)
    return detail::cuda_error("reading error flags", e);
  if (cudaError_t e = cudaMemsetAsync(error_flags, 0, sizeof bits, stream); e != cudaSuccess)
    return detail::cuda_error("clearing error flags", e);
  if (cudaError_t e = cudaStreamSynchronize(stream); e != cudaSuccess) return detail::cuda_error("synchronizing", e);
  return bits == 0 ? status{} : status::error("replayssm: " + describe_step_errors(bits));
}

}  // namespace cuda
}  // namespace replayssm
