// SPDX-License-Identifier: Apache-2.0
/// \file async_copy.cuh
/// The device's asynchronous copies from global to shared memory that a warp's streams
/// are built on: bulk copies completing on an mbarrier (sm_90+), through libcu++'s PTX
/// wrappers (`cuda::ptx`), and per-lane 16-byte copies (sm_80+) with a plain-load fallback
/// below that. Device code only. The ring's barriers are plain 64-bit mbarriers in the
/// warp's temp storage rather than `cuda::barrier` objects, whose size a host-side
/// `temp_storage_bytes` would have to match.
#pragma once

#include <cuda_runtime.h>

#include <cuda/ptx>

#include <cstdint>

namespace replayssm {
namespace warp {

/// How a warp's stream moves bytes into shared memory.
enum class copy_engine : uint8_t {
  bulk,   ///< `cp.async.bulk` issued by lane 0, completing on an mbarrier (sm_90+)
  lanes,  ///< every lane copies 16-byte pieces with `cp.async` (sm_80+; plain loads before)
};

/// Whether `p` is aligned to 16 bytes.
__device__ __forceinline__ bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

/// The shared-memory address of `p`, as the PTX copy and barrier instructions take it.
__device__ __forceinline__ uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

/// Initializes an mbarrier that one arrival (with its byte count) completes per phase.
__device__ __forceinline__ void barrier_init(uint64_t* barrier) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  ::cuda::ptx::mbarrier_init(barrier, 1);
  // Makes the initialized barrier visible to the async proxy that completes it.
  ::cuda::ptx::fence_mbarrier_init(::cuda::ptx::sem_release, ::cuda::ptx::scope_cluster);
#else
  (void)barrier;
#endif
}

/// Invalidates an mbarrier whose phases have all completed, so that its memory may be
/// initialized again (a ring started again in the same shared memory). (`cuda::ptx` has no
/// `mbarrier.inval`.)
__device__ __forceinline__ void barrier_inval(uint64_t* barrier) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.inval.shared::cta.b64 [%0];" ::"r"(shared_address(barrier)) : "memory");
#else
  (void)barrier;
#endif
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
/// Arrives on `barrier` (one lane), expecting `bytes` more to land on it in this phase.
__device__ __forceinline__ void arrive_expecting(uint64_t* barrier, uint32_t bytes) {
  // CTA scope: the form that discards the state is cluster-scoped, and its release fenced
  // the whole GPU's memory before every arrival. The state returned is not needed.
  (void)::cuda::ptx::mbarrier_arrive_expect_tx(::cuda::ptx::sem_release, ::cuda::ptx::scope_cta,
                                               ::cuda::ptx::space_shared, barrier, bytes);
}
#endif

/// Issued by one lane: copies `bytes` (a multiple of 16, both ends 16-byte aligned) from
/// global `from` to shared `to` and arms `barrier` to complete when they have landed.
__device__ __forceinline__ void bulk_copy(void* to, const void* from, uint32_t bytes, uint64_t* barrier) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  arrive_expecting(barrier, bytes);
  ::cuda::ptx::cp_async_bulk(::cuda::ptx::space_cluster, ::cuda::ptx::space_global, to, from, bytes, barrier);
#else
  (void)to, (void)from, (void)bytes, (void)barrier;
#endif
}

/// Issued by one lane: two bulk copies (a state's data and scale planes) on one barrier.
__device__ __forceinline__ void bulk_copy_pair(void* to0, const void* from0, uint32_t bytes0, void* to1,
                                               const void* from1, uint32_t bytes1, uint64_t* barrier) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  arrive_expecting(barrier, bytes0 + bytes1);
  ::cuda::ptx::cp_async_bulk(::cuda::ptx::space_cluster, ::cuda::ptx::space_global, to0, from0, bytes0, barrier);
  ::cuda::ptx::cp_async_bulk(::cuda::ptx::space_cluster, ::cuda::ptx::space_global, to1, from1, bytes1, barrier);
#else
  (void)to0, (void)from0, (void)bytes0, (void)to1, (void)from1, (void)bytes1, (void)barrier;
#endif
}

/// Waits until `barrier` has completed the phase of parity `parity`.
__device__ __forceinline__ void barrier_wait(uint64_t* barrier, uint32_t parity) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  while (!::cuda::ptx::mbarrier_try_wait_parity(barrier, parity)) {
  }
#else
  (void)barrier, (void)parity;
#endif
}

/// Orders this thread's earlier shared-memory reads before later async-proxy writes into
/// the same bytes (a bulk copy refilling a stage the warp has just read).
__device__ __forceinline__ void fence_async_proxy() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  ::cuda::ptx::fence_proxy_async(::cuda::ptx::space_shared);
#endif
}

