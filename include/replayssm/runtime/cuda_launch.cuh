// SPDX-License-Identifier: Apache-2.0
/// \file cuda_launch.cuh
/// What every recurrence's CUDA launchers share: the body of a per-(request, head)
/// kernel, launch helpers, the commit kernels and their launchers, and the device error
/// flags. Every launch is asynchronous on the caller's stream, allocates nothing and is
/// CUDA-graph capturable: window lengths, pending drafts and flush counts live on the device.
#pragma once

#include <cuda_runtime.h>

#include <climits>
#include <cstdint>
#include <string>

#include "replayssm/runtime/commit.hpp"
#include "replayssm/runtime/gpu_tuning.hpp"
#include "replayssm/runtime/requests.hpp"
#include "replayssm/runtime/status.hpp"

namespace replayssm {
namespace cuda {
namespace detail {

/// Records request `b`'s step_error bits in `p.report` (nothing when there are none).
template <class Params>
__device__ __forceinline__ void report(const Params& p, int32_t b, uint32_t errors) {
  if (errors == step_ok) return;
  atomicOr(&p.report->errors, errors);
  atomicMax(&p.report->request_key, INT32_MAX - b);
}

/// The body of every per-(request, head) kernel, the device twin of the CPU's
/// `for_each_request_head`: block (h, b) runs `head(b, h, slot, scratch)` on its dynamic shared
/// memory unless request b is padding, and reports a slot out of range or the head step's own
/// error bits (a cursor, phase or token count no step could have left: that head is skipped).
template <class Params, class HeadStep>
__device__ __forceinline__ void run_request_head(const Params& p, HeadStep&& head) {
  extern __shared__ float4 scratch_storage[];
  const int32_t h = blockIdx.x, b = blockIdx.y;
  const int32_t slot = request_slot(p, b);
  if (slot == p.pad_slot_id) return;
  const uint32_t errors = slot >= 0 && slot < p.num_slots ? head(b, h, slot, reinterpret_cast<float*>(scratch_storage))
                                                          : uint32_t(error_slot_out_of_range);
  if (threadIdx.x == 0) report(p, b, errors);
}

inline status cuda_error(const char* what, cudaError_t e) {
  return status::error(std::string("replayssm: ") + what + ": " + cudaGetErrorString(e));
}

/// The device's shared memory per block (opt-in maximum) and compute capability.
struct device_limits {
  int shared_per_block = 0, major = 0;
};
inline status query_device(device_limits& d) {
  int device = 0;
  if (const cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return cuda_error("no CUDA device", e);
  if (const cudaError_t e = cudaDeviceGetAttribute(&d.shared_per_block, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
      e != cudaSuccess)
    return cuda_error("querying the shared memory per block", e);
  if (const cudaError_t e = cudaDeviceGetAttribute(&d.major, cudaDevAttrComputeCapabilityMajor, device);
      e != cudaSuccess)
    return cuda_error("querying the compute capability", e);
  return {};
}

/// Launches `kernel` over (heads, batch) blocks with `smem` bytes of dynamic shared memory,
/// after checking that the device has that much per block (`who` names the step).
template <class Kernel, class Params>
status launch_head_blocks(Kernel kernel, const Params& p, size_t smem, int threads, cudaStream_t stream,
                          const char* who) {
  if (p.batch == 0) return {};
  device_limits d;
  if (status s = query_device(d); !s) return s;
  if (smem > size_t(d.shared_per_block))
    return status::error(std::string(who) + ": the step needs " + std::to_string(smem) +
                         " bytes of shared memory per block (its shape, tokens=" + std::to_string(p.tokens) +
                         " and window), more than the device's " + std::to_string(d.shared_per_block) +
                         "; use fewer drafts or a smaller shape");
  if (smem > 48 * 1024) {
    if (const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
        e != cudaSuccess)
      return cuda_error("raising the kernel's shared memory limit", e);
  }
  kernel<<<dim3(p.heads, p.batch), threads, smem, stream>>>(p);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return cuda_error("launch failed", e);
  return {};
}

/// Checks that device params carry request plans (the replay decode step's scratch).
template <class Params>
status check_request_plans(const char* who, const Params& p) {
  if (p.request_plans == nullptr)
    return status::error(std::string(who) +
                         ": request_plans is null: the CUDA replay decode step plans each request there before it "
                         "steps any head ([batch] replayssm::request_plan, device memory)");
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

/// Plans every request of a decode step from its slot and cursors (`check_request`), one
/// thread each: a request with any error is reported and skipped on every head; the others
/// read or flush on every head. The steps that follow read the plans, so that which kernel
/// steps a request is decided before any cursor moves.
template <class Policy, class Params>
__global__ void plan_requests_kernel(const Params p) {
  const int32_t b = blockIdx.x * blockDim.x + threadIdx.x;
  if (b >= p.batch) return;
  const request_check r = check_request<Policy, step_kind::decode>(p, b);
  const bool pad = request_slot(p, b) == p.pad_slot_id;
  p.request_plans[b] = r.errors != step_ok || pad ? request_plan::skip
                                                  : (r.flushes ? request_plan::flush : request_plan::read);
  detail::report(p, b, r.errors);
}

/// Commits the accepted drafts of every request, all of its heads or none: one thread each.
template <class Params>
__global__ void commit_drafts_kernel(const Params p) {
  const int32_t b = blockIdx.x * blockDim.x + threadIdx.x;
  if (b < p.batch) detail::report(p, b, commit_request(p, b));
}

/// The snapshot baseline's commit: one thread per request. (A template, as every kernel of a
/// header must be, so that several translation units may include it.)
template <class Params>
__global__ void snapshot_commit_kernel(const Params p, int32_t* slot_indices, int32_t* snapshot_slots) {
  const int32_t b = blockIdx.x * blockDim.x + threadIdx.x;
  if (b < p.batch) detail::report(p, b, snapshot_commit_request(p, slot_indices, snapshot_slots, b));
}

/// Commits `p.accepted_counts[b]` drafts of every request of any recurrence: moves the
/// committed lengths on the device (a commit beyond the verified drafts is reported through
/// `error_flags`).
template <class Params>
[[nodiscard]] status commit_drafts(const Params& p, cudaStream_t stream = nullptr) {
  if (status s = validate_commit(p, /*host_memory=*/false); !s) return s;
  return detail::launch_threads(commit_drafts_kernel<Params>, p.batch, stream, p);
}

/// The conventional commit: request b's slot becomes the snapshot slot of its last accepted
/// draft (`slot_indices` and `snapshot_slots`, device memory, are updated in place).
template <class Params>
[[nodiscard]] status snapshot_commit(const Params& p, int32_t* slot_indices, int32_t* snapshot_slots,
                                     cudaStream_t stream = nullptr) {
  if (status s = validate_snapshot_commit(p, slot_indices, snapshot_slots, /*host_memory=*/false); !s) return s;
  return detail::launch_threads(snapshot_commit_kernel<Params>, p.batch, stream, p, slot_indices, snapshot_slots);
}

/// Reads and clears a device report (synchronizes `stream`); an error status names the
/// lowest request that raised one and what was wrong. On the device a bad slot skips its
/// request and a bad cursor its head; a commit is all or nothing per request. (Checking a
/// request's every head and the other requests' slots inside the step, as the CPU path
/// does before it steps anything, cost 15-50% of a step on the H200: see docs/benchmarks.md.)
[[nodiscard]] inline status take_step_errors(step_report* report, cudaStream_t stream = nullptr) {
  step_report r{};
  if (cudaError_t e = cudaMemcpyAsync(&r, report, sizeof r, cudaMemcpyDeviceToHost, stream); e != cudaSuccess)
    return detail::cuda_error("reading the step report", e);
  if (cudaError_t e = cudaMemsetAsync(report, 0, sizeof r, stream); e != cudaSuccess)
    return detail::cuda_error("clearing the step report", e);
  if (cudaError_t e = cudaStreamSynchronize(stream); e != cudaSuccess) return detail::cuda_error("synchronizing", e);
  if (r.errors == 0) return {};
  return status::error("replayssm: request " + std::to_string(INT32_MAX - r.request_key) + ": " +
                       describe_step_errors(r.errors) + "; what it named was skipped");
}

}  // namespace cuda
}  // namespace replayssm
