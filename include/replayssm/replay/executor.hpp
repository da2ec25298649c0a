// SPDX-License-Identifier: Apache-2.0
/// \file executor.hpp
/// Layer 5: the two ways a head step runs its parallel loops. The step itself is written
/// once against this interface, so the CPU path and the CUDA kernels are the same code.
#pragma once

#include "replayssm/config.hpp"

namespace replayssm {

/// Runs every loop in order on the calling thread: the CPU implementation.
struct serial_executor {
  template <class F>
  REPLAYSSM_HOST_DEVICE void for_each(int count, F&& body) const {
    for (int i = 0; i < count; ++i) body(i);
  }
  REPLAYSSM_HOST_DEVICE void sync() const {}
  /// True on the one thread that performs single writes (cursors, flags).
  REPLAYSSM_HOST_DEVICE bool leader() const { return true; }
};

/// Spreads every loop over the threads of a CUDA block; `sync` is a block barrier.
/// Every thread of the block must call each member (they contain barriers or are
/// followed by one).
struct block_executor {
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
};

}  // namespace replayssm
