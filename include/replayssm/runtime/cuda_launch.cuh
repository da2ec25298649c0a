// SPDX-License-Identifier: Apache-2.0
/// \file cuda_launch.cuh
/// What every recurrence's CUDA launchers share: the body of a per-(request, head)
/// kernel, launch helpers, the commit kernels and their launchers, and the device error
/// flags. Every launch is asynchronous on the caller's stream, allocates nothing and is
/// CUDA-graph capturable: window lengths, pending drafts and flush counts live on the device.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>

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
/// memory unless request b is padding or planned to be skipped (`plan_requests_kernel` ran
/// first and reported it), or only flushes run (`flushes_only`: a warp launch reads) and b
/// reads; and reports the head step's own error bits.
template <class Params, class HeadStep>
__device__ __forceinline__ void run_request_head(const Params& p, HeadStep&& head, bool flushes_only = false) {
  extern __shared__ float4 scratch_storage[];
  const int32_t h = blockIdx.x, b = blockIdx.y;
  const int32_t slot = request_slot(p, b);
  // The plan already excluded padding and slots out of range.
  const request_plan plan = p.request_plans[b];
  if (plan == request_plan::skip || (flushes_only && plan != request_plan::flush)) return;
  const uint32_t errors = head(b, h, slot, reinterpret_cast<float*>(scratch_storage));
  if (threadIdx.x == 0) report(p, b, errors);
}

/// Lets the launch after this one start before this one ends (programmatic dependent launch,
/// sm_90+; `plan_requests_kernel` calls it once it has waited): that launch's blocks become
/// resident and run up to `wait_for_previous_launch` while this one works.
__device__ __forceinline__ void allow_next_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaTriggerProgrammaticLaunchCompletion();
#endif
}

/// Waits until the launch before this one has ended and its writes are visible (the plans,
/// after the planner; the states, after the step before): call it before reading anything
/// that launch writes in a kernel launched `overlapping`. Otherwise, and before sm_90, it
/// returns at once.
__device__ __forceinline__ void wait_for_previous_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaGridDependencySynchronize();
#endif
}

/// Request `b`'s plan in the launch right after the planner (launched `overlapping` it):
/// waits for the plans, then lets the launch after this one start, whose blocks then find
/// the plans complete (`plan_beside_previous`).
template <class Params>
__device__ __forceinline__ request_plan plan_after_planner(const Params& p, int32_t b) {
  wait_for_previous_launch();
  const request_plan plan = p.request_plans[b];
  allow_next_launch();
  return plan;
}

/// Request `b`'s plan in a launch that runs beside one that took its plans with
/// `plan_after_planner` (launched `overlapping` it, or plainly after it): that launch let
/// this one start only once each of its blocks had read complete plans, so they are read
/// here without waiting, past the L1 cache. Block (0, 0) waits for that launch to end, so
/// that this one ends after it and the launches after both see what both wrote.
template <class Params>
__device__ __forceinline__ request_plan plan_beside_previous(const Params& p, int32_t b) {
  if (blockIdx.x == 0 && blockIdx.y == 0) wait_for_previous_launch();
  return request_plan(__ldcg(reinterpret_cast<const int32_t*>(p.request_plans + b)));
}

/// A warp's place in a scan of the plans for the requests planned one way (`next_planned`):
/// the word of 32 requests it resumes at, and how many such requests from that word's
/// first it passes before the one it takes next.
struct planned_scan {
  int32_t first, skip;
};

/// The next request planned `wanted` at the scan's place `s`, which then moves `stride` such
/// requests on, or -1 when none is left. The lanes read the plans, past the L1 cache, eight
/// words of 32 requests at a time, their loads issued together (a warp of a launch that
/// finds nothing to step waits for one round trip per 256 requests, not per 32). Every lane
/// calls it and receives it.
template <class Params>
__device__ int32_t next_planned(const Params& p, request_plan wanted, planned_scan& s, int32_t stride, int32_t lane) {
  constexpr int words = 8;
  for (; s.first < p.batch; s.first += 32 * words) {
    uint32_t hits[words];
#pragma unroll
    for (int k = 0; k < words; ++k) {
      const int32_t b = s.first + 32 * k + lane;
      hits[k] = __ballot_sync(
          0xffffffffu,
          b < p.batch && request_plan(__ldcg(reinterpret_cast<const int32_t*>(p.request_plans + b))) == wanted);
    }
#pragma unroll
    for (int k = 0; k < words; ++k) {
      const int32_t count = __popc(hits[k]);
      if (s.skip < count) {
        const int32_t b = s.first + 32 * k + int32_t(__fns(hits[k], 0u, s.skip + 1));
        s.first += 32 * k;
        s.skip += stride;
        return b;
      }
      s.skip -= count;
    }
  }
  return -1;
}