/// Asks for the 128-byte line at `p` to be brought into L2, with no register waiting on it:
/// a later load of it waits an L2 hit, not a trip to memory.
__device__ __forceinline__ void prefetch_l2(const void* p) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
/// One 16-byte `cp.async` from global `from` to shared `to` (both 16-byte aligned). (Written
/// here: `cuda::ptx` has only the bulk form; libcu++'s `cuda::memcpy_async`, with a pipeline
/// object per warp, has not been measured against it.)
__device__ __forceinline__ void cp_async16(void* to, const void* from) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(shared_address(to)), "l"(from) : "memory");
}
#endif

/// Copies the 4-byte word at global `from` to shared `to` (both 4-byte aligned) with one
/// `cp.async` (wait with `lanes_wait`), so that no register waits on it.
__device__ __forceinline__ void copy_word_async(void* to, const void* from) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(shared_address(to)), "l"(from) : "memory");
#else
  *static_cast<uint32_t*>(to) = *static_cast<const uint32_t*>(from);
#endif
}

/// Copies `bytes` from global `from` to shared `to` with the warp's lanes: 16-byte
/// `cp.async` pieces when both ends and the size allow it (wait with `lanes_wait`), else
/// plain byte loads (complete on return). Every lane calls it.
__device__ __forceinline__ void lanes_copy(void* to, const void* from, uint32_t bytes, int lane) {
  auto* dst = static_cast<uint8_t*>(to);
  const auto* src = static_cast<const uint8_t*>(from);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if (aligned16(dst) && aligned16(src) && bytes % 16 == 0) {
    for (uint32_t at = uint32_t(lane) * 16; at < bytes; at += 32 * 16) cp_async16(dst + at, src + at);
    return;
  }
#endif
  for (uint32_t at = uint32_t(lane); at < bytes; at += 32) dst[at] = src[at];
}

/// Copies `count` rows of `bytes` bytes into shared memory, row j from global `row(j)` to
/// `to + j * pitch`, with the warp's lanes. Rows of up to 32 pieces of 16 bytes (`bytes` and
/// `pitch` multiples of 16, `to` 16-byte aligned): each lane takes one piece of every
/// 32 / pieces-th row, as a `cp.async` (wait with `lanes_wait`), or byte by byte where the
/// row is not 16-byte aligned, and finds only its rows' addresses (every lane finding every
/// row's address, a few dozen instructions a row, made a read step late in its window
/// issue-bound). Other rows: row by row, byte by byte. Every lane calls it.
template <class RowAddress>
__device__ __forceinline__ void lanes_copy_rows(void* to, uint32_t pitch, int32_t count, uint32_t bytes,
                                                RowAddress&& row, int lane) {
  auto* dst = static_cast<uint8_t*>(to);
  const uint32_t pieces = bytes / 16;
  if (bytes % 16 == 0 && pitch % 16 == 0 && aligned16(dst) && pieces >= 1 && pieces <= 32) {
    const int32_t rows_per_pass = int32_t(32 / pieces), piece = lane % int32_t(pieces);
    if (lane >= rows_per_pass * int32_t(pieces)) return;
    for (int32_t j = lane / int32_t(pieces); j < count; j += rows_per_pass) {
      const auto* src = reinterpret_cast<const uint8_t*>(row(j)) + piece * 16;
      uint8_t* at = dst + j * pitch + piece * 16;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
      if (aligned16(src)) {
        cp_async16(at, src);
        continue;
      }
#endif
      for (int k = 0; k < 16; ++k) at[k] = src[k];
    }
    return;
  }
  for (int32_t j = 0; j < count; ++j) {
    const auto* src = reinterpret_cast<const uint8_t*>(row(j));
    for (uint32_t k = uint32_t(lane); k < bytes; k += 32) dst[j * pitch + k] = src[k];
  }
}

/// Copies `pieces` runs of `Bytes` bytes, `stride` bytes apart from `from` in global memory,
/// to consecutive runs from shared `to`, with the warp's lanes: 16-byte `cp.async` pieces
/// when every run allows it (wait with `lanes_wait`), else `lanes_copy` run by run. Every
/// lane calls it.
template <uint32_t Bytes>
__device__ __forceinline__ void lanes_gather(void* to, const void* from, int pieces, int64_t stride, int lane) {
  auto* dst = static_cast<uint8_t*>(to);
  const auto* src = static_cast<const uint8_t*>(from);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if (Bytes % 16 == 0 && aligned16(dst) && aligned16(src) && stride % 16 == 0) {
    constexpr uint32_t per_piece = Bytes / 16;
    for (uint32_t i = uint32_t(lane); i < uint32_t(pieces) * per_piece; i += 32)
      cp_async16(dst + i * 16, src + int64_t(i / per_piece) * stride + i % per_piece * 16);
    return;
  }
#endif
  for (int piece = 0; piece < pieces; ++piece) lanes_copy(dst + piece * Bytes, src + piece * stride, Bytes, lane);
}

/// Closes the lane's `cp.async` copies issued so far into one group.
__device__ __forceinline__ void lanes_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}

/// Waits until at most `Pending` of the lane's committed groups are still in flight.
template <int Pending>
__device__ __forceinline__ void lanes_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;" ::"n"(Pending) : "memory");
#endif
}

}  // namespace warp
}  // namespace replayssm
