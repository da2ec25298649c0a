// SPDX-License-Identifier: Apache-2.0
/// \file cuda_decode.cuh
/// Layer 6: the ready-made CUDA kernels of the Mamba-2 and Gated DeltaNet steps (decode,
/// speculative verify and commit, and the snapshot baseline) and their launchers, built from
/// the primitives (run by `block_executor`). One block per (request, head); the launchers
/// are overloaded on the params type.
///
/// A step is one launch, makes no host round trip and no allocation, and is CUDA-graph
/// capturable: window lengths, pending drafts and flush counts live on the device in `cursors`.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "replayssm/kernels/commit.hpp"
#include "replayssm/kernels/gdn_params.hpp"
#include "replayssm/kernels/gdn_snapshot.hpp"
#include "replayssm/kernels/gdn_validate.hpp"
#include "replayssm/kernels/mamba2_params.hpp"
#include "replayssm/kernels/mamba2_snapshot.hpp"
#include "replayssm/kernels/mamba2_validate.hpp"
#include "replayssm/kernels/status.hpp"
#include "replayssm/replay/executor.hpp"
#include "replayssm/replay/gdn_head_step.hpp"
#include "replayssm/replay/mamba2_head_step.hpp"

namespace replayssm {
namespace cuda {

/// Threads per block of the ready-made kernels by default. The step's results do not depend
/// on it (the random bits and every reduction order are fixed by the data layout).
inline constexpr int decode_block_threads = 128;

/// Blocks per SM the ready-made kernels ask registers for, `Blocks` x 128 threads' worth.
/// With no cap the register allocator's choice swung between 76 and 118 registers (6 and 4
/// blocks) on small changes of the step's code. Replay decode steps run 8 blocks (64
/// registers, a few spilled): 416 against 468 us at batch 256 on the H200 with 6 blocks (80
/// registers). The write-back and verify steps stay at 6: at 64 registers the verify step
/// spilled 64 bytes and took 2.67 against 2.50 ms per round at batch 512, and capping the
/// write-back step at 64 spilled its flush (625 against 571 us at batch 256). Carving all of
/// L1 out as shared memory changed nothing measurable (492 against 485 us).
template <int Threads, int Blocks>
inline constexpr int decode_min_blocks = 128 * Blocks / Threads > 0 ? 128 * Blocks / Threads : 1;

/// `Blocks` of decode_min_blocks for a step kind.
template <class Policy, token_commit Commit>
inline constexpr int step_blocks_per_sm = Policy::is_writeback || Commit == token_commit::pending ? 6 : 8;

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

}  // namespace detail

/// One block runs one head of one request: a decode (`immediate`) or verify (`pending`) step.
template <class Policy, class Act, int Threads = decode_block_threads,
          token_commit Commit = token_commit::immediate>
__global__ void __launch_bounds__(Threads, decode_min_blocks<Threads, step_blocks_per_sm<Policy, Commit>>)
    mamba2_decode_kernel(const mamba2_params p) {
  static_assert(Threads % 32 == 0 && Threads <= 1024, "mamba2_decode_kernel: Threads must be whole warps");
  detail::run_request_head(p, [&](int32_t b, int32_t h, int32_t slot, float* scratch) {
    const mamba2_head_views<Policy, Act> v(p, b, h, slot);
    return mamba2_head_tokens<Commit>(block_executor{}, v.in, v.state, mamba2_shape{p.head_dim, p.state_dim}, scratch);
  });
}

/// The snapshot baseline's verify step: one block per (request, head), drafts in order.
template <class StateFormat, class Act, int Threads = decode_block_threads>
__global__ void __launch_bounds__(Threads, decode_min_blocks<Threads, 6>) mamba2_snapshot_kernel(const mamba2_params p) {
  detail::run_request_head(p, [&](int32_t b, int32_t h, int32_t slot, float* scratch) {
    return mamba2_snapshot_head_step<StateFormat, Act>(block_executor{}, p, b, h, slot, scratch);
  });
}

/// How a Gated DeltaNet kernel spreads a state row: the write-back and snapshot steps stream
/// the state and are best with a whole row per thread (168 registers, 3 blocks per SM: 585
/// against 785 us per write-back step at batch 512 with four lanes); the replay steps, bound
/// by the latency of their staging, are best with four lanes and many blocks (6 blocks of 80
/// registers: 864 us per step at batch 512 against 1092 with 4 blocks). Decode steps take 8
/// (64 registers, a few bytes spilled); verify steps, with their per-draft arrays, 6.
template <bool Streaming>
using gdn_executor = basic_block_executor<Streaming ? 1 : 4>;
template <bool Streaming, token_commit Commit>
inline constexpr int gdn_blocks_per_sm = Streaming ? 3 : (Commit == token_commit::immediate ? 8 : 6);

/// Gated DeltaNet: one block runs one value head of one request.
template <class Policy, class Act, int Threads, token_commit Commit, gdn_window Mode>
__global__ void __launch_bounds__(Threads, decode_min_blocks<Threads, gdn_blocks_per_sm<Policy::is_writeback, Commit>>)
    gdn_decode_kernel(const gdn_params p) {
  static_assert(Threads % 32 == 0 && Threads <= 1024, "gdn_decode_kernel: Threads must be whole warps");
  detail::run_request_head(p, [&](int32_t b, int32_t h, int32_t slot, float* scratch) {
    const gdn_head_views<Policy, Act> v(p, b, h, slot);
    return gdn_head_tokens<Commit, Mode>(gdn_executor<Policy::is_writeback>{}, v.in, v.state,
                                         gdn_shape{p.value_dim, p.key_dim}, scratch);
  });
}

/// Gated DeltaNet's snapshot baseline: one block per (request, value head), a row per thread.
template <class StateFormat, class Act, int Threads>
__global__ void __launch_bounds__(Threads, decode_min_blocks<Threads, gdn_blocks_per_sm<true, token_commit::pending>>)
    gdn_snapshot_kernel(const gdn_params p) {
  detail::run_request_head(p, [&](int32_t b, int32_t h, int32_t slot, float* scratch) {
    return gdn_snapshot_head_step<StateFormat, Act>(gdn_executor<true>{}, p, b, h, slot, scratch);
  });
}

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

namespace detail {

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

/// A decode or verify step for every request of `p` (device memory).
template <class Policy, int Threads, token_commit Commit>
status mamba2_tokens_step(const mamba2_params& p, cudaStream_t stream) {
  if (status s = validate_mamba2<Policy>(p, /*host_memory=*/false, Commit); !s) return s;
  if (p.batch == 0) return {};
  const size_t smem = mamba2_scratch_layout<Policy>::make({p.head_dim, p.state_dim}, p.tokens).bytes();
  status result;
  dispatch_dtype(p.act_dtype, [&](auto act) {
    result = launch_head_blocks(mamba2_decode_kernel<Policy, decltype(act), Threads, Commit>, p, smem, Threads, stream);
  });
  return result;
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

/// One decode step for every request of `p` (device memory), under `Policy`, on `stream`,
/// with `Threads` threads per (request, head) block.
template <class Policy, int Threads = decode_block_threads>
[[nodiscard]] status mamba2_decode_step(const mamba2_params& p, cudaStream_t stream = nullptr) {
  return detail::mamba2_tokens_step<Policy, Threads, token_commit::immediate>(p, stream);
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

/// The speculative verify step: every draft's output from checkpoint + window + the drafts
/// before it, the state read once for all of them; the drafts wait in the window,
/// uncommitted. The committed entries are flushed first when the drafts would not fit.
template <class Policy, int Threads = decode_block_threads>
[[nodiscard]] status replay_verify_step(const mamba2_params& p, cudaStream_t stream = nullptr) {
  return detail::mamba2_tokens_step<Policy, Threads, token_commit::pending>(p, stream);
}

/// Commits `p.accepted_counts[b]` drafts of every request: moves the committed lengths on
/// the device (a commit beyond the verified drafts is reported through `error_flags`).
template <class Params>
[[nodiscard]] status commit_drafts(const Params& p, cudaStream_t stream = nullptr) {
  if (status s = validate_commit(p, /*host_memory=*/false); !s) return s;
  return detail::launch_threads(commit_drafts_kernel<Params>, int64_t(p.batch) * p.heads, stream, p);
}

/// The conventional verify step: each draft's state written to its snapshot slot.
template <class StateFormat, int Threads = decode_block_threads>
[[nodiscard]] status snapshot_verify_step(const mamba2_params& p, cudaStream_t stream = nullptr) {
  if (status s = validate_snapshot<StateFormat>(p, /*host_memory=*/false); !s) return s;
  if (p.batch == 0) return {};
  const size_t smem =
      mamba2_scratch_layout<writeback_policy<StateFormat>>::make({p.head_dim, p.state_dim}).bytes();
  status result;
  dispatch_dtype(p.act_dtype, [&](auto act) {
    result = detail::launch_head_blocks(mamba2_snapshot_kernel<StateFormat, decltype(act), Threads>, p, smem, Threads,
                                        stream);
  });
  return result;
}

/// The conventional commit: request b's slot becomes the snapshot slot of its last accepted
/// draft (`slot_indices` and `snapshot_slots`, device memory, are updated in place).
template <class Params>
[[nodiscard]] status snapshot_commit(const Params& p, int32_t* slot_indices, int32_t* snapshot_slots,
                                     cudaStream_t stream = nullptr) {
  if (status s = validate_snapshot_commit(p, slot_indices, snapshot_slots, /*host_memory=*/false); !s) return s;
  return detail::launch_threads(snapshot_commit_kernel<Params>, p.batch, stream, p, slot_indices, snapshot_slots);
}

namespace detail {

/// A Gated DeltaNet decode or verify step for every request of `p` (device memory).
template <class Policy, int Threads, token_commit Commit, gdn_window Mode>
status gdn_tokens_step(const gdn_params& p, cudaStream_t stream) {
  if (status s = validate_gdn<Policy, Mode>(p, /*host_memory=*/false, Commit); !s) return s;
  if (p.batch == 0) return {};
  const size_t smem = gdn_scratch_layout::make({p.value_dim, p.key_dim}, Policy::window, p.tokens).bytes();
  status result;
  dispatch_dtype(p.act_dtype, [&](auto act) {
    result = launch_head_blocks(gdn_decode_kernel<Policy, decltype(act), Threads, Commit, Mode>, p, smem, Threads, stream);
  });
  return result;
}

}  // namespace detail

/// Gated DeltaNet: one decode step for every request of `p` (device memory), under `Policy`
/// with the window mode `Mode`, in blocks of `Threads` threads (a state row each).
template <class Policy, gdn_window Mode = gdn_window::corrected_values, int Threads = decode_block_threads>
[[nodiscard]] status gdn_decode_step(const gdn_params& p, cudaStream_t stream = nullptr) {
  return detail::gdn_tokens_step<Policy, Threads, token_commit::immediate, Mode>(p, stream);
}

/// Gated DeltaNet: the conventional step, read, update and write the whole state.
template <class StateFormat, class Rounding = round_nearest_even>
[[nodiscard]] status naive_decode_step(const gdn_params& p, cudaStream_t stream = nullptr) {
  return gdn_decode_step<writeback_policy<StateFormat, Rounding>>(p, stream);
}

/// Gated DeltaNet: the replay step, output from checkpoint + window, flush when it fills.
template <class Policy, gdn_window Mode = gdn_window::corrected_values>
[[nodiscard]] status replay_decode_step(const gdn_params& p, cudaStream_t stream = nullptr) {
  static_assert(!Policy::is_writeback, "replay_decode_step needs a window longer than 1");
  return gdn_decode_step<Policy, Mode>(p, stream);
}

/// Gated DeltaNet: the speculative verify step; drafts wait in the window until
/// `commit_drafts`.
template <class Policy, gdn_window Mode = gdn_window::corrected_values, int Threads = decode_block_threads>
[[nodiscard]] status replay_verify_step(const gdn_params& p, cudaStream_t stream = nullptr) {
  return detail::gdn_tokens_step<Policy, Threads, token_commit::pending, Mode>(p, stream);
}

/// Gated DeltaNet: the conventional verify step, each draft's state written to its
/// snapshot slot in one pass over the state.
template <class StateFormat, int Threads = decode_block_threads>
[[nodiscard]] status snapshot_verify_step(const gdn_params& p, cudaStream_t stream = nullptr) {
  if (status s = validate_snapshot<StateFormat>(p, /*host_memory=*/false); !s) return s;
  if (p.batch == 0) return {};
  const size_t smem = gdn_scratch_layout::make({p.value_dim, p.key_dim}, 0, p.tokens).bytes();
  status result;
  dispatch_dtype(p.act_dtype, [&](auto act) {
    result = detail::launch_head_blocks(gdn_snapshot_kernel<StateFormat, decltype(act), Threads>, p, smem, Threads, stream);
  });
  return result;
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