/// Calls `step(b)` for each request planned `wanted`, in a launch right after the planner
/// (launched `overlapping` it) over fewer request rows than the batch (`gridDim.y`, from
/// `planned_rows`): the blocks of row r take the r-th, (r + rows)-th, ... such request, in
/// one scan of the plans. Waits for the plans first, then lets the launch after this one
/// start: a launch over every request would keep it waiting while thousands of blocks of
/// requests planned otherwise were scheduled only to return.
template <class Params, class Step>
__device__ void for_each_planned(const Params& p, request_plan wanted, int32_t lane, Step&& step) {
  wait_for_previous_launch();
  allow_next_launch();
  planned_scan s{0, int32_t(blockIdx.y)};
  for (int32_t b; (b = next_planned(p, wanted, s, int32_t(gridDim.y), lane)) >= 0;) step(b);
}

/// What a launch waits for: every launch before it (`all_before`, a plain launch), or
/// (`overlapping`) only what the kernel itself waits for (`wait_for_previous_launch`): its
/// blocks become resident while the launch before it runs, once each of that launch's blocks
/// has let it (`allow_next_launch`, or its end), on sm_90+
/// (`kernel_waits_for_previous_launch`). The planner and a small batch's step start while
/// the launch before them ends; right after the planner, a step's streams start before its
/// plans are read; a replay decode step's read launch runs beside its flush launch.
enum class launch_wait { all_before, overlapping };

/// Which requests a step's launch steps: those planned to read, those planned to flush, or
/// (`planned`) each request as planned, reading or flushing. A warp launch of `planned` is a
/// replay decode step's one launch after the planner: at every batch for the policies
/// `mamba2_large_batch_launches` names, else where its warps all fit on the device at once,
/// so that a step with few heads waits for one launch rather than two; a block launch (a
/// block per request and head) is `planned`, or `flush` beside a warp launch that reads.
enum class warp_launch { read, flush, planned };

inline status cuda_error(const char* what, cudaError_t e) {
  return status::error(std::string("replayssm: ") + what + ": " + cudaGetErrorString(e));
}

/// What the CUDA runtime tells the launchers and never changes while a process runs (device
/// attributes, a kernel's occupancy), asked once per key: asked on every call, those queries
/// were most of a launcher's host time. Thread-safe.
template <class Key, class Value>
class query_cache {
 public:
  /// The value of `key` into `value`: cached, or made by `make(value)` (outside the lock;
  /// an error is returned and not cached).
  template <class Make>
  status get(const Key& key, Value& value, Make&& make) {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      if (const auto it = values_.find(key); it != values_.end()) {
        value = it->second;
        return {};
      }
    }
    if (status s = make(value); !s) return s;
    const std::lock_guard<std::mutex> lock(mutex_);
    values_.emplace(key, value);
    return {};
  }

 private:
  std::mutex mutex_;
  std::map<Key, Value> values_;
};

