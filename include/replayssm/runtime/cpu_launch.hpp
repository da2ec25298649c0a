// SPDX-License-Identifier: Apache-2.0
/// \file cpu_launch.hpp
/// How every recurrence's CPU launchers run a step: one head step per (request, head) of
/// the batch, each on a scratch buffer of its thread's, spread over threads by the caller's
/// `ParallelFor` (in order on the calling thread by default).
///
/// A `ParallelFor` is any callable `parallel_for(int64_t count, body)` that calls `body(i)`
/// once for every i in [0, count), in any order and on any threads, and returns when all
/// calls have returned; `body` may be called concurrently. The (request, head) pairs of a
/// step touch disjoint state (requests have distinct slots; heads, their own rows and
/// cursors), as the CUDA kernels' blocks do, so the bits do not depend on the order or the
/// threads. An engine passes its own thread pool's loop, e.g. with OpenMP:
///
///     auto omp_for = [](int64_t n, auto&& body) {
///     #pragma omp parallel for schedule(dynamic)
///       for (int64_t i = 0; i < n; ++i) body(i);
///     };
///     replayssm::cpu::decode_step<Policy>(params, omp_for);
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "replayssm/runtime/requests.hpp"
#include "replayssm/runtime/status.hpp"

namespace replayssm {
namespace cpu {

/// The default `ParallelFor`: every item in order on the calling thread.
struct serial_for {
  template <class Body>
  void operator()(int64_t count, Body&& body) const {
    for (int64_t i = 0; i < count; ++i) body(i);
  }
};

/// A `ParallelFor` over `threads` threads started for the call (the calling thread is one of
/// them; item i runs on thread i % threads). It starts its threads at every step: an engine
/// with a thread pool passes its pool's loop instead.
struct thread_for {
  int threads = 1;
  template <class Body>
  void operator()(int64_t count, Body&& body) const {
    const int64_t n = threads < 1 ? 1 : (count < threads ? count : threads);
    const auto share = [&](int64_t first) {
      for (int64_t i = first; i < count; i += n) body(i);
    };
    std::vector<std::thread> others;
    for (int64_t t = 1; t < n; ++t) others.emplace_back(share, t);
    share(0);
    for (std::thread& t : others) t.join();
  }
};

namespace detail {

/// The calling thread's scratch of at least `floats` floats, kept between steps (a head
/// step does not read what it has not written).
inline float* thread_scratch(size_t floats) {
  thread_local std::vector<float> scratch;
  if (scratch.size() < floats) scratch.resize(floats);
  return scratch.data();
}

/// `head(b, h, slot, scratch)`, everything it calls inlined into this function
/// (`REPLAYSSM_FLATTEN`, config.hpp).
template <class HeadStep>
REPLAYSSM_FLATTEN uint32_t step_head(HeadStep& head, int32_t b, int32_t h, int32_t slot, float* scratch) {
  return head(b, h, slot, scratch);
}

/// Runs `head(b, h, slot, scratch)` for every (request, head) of `p` that is not padding,
/// with `scratch_bytes` of scratch, as `parallel_for` spreads them (item i: request
/// i / heads, head i % heads); `who` starts the error message.
template <class Params, class HeadStep, class ParallelFor>
status for_each_request_head(const Params& p, size_t scratch_bytes, const char* who, HeadStep&& head,
                             ParallelFor&& parallel_for) {
  std::atomic<uint32_t> errors{0};
  parallel_for(int64_t(p.batch) * p.heads, [&](int64_t item) {
    const int32_t b = int32_t(item / p.heads), h = int32_t(item % p.heads);
    const int32_t slot = request_slot(p, b);
    if (slot == p.pad_slot_id) return;
    if (const uint32_t e = step_head(head, b, h, slot, thread_scratch(scratch_bytes / sizeof(float))); e != 0)
      errors.fetch_or(e, std::memory_order_relaxed);
  });
  if (const uint32_t e = errors.load(); e != 0) return status::error(std::string(who) + ": " + describe_step_errors(e));
  return {};
}

}  // namespace detail
}  // namespace cpu
}  // namespace replayssm
