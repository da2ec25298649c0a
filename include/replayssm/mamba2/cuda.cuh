// SPDX-License-Identifier: Apache-2.0
/// \file cuda.cuh
/// The ready-made CUDA kernels of the Mamba-2 steps, and how they run `cuda::decode_step`
/// and `cuda::verify_step` (runtime/cuda_steps.cuh) on `mamba2_params`. Decode and verify
/// steps run on the warp steps (mamba2/warp_step.cuh: one warp per head, the state
/// streamed): a planner launch decides from the cursors which requests read and which
/// flush; beside it one launch reads or flushes each request as planned, or a flush launch
/// and a read launch, side by side, each step their requests (a verify step's flush launch
/// forms the drafts' outputs of the requests it flushes); so does the
/// snapshot baseline (a planner launch, then one flush launch that folds and stores the
/// drafts in turn). Shapes the warp steps do not cover run the head step of
/// the CPU path with `block_executor`, one block per (request, head). Commits and device
/// error reports are shared by every recurrence (runtime/cuda_launch.cuh). The kernels are
/// internal (`cuda::detail`).
#pragma once

#include <cuda_runtime.h>

#include "replayssm/mamba2/head_step.hpp"
#include "replayssm/mamba2/params.hpp"
#include "replayssm/mamba2/snapshot.hpp"
#include "replayssm/mamba2/validate.hpp"
#include "replayssm/mamba2/warp_step.cuh"
#include "replayssm/replay/executor.hpp"
#include "replayssm/runtime/cuda_launch.cuh"
#include "replayssm/runtime/cuda_steps.cuh"
#include "replayssm/runtime/gpu_tuning.hpp"
#include "replayssm/runtime/status.hpp"