/// What the launchers need to know of the current device.
struct device_limits {
  int device = 0;              ///< its ordinal
  int shared_per_block = 0;    ///< opt-in maximum of dynamic shared memory per block
  int reserved_per_block = 0;  ///< shared memory the system reserves per resident block
  int major = 0;               ///< compute capability
  int multiprocessors = 0;
};
/// The current device's limits (queried once per device).
inline status query_device(device_limits& d) {
  int device = 0;
  if (const cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return cuda_error("no CUDA device", e);
  static query_cache<int, device_limits> known;
  return known.get(device, d, [device](device_limits& q) {
    q.device = device;
    const std::pair<int*, cudaDeviceAttr> queries[] = {{&q.shared_per_block, cudaDevAttrMaxSharedMemoryPerBlockOptin},
                                                       {&q.reserved_per_block, cudaDevAttrReservedSharedMemoryPerBlock},
                                                       {&q.major, cudaDevAttrComputeCapabilityMajor},
                                                       {&q.multiprocessors, cudaDevAttrMultiProcessorCount}};
    for (const auto& [value, attribute] : queries)
      if (const cudaError_t e = cudaDeviceGetAttribute(value, attribute, device); e != cudaSuccess)
        return cuda_error("querying the device", e);
    return status{};
  });
}

/// How a warp kernel is laid out: warps per block, and warps per head (`parts`; the block
/// then holds one head); and how many of its warps are resident per SM.
struct warp_geometry {
  int warps_per_block = 1, parts = 1, resident_warps = 0;
};

/// Where a warp of a warp-step launch works: request `b`, head `h`, and `part` of the head's
/// rows. With `parts` = 1 a block holds `blockDim.x / 32` heads of a request; otherwise its
/// warps split one head's rows.
struct warp_place {
  int32_t b, h, part, warp, lane;
  __device__ explicit warp_place(int32_t parts)
      : b(int32_t(blockIdx.y)), part(0), warp(int32_t(threadIdx.x / 32)), lane(int32_t(threadIdx.x % 32)) {
    h = parts > 1 ? int32_t(blockIdx.x) : int32_t(blockIdx.x * (blockDim.x / 32)) + warp;
    part = parts > 1 ? warp : 0;
  }
};

/// Block sizes of the warp kernels, in warps: 1, 2, 4, ... up to `warp_step_threads / 32`.
inline constexpr int warp_block_sizes = 3;
static_assert(1 << (warp_block_sizes - 1) == warp_step_threads / 32, "warp_block_sizes: one per power of two");

/// Warps of a warp kernel resident per SM with blocks of 1, 2, 4, ... warps (0: the block's
/// shared memory does not fit).
using resident_warps = std::array<int, warp_block_sizes>;

/// The geometry of a warp kernel with `resident` warps per SM for each block size over `heads`
/// (request, head) pairs: the block size that keeps the most warps resident per SM (fewer
/// warps per block pack shared memory more tightly), and a head's rows split over up to
/// `max_parts` warps when the heads alone would leave most of those warps idle.
inline warp_geometry choose_warp_geometry(const resident_warps& resident, const device_limits& d, int64_t heads,
                                          int max_parts) {
  warp_geometry g;
  int size = 0;  // index of the block size: 2^size warps
  for (int i = 1; i < warp_block_sizes; ++i)
    if (resident[i] >= resident[size]) size = i;
  const int64_t slots = int64_t(resident[size]) * d.multiprocessors;
  int parts = 0;
  for (int i = 1; i < warp_block_sizes && (1 << i) <= max_parts && heads * (1 << i) <= slots && resident[i] > 0; ++i)
    parts = i;
  if (parts > 0) size = parts;
  g.parts = parts > 0 ? 1 << parts : 1;
  g.warps_per_block = 1 << size;
  g.resident_warps = resident[size_t(size)];
  return g;
}

/// Raises `kernel`'s shared memory limit to the device's, so that the occupancy queries see
/// every block size, and asks how many warps of it are resident per SM for each block size.
template <class Kernel>
status ask_resident_warps(Kernel kernel, const device_limits& d, uint32_t warp_bytes, resident_warps& r) {
  if (const cudaError_t e =
          cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, d.shared_per_block);
      e != cudaSuccess)
    return cuda_error("raising the kernel's shared memory limit", e);
  for (int i = 0; i < warp_block_sizes; ++i) {
    const int warps = 1 << i;
    const size_t bytes = size_t(warps) * warp_bytes;
    int blocks = 0;
    if (bytes <= size_t(d.shared_per_block))
      if (const cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, warps * 32, bytes);
          e != cudaSuccess)
        return cuda_error("asking the kernel's occupancy", e);
    r[size_t(i)] = blocks * warps;
  }
  return {};
}

/// Readies a warp kernel of `warp_bytes` of shared memory per warp for a launch over `heads`
/// (request, head) pairs: checks that one warp's bytes fit the device (`who` names the step
/// in the error), asks its occupancy once per (kernel, device, bytes per warp)
/// (`ask_resident_warps`) and chooses the geometry (`choose_warp_geometry`, a head split over
/// up to `max_parts` warps) into `g`.
template <class Kernel>
status prepare_warp_kernel(Kernel kernel, const device_limits& d, uint32_t warp_bytes, int64_t heads, const char* who,
                           warp_geometry& g, int max_parts = warp_step_threads / 32) {
  if (warp_bytes + uint32_t(d.reserved_per_block) > uint32_t(d.shared_per_block))
    return status::error(std::string(who) + ": a warp step of this shape and window needs " +
                         std::to_string(warp_bytes) + " bytes of shared memory, more than the device's " +
                         std::to_string(d.shared_per_block));
  static query_cache<std::tuple<const void*, int, uint32_t>, resident_warps> known;
  resident_warps resident{};
  const auto key = std::make_tuple(reinterpret_cast<const void*>(kernel), d.device, warp_bytes);
  if (status s =
          known.get(key, resident, [&](resident_warps& r) { return ask_resident_warps(kernel, d, warp_bytes, r); });
      !s)
    return s;
  g = choose_warp_geometry(resident, d, heads, max_parts);
  return {};
}

