// SPDX-License-Identifier: Apache-2.0
/// \file cuda_steps.cuh
/// The CUDA steps of every recurrence, defined once: `cuda::decode_step<Policy>(p, stream)`
/// and `cuda::verify_step<Policy>(p, stream)` on a recurrence's params (`mamba2_params`,
/// `gdn_params`), whose cuda.cuh says how its kernels run a step (`cuda::step_kernels`). The
/// commits are `cuda::commit_drafts` and `cuda::snapshot_commit` (runtime/cuda_launch.cuh).
/// Every step is asynchronous on the caller's stream, allocates nothing and is CUDA-graph
/// capturable.
#pragma once

#include <cuda_runtime.h>

#include <type_traits>

#include "replayssm/policy/policy.hpp"
#include "replayssm/replay/cursor.hpp"
#include "replayssm/runtime/cuda_launch.cuh"
#include "replayssm/runtime/gpu_tuning.hpp"
#include "replayssm/runtime/status.hpp"
#include "replayssm/runtime/validate.hpp"
#include "replayssm/warp/async_copy.cuh"

namespace replayssm {
namespace cuda {

/// How a recurrence's kernels run a step, specialized for its params by the recurrence's
/// cuda.cuh (its params are checked by `step_checks`): whether a step runs on the warp
/// steps, `on_warp_steps<Policy, Kind>(p)`, and whether their state streams fit the bulk
/// copy engine, `bulk_copies_fit<Policy>(p, d)`; and the launches of a validated step:
/// `warp_step<Policy, Engine, Threads, Kind>(p, d, stream)`, else `block_step<Policy,
/// Threads, Kind>(p, stream)` (one block of `Threads` per (request, head)), and the snapshot
/// baseline's `snapshot_step<StateFormat, Threads>(p, stream)`.
template <class Params>
struct step_kernels;

namespace detail {

/// A decode or verify step for every request of `p` (device memory): on the warp steps where
/// they cover the step, with the copy engine `*engine` (tests force one) or, by default, the
/// bulk engine where it can run; else on blocks of `Threads`.
template <class Policy, int Threads, step_kind Kind, class Params>
status tokens_step(const Params& p, cudaStream_t stream, const warp::copy_engine* engine = nullptr) {
  using kernels = step_kernels<Params>;
  if (status s = step_checks<Params>::template step<Policy>(p, /*host_memory=*/false, Kind); !s) return s;
  if (status s = check_request_plans(p); !s) return s;
  if (p.batch == 0) return {};
  if (!kernels::template on_warp_steps<Policy, Kind>(p))
    return kernels::template block_step<Policy, Threads, Kind>(p, stream);
  device_limits d;
  if (status s = query_device(d); !s) return s;
  using warp::copy_engine;
  const bool bulk = engine != nullptr ? *engine == copy_engine::bulk : kernels::template bulk_copies_fit<Policy>(p, d);
  return bulk ? kernels::template warp_step<Policy, copy_engine::bulk, Threads, Kind>(p, d, stream)
              : kernels::template warp_step<Policy, copy_engine::lanes, Threads, Kind>(p, d, stream);
}

}  // namespace detail

/// One decode step for every request of `p` (device memory) under `Policy`, on `stream`:
/// the write-back step (`writeback_policy<Format>`) reads, updates and writes each head's
/// state; a replay step forms the output from checkpoint + window, and flushes on the step
/// whose window fills. Which requests read and which flush is decided on the device, from
/// the cursors.
template <class Policy, class Params>
[[nodiscard]] status decode_step(const Params& p, cudaStream_t stream = nullptr) {
  static_assert(replayssm::detail::require_policy<Policy>::ok);
  return detail::tokens_step<Policy, decode_block_threads, step_kind::decode>(p, stream);
}

/// The speculative verify step for every request of `p` (device memory), up to `p.tokens`
/// drafts each, on `stream`. Under a replay policy each draft's output comes from
/// checkpoint + window + the drafts before it, the state read once for all of them, and the
/// drafts wait in the window, uncommitted, until `commit_drafts` (the committed entries are
/// flushed first where the drafts would not fit). Under a write-back policy it is the
/// conventional snapshot baseline: each draft's state is written to its snapshot slot
/// (`p.snapshot_slots`), and `snapshot_commit` follows.
template <class Policy, class Params>
[[nodiscard]] status verify_step(const Params& p, cudaStream_t stream = nullptr) {
  static_assert(replayssm::detail::require_policy<Policy>::ok);
  if constexpr (Policy::is_writeback) {
    static_assert(std::is_same_v<typename Policy::rounding, round_nearest_even>,
                  "verify_step: the snapshot baseline rounds its states to nearest even");
    using kernels = step_kernels<Params>;
    using format = typename Policy::checkpoint_format;
    if (status s = step_checks<Params>::template snapshot<format>(p, /*host_memory=*/false); !s) return s;
    if (p.batch == 0) return {};
    return kernels::template snapshot_step<format, decode_block_threads>(p, stream);
  } else {
    return detail::tokens_step<Policy, decode_block_threads, step_kind::verify>(p, stream);
  }
}

}  // namespace cuda
}  // namespace replayssm
