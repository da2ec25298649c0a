// SPDX-License-Identifier: Apache-2.0
/// \file cuda.cuh
/// The ready-made CUDA kernels of the Gated DeltaNet steps, and how they run
/// `cuda::decode_step` and `cuda::verify_step` (runtime/cuda_steps.cuh) on `gdn_params`.
/// Decode steps run on the warp steps (gated_deltanet/warp_step.cuh: one warp per value
/// head, the state streamed): a replay step's read and flush (flushes of windows over 16 on
/// the head step), and the write-back step. A verify step of up to 4 drafts runs on them
/// too: a flush launch of the committed entries of the requests whose drafts would not fit,
/// then a read launch of every request, each request's drafts read in one pass over the
/// state. More drafts, the snapshot baseline and the shapes the warp steps do not cover run
/// the head step of the CPU path, one block per (request, value head). Commits and device
/// error flags are shared by every recurrence (runtime/cuda_launch.cuh). The kernels are
/// internal (`cuda::detail`).
#pragma once

#include <cuda_runtime.h>

#include "replayssm/gated_deltanet/head_step.hpp"
#include "replayssm/gated_deltanet/params.hpp"
#include "replayssm/gated_deltanet/snapshot.hpp"
#include "replayssm/gated_deltanet/validate.hpp"
#include "replayssm/gated_deltanet/warp_step.cuh"
#include "replayssm/replay/executor.hpp"
#include "replayssm/runtime/cuda_launch.cuh"
#include "replayssm/runtime/cuda_steps.cuh"
#include "replayssm/runtime/gpu_tuning.hpp"
#include "replayssm/runtime/status.hpp"