/// Blocks of `threads` threads (no dynamic shared memory) of `kernel` resident per SM, asked
/// once per (kernel, device, threads).
template <class Kernel>
status resident_blocks(Kernel kernel, const device_limits& d, int threads, int& blocks) {
  static query_cache<std::tuple<const void*, int, int>, int> known;
  return known.get({reinterpret_cast<const void*>(kernel), d.device, threads}, blocks, [&](int& n) {
    if (const cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, threads, 0);
        e != cudaSuccess)
      return cuda_error("asking the kernel's occupancy", e);
    return status{};
  });
}

/// Whether every warp of a launch of `kernel` (`warp_bytes` of shared memory per warp) over
/// every (request, head) of `p` is resident on the device at once, in the geometry the
/// launch takes (`prepare_warp_kernel`): a small batch.
template <class Kernel, class Params>
status warps_fit_at_once(Kernel kernel, uint32_t warp_bytes, const Params& p, const device_limits& d, bool& fits) {
  warp_geometry g;
  const int64_t heads = int64_t(p.batch) * p.heads;
  if (status s = prepare_warp_kernel(kernel, d, warp_bytes, heads, "mamba2", g); !s) return s;
  fits = heads * g.parts <= int64_t(g.resident_warps) * d.multiprocessors;
  return {};
}

/// Whether `kernel` was compiled for a virtual architecture of sm_90 or later on the current
/// device `d`, so that its `wait_for_previous_launch` waits: only then may its launch start
/// early (a kernel compiled for compute_80 and run on an H200 would read what the launch
/// before writes unwaited). Asked once per (kernel, device).
template <class Kernel>
status kernel_waits_for_previous_launch(Kernel kernel, const device_limits& d, bool& waits) {
  static query_cache<std::pair<const void*, int>, bool> known;
  return known.get({reinterpret_cast<const void*>(kernel), d.device}, waits, [&](bool& w) {
    cudaFuncAttributes a{};
    if (const cudaError_t e = cudaFuncGetAttributes(&a, kernel); e != cudaSuccess)
      return cuda_error("asking the kernel's attributes", e);
    w = a.ptxVersion >= 90;
    return status{};
  });
}

/// Request rows of a launch whose blocks step the requests planned one way only
/// (`for_each_planned`), about 1 / `share` of the batch per step (a window's flushes, when
/// phases are staggered): that many rows rounded up to whole waves of the rows the device
/// keeps resident, so that in a step where every request flushes each wave's blocks take
/// as many requests in turn (a last wave part full would double the step); the batch at
/// most. `share` 1: a row per request.
inline int32_t planned_rows(int32_t batch, int32_t share, const warp_geometry& g, const device_limits& d,
                            int32_t blocks_per_row) {
  if (share <= 1) return batch;
  const int64_t resident_rows = std::max<int64_t>(
      int64_t(g.resident_warps) * d.multiprocessors / (int64_t(blocks_per_row) * g.warps_per_block), 1);
  const int64_t wanted = (batch + share - 1) / share;
  const int64_t rows = (wanted + resident_rows - 1) / resident_rows * resident_rows;
  return int32_t(std::min<int64_t>(rows, batch));
}

/// Launches `kernel(args...)` in `config`, waiting for what `wait` says (`launch_wait`).
template <class Kernel, class... Args>
status launch_waiting(Kernel kernel, cudaLaunchConfig_t config, launch_wait wait, const device_limits& d,
                      const Args&... args) {
  bool early = false;
  if (wait == launch_wait::overlapping)
    if (status s = kernel_waits_for_previous_launch(kernel, d, early); !s) return s;
  cudaLaunchAttribute overlap{};
  overlap.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  overlap.val.programmaticStreamSerializationAllowed = 1;
  config.attrs = &overlap;
  config.numAttrs = early ? 1 : 0;
  if (const cudaError_t e = cudaLaunchKernelEx(&config, kernel, args...); e != cudaSuccess)
    return cuda_error("launch failed", e);
  return {};
}

