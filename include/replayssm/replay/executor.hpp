// SPDX-License-Identifier: Apache-2.0
/// \file executor.hpp
/// The two ways a head step runs its parallel loops. The step itself is written
/// once against this interface, so the CPU path and the CUDA kernels are the same code.
#pragma once

#include "replayssm/config.hpp"

namespace replayssm {

/// Copies N floats of a head step's scratch starting at `from`, which is aligned to 16 bytes
/// when N is a multiple of 4 and to 8 bytes when N is 2: vector loads on the device. (Scalar
/// loads of a flush's B rows, eight floats apart from thread to thread, conflicted 4.8-way
/// on the banks of shared memory.)
template <int N>
REPLAYSSM_HOST_DEVICE void load_scratch(const float* from, float (&to)[N]) {
#if REPLAYSSM_DEVICE_PASS
  if constexpr (N % 4 == 0) {
    REPLAYSSM_UNROLL
    for (int i = 0; i < N; i += 4) {
      const float4 v = *reinterpret_cast<const float4*>(from + i);
      to[i] = v.x, to[i + 1] = v.y, to[i + 2] = v.z, to[i + 3] = v.w;
    }
  } else if constexpr (N == 2) {
    const float2 v = *reinterpret_cast<const float2*>(from);
    to[0] = v.x, to[1] = v.y;
  } else  // the scalar copy below: the device's other sizes, and the host
#endif
  {
    for (int i = 0; i < N; ++i) to[i] = from[i];
  }
}

/// Runs every loop in order on the calling thread: the CPU implementation.
struct serial_executor {
  template <class F>
  REPLAYSSM_HOST_DEVICE void for_each(int count, F&& body) const {
    for (int i = 0; i < count; ++i) body(i);
  }
  REPLAYSSM_HOST_DEVICE void sync() const {}
  /// True on the one thread that performs single writes (cursors, flags).
  REPLAYSSM_HOST_DEVICE bool leader() const { return true; }

  /// Work items that share one row in `for_each_row`.
  static constexpr int row_lanes = 1;
  /// Runs `body(row, lane)` for every row, with its `row_lanes` lanes.
  template <class F>
  REPLAYSSM_HOST_DEVICE void for_each_row(int rows, F&& body) const {
    for (int r = 0; r < rows; ++r) body(r, 0);
  }
  /// Inside `for_each_row`: the sum of `x` over the lanes of the row (the lanes' values in
  /// lane order, paired as (0 + 1) + (2 + 3)); every lane receives it.
  REPLAYSSM_HOST_DEVICE float row_sum(float x) const { return x; }
};

/// Spreads every loop over the threads of a CUDA block; `sync` is a block barrier.
/// Every thread of the block must call each member (they contain barriers or are
/// followed by one).
///
/// `RowLanes` consecutive threads share a row in `for_each_row` (1 or 4).
template <int RowLanes>
struct basic_block_executor {
  static_assert(RowLanes == 1 || RowLanes == 4, "basic_block_executor: a row has 1 or 4 lanes");
  template <class F>
  REPLAYSSM_HOST_DEVICE void for_each(int count, F&& body) const {
#if REPLAYSSM_DEVICE_PASS
    for (int i = threadIdx.x; i < count; i += blockDim.x) body(i);
#else
    serial_executor{}.for_each(count, body);
#endif
  }
  REPLAYSSM_HOST_DEVICE void sync() const {
#if REPLAYSSM_DEVICE_PASS
    __syncthreads();
#endif
  }
  REPLAYSSM_HOST_DEVICE bool leader() const {
#if REPLAYSSM_DEVICE_PASS
    return threadIdx.x == 0;
#else
    return true;
#endif
  }

  /// Lanes of a row (on the host, where a block executor runs serially, one).
  static constexpr int row_lanes = REPLAYSSM_DEVICE_PASS ? RowLanes : 1;
  /// Runs `body(row, lane)` for every row, on `row_lanes` consecutive threads each.
  /// blockDim.x must be a multiple of row_lanes.
  template <class F>
  REPLAYSSM_HOST_DEVICE void for_each_row(int rows, F&& body) const {
#if REPLAYSSM_DEVICE_PASS
    const int groups = blockDim.x / row_lanes;
    for (int r = threadIdx.x / row_lanes; r < rows; r += groups) body(r, threadIdx.x % row_lanes);
#else
    for (int r = 0; r < rows; ++r) body(r, 0);
#endif
  }
  /// Inside `for_each_row`: the sum of `x` over the row's lanes, (0 + 1) + (2 + 3) (floating
  /// addition commutes exactly, so every lane receives the same bits).
  REPLAYSSM_HOST_DEVICE float row_sum(float x) const {
#if REPLAYSSM_DEVICE_PASS
    if constexpr (row_lanes == 1) return x;
    // A row's lanes are active or inactive together, so the active mask covers them.
    const unsigned mask = __activemask();
    x += __shfl_xor_sync(mask, x, 1);
    return x + __shfl_xor_sync(mask, x, 2);
#else
    return x;
#endif
  }
};

/// The block executor of the ready-made kernels: four lanes per row, so that a Gated DeltaNet
/// row of 128 fp32 values does not take a whole thread's registers.
using block_executor = basic_block_executor<4>;

}  // namespace replayssm