namespace replayssm {
namespace cuda {

namespace detail {

/// One block runs one head of one request: a decode or verify step of the planned requests.
template <class Policy, class Act, int Threads, step_kind Kind>
__global__ void __launch_bounds__(Threads, decode_min_blocks<Threads, mamba2_blocks_per_sm<Policy, Kind>>)
    mamba2_decode_kernel(const mamba2_params<Act> p) {
  static_assert(Threads % 32 == 0 && Threads <= 1024, "mamba2_decode_kernel: Threads must be whole warps");
  detail::run_request_head(p, [&](int32_t b, int32_t h, int32_t slot, float* scratch) {
    const mamba2_head_views<Policy, Act> v(p, b, h, slot);
    return mamba2_head_step<Kind>(block_executor{}, v.in, v.state, p.shape(), scratch);
  });
}

/// The snapshot baseline's verify step: one block per (request, head), drafts in order.
template <class StateFormat, class Act, int Threads>
__global__ void __launch_bounds__(
    Threads, decode_min_blocks<Threads, mamba2_blocks_per_sm<writeback_policy<StateFormat>, step_kind::verify>>)
    mamba2_snapshot_kernel(const mamba2_params<Act> p) {
  detail::run_request_head(p, [&](int32_t b, int32_t h, int32_t slot, float* scratch) {
    return mamba2_snapshot_head_step<StateFormat, Act>(block_executor{}, p, b, h, slot, scratch);
  });
}

/// Steps request `b` on slot `slot` (`request_slot`), on the rows of one head that the warp
/// at `at` runs (the body of `mamba2_warp_kernel`; its plan already checked): the stream
/// started first, the step, the cursor moved once every warp of the head is done.
template <class Policy, class Act, warp::copy_engine Engine, warp::warp_role Role, step_kind Kind, int Tokens>
__device__ void mamba2_warp_request(const mamba2_params<Act>& p, int32_t b, int32_t slot, const warp_place& at,
                                    uint8_t* smem, int32_t parts) {
  using step_t = warp::mamba2_warp_step<Policy, Act, Role, Kind == step_kind::verify ? Tokens : 1, Engine>;
  const int32_t lane = at.lane;
  if constexpr (Policy::is_writeback) {
    if (slot == p.pad_slot_id) return;
    if (slot < 0 || slot >= p.num_slots) {  // no stream: the slot names no state
      if (threadIdx.x == 0) report(p, b, error_slot_out_of_range);
      return;
    }
  }
  const mamba2_head_views<Policy, Act> v(p, b, at.h, slot);
  const mamba2_layer_shape shape = p.shape();
  // The stream starts before the cursors are read: their latency hides behind the state's.
  step_t step(smem, v.state, shape, step_t::part_rows(shape, parts, at.part));
  if constexpr (Policy::is_writeback) {
    const request_check r = warp_check_request<Policy, step_kind::decode>(p, b, lane);
    if (r.errors != step_ok) {
      step.drain();
      if (lane == 0) report(p, b, r.errors);
      return;
    }
  }
  const step_plan plan = plan_step<Kind>(v.state, Kind == step_kind::decode ? 1 : v.in.tokens);
  step.template step<Kind>(v.in, plan);
  if (parts > 1) __syncthreads();
  if (at.part == 0) step.advance_cursor(plan, Kind);
}

/// Steps request `b` on slot `slot` in the launch that reads or flushes each request as
/// planned (a replay decode step's one launch, right after the planner): the head plans
/// itself from its cursor and starts its stream at once, overlapping the planner, then takes
/// the planner's plan for the request (`plan_after_planner`) and writes only if the planner
/// planned it so (a request with an error anywhere is planned to be skipped, and the planner
/// reports it). A slot outside the pool, or a cursor no step leaves, is left to the planner.
template <class Policy, class Act, warp::copy_engine Engine>
__device__ void mamba2_planned_request(const mamba2_params<Act>& p, int32_t b, int32_t slot, const warp_place& at,
                                       uint8_t* smem, int32_t parts) {
  if (slot < 0 || slot >= p.num_slots) return;  // padding, or no state
  const mamba2_head_views<Policy, Act> v(p, b, at.h, slot);
  const step_plan plan = plan_step<step_kind::decode>(v.state, 1);
  if (plan.error != step_ok) return;
  auto run = [&](auto role) {
    using step_t = warp::mamba2_warp_step<Policy, Act, decltype(role)::value, 1, Engine>;
    const mamba2_layer_shape shape = p.shape();
    step_t step(smem, v.state, shape, step_t::part_rows(shape, parts, at.part));
    constexpr request_plan wanted =
        decltype(role)::value == warp::warp_role::flush ? request_plan::flush : request_plan::read;
    const request_plan planned = plan_after_planner(p, b);
    const bool stepped = step.step(v.in, plan, warp::store_outputs<Act>{v.in}, [&] { return planned == wanted; });
    if (parts > 1) __syncthreads();
    if (stepped && at.part == 0) step.advance_cursor(plan);
  };
  if (warp::role_of(plan) == warp::warp_role::flush)
    run(std::integral_constant<warp::warp_role, warp::warp_role::flush>{});
  else
    run(std::integral_constant<warp::warp_role, warp::warp_role::read>{});
}

/// Whether a warp launch steps only the requests planned to flush, over fewer request rows
/// than the batch (`for_each_planned`): a replay step's flush.
template <class Policy, warp_launch Launch>
inline constexpr bool flushes_planned_only = !Policy::is_writeback && Launch == warp_launch::flush;

/// The register cap of a warp launch of `Launch` (`warp_step_min_blocks` says why): 168
/// where its warps flush a replay step's window or read up to 8 drafts, else 128. A decode
/// step's planned launch of a 16-bit state that runs it at every batch
/// (`mamba2_large_batch_launches`) takes 128 too: its flush then spills a few bytes, and its
/// reads, most of its warps, keep 16 warps per SM.
template <class Policy, warp_launch Launch, int Tokens>
constexpr register_cap mamba2_warp_registers() {
  const bool flushes_window = Launch != warp_launch::read && !Policy::is_writeback;
  const bool reads_keep_occupancy = Launch == warp_launch::planned &&
                                    mamba2_large_batch_launches<Policy> == mamba2_decode_launches::one &&
                                    Policy::checkpoint_format::bytes_per_element == 2.0;
  return (flushes_window && !reads_keep_occupancy) || Tokens > 4 ? register_cap::registers_168
                                                                 : register_cap::registers_128;
}

/// The warp kernel of a step of `Kind` that steps the requests `Launch` names (a verify
/// step takes up to `Tokens` drafts): each warp runs rows of one head of one request
/// (`detail::warp_place`); the warps of one head meet at one barrier before the cursor
/// moves. Replay steps run the requests planned so: a flush launch takes the flushing
/// requests in turn over a few request rows (`for_each_planned`), a read launch every request
/// that reads, or one launch each request as planned. A write-back step flushes every request,
/// each warp checking the whole request itself while its stream fills (a planner launch
/// would add its latency to every write-back step).
template <class Policy, class Act, warp::copy_engine Engine, warp_launch Launch, step_kind Kind = step_kind::decode,
          int Tokens = 1>
__global__ void __launch_bounds__(warp_step_threads,
                                  warp_step_min_blocks<mamba2_warp_registers<Policy, Launch, Tokens>()>)
    mamba2_warp_kernel(const mamba2_params<Act> p, uint32_t warp_bytes, int32_t parts) {
  extern __shared__ float4 warp_storage[];
  const detail::warp_place at(parts);
  if (at.h >= p.heads) return;
  uint8_t* smem = reinterpret_cast<uint8_t*>(warp_storage) + at.warp * warp_bytes;
  auto step = [&](auto role, int32_t b, int32_t slot) {
    detail::mamba2_warp_request<Policy, Act, Engine, decltype(role)::value, Kind, Tokens>(p, b, slot, at, smem, parts);
  };
  using warp::warp_role;
  constexpr std::integral_constant<warp_role, warp_role::flush> flush;
  if constexpr (detail::flushes_planned_only<Policy, Launch>) {
    detail::for_each_planned(p, request_plan::flush, at.lane,
                             [&](int32_t b) { step(flush, b, request_slot(p, b)); });
  } else if constexpr (Launch == warp_launch::planned) {
    detail::mamba2_planned_request<Policy, Act, Engine>(p, at.b, request_slot(p, at.b), at, smem, parts);
  } else if constexpr (Policy::is_writeback) {
    step(flush, at.b, request_slot(p, at.b));
  } else {  // a read launch, beside the flush launch
    // The slot is loaded beside the plan, not after it, so that the two loads overlap.
    const int32_t slot = request_slot(p, at.b);
    if (detail::plan_beside_previous(p, at.b) == request_plan::read)
      step(std::integral_constant<warp_role, warp_role::read>{}, at.b, slot);
  }
}

/// The snapshot baseline's verify step on the warp steps (up to `Tokens` drafts): each warp
/// streams its rows of the request's state once, and the drafts fold into it in turn, each
/// draft's state stored to its snapshot slot (`mamba2_warp_step::fold_drafts`), so that the baseline
/// moves its bytes at the rate the replay steps do.
template <class StateFormat, class Act, warp::copy_engine Engine, int Tokens>
__global__ void __launch_bounds__(warp_step_threads, warp_step_min_blocks<register_cap::registers_168>)
    mamba2_warp_snapshot_kernel(const mamba2_params<Act> p, uint32_t warp_bytes, int32_t parts) {
  using Policy = writeback_policy<StateFormat>;
  using step_t = warp::mamba2_warp_step<Policy, Act, warp::warp_role::flush, Tokens, Engine>;
  extern __shared__ float4 warp_storage[];
  const detail::warp_place at(parts);
  if (at.h >= p.heads || p.request_plans[at.b] == request_plan::skip) return;
  const mamba2_head_views<Policy, Act> v(p, at.b, at.h, request_slot(p, at.b));
  const mamba2_layer_shape shape = p.shape();
  uint8_t* smem = reinterpret_cast<uint8_t*>(warp_storage) + at.warp * warp_bytes;
  step_t step(smem, v.state, shape, step_t::part_rows(shape, parts, at.part));
  const int32_t tokens = v.in.tokens;
  uint32_t error = tokens < 1 || tokens > p.tokens || tokens > Tokens ? error_tokens_out_of_range : step_ok;
  state_head_view<StateFormat> snapshots[Tokens];
  const int64_t elements = int64_t(shape.head_dim) * shape.state_dim;
#pragma unroll
  for (int t = 0; t < Tokens; ++t) {
    const int32_t slot = t < tokens ? p.snapshot_slots[int64_t(at.b) * p.tokens + t] : 0;
    if (slot < 0 || slot >= p.num_slots) error |= error_slot_out_of_range;
    snapshots[t] = state_head_view<StateFormat>::in_pool(p.checkpoint, p.checkpoint_scales,
                                                         int64_t(slot) * p.heads + at.h, elements);
  }
  if (error != step_ok) {  // no draft of the request is stepped
    step.drain();
    if (at.lane == 0) detail::report(p, at.b, error);
    return;
  }
  const step_plan plan{0, tokens, tokens, true, 0, 0, 0u, step_ok};  // every draft folded, in turn
  step.fold_drafts(v.in, plan, snapshots);
}

/// The decode step of a small batch in tiles (`warp::mamba2_tile_step`): block (i, g, b) runs
/// head h = g H / G + i (of group g) of request b, warp w its w-th tile, read or flushed as
/// the head's cursor plans it (a head of up to `tile_threads / 32` tiles), every load issued
/// before the warp learns whether the request may step: a write-back step's block checks
/// the whole request itself, its threads splitting the heads (no cursor of it changes but
/// its flush count), a replay step's reads the planner's verdict (the planner, launched
/// before, runs beside it, and has read every cursor of the request before any block moves
/// one). The cursor moves once every warp of the head is done. A small batch's step is as
/// long as a warp's path, not as its bytes: the streamed kernels' warps set up a ring and
/// stage the window in shared memory for rows that here are one tile's loads; so it is
/// launched overlapping the launch before it (a write-back step's blocks wait for that
/// launch's end before their first load, a replay step's planner has waited for it) and lets
/// the launch after it start at once.
template <class Policy, class Act>
__global__ void __launch_bounds__(tile_threads) mamba2_tiles_kernel(const mamba2_params<Act> p) {
  using tile_step = warp::mamba2_tile_step<Policy, Act>;
  __shared__ typename tile_step::TempStorage storage[tile_threads / 32];
  __shared__ request_share shares[tile_threads / 32];  // a write-back step's request check
  const int32_t g = int32_t(blockIdx.y), h = g * int32_t(gridDim.x) + int32_t(blockIdx.x), b = int32_t(blockIdx.z);
  const int32_t warp = int32_t(threadIdx.x / 32);
  if constexpr (Policy::is_writeback) {  // launched overlapping the launch before: it may write any input
    detail::wait_for_previous_launch();
    detail::allow_next_launch();
  }
  const int32_t slot = request_slot(p, b);
  if (slot < 0 || slot >= p.num_slots) {  // padding, or no state (the check reports it)
    if (Policy::is_writeback && slot != p.pad_slot_id && threadIdx.x == 0) report(p, b, error_slot_out_of_range);
    return;
  }
  const mamba2_head_views<Policy, Act> v(p, b, h, g, slot);
  const step_plan plan = plan_step<step_kind::decode>(v.state, 1);
  const bool flushes = warp::role_of(plan) == warp::warp_role::flush;
  auto gate = [&] {  // every thread of the block asks it
    if constexpr (Policy::is_writeback) {
      const request_check r = block_check_request<Policy, step_kind::decode>(p, b, shares);
      if (threadIdx.x == 0) report(p, b, r.errors);
      return r.errors == step_ok;
    } else {
      return plan_after_planner(p, b) == (flushes ? request_plan::flush : request_plan::read);
    }
  };
  if (plan.error != step_ok) {  // the window is not read: the cursor places none
    if constexpr (Policy::is_writeback) gate();
    return;
  }
  tile_step step(storage[warp], v.state, p.shape(), warp);
  if (!step.step(v.in, plan, warp::store_outputs<Act>{v.in}, gate)) return;  // the same on every warp: one request
  __syncthreads();
  if (warp == 0) step.advance_cursor(plan);
}

/// Launches a small batch's decode step in tiles (`mamba2_tiles_kernel`; a replay step's
/// after its planner), overlapping the launch before it, if its rows are of the tiles' state
/// dimension, a block holds a head's tiles and every block of the batch is resident on the
/// device at once; `launched` says whether it did.
template <class Policy, class Act>
status launch_tiles(const mamba2_params<Act>& p, const device_limits& d, cudaStream_t stream, bool& launched) {
  using tile_step = warp::mamba2_tile_step<Policy, Act>;
  launched = false;
  if (!tile_step::supported(p.shape())) return {};
  const auto kernel = mamba2_tiles_kernel<Policy, Act>;
  const int32_t warps = tile_step::tiles(p.shape());
  int resident = 0;
  if (warps <= tile_threads / 32)
    if (status s = resident_blocks(kernel, d, warps * 32, resident); !s) return s;
  launched = int64_t(p.batch) * p.heads <= int64_t(resident) * d.multiprocessors;
  if (!launched) return {};
  if constexpr (!Policy::is_writeback)
    if (status s = plan_requests<Policy, step_kind::decode>(p, stream); !s) return s;
  cudaLaunchConfig_t launch{};
  launch.gridDim = dim3(p.heads / p.groups, p.groups, p.batch);
  launch.blockDim = dim3(warps * 32);
  launch.stream = stream;
  return launch_waiting(kernel, launch, launch_wait::overlapping, d, p);
}

/// Shared memory per warp of a launch of `Launch` in a step of `Tokens` tokens at most (a
/// verify step's drafts): the read or the flush layout's, or the larger of the two where a
/// warp takes either (a launch that steps each request as planned).
template <class Policy, class Act, warp_launch Launch, int Tokens>
uint32_t warp_launch_bytes(mamba2_layer_shape s) {
  using warp::warp_role;
  const uint32_t read = warp::mamba2_warp_step<Policy, Act, warp_role::read, Tokens>::temp_storage_bytes(s);
  const uint32_t flush = warp::mamba2_warp_step<Policy, Act, warp_role::flush, Tokens>::temp_storage_bytes(s);
  return Launch == warp_launch::read ? read : Launch == warp_launch::flush ? flush : std::max(flush, read);
}

/// Launches the warp kernel of a step of `Kind` that steps the requests `Launch` names
/// (`wait`: `overlapping` for a launch that may run beside the one before it).
template <class Policy, warp::copy_engine Engine, warp_launch Launch, step_kind Kind = step_kind::decode,
          int Tokens = 1, class Act>
status launch_warp_step(const mamba2_params<Act>& p, const device_limits& d, cudaStream_t stream,
                        launch_wait wait = launch_wait::all_before) {
  // A flush launch takes about the share of the requests whose windows fill in a step.
  const int32_t flush_share = Kind == step_kind::decode ? Policy::window : Policy::window / std::max(p.tokens, 1);
  return launch_warp_kernel(mamba2_warp_kernel<Policy, Act, Engine, Launch, Kind, Tokens>,
                            warp_launch_bytes<Policy, Act, Launch, Tokens>(p.shape()), p, d, stream, "mamba2",
                            warp_step_threads / 32, wait, flushes_planned_only<Policy, Launch> ? flush_share : 1);
}

/// Launches the snapshot baseline's warp kernel for up to `Tokens` drafts.
template <class StateFormat, warp::copy_engine Engine, int Tokens, class Act>
status launch_warp_snapshot(const mamba2_params<Act>& p, const device_limits& d, cudaStream_t stream) {
  using step_t = warp::mamba2_warp_step<writeback_policy<StateFormat>, Act, warp::warp_role::flush, Tokens, Engine>;
  return launch_warp_kernel(mamba2_warp_snapshot_kernel<StateFormat, Act, Engine, Tokens>,
                            step_t::temp_storage_bytes(p.shape()), p, d, stream, "mamba2");
}

/// A planned verify step's launches for up to `Tokens` drafts: the flush launch (the requests
/// whose drafts do not fit after their committed entries: flushed, the drafts' outputs from
/// the new state) and beside it the read launch (every other request).
template <class Policy, warp::copy_engine Engine, int Tokens, class Act>
status verify_launches(const mamba2_params<Act>& p, const device_limits& d, cudaStream_t stream) {
  constexpr step_kind verify = step_kind::verify;
  if (status s =
          launch_warp_step<Policy, Engine, warp_launch::flush, verify, Tokens>(p, d, stream, launch_wait::overlapping);
      !s)
    return s;
  return launch_warp_step<Policy, Engine, warp_launch::read, verify, Tokens>(p, d, stream, launch_wait::overlapping);
}

/// A replay decode step's launches after its planner: one that reads or flushes each request
/// as planned, where `mamba2_large_batch_launches` says so or every warp fits on the device
/// at once; else a flush launch, then a read launch beside it.
template <class Policy, warp::copy_engine Engine, class Act>
status mamba2_decode_launches_after_planner(const mamba2_params<Act>& p, const device_limits& d, cudaStream_t stream) {
  constexpr launch_wait overlapping = launch_wait::overlapping;
  if constexpr (mamba2_large_batch_launches<Policy> == mamba2_decode_launches::side_by_side) {
    bool fits = false;
    if (status s = warps_fit_at_once(mamba2_warp_kernel<Policy, Act, Engine, warp_launch::planned>,
                                     warp_launch_bytes<Policy, Act, warp_launch::planned, 1>(p.shape()), p, d, fits);
        !s)
      return s;
    if (!fits) {
      if (status s = launch_warp_step<Policy, Engine, warp_launch::flush>(p, d, stream, overlapping); !s) return s;
      return launch_warp_step<Policy, Engine, warp_launch::read>(p, d, stream, overlapping);
    }
  }
  return launch_warp_step<Policy, Engine, warp_launch::planned>(p, d, stream, overlapping);
}

/// Whether the stored state of `p` can stream with the bulk copy engine on this device.
template <class Policy, class Act>
bool bulk_copies_fit(const mamba2_params<Act>& p, const device_limits& d) {
  using config = warp::mamba2_warp_config<Policy>;
  const int64_t elements = int64_t(p.head_dim) * p.state_dim;
  bool ok = d.major >= 9 && config::template flush_stream<warp::copy_engine::bulk>::bulk_ok(elements, p.checkpoint,
                                                                                            p.checkpoint_scales);
  if constexpr (!Policy::shared_state)
    ok =
        ok && config::template read_stream<warp::copy_engine::bulk>::bulk_ok(elements, p.read_copy, p.read_copy_scales);
  return ok;
}

/// A step of `Kind` on the warp kernels with the copy engine `Engine` (validated params). A
/// decode step of a small batch (every head's block resident at once) runs in tiles, one
/// launch (`mamba2_tiles_kernel`), where the policy allows (`warp::mamba2_tile_step`).
/// Otherwise: a write-back step is one flush launch; a replay step plans its requests, and
/// beside the planner one launch reads or flushes each request as planned, so that the
/// flushes of staggered windows run among the reads, or, for policies whose reads that
/// launch would slow (`mamba2_large_batch_launches`) and where its warps do not all fit on
/// the device at once, a read launch runs beside a flush launch (they step different
/// requests). A verify step's flush launch flushes the committed entries of the requests
/// whose drafts would not fit after them and forms those drafts' outputs from the new
/// state, beside the read launch of the others (`verify_launches`, a kernel for up to 4 or
/// up to 8 drafts).
template <class Policy, warp::copy_engine Engine, step_kind Kind, class Act>
status mamba2_warp_step(const mamba2_params<Act>& p, const device_limits& d, cudaStream_t stream) {
  if constexpr (Kind == step_kind::decode && warp::mamba2_tile_step<Policy, Act>::policy_supported) {
    bool tiles = false;
    if (status s = launch_tiles<Policy>(p, d, stream, tiles); !s || tiles) return s;
  }
  if constexpr (Policy::is_writeback) {
    return launch_warp_step<Policy, Engine, warp_launch::flush>(p, d, stream);
  } else if constexpr (Kind == step_kind::decode) {
    if (status s = plan_requests<Policy, Kind>(p, stream); !s) return s;
    return mamba2_decode_launches_after_planner<Policy, Engine>(p, d, stream);
  } else {
    if (status s = plan_requests<Policy, Kind>(p, stream); !s) return s;
    return p.tokens <= 4 ? verify_launches<Policy, Engine, 4>(p, d, stream)
                         : verify_launches<Policy, Engine, max_draft_tokens>(p, d, stream);
  }
}

/// The snapshot baseline on the warp kernels with the copy engine `Engine` (validated and
/// planned params), in a kernel for up to 4 or up to 8 drafts.
template <class StateFormat, warp::copy_engine Engine, class Act>
status mamba2_warp_snapshot_step(const mamba2_params<Act>& p, const device_limits& d, cudaStream_t stream) {
  return p.tokens <= 4 ? launch_warp_snapshot<StateFormat, Engine, 4>(p, d, stream)
                       : launch_warp_snapshot<StateFormat, Engine, max_draft_tokens>(p, d, stream);
}

}  // namespace detail

/// How the Mamba-2 kernels run a step (`step_kernels`): decode and verify steps on the warp
/// steps where the state dimension allows (`mamba2_warp_config::supported`), else one block
/// per (request, head); so does the snapshot baseline.
template <class Act>
struct step_kernels<mamba2_params<Act>> {
  using params = mamba2_params<Act>;
  template <class Policy, step_kind Kind>
  static bool on_warp_steps(const params& p) {
    return (Kind == step_kind::decode || !Policy::is_writeback) &&
           warp::mamba2_warp_config<Policy>::supported(p.state_dim);
  }
  template <class Policy>
  static bool bulk_copies_fit(const params& p, const detail::device_limits& d) {
    return detail::bulk_copies_fit<Policy>(p, d);
  }
  template <class Policy, warp::copy_engine Engine, int Threads, step_kind Kind>
  static status warp_step(const params& p, const detail::device_limits& d, cudaStream_t stream) {
    return detail::mamba2_warp_step<Policy, Engine, Kind>(p, d, stream);
  }
  template <class Policy, int Threads, step_kind Kind>
  static status block_step(const params& p, cudaStream_t stream) {
    if (status s = detail::plan_requests<Policy, Kind>(p, stream); !s) return s;
    const size_t smem = mamba2_scratch_layout<Policy>::make(p.shape(), p.tokens).bytes();
    return detail::launch_head_blocks(detail::mamba2_decode_kernel<Policy, Act, Threads, Kind>, p, smem, Threads,
                                      stream, "mamba2");
  }
  /// Planned, then on the warp kernels where the shape allows, else one block per (request,
  /// head).
  template <class StateFormat, int Threads>
  static status snapshot_step(const params& p, cudaStream_t stream) {
    using Policy = writeback_policy<StateFormat>;
    if (status s = detail::plan_requests<Policy, step_kind::decode>(p, stream); !s) return s;
    if (warp::mamba2_warp_config<Policy>::supported(p.state_dim)) {
      detail::device_limits d;
      if (status s = detail::query_device(d); !s) return s;
      using warp::copy_engine;
      if (detail::bulk_copies_fit<Policy>(p, d))
        return detail::mamba2_warp_snapshot_step<StateFormat, copy_engine::bulk>(p, d, stream);
      return detail::mamba2_warp_snapshot_step<StateFormat, copy_engine::lanes>(p, d, stream);
    }
    const size_t smem = mamba2_scratch_layout<Policy>::make(p.shape()).bytes();
    return detail::launch_head_blocks(detail::mamba2_snapshot_kernel<StateFormat, Act, Threads>, p, smem, Threads,
                                      stream, "mamba2");
  }
};

}  // namespace cuda
}  // namespace replayssm