/// Launches a warp kernel (taking the params, `warp_bytes` and the parts of a head) over every
/// (request, head) of `p` (over `planned_rows` of requests with `planned_share` > 1),
/// `warp_bytes` of shared memory per warp. Warps per block, and warps per head up to
/// `max_parts`, are chosen for occupancy (`choose_warp_geometry`); `who` names the step in
/// errors; `wait` says what the launch waits for.
template <class Kernel, class Params>
status launch_warp_kernel(Kernel kernel, uint32_t warp_bytes, const Params& p, const device_limits& d,
                          cudaStream_t stream, const char* who, int max_parts = warp_step_threads / 32,
                          launch_wait wait = launch_wait::all_before, int32_t planned_share = 1) {
  warp_geometry g;
  if (status s = prepare_warp_kernel(kernel, d, warp_bytes, int64_t(p.batch) * p.heads, who, g, max_parts); !s)
    return s;
  const int32_t heads_per_block = g.parts > 1 ? 1 : g.warps_per_block;
  const int32_t blocks_per_row = (p.heads + heads_per_block - 1) / heads_per_block;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(blocks_per_row, planned_rows(p.batch, planned_share, g, d, blocks_per_row));
  config.blockDim = dim3(g.warps_per_block * 32);
  config.dynamicSmemBytes = size_t(g.warps_per_block) * warp_bytes;
  config.stream = stream;
  return launch_waiting(kernel, config, wait, d, p, warp_bytes, g.parts);
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

/// Checks that device params carry request plans (the planned steps' scratch).
template <class Params>
status check_request_plans(const Params& p) {
  if (p.request_plans == nullptr)
    return status::error(
        "replayssm: request_plans is null: the CUDA steps plan each request there before they "
        "step any head ([batch] replayssm::request_plan, device memory)");
  return {};
}

/// Launches a one-dimensional kernel over `count` threads, waiting for what `wait` says.
template <class Kernel, class... Args>
status launch_threads(Kernel kernel, int64_t count, cudaStream_t stream, launch_wait wait, const Args&... args) {
  if (count == 0) return {};
  device_limits d;
  if (wait == launch_wait::overlapping)
    if (status s = query_device(d); !s) return s;
  constexpr int threads = 256;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(unsigned((count + threads - 1) / threads));
  config.blockDim = dim3(threads);
  config.stream = stream;
  return launch_waiting(kernel, config, wait, d, args...);
}

}  // namespace detail