namespace replayssm {
namespace cuda {

/// The block executor of a Gated DeltaNet step whose rows are split as `Split`.
template <gdn_row_split Split>
using gdn_executor = basic_block_executor<gdn_row_lanes<Split>>;

namespace detail {

/// How a block launch of `Policy` that steps the requests `Launch` names splits its rows: a
/// whole row per thread for a write-back step and for flushes of a shared state (`flush`:
/// the requests planned to flush, beside a warp launch that reads the others); flushes that
/// also write a read copy, and the other replay steps, four lanes per row (whole rows took
/// twice as long there on the H200).
template <class Policy, warp_launch Launch>
constexpr gdn_row_split gdn_block_rows() {
  const bool streams = Policy::is_writeback || (Launch == warp_launch::flush && Policy::shared_state);
  return streams ? gdn_row_split::whole_rows : gdn_row_split::four_lanes;
}

/// One block runs one value head of one request: a decode or verify step of the planned
/// requests, or (`warp_launch::flush`) of those planned to flush (a warp launch reads the
/// others).
template <class Policy, class Act, int Threads, step_kind Kind, warp_launch Launch = warp_launch::planned>
__global__ void __launch_bounds__(Threads,
                                  decode_min_blocks<Threads, gdn_blocks_per_sm<gdn_block_rows<Policy, Launch>(), Kind>>)
    gdn_decode_kernel(const gdn_params<Act> p) {
  static_assert(Threads % 32 == 0 && Threads <= 1024, "gdn_decode_kernel: Threads must be whole warps");
  static_assert(Launch != warp_launch::read, "gdn_decode_kernel: steps every planned request, or the flushing ones");
  detail::run_request_head(
      p,
      [&](int32_t b, int32_t h, int32_t slot, float* scratch) {
        const gdn_head_views<Policy, Act> v(p, b, h, slot);
        return gdn_head_step<Kind>(gdn_executor<gdn_block_rows<Policy, Launch>()>{}, v.in, v.state, p.shape(), scratch);
      },
      Launch == warp_launch::flush);
}

/// The read or flush warp kernel (`Role`) of a step of `Kind` (a verify step's read
/// takes up to `Tokens` drafts): each warp steps one value head of one request planned so,
/// or a part of its rows (`detail::warp_place`; flushes on whole rows only), the warps of
/// one head meeting at one barrier before the cursor moves (gated_deltanet/warp_step.cuh). A
/// verify step's read steps every request it plans, after the flush of the committed entries
/// of those planned to flush. A write-back step is the flush of a window of one. (Its warps
/// checking their requests themselves, as Mamba-2's do, instead of the planner was slower
/// at large batches, each warp comparing its request's slot with every other, and gained
/// nothing at smaller ones.)
template <class Policy, class Act, warp::copy_engine Engine, warp::warp_role Role, step_kind Kind = step_kind::decode,
          int Tokens = 1>
__global__ void __launch_bounds__(warp_step_threads, warp_step_min_blocks<gdn_warp_registers<Policy, Role, Tokens>>)
    gdn_warp_kernel(const gdn_params<Act> p, uint32_t warp_bytes, int32_t parts) {
  constexpr bool flushes = Role == warp::warp_role::flush;
  extern __shared__ float4 warp_storage[];
  const detail::warp_place at(parts);
  const int32_t slot = request_slot(p, at.b);
  // A write-back step flushes every request whose slot is in the pool unless the planner
  // finds an error, so its stream starts while the planner still runs; the other steps'
  // warps wait for their plans first.
  const bool streams_early =
      Policy::is_writeback && at.h < p.heads && slot != p.pad_slot_id && slot >= 0 && slot < p.num_slots;
  if (!streams_early) {
    detail::wait_for_previous_launch();
    if (at.h >= p.heads) return;
    const request_plan planned = p.request_plans[at.b];
    if (Kind == step_kind::verify && !flushes ? planned == request_plan::skip
                                              : planned != (flushes ? request_plan::flush : request_plan::read))
      return;
  }
  const gdn_head_views<Policy, Act> v(p, at.b, at.h, slot);
  using step_t = warp::gdn_warp_step<Policy, Act, Role, Tokens, Engine>;
  // The stream starts before the cursor is read: its latency hides behind the state's.
  step_t step(reinterpret_cast<uint8_t*>(warp_storage) + at.warp * warp_bytes, v.state, p.shape(),
              step_t::part_rows(parts, at.part));
  if (streams_early) {
    detail::wait_for_previous_launch();
    if (p.request_plans[at.b] != request_plan::flush) return step.drain();
  }
  const step_plan plan = plan_step<Kind>(v.state, Kind == step_kind::decode ? 1 : v.in.tokens);
  step.template step<Kind>(v.in, plan);
  if (Kind == step_kind::verify && flushes) return;  // the verify read that follows moves the cursor
  if (parts > 1) __syncthreads();
  if (at.part == 0) step.advance_cursor(plan, Kind);
}

/// The snapshot baseline's verify step: one block per (request, value head), a row per thread.
template <class StateFormat, class Act, int Threads>
__global__ void __launch_bounds__(
    Threads, decode_min_blocks<Threads, gdn_blocks_per_sm<gdn_row_split::whole_rows, step_kind::verify>>)
    gdn_snapshot_kernel(const gdn_params<Act> p) {
  detail::run_request_head(p, [&](int32_t b, int32_t h, int32_t slot, float* scratch) {
    return gdn_snapshot_head_step<StateFormat, Act>(gdn_executor<gdn_row_split::whole_rows>{}, p, b, h, slot, scratch);
  });
}

/// Launches the read or flush warp kernel (`Role`) of a step of `Kind` over every
/// request (those planned so step; `wait`: `overlapping` for the launch right after the
/// planner's); a flush on whole rows may split a head's rows over several warps.
template <class Policy, warp::copy_engine Engine, warp::warp_role Role, step_kind Kind = step_kind::decode,
          int Tokens = 1, class Act>
status launch_gdn_warp_step(const gdn_params<Act>& p, const device_limits& d, cudaStream_t stream,
                            launch_wait wait = launch_wait::all_before) {
  constexpr bool parted = Role == warp::warp_role::flush && warp::gdn_row_flushes<Policy>;
  return launch_warp_kernel(gdn_warp_kernel<Policy, Act, Engine, Role, Kind, Tokens>,
                            warp::gdn_warp_layout<Policy, Role, Tokens>::make(p.shape()).bytes, p, d, stream,
                            "gated_deltanet", parted ? warp_step_threads / 32 : 1, wait);
}

/// Whether the flushes of `Policy` run on a warp step for layers of shape `s`: on its path's
/// shapes (`gdn_warp_flush_path`; windows over 16 flush on the head step).
template <class Policy>
bool gdn_warp_flush_fits(gdn_layer_shape s) {
  using warp::gdn_flush_path;
  constexpr gdn_flush_path path = warp::gdn_warp_flush_path<Policy>;
  if constexpr (path == gdn_flush_path::column_stages)
    return warp::gdn_flush_config<Policy>::supported(s);
  else if constexpr (path == gdn_flush_path::whole_rows)
    return warp::gdn_row_flush_config<Policy>::supported(s);
  else
    return false;
}

/// The copy engine of a flush of `Policy` whose read step copies with `Engine`: flushes on
/// whole rows gather with the lanes.
template <class Policy, warp::copy_engine Engine>
inline constexpr warp::copy_engine gdn_flush_engine = warp::gdn_row_flushes<Policy> ? warp::copy_engine::lanes : Engine;

/// A decode step on the warp steps with the copy engine `Engine` (validated and planned
/// params): a write-back step's one flush launch, or a replay step's read launch, then its
/// flush launch, on the warp flush step where the policy and the shape allow
/// (`gdn_warp_flush_fits`), else on the head step.
template <class Policy, warp::copy_engine Engine, int Threads, class Act>
status gdn_warp_decode_step(const gdn_params<Act>& p, const device_limits& d, size_t smem, cudaStream_t stream) {
  // The first launch follows the planner's.
  using warp::warp_role;
  launch_wait flush_wait = launch_wait::overlapping;
  if constexpr (!Policy::is_writeback) {
    if (status s = launch_gdn_warp_step<Policy, Engine, warp_role::read>(p, d, stream, launch_wait::overlapping); !s)
      return s;
    flush_wait = launch_wait::all_before;
  }
  if constexpr (warp::gdn_warp_flushes<Policy>)
    if (gdn_warp_flush_fits<Policy>(p.shape()))
      return launch_gdn_warp_step<Policy, gdn_flush_engine<Policy, Engine>, warp_role::flush>(p, d, stream, flush_wait);
  return launch_head_blocks(gdn_decode_kernel<Policy, Act, Threads, step_kind::decode, warp_launch::flush>, p, smem,
                            Threads, stream, "gated_deltanet");
}

/// Whether the warp steps of `p` can stream with the bulk copy engine on this device: the read
/// step its read copy (or shared checkpoint), a flush in column stages the checkpoint.
/// (Flushes on whole rows gather with the lanes.)
template <class Policy, class Act>
bool gdn_bulk_copies_fit(const gdn_params<Act>& p, const device_limits& d) {
  using read_stream = typename warp::gdn_warp_config<Policy>::template stream<warp::copy_engine::bulk>;
  using flush_stream = typename warp::gdn_flush_config<Policy>::template stream<warp::copy_engine::bulk>;
  const int64_t elements = int64_t(p.value_dim) * p.key_dim;
  const bool checkpoint_ok = warp::gdn_warp_flush_path<Policy> != warp::gdn_flush_path::column_stages ||
                             flush_stream::bulk_ok(elements, p.checkpoint, p.checkpoint_scales);
  if constexpr (Policy::shared_state)
    return d.major >= 9 && read_stream::bulk_ok(elements, p.checkpoint, p.checkpoint_scales) && checkpoint_ok;
  else
    return d.major >= 9 && read_stream::bulk_ok(elements, p.read_copy, p.read_copy_scales) && checkpoint_ok;
}

/// Whether the decode steps of `p` run on the warp steps: a write-back step where its flush
/// does, a replay step where its read step does.
template <class Policy>
bool gdn_warp_decodes(gdn_layer_shape s) {
  if constexpr (Policy::is_writeback)
    return gdn_warp_flush_fits<Policy>(s);
  else
    return warp::gdn_warp_config<Policy>::supported(s);
}

/// A verify step on the warp steps with the copy engine `Engine` (validated and planned
/// params, up to `gdn_warp_verify_tokens` drafts): the committed entries of the requests whose
/// drafts would not fit after them are flushed first, then every request reads the state once
/// for all its drafts.
template <class Policy, warp::copy_engine Engine, class Act>
status gdn_warp_verify_step(const gdn_params<Act>& p, const device_limits& d, cudaStream_t stream) {
  using warp::warp_role;
  constexpr step_kind verify = step_kind::verify;
  if (status s = launch_gdn_warp_step<Policy, gdn_flush_engine<Policy, Engine>, warp_role::flush, verify>(
          p, d, stream, launch_wait::overlapping);
      !s)
    return s;
  return launch_gdn_warp_step<Policy, Engine, warp_role::read, verify, gdn_warp_verify_tokens>(p, d, stream);
}

/// Whether the verify steps of `p` run on the warp steps: up to `gdn_warp_verify_tokens`
/// drafts, of a shape both the read step and the flush cover.
template <class Policy, class Act>
bool gdn_warp_verifies(const gdn_params<Act>& p) {
  return !Policy::is_writeback && p.tokens <= gdn_warp_verify_tokens &&
         warp::gdn_warp_config<Policy>::supported(p.shape()) && gdn_warp_flush_fits<Policy>(p.shape());
}

}  // namespace detail

/// How the Gated DeltaNet kernels run a step (`step_kernels`): the plans first, then the
/// step of the requests planned to run. A decode step whose shape the warp steps cover runs
/// on them, and so does a replay verify step of up to `gdn_warp_verify_tokens` drafts;
/// others, and the snapshot baseline, run one block per (request, value head).
template <class Act>
struct step_kernels<gdn_params<Act>> {
  using params = gdn_params<Act>;
  template <class Policy, step_kind Kind>
  static bool on_warp_steps(const params& p) {
    if constexpr (Kind == step_kind::decode)
      return detail::gdn_warp_decodes<Policy>(p.shape());
    else if constexpr (!Policy::is_writeback && warp::gdn_warp_flushes<Policy>)
      return detail::gdn_warp_verifies<Policy>(p);
    else
      return false;
  }
  template <class Policy>
  static bool bulk_copies_fit(const params& p, const detail::device_limits& d) {
    return detail::gdn_bulk_copies_fit<Policy>(p, d);
  }
  template <class Policy, warp::copy_engine Engine, int Threads, step_kind Kind>
  static status warp_step(const params& p, const detail::device_limits& d, cudaStream_t stream) {
    if (status s = detail::plan_requests<Policy, Kind>(p, stream); !s) return s;
    if constexpr (Kind == step_kind::decode)
      return detail::gdn_warp_decode_step<Policy, Engine, Threads>(p, d, scratch_bytes<Policy>(p), stream);
    else if constexpr (!Policy::is_writeback && warp::gdn_warp_flushes<Policy>)
      return detail::gdn_warp_verify_step<Policy, Engine>(p, d, stream);
    else
      return status::error("gated_deltanet: this verify step has no warp kernels");  // on_warp_steps says so
  }
  template <class Policy, int Threads, step_kind Kind>
  static status block_step(const params& p, cudaStream_t stream) {
    if (status s = detail::plan_requests<Policy, Kind>(p, stream); !s) return s;
    return detail::launch_head_blocks(detail::gdn_decode_kernel<Policy, Act, Threads, Kind>, p,
                                      scratch_bytes<Policy>(p), Threads, stream, "gated_deltanet");
  }
  template <class StateFormat, int Threads>
  static status snapshot_step(const params& p, cudaStream_t stream) {
    if (status s = detail::plan_requests<writeback_policy<StateFormat>, step_kind::decode>(p, stream); !s) return s;
    const size_t smem = gdn_scratch_layout::make(p.shape(), 0, p.tokens).bytes();
    return detail::launch_head_blocks(detail::gdn_snapshot_kernel<StateFormat, Act, Threads>, p, smem, Threads, stream,
                                      "gated_deltanet snapshot");
  }

 private:
  template <class Policy>
  static size_t scratch_bytes(const params& p) {
    return gdn_scratch_layout::make(p.shape(), Policy::window, p.tokens).bytes();
  }
};

}  // namespace cuda
}  // namespace replayssm
