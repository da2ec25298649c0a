// SPDX-License-Identifier: Apache-2.0
/// \file async_copy.cuh
/// The device's asynchronous copies from global to shared memory that a warp's streams
/// are built on: bulk copies completing on an mbarrier (sm_90+), and per-lane 16-byte
/// copies (sm_80+) with a plain-load fallback below that. Device code only.
#pragma once

#include <cuda_runtime.h>

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
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(shared_address(barrier)));
  // Makes the initialized barrier visible to the async proxy that completes it.
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#else
  (void)barrier;
#endif
}

/// Issued by one lane: copies `bytes` (a multiple of 16, both ends 16-byte aligned) from
/// global `from` to shared `to` and arms `barrier` to complete when they have landed.
__device__ __forceinline__ void bulk_copy(void* to, const void* from, uint32_t bytes, uint64_t* barrier) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(shared_address(barrier)), "r"(bytes)
               : "memory");
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
          shared_address(to)),
      "l"(from), "r"(bytes), "r"(shared_address(barrier))
      : "memory");
#else
  (void)to, (void)from, (void)bytes, (void)barrier;
#endif
}

/// Issued by one lane: two bulk copies (a state's data and scale planes) on one barrier.
__device__ __forceinline__ void bulk_copy_pair(void* to0, const void* from0, uint32_t bytes0, void* to1,
                                               const void* from1, uint32_t bytes1, uint64_t* barrier) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(shared_address(barrier)),
               "r"(bytes0 + bytes1)
               : "memory");
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
          shared_address(to0)),
      "l"(from0), "r"(bytes0), "r"(shared_address(barrier))
      : "memory");
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
          shared_address(to1)),
      "l"(from1), "r"(bytes1), "r"(shared_address(barrier))
      : "memory");
#else
  (void)to0, (void)from0, (void)bytes0, (void)to1, (void)from1, (void)bytes1, (void)barrier;
#endif
}

/// Waits until `barrier` has completed the phase of parity `parity`.
__device__ __forceinline__ void barrier_wait(uint64_t* barrier, uint32_t parity) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "wait:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra wait;\n"
      "}" ::"r"(shared_address(barrier)),
      "r"(parity)
      : "memory");
#else
  (void)barrier, (void)parity;
#endif
}

/// Orders this thread's earlier shared-memory reads before later async-proxy writes into
/// the same bytes (a bulk copy refilling a stage the warp has just read).
__device__ __forceinline__ void fence_async_proxy() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}

/// Asks for the 128-byte line at `p` to be brought into L2, with no register waiting on it:
/// a later load of it waits an L2 hit, not a trip to memory.
__device__ __forceinline__ void prefetch_l2(const void* p) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
/// One 16-byte `cp.async` from global `from` to shared `to` (both 16-byte aligned).
__device__ __forceinline__ void cp_async16(void* to, const void* from) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(shared_address(to)), "l"(from) : "memory");
}
#endif

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