namespace detail {

/// The union of the warp's lanes' shares of a request's checks, on every lane.
__device__ inline request_share warp_union(request_share share) {
  share.errors = __reduce_or_sync(0xffffffffu, share.errors);
  share.flushes = __any_sync(0xffffffffu, share.flushes);
  share.reads = __any_sync(0xffffffffu, share.reads);
  return share;
}

/// What `check_request` finds for request `b`, worked out by one warp (every lane calls it,
/// every lane receives it): the lanes split the other requests' slots and the heads, so that
/// a request's check is as long as a lane's share, not as its heads.
template <class Policy, step_kind Kind, class Params>
__device__ request_check warp_check_request(const Params& p, int32_t b, int32_t lane) {
  return request_check::of(warp_union(check_request_share<Policy, Kind>(p, b, lane, 32)));
}

/// `warp_check_request` by a whole block of up to `Warps` warps (every thread calls it, every
/// thread receives it): its threads split the other requests' slots and the heads, and
/// `shares` (shared memory, a share per warp of the block) gathers the warps' unions, which
/// each warp then unites again, lane w taking warp w's (a union in a warp's one step, not
/// one per warp in a row). A block that holds one head of the request in several warps then
/// checks it in a lane's share of a block's, not a warp's.
template <class Policy, step_kind Kind, class Params, int Warps>
__device__ request_check block_check_request(const Params& p, int32_t b, request_share (&shares)[Warps]) {
  static_assert(Warps <= 32, "block_check_request: a share per lane");
  const request_share share =
      warp_union(check_request_share<Policy, Kind>(p, b, int32_t(threadIdx.x), int32_t(blockDim.x)));
  const uint32_t lane = threadIdx.x % 32;
  if (lane == 0) shares[threadIdx.x / 32] = share;
  __syncthreads();
  const request_share none{step_ok, false, false};
  return request_check::of(warp_union(lane < blockDim.x / 32 ? shares[lane] : none));
}

/// Plans every request of a step of `Kind` from its slot and cursors (`check_request`), one
/// warp per request: a request with any error is reported and skipped on every head; the
/// others read or flush on every head. The steps that follow read the plans, so that which
/// launch steps a request is decided before any cursor moves, and no head of a bad request
/// is stepped.
template <class Policy, step_kind Kind, class Params>
__global__ void plan_requests_kernel(const Params p) {
  // The launch after the planner starts its streams before it reads the plans: it may start
  // only once the step before has ended.
  detail::wait_for_previous_launch();
  detail::allow_next_launch();
  const int32_t b = int32_t((blockIdx.x * blockDim.x + threadIdx.x) / 32), lane = int32_t(threadIdx.x % 32);
  if (b >= p.batch) return;
  const request_check r = detail::warp_check_request<Policy, Kind>(p, b, lane);
  if (lane != 0) return;
  const bool skip = r.errors != step_ok || request_slot(p, b) == p.pad_slot_id;
  p.request_plans[b] = skip ? request_plan::skip : (r.flushes ? request_plan::flush : request_plan::read);
  detail::report(p, b, r.errors);
}

/// Checks the request plans and launches `plan_requests_kernel` over every request of `p`,
/// overlapping the launch before it.
template <class Policy, step_kind Kind, class Params>
status plan_requests(const Params& p, cudaStream_t stream) {
  if (status s = check_request_plans(p); !s) return s;
  return launch_threads(plan_requests_kernel<Policy, Kind, Params>, int64_t(p.batch) * 32, stream,
                        launch_wait::overlapping, p);
}

/// Commits the accepted drafts of every request, all of its heads or none: one warp each,
/// its lanes over the other requests' slots and over the heads (a thread per request waits
/// on them one load at a time).
template <class Params>
__global__ void commit_drafts_kernel(const Params p) {
  const int32_t b = int32_t((blockIdx.x * blockDim.x + threadIdx.x) / 32), lane = int32_t(threadIdx.x % 32);
  if (b >= p.batch) return;
  const int32_t slot = request_slot(p, b);
  uint32_t errors = __reduce_or_sync(0xffffffffu, slot_errors(p, b, lane, 32));
  const bool commits = errors == step_ok && slot != p.pad_slot_id;
  if (commits) errors = __reduce_or_sync(0xffffffffu, commit_heads_errors(p, b, slot, lane, 32));
  if (commits && errors == step_ok) commit_heads(p, b, slot, lane, 32);
  if (lane == 0) detail::report(p, b, errors);
}

/// The snapshot baseline's commit: one thread per request. (A template, as every kernel of a
/// header must be, so that several translation units may include it.)
template <class Params>
__global__ void snapshot_commit_kernel(const Params p, int32_t* slot_indices, int32_t* snapshot_slots) {
  const int32_t b = blockIdx.x * blockDim.x + threadIdx.x;
  if (b < p.batch) detail::report(p, b, snapshot_commit_request(p, slot_indices, snapshot_slots, b));
}

}  // namespace detail

/// Commits `p.accepted_counts[b]` drafts of every request of any recurrence: moves the
/// committed lengths on the device (a commit beyond the verified drafts is reported through
/// `error_flags`).
template <class Params>
[[nodiscard]] status commit_drafts(const Params& p, cudaStream_t stream = nullptr) {
  if (status s = validate_commit(p, /*host_memory=*/false); !s) return s;
  return detail::launch_threads(detail::commit_drafts_kernel<Params>, int64_t(p.batch) * 32, stream,
                                detail::launch_wait::all_before, p);
}

/// The conventional commit: request b's slot becomes the snapshot slot of its last accepted
/// draft (`slot_indices` and `snapshot_slots`, device memory, are updated in place).
template <class Params>
[[nodiscard]] status snapshot_commit(const Params& p, int32_t* slot_indices, int32_t* snapshot_slots,
                                     cudaStream_t stream = nullptr) {
  if (status s = validate_snapshot_commit(p, slot_indices, snapshot_slots, /*host_memory=*/false); !s) return s;
  return detail::launch_threads(detail::snapshot_commit_kernel<Params>, p.batch, stream,
                                detail::launch_wait::all_before, p, slot_indices, snapshot_slots);
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
