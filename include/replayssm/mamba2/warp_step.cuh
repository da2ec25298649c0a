// SPDX-License-Identifier: Apache-2.0
/// \file warp_step.cuh
/// A Mamba-2 decode step of one head (or of a range of its rows) run by one warp, the
/// structure that keeps the state stream at the memory's rate (docs/kernels.md): the state
/// streams through the warp's ring (warp/state_stream.cuh), started before any other load;
/// meanwhile the entries' x rows are copied asynchronously into the warp's shared memory, so
/// that no register waits on them while the stream is consumed. A read step dots the
/// window's keys B_j with its queries C from registers before the stream is consumed (their
/// loads land beside its first stages; a decode read forms its whole weights there), a flush
/// holds its columns of the keys in registers; the window term comes after the stream. No
/// block barrier: every warp is independent.
///
/// Two roles (`warp_role`), each a launch of its own in the ready-made kernels (mamba2/cuda.cuh):
///  - read: a window that does not fill; y from the read copy and the window, the token
///    appended; no state written. With `Tokens` > 1 it is the speculative verify step: the
///    stream is queried with every draft's C in one pass, each draft's output adds the
///    window and the drafts before it, and the drafts are appended uncommitted;
///  - flush: a window that fills, and every write-back step; the new checkpoint formed per
///    element by the arithmetic of replay/scalar_decay.hpp, so it is bit-identical with the
///    CPU's, then y from it. For a verify step (`step_kind::verify`, `Tokens` > 1) it folds
///    the committed entries only, when the drafts would not fit after them, and forms the
///    drafts' y from the new state as stored while it is in registers.
///
/// `mamba2_warp_step` is the primitive an engine's kernel instantiates (its comment shows
/// how), and `mamba2_tile_step` its small-batch form, a head's rows held in registers over
/// the warps of a block; the functions in `detail` are their parts.
#pragma once

#include <cuda_runtime.h>
#include <cub/warp/warp_scan.cuh>

#include <cstdint>
#include <type_traits>

#include "replayssm/mamba2/head_step.hpp"
#include "replayssm/mamba2/recurrence.hpp"
#include "replayssm/numeric/activation.hpp"
#include "replayssm/numeric/convert.hpp"
#include "replayssm/replay/executor.hpp"
#include "replayssm/replay/scalar_decay.hpp"
#include "replayssm/replay/state_view.hpp"
#include "replayssm/replay/step_plan.hpp"
#include "replayssm/warp/async_copy.cuh"
#include "replayssm/warp/state_stream.cuh"
#include "replayssm/warp/warp_role.hpp"

namespace replayssm {
namespace warp {

/// What a warp step does with each output it forms, by default: stores y of token t, row p
/// (the gate applied) to the step's output rows in the activation type. An engine's kernel
/// may hand its own handler to `mamba2_warp_step::step` instead, to use the outputs before
/// they leave the warp: `out(t, p, y)` is called by the lane that formed y, lane l taking
/// rows first + l, first + l + 32, ... of the warp's rows.
template <class Act>
struct store_outputs {
  const mamba2_head_inputs<Act>& in;
  __device__ void operator()(int32_t t, int32_t p, float y) const { in.y.at(t)[p] = from_float<Act>(y); }
};

/// A step's gate, by default: every step writes. A kernel that starts a step before it knows
/// whether the step may run (a head that plans itself from its cursor while a planner checks
/// the whole request) hands `mamba2_warp_step::step` its own: `gate()` is called by every
/// lane once the step has read what it needs and before it writes anything, and a false
/// abandons the step with nothing written.
struct always_write {
  __device__ bool operator()() const { return true; }
};

/// Stage sizes of the Mamba-2 warp steps.
template <class Policy>
struct mamba2_warp_config {
  using read_format = typename Policy::read_format;
  using checkpoint_format = typename Policy::checkpoint_format;
  static constexpr int window = Policy::window;
  /// A read stage holds 4 KB of stored data whatever the format, so that a warp has as many
  /// bytes in flight in every format.
  static constexpr int read_stage = 4096 / read_format::data_bytes_per_chunk * read_format::chunk_elems;
  static constexpr int read_unit = read_format::chunk_elems;
  /// A flush stage holds 1024 elements, 32 per lane in registers while the window folds in.
  static constexpr int flush_stage = 1024;
  /// A flush lane's unit covers whole chunks of the checkpoint and of a separate read copy.
  static constexpr int flush_unit = Policy::shared_state || checkpoint_format::chunk_elems >= read_format::chunk_elems
                                        ? checkpoint_format::chunk_elems
                                        : read_format::chunk_elems;
  /// Stages in each warp's ring. A read step consumes a stage in place and keeps two: an
  /// SM's many warps keep enough bytes in flight with two each, and the shared memory a
  /// third would take holds more warps, which hide the window's arithmetic after the stream.
  /// A flush keeps three: it copies each stage to registers and releases it before its
  /// long fold, and a warp that waits for its stage to land waits less with more in flight
  /// (the room is what a stage's weighted x leaves: docs/kernels.md).
  template <int Tokens>
  static constexpr int read_stages = 2;
  static constexpr int flush_stages = 3;
  using read_lanes = unit_lanes<read_stage, read_unit>;
  using flush_lanes = unit_lanes<flush_stage, flush_unit>;
  template <copy_engine Engine, int Tokens = 1>
  using read_stream = state_stream<read_format, read_stage, read_stages<Tokens>, Engine>;
  template <copy_engine Engine>
  using flush_stream = state_stream<checkpoint_format, flush_stage, flush_stages, Engine>;

  /// Whether a layer of state dimension `state_dim` runs on the warp steps (a power of two
  /// whose rows map onto the lanes; other shapes take the block kernels).
  __host__ __device__ static constexpr bool supported(int state_dim) {
    return read_lanes::supported(state_dim) && flush_lanes::supported(state_dim) &&
           (Policy::shared_state || flush_unit % read_format::chunk_elems == 0);
  }
  /// Rows of a stage of a step of `Role`, a power of two: the stage over a state dimension
  /// that divides it (`supported`), by a shift (a division by a run-time divisor is some
  /// twenty instructions, and every warp forms its layout).
  template <warp_role Role>
  __host__ __device__ static int32_t stage_rows(int32_t state_dim) {
    return (Role == warp_role::flush ? flush_stage : read_stage) >> replayssm::detail::leading_one(uint32_t(state_dim));
  }
  /// Part `part` of `parts` of a head's rows, split at whole stages.
  template <warp_role Role>
  __host__ __device__ static row_range part_rows(mamba2_layer_shape s, int32_t parts, int32_t part) {
    if (parts == 1) return {0, s.head_dim};
    const int32_t R = stage_rows<Role>(s.state_dim), stages_total = (s.head_dim + R - 1) / R;
    const int32_t per_part = (stages_total + parts - 1) / parts * R, first = part * per_part;
    const int32_t last = first + per_part < s.head_dim ? first + per_part : s.head_dim;
    return {first, last > first ? last - first : 0};
  }
};

/// Where a flush lane keeps the window's keys B_j of its columns.
enum class key_place : uint8_t {
  registers,      ///< loaded from global memory once, before the stream
  shared_memory,  ///< staged rows, read per stage (a window whose keys exceed the registers)
};

/// One warp's shared memory for a step of up to `Tokens` tokens (bytes, 16-byte aligned
/// regions): the stream's ring, then the x rows of the entries and the tokens' z as stored
/// (activations), the window's keys where a flush does not hold them in registers, then
/// floats. A replay step sees at most `window` entries (a verify step's drafts included:
/// they fit after the committed entries, or those are flushed first); a replay verify flush
/// (`Tokens` > 1) folds the committed entries and then reads the drafts after them; a
/// write-back flush (the snapshot baseline's verify step) folds its `Tokens` drafts one by
/// one.
template <class Policy, class Act, warp_role Role, int Tokens = 1>
struct mamba2_warp_layout {
  static constexpr bool flushes = Role == warp_role::flush;
  /// Whether a flush then reads its drafts from the state it forms: a replay verify step's.
  static constexpr bool reads_drafts = flushes && Tokens > 1 && !Policy::is_writeback;
  static_assert(Tokens >= 1 && Tokens <= max_draft_tokens, "mamba2_warp_layout: 1 to max_draft_tokens tokens");
  static constexpr int window = Policy::window;
  static constexpr int tokens = Tokens;
  /// Entries a flush folds: the window's (a write-back flush's window is its one token, a
  /// run per draft in the snapshot baseline).
  static constexpr int folded_entries = Policy::is_writeback ? Tokens : window;
  /// Entries a step stages: the window's, or a flush's folded ones and the drafts it reads.
  static constexpr int entries = !flushes ? window : folded_entries + (reads_drafts ? Tokens : 0);
  /// Whether the entries' step sizes and log decays are staged here, for coefficients formed
  /// in shared memory: a flush's and a verify read's (a decode read forms its weights in
  /// registers, `decode_weights`).
  static constexpr bool stages_steps = flushes || Tokens > 1;
  /// Whether the drafts' dots with the C of the tokens and their coefficients are staged
  /// here: a read's and a flush's that reads drafts.
  static constexpr bool stages_weights = !flushes || reads_drafts;
  using config = mamba2_warp_config<Policy>;
  /// Where a flush lane keeps the folded entries' keys B_j of its unit's columns: in
  /// registers where they are 64 floats at most, else in the warp's shared memory.
  static constexpr key_place flush_keys_at =
      folded_entries * config::flush_unit <= 64 ? key_place::registers : key_place::shared_memory;
  /// Whether the folded entries' B rows are staged here: for a flush whose keys exceed its
  /// registers (a read dots its keys from registers).
  static constexpr bool stages_keys = flushes && flush_keys_at == key_place::shared_memory;
  /// Decays: of the state over each run a flush folds, then over each draft's window after
  /// the fold where it reads drafts; over each token's window for a read.
  static constexpr int decays = (flushes ? folded_entries / window : 0) + (stages_weights ? Tokens : 0);
  static constexpr uint32_t stream_bytes =
      flushes ? sizeof(typename config::template flush_stream<copy_engine::bulk>::TempStorage)
              : sizeof(typename config::template read_stream<copy_engine::bulk, Tokens>::TempStorage);
  uint32_t x_pitch, B_pitch;  ///< bytes per stored row of x and of B
  uint32_t x, z, B;           ///< stored rows: x of every entry, the tokens' z, B of every entry
  uint32_t window_dt, dt, log_decay, coef, weight, decay, row_sum, weighted_x, bytes;

  static constexpr uint32_t align16(uint32_t n) { return (n + 15u) / 16u * 16u; }
  __host__ __device__ static mamba2_warp_layout make(mamba2_layer_shape s) {
    mamba2_warp_layout l{};
    l.x_pitch = align16(uint32_t(s.head_dim) * sizeof(Act));
    l.B_pitch = align16(uint32_t(s.state_dim) * sizeof(Act));
    const uint32_t R = uint32_t(config::template stage_rows<Role>(s.state_dim));
    uint32_t at = stream_bytes;
    auto take = [&at](uint32_t n) {
      const uint32_t start = at;
      at += align16(n);
      return start;
    };
    l.x = take(entries * l.x_pitch);
    l.z = take(Tokens * l.x_pitch);
    l.B = take(stages_keys ? folded_entries * l.B_pitch : 0);
    l.window_dt = take(stages_steps ? entries * 4 : 0);
    l.dt = take(stages_steps ? entries * 4 : 0);
    l.log_decay = take(stages_steps ? entries * 4 : 0);
    l.coef = take(flushes ? folded_entries * 4 : 0);
    l.weight = take(stages_weights ? Tokens * window * 4 : 0);
    l.decay = take(decays * 4);
    l.row_sum = take(Tokens * uint32_t(s.head_dim) * 4);
    l.weighted_x = take(flushes ? folded_entries * R * 4 : 0);  // a stage's rows
    l.bytes = (at + 127u) / 128u * 128u;
    return l;
  }
};

namespace detail {

/// The warp's view of its shared memory under a layout (`mamba2_warp_layout`): staged row j
/// holds entry `first + j` of the step.
template <class Layout, class Act>
struct warp_window {
  uint8_t* base;
  Layout l;
  __device__ const Act* x(int32_t j) const { return reinterpret_cast<const Act*>(base + l.x + j * l.x_pitch); }
  __device__ const Act* B(int32_t j) const { return reinterpret_cast<const Act*>(base + l.B + j * l.B_pitch); }
  __device__ const Act* z(int32_t t) const { return reinterpret_cast<const Act*>(base + l.z + t * l.x_pitch); }
  __device__ float* floats(uint32_t offset) const { return reinterpret_cast<float*>(base + offset); }
  /// The view whose staged row 0 is this one's row `j`: its x rows, step sizes and log
  /// decays (a verify flush's drafts, after the entries it folds).
  __device__ warp_window from_row(int32_t j) const {
    warp_window v = *this;
    v.l.x += uint32_t(j) * l.x_pitch;
    v.l.window_dt += 4u * uint32_t(j);
    v.l.dt += 4u * uint32_t(j);
    v.l.log_decay += 4u * uint32_t(j);
    return v;
  }
};

// Where entry j of a step lies (x, B, step size): the head step's own definition.
using replayssm::detail::entry_rows;

/// `Width` consecutive activations as stored, in 32-bit words, converted where they are
/// used (`at`): keys held in registers take half the registers for 16-bit activations that
/// floats would.
template <int Width, class Act>
struct stored_activations {
  static_assert(sizeof(Act) == 2 || sizeof(Act) == 4, "stored_activations: 16- or 32-bit activations");
  static constexpr int bytes = Width * int(sizeof(Act)), words = (bytes + 3) / 4;
  /// The one load of the whole run where it fills 4, 8 or 16 aligned bytes.
  using vector =
      std::conditional_t<bytes == 4, uint32_t,
                         std::conditional_t<bytes == 8, uint2, std::conditional_t<bytes == 16, uint4, void>>>;
  union {
    uint32_t word[words];
    std::conditional_t<std::is_void_v<vector>, uint32_t[words], vector> loaded;
  };

  /// Element e as a float.
  __device__ float at(int e) const {
    if constexpr (sizeof(Act) == 4) {
      return __uint_as_float(word[e]);
    } else {
      typename activation_traits<Act>::storage v;
      v.bits = uint16_t(word[e / 2] >> (e % 2 * 16));
      return to_float(v);
    }
  }
};

/// `row` of lane `from`, on every lane (every lane calls it): an activation row's address
/// formed once by the lane that owns it, not on every lane (a window entry's is a ring slot,
/// two products and a choice of pointer: some twenty instructions).
template <class Act>
__device__ const Act* row_of_lane(const Act* row, int from) {
  const auto bits = static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(row));
  return reinterpret_cast<const Act*>(uintptr_t(__shfl_sync(0xffffffffu, bits, from)));
}

/// Loads `Width` consecutive activations of rows 0 .. Rows - 1 (row k's at `row(k)`), every
/// load issued before any is used (a branch per row kept each load's wait apart: a flush's 16
/// keys took 16 round trips). Rows from `count` on and elements from `elements` on are not
/// loaded (0); `row(k)` is called for k below `count` and for 0, whose address need not be
/// valid when `count` is 0. One vector load per row where every row's elements fill 4, 8 or
/// 16 aligned bytes, else a load per element.
template <int Rows, int Width, class Act, class Row>
__device__ void load_stored_rows(Row&& row, int count, int elements, stored_activations<Width, Act> (&out)[Rows]) {
  using stored = stored_activations<Width, Act>;
  const Act* from[Rows];
#pragma unroll
  for (int k = 0; k < Rows; ++k) from[k] = row(k < count ? k : 0);
#pragma unroll
  for (int k = 0; k < Rows; ++k)
#pragma unroll
    for (int i = 0; i < stored::words; ++i) out[k].word[i] = 0u;
  if constexpr (!std::is_void_v<typename stored::vector>) {
    uintptr_t addresses = 0;
#pragma unroll
    for (int k = 0; k < Rows; ++k) addresses |= reinterpret_cast<uintptr_t>(from[k]);
    if ((addresses & uintptr_t(stored::bytes - 1)) == 0 && elements == Width) {
#pragma unroll
      for (int k = 0; k < Rows; ++k)
        if (k < count) out[k].loaded = *reinterpret_cast<const typename stored::vector*>(from[k]);
      return;
    }
  }
#pragma unroll
  for (int k = 0; k < Rows; ++k)
#pragma unroll
    for (int e = 0; e < Width; ++e) {
      if (k >= count || e >= elements) continue;
      if constexpr (sizeof(Act) == 4)
        out[k].word[e] = *reinterpret_cast<const uint32_t*>(from[k] + e);
      else
        out[k].word[e / 2] |= uint32_t(*reinterpret_cast<const uint16_t*>(from[k] + e)) << (e % 2 * 16);
    }
}

/// `Width` consecutive activations of each of rows 0 .. Rows - 1 as floats
/// (`load_stored_rows`; rows from `count` on are 0).
template <int Rows, int Width, class Row>
__device__ void load_activation_rows(Row&& row, int count, float (&out)[Rows][Width]) {
  using Act = std::remove_cv_t<std::remove_pointer_t<decltype(row(0))>>;
  stored_activations<Width, Act> stored[Rows];
  load_stored_rows<Rows>(row, count, Width, stored);
#pragma unroll
  for (int k = 0; k < Rows; ++k)
#pragma unroll
    for (int e = 0; e < Width; ++e) out[k][e] = stored[k].at(e);
}

/// `Width` consecutive activations at `from` as floats (`load_activation_rows` of one row).
template <int Width, class Act>
__device__ void load_activations(const Act* from, float (&out)[Width]) {
  load_activation_rows<1, Width>([from](int) { return from; }, 1, reinterpret_cast<float(&)[1][Width]>(out));
}

/// Sums each row's partial dot products over its lanes and stores the rows below `end` of
/// the first `tokens` tokens: part[t * LaneRows + i] is token t's sum of the lane's i-th row,
/// row `first_row + i` of the head, stored at row_sum[t * rows_per_token + row].
template <int LaneRows, class Lanes, int Parts>
__device__ void store_row_sums(const Lanes& lanes, float (&part)[Parts], int32_t first_row, int32_t end, int32_t tokens,
                               int32_t rows_per_token, float* row_sum) {
  constexpr bool one_token = Parts == LaneRows;  // then t is 0: a known constant
  lanes.row_sums(part).for_each_owned(part, [&](int k, float sum) {
    const int32_t t = one_token ? 0 : k / LaneRows, row = first_row + (one_token ? k : k % LaneRows);
    if (row < end && (one_token || t < tokens)) row_sum[t * rows_per_token + row] = sum;
  });
}

/// The entries a step stages: entries first .. first + count - 1 (window entries, then the
/// step's tokens) in staged rows 0 .. count - 1, and the rows (z; C for a read step) of its
/// first `tokens` tokens.
struct staged_entries {
  int32_t first, count, tokens;
};

/// Issues the asynchronous copies of the staged entries' rows into the warp's shared
/// memory: their x, their B where the layout stages keys, the tokens' z, and the window's
/// step sizes where it stages them. No register waits on them. Every lane calls it;
/// `lanes_wait<0>` and a `__syncwarp` precede their use (`stage_decays`).
template <class Layout, class Policy, class Act>
__device__ void copy_window(const warp_window<Layout, Act>& w, const entry_rows<Policy, Act>& entry,
                            mamba2_layer_shape s, staged_entries e, int lane) {
  const step_plan& plan = entry.plan;
  const int32_t P = s.head_dim, N = s.state_dim;
  lanes_copy_rows(w.base + w.l.x, w.l.x_pitch, e.count, uint32_t(P) * sizeof(Act),
                  [&](int32_t j) { return entry.x(e.first + j); }, lane);
  if constexpr (Layout::stages_keys) {  // the folded entries' keys, 0 past them (a flush folds whole runs)
    const int32_t folded = plan.folded;
    lanes_copy_rows(
        w.base + w.l.B, w.l.B_pitch, folded, uint32_t(N) * sizeof(Act), [&](int32_t j) { return entry.B(j); }, lane);
    Act* past = reinterpret_cast<Act*>(w.base + w.l.B + folded * w.l.B_pitch);
    for (int32_t n = lane; n < (Layout::folded_entries - folded) * int32_t(w.l.B_pitch / sizeof(Act)); n += 32)
      past[n] = from_float<Act>(0.0f);
  }
  if (entry.in.z.data != nullptr)
    for (int32_t t = 0; t < e.tokens; ++t)
      lanes_copy(w.base + w.l.z + t * w.l.x_pitch, entry.in.z.at(t), uint32_t(P) * sizeof(Act), lane);
  if constexpr (Layout::stages_steps)
    for (int32_t j = lane; j < e.count && e.first + j < plan.length; j += 32)
      copy_word_async(w.floats(w.l.window_dt) + j,
                      entry.st.window_dt + plan.ring_slot(e.first + j) * entry.st.window_dt_stride);
  lanes_commit();
}

/// A verify read's dots B_i . C_t of `count` entries (entry first + i) with the C of the
/// first `tokens` of `T` tokens into `weight` at [t * W + i] (the window coefficients
/// multiply them later), before the stream is consumed: each lane takes 4 consecutive
/// columns of every 128, and the warp reduce-scatters the sums, a group of up to 16 entries
/// at a time. Ends with a `__syncwarp`. Each row loads on its own (`load_activations`):
/// loaded together (`load_activation_rows`) the group's keys spilled the read kernel's
/// registers.
template <int W, int T, class Policy, class Act>
__device__ void key_dots(const entry_rows<Policy, Act>& entry, int32_t first, float* weight, int32_t N, int32_t count,
                         int32_t tokens, int lane) {
  // Entries per group: 16 sums and 16 keys at most (grouped for 32 sums, a verify step's dots
  // spilled the read kernel's registers).
  constexpr int by_sums = W < 16 / T ? W : 16 / T, G = by_sums < 16 ? by_sums : 16;
  for (int32_t g0 = 0; g0 < count; g0 += G) {
    float dot[T * G];
#pragma unroll
    for (int k = 0; k < T * G; ++k) dot[k] = 0.0f;
    for (int32_t n = lane * 4; n < N; n += 128) {
      float c[T][4], b[G][4];
#pragma unroll
      for (int t = 0; t < T; ++t) load_activations<4>(entry.in.C.at(t < tokens ? t : 0) + n, c[t]);
#pragma unroll
      for (int j = 0; j < G; ++j) {
        const int32_t i = g0 + j < count ? g0 + j : count - 1;  // past the step's: the last again, never stored
        load_activations<4>(entry.B(first + i) + n, b[j]);
      }
#pragma unroll
      for (int t = 0; t < T; ++t)
#pragma unroll
        for (int j = 0; j < G; ++j)
#pragma unroll
          for (int k = 0; k < 4; ++k) dot[t * G + j] = math::fma(b[j][k], c[t][k], dot[t * G + j]);
    }
    reduce_scatter(dot, 32, lane).for_each_owned(dot, [&](int k, float sum) {
      const int32_t t = k / G, i = g0 + k % G;
      if (t < tokens && i < count) weight[t * W + i] = sum;
    });
  }
  __syncwarp();
}

/// The raw step sizes of a step's tokens among the staged entries, a lane's entries (lane,
/// lane + 32, ...) each: loaded right after `copy_window` is issued, so that their latency
/// overlaps the stream's and the copies' rather than following them.
template <class Layout>
struct token_steps {
  static constexpr int passes = (Layout::entries + 31) / 32;  // entries per lane at most
  float raw[passes];
  template <class Act>
  __device__ token_steps(const mamba2_head_inputs<Act>& in, const step_plan& plan, staged_entries e, int lane) {
#pragma unroll
    for (int k = 0; k < passes; ++k) {
      const int32_t j = lane + 32 * k, entry = e.first + j;
      raw[k] = j < e.count && entry >= plan.length ? to_float(in.dt.at(entry - plan.length)[0]) : 0.0f;
    }
  }
};

/// Waits for `copy_window`, then forms the staged entries' step sizes (the window's as
/// copied, the tokens' from `tokens`) and log decays (entry first + j at j). Ends with a
/// `__syncwarp`.
template <class Layout, class Act>
__device__ void stage_decays(const warp_window<Layout, Act>& w, const mamba2_head_inputs<Act>& in,
                             const step_plan& plan, staged_entries e, const token_steps<Layout>& tokens, int lane) {
  lanes_wait<0>();
  __syncwarp();
  float* dt = w.floats(w.l.dt);
  float* log_decay = w.floats(w.l.log_decay);
#pragma unroll
  for (int k = 0; k < token_steps<Layout>::passes; ++k) {
    const int32_t j = lane + 32 * k, entry = e.first + j;
    if (j >= e.count) break;
    const float step =
        entry < plan.length ? w.floats(w.l.window_dt)[j] : mamba2::step_size(tokens.raw[k], in.dt_bias, in.dt_softplus);
    dt[j] = step;
    log_decay[j] = mamba2::log_decay(step, in.A);
  }
  __syncwarp();
}

/// A flush's coefficients in the order of replay/scalar_decay.hpp: its F staged entries fold
/// in `folds` equal runs (a replay flush's one run; the snapshot baseline's drafts, a run
/// each), coef_j = window_coefficient of entry j within its run, and decay[f] the decay of
/// the state over run f. Ends with a `__syncwarp`.
template <class Layout, class Act>
__device__ void flush_coefficients(const warp_window<Layout, Act>& w, int32_t F, int32_t folds, int lane) {
  const float* log_decay = w.floats(w.l.log_decay);
  const float* dt = w.floats(w.l.dt);
  const int32_t n = F / folds;
  for (int32_t j = lane; j < F; j += 32) {
    const int32_t run = j / n * n;
    w.floats(w.l.coef)[j] = window_coefficient(log_decay + run, dt + run, j - run, n);
  }
  for (int32_t f = lane; f < folds; f += 32) w.floats(w.l.decay)[f] = checkpoint_decay(log_decay + f * n, n);
  __syncwarp();
}

/// A read step's token t sees the staged entries 0 .. seen0 + t - 1 (itself the last):
/// weight[t * W + i] (its dot with entry i) times that window's coefficient of i, and
/// decay[t] the state's decay over that window. Ends with a `__syncwarp`.
template <int W, class Layout, class Act>
__device__ void query_coefficients(const warp_window<Layout, Act>& w, int32_t seen0, int32_t tokens, float* decay,
                                   int lane) {
  const float* log_decay = w.floats(w.l.log_decay);
  float* weight = w.floats(w.l.weight);
  for (int32_t k = lane; k < tokens * W; k += 32) {
    const int32_t t = k / W, i = k % W, seen = seen0 + t;
    if (i < seen) weight[k] = math::mul(weight[k], window_coefficient(log_decay, w.floats(w.l.dt), i, seen));
  }
  for (int32_t t = lane; t < tokens; t += 32) decay[t] = checkpoint_decay(log_decay, seen0 + t);
  __syncwarp();
}

/// Hands y of rows `rows` of the first `tokens` of `Tokens` tokens to `out` (`out(t, p, y)`),
/// token t's x in staged row seen0 - 1 + t: its state term row_sum[t * P + p] times decay[t]
/// (1 without `decay`) and its window term sum_i weight[t * W + i] x_i over the staged rows
/// i < seen0 + t (none without `weight`). Lane l takes rows first + l, first + l + 32, ...;
/// a row's staged x are read once for all the tokens (a verify step's drafts share them),
/// and a token's weights as vectors.
template <int W, int Tokens, class Layout, class Act, class Outputs>
__device__ void write_outputs(const warp_window<Layout, Act>& w, const mamba2_head_inputs<Act>& in, row_range rows,
                              int32_t P, int32_t seen0, int32_t tokens, const float* decay, const float* weight,
                              Outputs& out, int lane) {
  const bool gated = in.z.data != nullptr;
  const float* row_sum = w.floats(w.l.row_sum);
  // Staged rows of x (those of a decode step's window are its token's seen rows, so that one
  // predicate both loads and adds each).
  const int32_t staged = weight == nullptr ? 0 : Tokens == 1 ? seen0 : seen0 + tokens - 1;
  for (int32_t p = rows.first + lane; p < rows.first + rows.count; p += 32) {
    float x[W];
#pragma unroll
    for (int j = 0; j < W; ++j) x[j] = j < staged ? to_float(w.x(j)[p]) : 0.0f;
#pragma unroll
    for (int t = 0; t < Tokens; ++t) {
      if (t >= tokens) break;  // the same on every lane
      const int32_t seen = weight != nullptr ? seen0 + t : 0;
      float coefficient[W];
      if (weight != nullptr) load_scratch(weight + t * W, coefficient);
      float window_term = 0.0f;
#pragma unroll
      for (int j = 0; j < W; ++j)
        if (j < seen) window_term = math::fma(coefficient[j], x[j], window_term);
      const float state_decay = decay != nullptr ? decay[t] : 1.0f;
      const float z = gated ? to_float(w.z(t)[p]) : 0.0f;
      out(t, p,
          mamba2::output(math::mul(state_decay, row_sum[t * P + p]), window_term, in.D, to_float(w.x(seen0 - 1 + t)[p]),
                         z, gated));
    }
  }
}

/// A flush lane's keys B_j (j < window; 0 from the F folded entries on) of its unit's
/// `Columns` columns: held in registers (loaded from global memory once) or read per use
/// from the rows the layout stages in shared memory.
template <int W, int Columns, class Act, key_place Place>
struct flush_keys;

template <int W, int Columns, class Act>
struct flush_keys<W, Columns, Act, key_place::registers> {
  float b[W][Columns];
  template <class Policy, class Layout>
  __device__ flush_keys(const entry_rows<Policy, Act>& entry, const warp_window<Layout, Act>&, int32_t column,
                        int32_t F) {
    load_activation_rows<W, Columns>([&](int j) { return entry.B(j) + column; }, F, b);  // 0 from F on
  }
  __device__ void load(int j, float (&out)[Columns]) const {
#pragma unroll
    for (int e = 0; e < Columns; ++e) out[e] = b[j][e];
  }
};

template <int W, int Columns, class Act>
struct flush_keys<W, Columns, Act, key_place::shared_memory> {
  const uint8_t* first;  ///< the lane's columns of the first staged row
  uint32_t pitch;
  template <class Policy, class Layout>
  __device__ flush_keys(const entry_rows<Policy, Act>&, const warp_window<Layout, Act>& w, int32_t column, int32_t)
      : first(reinterpret_cast<const uint8_t*>(w.B(0) + column)), pitch(w.l.B_pitch) {}
  __device__ void load(int j, float (&out)[Columns]) const {
    using stored = stored_activations<Columns, Act>;
    if constexpr (std::is_void_v<typename stored::vector>) {
      load_activations<Columns>(reinterpret_cast<const Act*>(first + j * pitch), out);
    } else {  // staged rows start at whole vectors, and so do a lane's columns: no alignment test
      stored k;
      k.loaded = *reinterpret_cast<const typename stored::vector*>(first + j * pitch);
#pragma unroll
      for (int e = 0; e < Columns; ++e) out[e] = k.at(e);
    }
  }
};

/// A stage's share of one flush lane in registers: its `Rows` rows of `Columns` elements.
template <int Rows, int Columns>
struct state_tile {
  float v[Rows][Columns];
};

/// Streams a read step's rows of a head: each stage's rows dotted with the lane's slices of
/// the first `tokens` tokens' C (`c`, at the lane's unit column), each row's sum stored at
/// row_sum[t * P + row] (`store_row_sums`).
template <int Tokens, class Policy, class Stream>
__device__ void stream_row_sums(Stream& stream, const float (&c)[Tokens][mamba2_warp_config<Policy>::read_unit],
                                mamba2_layer_shape s, row_range rows, int32_t tokens, float* row_sum, int lane) {
  using config = mamba2_warp_config<Policy>;
  using format = typename config::read_format;
  constexpr int unit = config::read_unit, lane_rows = config::read_lanes::rows;
  const int32_t end = rows.first + rows.count, stage_rows = config::template stage_rows<warp_role::read>(s.state_dim);
  with_unit_lanes<config::read_stage, unit>(s.state_dim, lane, [&](const auto& lanes) {
    stream.for_each_stage([&](int stage, const uint8_t* data, const uint8_t* scales, int32_t) {
      const int32_t row0 = rows.first + stage * stage_rows;
      float part[Tokens * lane_rows];
#pragma unroll
      for (int i = 0; i < lane_rows; ++i) {
        const int u = lanes.unit_index(i);
        float v[unit];
        decode_operands<format>(data + u * format::data_bytes_per_chunk, scales + u * format::scale_bytes_per_chunk, v);
#pragma unroll
        for (int t = 0; t < Tokens; ++t) {
          part[t * lane_rows + i] = 0.0f;
#pragma unroll
          for (int e = 0; e < unit; ++e) part[t * lane_rows + i] = math::fma(v[e], c[t][e], part[t * lane_rows + i]);
        }
      }
      store_row_sums<lane_rows>(lanes, part, row0 + lanes.row(0), end, tokens, s.head_dim, row_sum);
    });
  });
}

/// Appends a read step's first `tokens` tokens to the window: token t (entry L + t of the
/// plan, staged row L + t - `staged_first`) at ring slot L + t, x of these rows from its
/// staged row; its B and step size (`step(t)`) by the warp of the head's first rows.
template <class Layout, class Policy, class Act, class Step>
__device__ void append_tokens(const warp_window<Layout, Act>& w, const entry_rows<Policy, Act>& entry, row_range rows,
                              int32_t N, int32_t tokens, int32_t staged_first, int lane, Step&& step) {
  const step_plan& plan = entry.plan;
  const mamba2_head_state<Policy, Act>& st = entry.st;
  for (int32_t t = 0; t < tokens; ++t) {
    const int32_t j = plan.length + t, ring = plan.ring_slot(j);
    Act* x = st.window_x + ring * st.window_x_stride;
    for (int32_t p = rows.first + lane; p < rows.first + rows.count; p += 32) x[p] = w.x(j - staged_first)[p];
    if (rows.first == 0) {
      if (st.appends_key) {
        Act* B = st.window_B + ring * st.window_B_stride;
        for (int32_t n = lane; n < N; n += 32) B[n] = entry.B(j)[n];
      }
      if (lane == 0) st.window_dt[ring * st.window_dt_stride] = step(t);
    }
  }
}

/// A decode read's weights of its window, formed from registers before its stream is
/// consumed (the first stages land meanwhile): the keys' dots with the token's C (each lane
/// 4 columns of every 128 of a group of `group` entries, loaded together, then
/// reduce-scattered to a sum per lane), times the coefficients (exp of the log decays after
/// each entry, times its step size), summed by a scan over the lanes (CUB's) in an order of
/// its own: these feed outputs, which need FP32 accuracy, not the checkpoint's bits
/// (replay/scalar_decay.hpp). Keys loaded before the stream and dotted after it stay live
/// through the stream's loop, which then spills: an FP32 read step was 6% slower.
template <int W, class Act, int MaxGroup = 16>
struct decode_weights {
  static constexpr int pow2_at_least(int n, int p = 1) { return p >= n ? p : pow2_at_least(n, 2 * p); }
  /// Entries whose keys a lane holds at once: a power of two whose dots reduce-scatter to a
  /// sum per lane, `MaxGroup` at most (a power of two up to 16).
  static constexpr int group = pow2_at_least(W) < MaxGroup ? pow2_at_least(W) : MaxGroup;
  static constexpr int groups = (W + group - 1) / group;
  /// Entries per lane: lane l holds entries 32 k + 31 - l (`entry_of`), the window in reverse
  /// lane order, so that a prefix scan over the lanes sums the log decays after each entry.
  static constexpr int lane_entries = (W + 31) / 32;
  __device__ static int entry_of(int lane, int k) { return 32 * k + 31 - lane; }
  using key = stored_activations<4, Act>;

  float weight[lane_entries];  ///< entry_of(lane, k)'s weight; 0 past the token
  float decay;                 ///< the checkpoint's decay over the window, on every lane
  float token_step;            ///< the token's step size, on every lane

  /// The weights of the L + 1 entries of `entry` (the token the last).
  template <class Policy>
  __device__ decode_weights(const entry_rows<Policy, Act>& entry, int32_t N, int lane) {
    const mamba2_head_inputs<Act>& in = entry.in;
    const int32_t L = entry.plan.length;
    float step[lane_entries], dot[lane_entries];
#pragma unroll
    for (int k = 0; k < lane_entries; ++k) {
      const int j = entry_of(lane, k);
      step[k] = j < L ? entry.st.window_dt[entry.plan.ring_slot(j) * entry.st.window_dt_stride] : 0.0f;
      dot[k] = 0.0f;
    }
    const float token_dt = to_float(in.dt.at(0)[0]);
    const Act* key_rows[lane_entries];  // [k]: entry 32 k + lane's key row (the token's past it)
#pragma unroll
    for (int k = 0; k < lane_entries; ++k) key_rows[k] = entry.B(32 * k + lane < L ? 32 * k + lane : L);
#pragma unroll
    for (int g = 0; g < groups; ++g) {
      if (g * group > L) break;  // the same on every lane
      float part[group];
#pragma unroll
      for (int k = 0; k < group; ++k) part[k] = 0.0f;
      for (int32_t n = 4 * lane; n < N + 4 * lane; n += 128) {  // the same trips on every lane
        const int columns = N - n >= 4 ? 4 : N > n ? int(N - n) : 0;
        key B[group], C[1];
        load_stored_rows<group>(
            [&](int k) { return row_of_lane(key_rows[(g * group + k) / 32], (g * group + k) % 32) + n; },
            columns > 0 ? (L + 1 - g * group < group ? int(L + 1 - g * group) : group) : 0, columns, B);
        load_stored_rows<1>([&](int) { return in.C.at(0) + n; }, columns > 0 ? 1 : 0, columns, C);
#pragma unroll
        for (int k = 0; k < group; ++k)
#pragma unroll
          for (int e = 0; e < 4; ++e) part[k] = math::fma(B[k].at(e), C[0].at(e), part[k]);
      }
      reduce_scatter(part, 32, lane);  // entry g * group + m's sum on lanes m * 32 / group ...
#pragma unroll
      for (int k = 0; k < lane_entries; ++k) {
        const int m = entry_of(lane, k) - g * group;
        const float sum = __shfl_sync(0xffffffffu, part[0], (m & (group - 1)) * (32 / group));
        if (m >= 0 && m < group) dot[k] = sum;
      }
    }
    token_step = mamba2::step_size(token_dt, in.dt_bias, in.dt_softplus);
    using scan = cub::WarpScan<float>;
    typename scan::TempStorage no_storage;  // shuffles: a 32-lane scan needs no shared memory
    float after = 0.0f;                     // the log decays of the lane chunks after the current one
#pragma unroll
    for (int k = lane_entries - 1; k >= 0; --k) {
      const int j = entry_of(lane, k);
      const float s = j < L ? step[k] : j == L ? token_step : 0.0f;
      float later, chunk;  // the log decays of the chunk's entries after j, and of all of them
      scan(no_storage).ExclusiveSum(mamba2::log_decay(s, in.A), later, chunk);
      weight[k] = math::mul(dot[k], math::mul(math::exp(math::add(later, after)), s));
      after = math::add(after, chunk);
    }
    decay = math::exp(after);
  }
  /// Entry j's weight (j < 32), on every lane: every lane calls it.
  __device__ float weight_of(int j) const {
    static_assert(lane_entries == 1, "decode_weights::weight_of: a window of up to 32 entries");
    return __shfl_sync(0xffffffffu, weight[0], 31 - j);
  }
  /// Stores the weights of entries below W at `to` and the decay at `decay_at`.
  __device__ void store(float* to, float* decay_at, int lane) const {
#pragma unroll
    for (int k = 0; k < lane_entries; ++k)
      if (entry_of(lane, k) < W) to[entry_of(lane, k)] = weight[k];
    if (lane == 0) *decay_at = decay;
  }
};

/// A decode read of rows `rows` of one head by one warp, from `stream` (the read copy's,
/// started first; `smem` the warp's `mamba2_warp_layout<Policy, Act, warp_role::read>`
/// bytes): y from the read copy and the window, the token appended (x of these rows; B and
/// its step size by the warp of the head's first rows). The entries' x rows and the
/// token's z are copied into shared memory and the weights formed (`decode_weights`) before
/// the stream is consumed; the outputs after it. The outputs go to `out`
/// (`store_outputs`); `gate()` is asked before the first write, and a false returns false
/// with nothing written (`always_write`).
template <class Stream, class Policy, class Act, class Outputs, class Gate>
__device__ bool decode_read_rows(Stream& stream, const mamba2_head_inputs<Act>& in,
                                 const mamba2_head_state<Policy, Act>& st, mamba2_layer_shape s, const step_plan& plan,
                                 row_range rows, uint8_t* smem, Outputs& out, Gate& gate, int lane) {
  using config = mamba2_warp_config<Policy>;
  using layout_t = mamba2_warp_layout<Policy, Act, warp_role::read>;
  constexpr int W = Policy::window;
  const int32_t N = s.state_dim, P = s.head_dim, L = plan.length;
  const warp_window<layout_t, Act> w{smem, layout_t::make(s)};
  const entry_rows<Policy, Act> entry{in, st, plan};
  copy_window(w, entry, s, staged_entries{0, L + 1, 1}, lane);
  float c[1][config::read_unit];
  load_activations<config::read_unit>(in.C.at(0) + config::read_lanes(N, lane).column(), c[0]);
  const decode_weights<W, Act> weights(entry, N, lane);
  weights.store(w.floats(w.l.weight), w.floats(w.l.decay), lane);
  stream_row_sums<1, Policy>(stream, c, s, rows, 1, w.floats(w.l.row_sum), lane);

  lanes_wait<0>();  // the window's rows
  __syncwarp();
  if (!gate()) return false;
  write_outputs<W, 1>(w, in, rows, P, L + 1, 1, w.floats(w.l.decay), w.floats(w.l.weight), out, lane);
  append_tokens(w, entry, rows, N, 1, 0, lane, [&](int32_t) { return weights.token_step; });
  return true;
}

/// A verify read of rows `rows` of one head by one warp, from `stream` (the read copy's,
/// started first; `smem` the warp's `mamba2_warp_layout<Policy, Act, warp_role::read,
/// Tokens>` bytes): y of up to `Tokens` drafts from the read copy and the window, each
/// draft seeing the drafts before it, and the entries a flush folded first (`plan.folded`,
/// done by a verify flush before this step) already in the state it reads; the drafts
/// appended uncommitted (x of these rows; B and the step sizes by the warp of the head's
/// first rows). `plan` must not write the checkpoint otherwise. The outputs go to `out`
/// (`store_outputs`); `gate()` is asked before the first write, and a false returns false
/// with nothing written (`always_write`).
template <int Tokens, class Stream, class Policy, class Act, class Outputs, class Gate>
__device__ bool verify_read_rows(Stream& stream, const mamba2_head_inputs<Act>& in,
                                 const mamba2_head_state<Policy, Act>& st, mamba2_layer_shape s, const step_plan& plan,
                                 row_range rows, uint8_t* smem, Outputs& out, Gate& gate, int lane) {
  using config = mamba2_warp_config<Policy>;
  using layout_t = mamba2_warp_layout<Policy, Act, warp_role::read, Tokens>;
  constexpr int unit = config::read_unit, W = Policy::window;
  const int32_t N = s.state_dim, P = s.head_dim, L = plan.length, F = plan.folded;
  const int32_t T = plan.tokens < Tokens ? plan.tokens : Tokens;  // the planner skips more
  const staged_entries staged{F, L + T - F, T};
  const warp_window<layout_t, Act> w{smem, layout_t::make(s)};
  const entry_rows<Policy, Act> entry{in, st, plan};
  copy_window(w, entry, s, staged, lane);
  const token_steps<layout_t> tokens(in, plan, staged, lane);
  const int32_t column = typename config::read_lanes(N, lane).column();
  float c[Tokens][unit];
#pragma unroll
  for (int t = 0; t < Tokens; ++t) load_activations<unit>(in.C.at(t < T ? t : 0) + column, c[t]);
  key_dots<W, Tokens>(entry, F, w.floats(w.l.weight), N, staged.count, T, lane);
  stream_row_sums<Tokens, Policy>(stream, c, s, rows, T, w.floats(w.l.row_sum), lane);

  const int32_t seen0 = L + 1 - F;  // entries the first token sees, itself included
  stage_decays(w, in, plan, staged, tokens, lane);
  query_coefficients<W>(w, seen0, T, w.floats(w.l.decay), lane);
  if (!gate()) return false;
  write_outputs<W, Tokens>(w, in, rows, P, seen0, T, w.floats(w.l.decay), w.floats(w.l.weight), out, lane);

  append_tokens(w, entry, rows, N, T, F, lane, [&](int32_t t) { return w.floats(w.l.dt)[L - F + t]; });
  return true;
}

/// What a flush lane's registers hold after it stores its state: the values as formed, or
/// as stored (what a load of the stored state decodes), for outputs that read the state as
/// stored.
enum class kept_values : uint8_t { formed, stored };

/// Stores a flush lane's row of `U` values to `view`, chunks `first_chunk` on, rounded by
/// `Round`; with `kept_values::stored` the row then holds the values as stored.
template <class Round, kept_values Kept, int U, class View>
__device__ void store_row(const View& view, int32_t first_chunk, float (&row)[U], const random_stream_key& key) {
  constexpr int chunk = View::chunk_elems;
#pragma unroll
  for (int q = 0; q < U / chunk; ++q) {
    float v[chunk];
#pragma unroll
    for (int e = 0; e < chunk; ++e) v[e] = row[q * chunk + e];
    if constexpr (Kept == kept_values::stored) {
      view.template store_rounded<Round>(first_chunk + q, v, key);
#pragma unroll
      for (int e = 0; e < chunk; ++e) row[q * chunk + e] = v[e];
    } else {
      view.template store<Round>(first_chunk + q, v, key);
    }
  }
}

/// A flush of rows `rows` of one head by one warp, from `stream` (the checkpoint's, started
/// first; `smem` the warp's `mamba2_warp_layout<Policy, Act, warp_role::flush, Tokens>`
/// bytes): the `plan.folded` entries folded into these rows of the checkpoint (and the read
/// copy). A decode step's flush folds the window and the token and writes y from the new
/// state (a write-back step is the flush of a window of one). A replay verify step's
/// (`Kind`, up to `Tokens` drafts) folds the committed entries, then forms its drafts' y
/// from the new state as stored (the read copy's values, which a verify read would stream)
/// while it is in registers, each draft adding the drafts before it, and appends the drafts
/// uncommitted: the flushing requests read their state once. A write-back policy's verify
/// step is the snapshot baseline: its drafts (up to `Tokens`) fold one by one, each writing
/// y from its state and storing it to `snapshots[t]`, which the next draft goes on from as
/// stored. The outputs go to `out` (`store_outputs`); `gate()` is asked before the first
/// write, and a false returns false with nothing written (`always_write`).
template <step_kind Kind, int Tokens, class Stream, class Policy, class Act, class Outputs, class Gate>
__device__ bool flush_rows(Stream& stream, const mamba2_head_inputs<Act>& in, const mamba2_head_state<Policy, Act>& st,
                           mamba2_layer_shape s, const step_plan& plan, row_range rows, uint8_t* smem, Outputs& out,
                           Gate& gate, int lane, const state_head_view<typename Policy::checkpoint_format>* snapshots) {
  using config = mamba2_warp_config<Policy>;
  using ckpt_format = typename config::checkpoint_format;
  using lanes_t = typename config::flush_lanes;
  using layout_t = mamba2_warp_layout<Policy, Act, warp_role::flush, Tokens>;
  constexpr int unit = config::flush_unit, ckpt_chunk = ckpt_format::chunk_elems;
  constexpr int lane_rows = lanes_t::rows, W = Policy::window, folded_entries = layout_t::folded_entries;
  constexpr bool snapshot = Policy::is_writeback && Kind == step_kind::verify;
  constexpr bool reads_drafts = layout_t::reads_drafts;
  static_assert(Kind == step_kind::decode ? Tokens == 1 : snapshot || reads_drafts,
                "a flush: a decode step's folds its one token, a verify step's reads or folds 2 or more drafts");
  constexpr int max_folds = snapshot ? Tokens : 1;  // runs of W entries folded and stored in turn
  // What the registers go on with once stored: the snapshot baseline's next draft and a
  // verify flush's drafts go on from the state as stored (the read copy's values).
  constexpr kept_values kept = snapshot || reads_drafts ? kept_values::stored : kept_values::formed;
  const int32_t P = s.head_dim, N = s.state_dim, F = plan.folded, end = rows.first + rows.count;
  const int32_t T = Kind == step_kind::decode ? 1 : plan.tokens < Tokens ? plan.tokens : Tokens;  // tokens with y
  const int32_t folds = snapshot ? T : 1;
  const staged_entries staged{0, reads_drafts ? F + T : F, T};
  const warp_window<layout_t, Act> w{smem, layout_t::make(s)};
  const entry_rows<Policy, Act> entry{in, st, plan};
  copy_window(w, entry, s, staged, lane);
  const token_steps<layout_t> tokens(in, plan, staged, lane);
  const int32_t column = lanes_t(N, lane).column();
  float c[Tokens][unit];
#pragma unroll
  for (int t = 0; t < Tokens; ++t) load_activations<unit>(in.C.at(t < T ? t : 0) + column, c[t]);
  const flush_keys<folded_entries, unit, Act, layout_t::flush_keys_at> keys(entry, w, column, F);
  if constexpr (reads_drafts) key_dots<W, Tokens>(entry, F, w.floats(w.l.weight), N, T, T, lane);

  // The coefficients are ready before the first stage folds. Every stage folds all W
  // entries of a run without a branch, so that the loads of the next entries issue early:
  // an entry past the window's end (a first window shortened by its phase) has weighted x
  // -0 and keys 0, and s + (-0) * 0 = s for every s, +-0 included, as if it were not folded.
  stage_decays(w, in, plan, staged, tokens, lane);
  flush_coefficients(w, F, folds, lane);
  if constexpr (reads_drafts) query_coefficients<W>(w.from_row(F), 1, T, w.floats(w.l.decay) + 1, lane);
  const float* decay = w.floats(w.l.decay);
  const float* coef = w.floats(w.l.coef);
  float* weighted_x = w.floats(w.l.weighted_x);
  __syncwarp();

  if (!gate()) {
    stream.drain();
    return false;
  }
  random_stream_key key = st.key;
  key.flush_index = plan.flush_count;
  float* row_sum = w.floats(w.l.row_sum);
  with_unit_lanes<config::flush_stage, unit>(N, lane, [&](const auto& lanes) {
    const int32_t R = lanes.stage_rows();  // a constant for the common state dimension
    // Each stage is copied to registers (decayed) and released before the window folds in, so
    // that the next copy is in flight during the fold (KERNELS.md's flush).
    auto decayed_stage = [&](int, const uint8_t* data, const uint8_t* scales, int32_t) {
      const float total = decay[0];
      state_tile<lane_rows, unit> t;
#pragma unroll
      for (int i = 0; i < lane_rows; ++i) {
        const int u = lanes.unit_index(i);
#pragma unroll
        for (int q = 0; q < unit / ckpt_chunk; ++q) {
          float v[ckpt_chunk];
          const int chunk = u * (unit / ckpt_chunk) + q;
          // Operands: every value is decayed (multiplied) before it is stored.
          decode_operands<ckpt_format>(data + chunk * ckpt_format::data_bytes_per_chunk,
                                       scales + chunk * ckpt_format::scale_bytes_per_chunk, v);
#pragma unroll
          for (int e = 0; e < ckpt_chunk; ++e) t.v[i][q * ckpt_chunk + e] = decayed_checkpoint(total, v[e]);
        }
      }
      return t;
    };
    // The lane's rows dotted with token t's C, each row's sum stored.
    auto row_sums = [&](int stage, const state_tile<lane_rows, unit>& t, int32_t token) {
      float part[lane_rows];
#pragma unroll
      for (int i = 0; i < lane_rows; ++i) {
        part[i] = 0.0f;
#pragma unroll
        for (int e = 0; e < unit; ++e) part[i] = math::fma(t.v[i][e], c[token][e], part[i]);
      }
      store_row_sums<lane_rows>(lanes, part, rows.first + stage * R + lanes.row(0), end, 1, P, row_sum + token * P);
    };
    // A stage's weighted x (coef_j x_j of its R rows, entry j's at j R), formed by the lanes
    // together before its fold: a stage's room of shared memory rather than the head's leaves
    // room for more warps. Rows past the head (every lane folds whole runs of rows) fold the
    // last row's, and are never stored. Entries from F on weigh -0 with no branch: their
    // staged x and coefficient, read anyway, are not used.
    const int R_shift = replayssm::detail::leading_one(uint32_t(R));  // R is a power of two: no division
    auto weigh_stage = [&](int32_t first_row) {
      __syncwarp();  // the stage before has been folded
      for (int32_t k = lane; k < folded_entries * R; k += 32) {
        const int32_t j = k >> R_shift, p = first_row + (k & (R - 1));
        const float weighted = weighted_value(coef[j], to_float(w.x(j)[p < P ? p : P - 1]));
        weighted_x[k] = j >= F ? -0.0f : weighted;
      }
      __syncwarp();
    };
    auto fold_and_store = [&](int stage, state_tile<lane_rows, unit>& t) {
      weigh_stage(rows.first + stage * R);
      // The lane's first row; its other lane_rows - 1 rows follow.
      const int32_t row0 = rows.first + stage * R + lanes.row(0);
#pragma unroll
      for (int f = 0; f < max_folds; ++f) {
        if (f >= folds) break;  // the same on every lane
        if (f > 0) {
          const float run_decay = decay[f];
#pragma unroll
          for (int i = 0; i < lane_rows; ++i)
#pragma unroll
            for (int e = 0; e < unit; ++e) t.v[i][e] = decayed_checkpoint(run_decay, t.v[i][e]);
        }
#pragma unroll
        for (int j = f * W; j < f * W + W; ++j) {
          float b[unit], x[lane_rows];
          keys.load(j, b);
          load_scratch(weighted_x + j * R + lanes.row(0), x);
#pragma unroll
          for (int i = 0; i < lane_rows; ++i)
#pragma unroll
            for (int e = 0; e < unit; ++e) t.v[i][e] = fold_entry(t.v[i][e], x[i], b[e]);
        }
        if constexpr (!reads_drafts) row_sums(stage, t, f);  // y from the state before it is stored
#pragma unroll
        for (int i = 0; i < lane_rows; ++i) {
          if (row0 + i >= end) continue;
          using rounding = typename Policy::rounding;
          const int32_t chunk = lanes.template chunk_of<ckpt_chunk>(row0 + i);
          if constexpr (snapshot) {
            store_row<rounding, kept>(snapshots[f], chunk, t.v[i], key);
          } else if constexpr (Policy::shared_state) {
            store_row<rounding, kept>(st.checkpoint, chunk, t.v[i], key);
          } else {  // a separate read copy rounds to nearest (head_step.hpp says why)
            store_row<rounding, kept_values::formed>(st.checkpoint, chunk, t.v[i], key);
            store_row<round_nearest_even, kept>(
                st.read_copy, lanes.template chunk_of<config::read_format::chunk_elems>(row0 + i), t.v[i], key);
          }
        }
      }
      if constexpr (reads_drafts) {  // the drafts' y from the state as stored
#pragma unroll
        for (int token = 0; token < Tokens; ++token) {
          if (token >= T) break;  // the same on every lane
          row_sums(stage, t, token);
        }
      }
    };
    stream.for_each_stage(decayed_stage, fold_and_store);
  });
  __syncwarp();
  if constexpr (reads_drafts) {
    write_outputs<W, Tokens>(w.from_row(F), in, rows, P, 1, T, decay + 1, w.floats(w.l.weight), out, lane);
    append_tokens(w, entry, rows, N, T, 0, lane, [&](int32_t t) { return w.floats(w.l.dt)[F + t]; });
  } else {
    write_outputs<W, Tokens>(w, in, rows, P, F - folds + 1, folds, nullptr, nullptr, out, lane);
  }
  return true;
}


/// A small batch's tile of a head: a flush stage's rows from `first_row`, each lane its unit
/// of columns of `Lanes::rows` rows (`unit_lanes`), held in registers for a whole step. The
/// state's chunks and the token's C are loaded at once; rows past the head load the last
/// row's and are never stored.
template <class Format, class Act, class Lanes>
struct state_tile_rows {
  static constexpr int unit = Format::chunk_elems, lane_rows = Lanes::rows;
  stored_chunk<Format> stored[lane_rows];
  float c[unit];
  int32_t first_row;

  __device__ state_tile_rows(const state_head_view<Format>& view, const mamba2_head_inputs<Act>& in,
                             mamba2_layer_shape s, int32_t first, const Lanes& lanes)
      : first_row(first) {
#pragma unroll
    for (int i = 0; i < lane_rows; ++i) stored[i] = view.fetch(lanes.template chunk_of<unit>(clamped(s, lanes, i)));
    load_activations<unit>(in.C.at(0) + lanes.column(), c);
  }
  /// The head's row of the lane's i-th row.
  __device__ int32_t row(const Lanes& lanes, int i) const { return first_row + lanes.row(i); }
  /// That row, or the head's last where it lies past the head.
  __device__ int32_t clamped(mamba2_layer_shape s, const Lanes& lanes, int i) const {
    const int32_t r = row(lanes, i);
    return r < s.head_dim ? r : s.head_dim - 1;
  }
  /// The lane's i-th row decoded.
  __device__ void decode(int i, float (&v)[unit]) const { decode_operands<Format>(stored[i].data, stored[i].scales, v); }
  /// Sums each row's `part` over its lanes and hands y (the token's skip and gate applied)
  /// of the rows in the head to `out` (`store_outputs`), by the lane that owns the sum. The
  /// token's x and z of the rows whose sums the lane will hold (`row_share`) load here,
  /// their latency beside the sums' shuffles: held from the start, their registers spilled
  /// a read tile's.
  template <class Outputs>
  __device__ void outputs(const mamba2_head_inputs<Act>& in, mamba2_layer_shape s, const Lanes& lanes,
                          float (&part)[lane_rows], Outputs& out) const {
    const bool gated = in.z.data != nullptr;
    const value_share share = lanes.template row_share<lane_rows>();
    float x[lane_rows], z[lane_rows];  // [k]: of the lane's row share.first + k
#pragma unroll
    for (int k = 0; k < lane_rows; ++k) {
      if (k >= share.count) break;  // the same count on every lane
      x[k] = to_float(in.x.at(0)[clamped(s, lanes, share.first + k)]);
      z[k] = gated ? to_float(in.z.at(0)[clamped(s, lanes, share.first + k)]) : 0.0f;
    }
    lanes.row_sums(part).for_each_owned(part, [&](int i, float sum) {
      const int k = i - share.first;
      if (row(lanes, i) < s.head_dim) out(0, row(lanes, i), mamba2::output(sum, 0.0f, in.D, x[k], z[k], gated));
    });
  }
};

/// A step that flushes one tile of a head (`state_tile_rows`) by one warp, the state in
/// registers from its load to its store: a write-back step, or a replay step whose window
/// fills (a shared-state policy's: the checkpoint is the state it reads). Every load is
/// issued first, then `gate()` is asked (a false returns false with nothing written); the
/// `plan.folded` entries fold in with scalar_decay.hpp's arithmetic in `flush_rows`' order
/// (the coefficients from `log_decays`, 64 floats of the warp's shared memory), y from the
/// new state, the rows stored. No stream and no staging: at a small batch a warp's path,
/// not the bytes, sets the step's time.
template <class Policy, class Act, class Lanes, class Outputs, class Gate>
__device__ bool fold_tile(const mamba2_head_inputs<Act>& in, const mamba2_head_state<Policy, Act>& st,
                          mamba2_layer_shape s, const step_plan& plan, int32_t first_row, const Lanes& lanes,
                          Outputs& out, Gate& gate, float* log_decays) {
  static_assert(Policy::shared_state && Policy::window <= 32, "fold_tile: a shared state, an entry per lane");
  using format = typename Policy::checkpoint_format;
  using tile_t = state_tile_rows<format, Act, Lanes>;
  constexpr int unit = tile_t::unit, lane_rows = tile_t::lane_rows;
  // No plan folds more than the window: bounded so, a write-back step's one entry compiles
  // to straight code.
  const int32_t F = plan.folded < Policy::window ? plan.folded : Policy::window, lane = int32_t(threadIdx.x % 32);
  const entry_rows<Policy, Act> entry{in, st, plan};
  const tile_t tile(st.checkpoint, in, s, first_row, lanes);
  const float step = lane < F ? entry.dt(lane) : 0.0f;  // lane j: entry j's step size
  // Lane j: entry j's rows, handed to every lane as it folds in (`row_of_lane`); a
  // write-back step's one entry's on every lane.
  constexpr bool one_entry = Policy::window == 1;
  const int32_t own = one_entry || lane >= F ? 0 : lane;
  const Act* const key_row = entry.B(own);
  const Act* const x_row = entry.x(own);
  auto entry_row = [](const Act* row, int32_t j) { return one_entry ? row : row_of_lane(row, j); };
  float b[unit], x[lane_rows];  // the entry being folded: its key columns, its x of the lane's rows
  auto load_entry = [&](int32_t j) {
    load_activations<unit>(entry_row(key_row, j) + lanes.column(), b);
    const Act* const from = entry_row(x_row, j);
#pragma unroll
    for (int i = 0; i < lane_rows; ++i) x[i] = to_float(from[tile.clamped(s, lanes, i)]);
  };
  load_entry(0);  // before the gate too: a write-back step's one entry
  if (!gate()) return false;

  float* steps = log_decays + 32;
  if (lane < F) steps[lane] = step, log_decays[lane] = mamba2::log_decay(step, in.A);
  __syncwarp();
  const float coef = lane < F ? window_coefficient(log_decays, steps, lane, F) : 0.0f;
  const float total = checkpoint_decay(log_decays, F);
  float v[lane_rows][unit];
#pragma unroll
  for (int i = 0; i < lane_rows; ++i) {
    tile.decode(i, v[i]);
#pragma unroll
    for (int e = 0; e < unit; ++e) v[i][e] = decayed_checkpoint(total, v[i][e]);
  }
#pragma unroll 2
  for (int32_t j = 0; j < F; ++j) {
    const float coef_j = __shfl_sync(0xffffffffu, coef, j);
    if (j > 0) load_entry(j);
#pragma unroll
    for (int i = 0; i < lane_rows; ++i) {
      const float weighted = weighted_value(coef_j, x[i]);
#pragma unroll
      for (int e = 0; e < unit; ++e) v[i][e] = fold_entry(v[i][e], weighted, b[e]);
    }
  }
  random_stream_key key = st.key;
  key.flush_index = plan.flush_count;
  float part[lane_rows];
#pragma unroll
  for (int i = 0; i < lane_rows; ++i) {
    part[i] = 0.0f;
#pragma unroll
    for (int e = 0; e < unit; ++e) part[i] = math::fma(v[i][e], tile.c[e], part[i]);
    const int32_t row = tile.row(lanes, i);
    if (row < s.head_dim)
      store_row<typename Policy::rounding, kept_values::formed>(st.checkpoint, lanes.template chunk_of<unit>(row), v[i],
                                                                key);
  }
  tile.outputs(in, s, lanes, part, out);
  return true;
}

/// A replay step that reads one tile of a head (`state_tile_rows`) by one warp: the window's
/// weights formed from registers (`decode_weights`), then y from the tile and the window,
/// and the token appended (x of the tile's rows; B and its step size by the warp of the
/// head's first rows). Every load is issued before `gate()` is asked (a false returns false
/// with nothing written), but for a lane's later window entries where its row group has
/// fewer lanes than the window entries. A row group's lanes take the window's entries in
/// turn (position q entries q, q + group, ...), each adding its entries' weighted x to its
/// rows' partial sums, so that one reduction sums the state term and the window term of
/// each row.
template <class Policy, class Act, class Lanes, class Outputs, class Gate>
__device__ bool read_tile(const mamba2_head_inputs<Act>& in, const mamba2_head_state<Policy, Act>& st,
                          mamba2_layer_shape s, const step_plan& plan, int32_t first_row, const Lanes& lanes,
                          Outputs& out, Gate& gate) {
  static_assert(Policy::shared_state && Policy::window <= 32, "read_tile: a shared state, an entry per lane");
  using format = typename Policy::checkpoint_format;
  using tile_t = state_tile_rows<format, Act, Lanes>;
  constexpr int unit = tile_t::unit, lane_rows = tile_t::lane_rows;
  const int32_t L = plan.length, lane = int32_t(threadIdx.x % 32), group = lanes.units_per_row();
  const entry_rows<Policy, Act> entry{in, st, plan};
  const tile_t tile(st.checkpoint, in, s, first_row, lanes);
  const decode_weights<Policy::window, Act, 4> weights(entry, s.state_dim, lane);  // more keys at once spilled
  // Entry j's x of the lane's rows.
  auto load_x = [&](int32_t j, float(&x)[lane_rows]) {
    const Act* from = entry.x(j);
#pragma unroll
    for (int i = 0; i < lane_rows; ++i) x[i] = to_float(from[tile.clamped(s, lanes, i)]);
  };
  float first_x[lane_rows];  // the lane's first entry's (the token's where it has none)
  load_x(lanes.first_unit <= L ? lanes.first_unit : L, first_x);
  Act token_x[lane_rows];  // what the first lane of a row group appends to the window
#pragma unroll
  for (int i = 0; i < lane_rows; ++i) token_x[i] = in.x.at(0)[tile.clamped(s, lanes, i)];
  if (!gate()) return false;

  float part[lane_rows];
#pragma unroll
  for (int i = 0; i < lane_rows; ++i) {
    float v[unit];
    tile.decode(i, v);
    part[i] = 0.0f;
#pragma unroll
    for (int e = 0; e < unit; ++e) part[i] = math::fma(v[e], tile.c[e], part[i]);
    part[i] = math::mul(part[i], weights.decay);
  }
  for (int32_t first = 0; first <= L; first += group) {  // the same trips on every lane
    const int32_t j = first + lanes.first_unit;
    const float weight = weights.weight_of(j < 32 ? j : 31);
    if (j > L) continue;
    float x[lane_rows];
    if (first == 0) {
#pragma unroll
      for (int i = 0; i < lane_rows; ++i) x[i] = first_x[i];
    } else {
      load_x(j, x);
    }
#pragma unroll
    for (int i = 0; i < lane_rows; ++i) part[i] = math::fma(weight, x[i], part[i]);
  }
  tile.outputs(in, s, lanes, part, out);

  const int32_t ring = plan.ring_slot(L);
  if (lanes.first_unit == 0) {
    Act* x = st.window_x + ring * st.window_x_stride;
#pragma unroll
    for (int i = 0; i < lane_rows; ++i)
      if (tile.row(lanes, i) < s.head_dim) x[tile.row(lanes, i)] = token_x[i];
  }
  if (first_row == 0 && lanes.row(0) == 0) {
    if (st.appends_key) {
      Act* B = st.window_B + ring * st.window_B_stride;
#pragma unroll
      for (int e = 0; e < unit; ++e) B[lanes.column() + e] = in.B.at(0)[lanes.column() + e];
    }
    if (lane == 0) st.window_dt[ring * st.window_dt_stride] = weights.token_step;
  }
  return true;
}
}  // namespace detail

/// One warp's Mamba-2 step on rows of one head (all of them by default), a warp primitive in
/// the manner of CUB's: constructed on the warp's temp storage with the head's state, it
/// starts streaming the state at once, before any other load of the step (the stream's
/// latency then hides the rest); `step` runs the step of the plan, whose role (`role_of`)
/// must be `Role`; `advance_cursor` records the step once every warp of the head has run it.
/// Every lane of the warp calls each; a lane is the thread's index in its warp. With
/// `Tokens` > 1 the step is a speculative verify step of up to `Tokens` drafts. `Engine`
/// copies the state with the bulk copy engine (sm_90 on; the state's rows 16-byte aligned)
/// or with the lanes (anywhere).
///
/// The temp storage is `temp_storage_bytes(shape)` bytes of shared memory per warp,
/// 128-byte aligned (it depends on the layer's shape, so it is sized at launch). One warp
/// per head of each request, as in examples/fused_kernel (this code is compiled by
/// test/gpu/doc_snippets.cu):
///
///     template <warp::warp_role Role, class Policy, class Act>
///     __device__ void step_head(const mamba2_head_views<Policy, Act>& v, mamba2_layer_shape shape,
///                               const step_plan& plan, uint8_t* warp_storage) {
///       warp::mamba2_warp_step<Policy, Act, Role> step(warp_storage, v.state, shape);
///       step.step(v.in, plan);
///       step.advance_cursor(plan);  // the warp is the head's only one
///     }
///
/// and in the kernel, per warp (`v` the head's `mamba2_head_views`, `storage` the warp's
/// temp storage):
///
///     const step_plan plan = plan_step<step_kind::decode>(v.state, 1);
///     if (warp::role_of(plan) == warp::warp_role::flush) step_head<warp::warp_role::flush>(v, shape, plan, storage);
///     else step_head<warp::warp_role::read>(v, shape, plan, storage);
template <class Policy, class Act, warp_role Role, int Tokens = 1, copy_engine Engine = copy_engine::bulk>
class mamba2_warp_step {
 public:
  using config = mamba2_warp_config<Policy>;
  using layout = mamba2_warp_layout<Policy, Act, Role, Tokens>;
  using stream_type = std::conditional_t<Role == warp_role::flush, typename config::template flush_stream<Engine>,
                                         typename config::template read_stream<Engine, Tokens>>;

  /// Bytes of shared memory each warp's temp storage takes for a layer of shape `s`.
  __host__ __device__ static uint32_t temp_storage_bytes(mamba2_layer_shape s) { return layout::make(s).bytes; }
  /// Part `part` of `parts` of a head's rows, split at whole stages: the rows each of
  /// `parts` warps steps when several share a head.
  __host__ __device__ static row_range part_rows(mamba2_layer_shape s, int32_t parts, int32_t part) {
    return config::template part_rows<Role>(s, parts, part);
  }

  /// Starts streaming rows `rows` of the head's state (its read copy for a read, its
  /// checkpoint for a flush) into `temp_storage`. `state` must outlive the step.
  __device__ mamba2_warp_step(void* temp_storage, const mamba2_head_state<Policy, Act>& state, mamba2_layer_shape shape,
                              row_range rows)
      : storage_(static_cast<uint8_t*>(temp_storage)),
        state_(state),
        shape_(shape),
        rows_(rows),
        stream_(*static_cast<typename stream_type::TempStorage*>(temp_storage), streamed(state),
                rows.first * shape.state_dim, rows.count * shape.state_dim, lane()) {}
  /// Starts streaming every row of the head.
  __device__ mamba2_warp_step(void* temp_storage, const mamba2_head_state<Policy, Act>& state, mamba2_layer_shape shape)
      : mamba2_warp_step(temp_storage, state, shape, row_range{0, shape.head_dim}) {}

  /// The step of `plan` (of `Kind`; a verify step's flush folds the committed entries, then
  /// reads the drafts after them), its outputs stored to `in.y`. The cursor is not moved.
  template <step_kind Kind = step_kind::decode>
  __device__ void step(const mamba2_head_inputs<Act>& in, const step_plan& plan) {
    step<Kind>(in, plan, store_outputs<Act>{in});
  }
  /// The step of `plan`, each output handed to `out` (`out(t, p, y)`, `store_outputs`)
  /// rather than stored.
  template <step_kind Kind = step_kind::decode, class Outputs>
  __device__ void step(const mamba2_head_inputs<Act>& in, const step_plan& plan, Outputs&& out) {
    step<Kind>(in, plan, out, always_write{});
  }
  /// The step of `plan`, its outputs handed to `out`, written only if `gate()` says so once
  /// the step has read what it needs (`always_write`); returns whether it wrote.
  template <step_kind Kind = step_kind::decode, class Outputs, class Gate>
  __device__ bool step(const mamba2_head_inputs<Act>& in, const step_plan& plan, Outputs&& out, Gate&& gate) {
    static_assert(Kind == step_kind::decode ? Tokens == 1 : Tokens > 1,
                  "mamba2_warp_step: a decode step takes one token, a verify step 2 to max_draft_tokens (Tokens)");
    if constexpr (Role == warp_role::flush) {
      return detail::flush_rows<Kind, Tokens>(stream_, in, state_, shape_, plan, rows_, storage_, out, gate, lane(),
                                              nullptr);
    } else {
      if constexpr (Tokens == 1)
        return detail::decode_read_rows(stream_, in, state_, shape_, plan, rows_, storage_, out, gate, lane());
      else
        return detail::verify_read_rows<Tokens>(stream_, in, state_, shape_, plan, rows_, storage_, out, gate, lane());
    }
  }

  /// The snapshot baseline's verify step (a write-back policy): the drafts of `plan` folded
  /// in turn, draft t's y written from its state and the state stored to `snapshots[t]`.
  __device__ void fold_drafts(const mamba2_head_inputs<Act>& in, const step_plan& plan,
                              const state_head_view<typename Policy::checkpoint_format>* snapshots) {
    static_assert(Policy::is_writeback && Role == warp_role::flush, "mamba2_warp_step: drafts fold in write-back");
    store_outputs<Act> out{in};
    always_write gate;
    detail::flush_rows<step_kind::verify, Tokens>(stream_, in, state_, shape_, plan, rows_, storage_, out, gate, lane(),
                                                  snapshots);
  }

  /// Gives the step up: waits for the stream's copies, so that none lands in shared memory
  /// the warp no longer owns.
  __device__ void drain() { stream_.drain(); }

  /// Records the step of `plan` in the head's cursor (lane 0 writes it): once every warp of
  /// the head has run `step`.
  __device__ void advance_cursor(const step_plan& plan, step_kind kind = step_kind::decode) const {
    if (lane() == 0 && state_.cursor != nullptr) *state_.cursor = next_cursor(plan, kind);
  }

 private:
  __device__ static int lane() { return int(threadIdx.x % 32); }
  __device__ static const auto& streamed(const mamba2_head_state<Policy, Act>& st) {
    if constexpr (Role == warp_role::flush || Policy::shared_state)
      return st.checkpoint;
    else
      return st.read_copy;
  }

  uint8_t* storage_;
  const mamba2_head_state<Policy, Act>& state_;
  mamba2_layer_shape shape_;
  row_range rows_;
  stream_type stream_;
};

/// One warp's Mamba-2 decode step on a tile of a head, the primitive of a small batch: where
/// a batch's heads fit the device at once, a step takes as long as a warp's path, not as its
/// bytes, and a tile's warp holds its rows in registers from their load to the step's end,
/// with no stream and no window staged in shared memory (docs/kernels.md, "Tiles"). A head
/// of P rows takes `tiles(shape)` warps, usually a block per head, tile t its `tile_rows`
/// rows from t `tile_rows`. Tiles take rows of `common_state_dim` elements and policies
/// whose reads are of the checkpoint as stored, with windows of up to 32 (`supported`).
/// Every lane of the warp calls each member; the temp storage is the warp's `TempStorage`. As in
/// examples/fused_kernel (this code is compiled by test/gpu/doc_snippets.cu), a block per
/// head, `storage` the block's `TempStorage[tiles]` in shared memory:
///
///     template <class Policy, class Act>
///     __device__ void step_tile(const mamba2_head_views<Policy, Act>& v, mamba2_layer_shape shape,
///                               typename warp::mamba2_tile_step<Policy, Act>::TempStorage* storage) {
///       const int32_t tile = int32_t(threadIdx.x / 32);
///       const step_plan plan = plan_step<step_kind::decode>(v.state, 1);
///       if (plan.error != step_ok) return;  // the same on every warp of the block
///       warp::mamba2_tile_step<Policy, Act> step(storage[tile], v.state, shape, tile);
///       step.step(v.in, plan);
///       __syncthreads();  // every tile of the head stepped
///       if (tile == 0) step.advance_cursor(plan);
///     }
template <class Policy, class Act>
class mamba2_tile_step {
  using config = mamba2_warp_config<Policy>;

 public:
  /// The lanes of a tile: its rows' row group a compile-time constant (a kernel that also
  /// held the lanes of any other state dimension had twice the code, and a small step's
  /// warps wait on fetching their instructions).
  using lanes_type = unit_lanes<config::flush_stage, config::flush_unit, common_state_dim / config::flush_unit>;
  /// Rows of a tile: a flush stage's (each lane holds its unit of `lanes_type::rows` rows).
  static constexpr int32_t tile_rows = config::flush_stage / common_state_dim;
  /// The warp's shared memory: the window's log decays and step sizes, formed once a flush
  /// knows it may write.
  struct TempStorage {
    float log_decays[64];
  };

  /// Whether `Policy` steps in tiles: a state whose reads are of the checkpoint as stored,
  /// and a window of an entry per lane.
  static constexpr bool policy_supported =
      Policy::shared_state && Policy::window <= 32 &&
      unit_lanes<config::flush_stage, config::flush_unit>::supported(common_state_dim);
  /// Whether a layer of shape `s` steps in tiles under `Policy`.
  __host__ __device__ static constexpr bool supported(mamba2_layer_shape s) {
    return policy_supported && s.state_dim == common_state_dim;
  }
  /// Warps (tiles) per head.
  __host__ __device__ static constexpr int32_t tiles(mamba2_layer_shape s) {
    return (s.head_dim + tile_rows - 1) / tile_rows;
  }

  /// The step of tile `tile` of the head whose state is `state` (`shape` `supported`).
  /// Nothing is loaded yet: `step` loads the tile as its plan's role needs it.
  __device__ mamba2_tile_step(TempStorage& storage, const mamba2_head_state<Policy, Act>& state,
                              mamba2_layer_shape shape, int32_t tile)
      : storage_(storage),
        state_(state),
        shape_{shape.heads, shape.head_dim, common_state_dim, shape.groups},
        first_row_(tile * tile_rows),
        lanes_(common_state_dim, int(threadIdx.x % 32)) {}

  /// The decode step of `plan` on the tile, as its role (`role_of`) says: a read (y from
  /// the checkpoint and the window, the token appended) or a flush (the window and the
  /// token folded, y from the new state, the rows stored). Outputs go to `in.y`; the cursor
  /// is not moved.
  __device__ void step(const mamba2_head_inputs<Act>& in, const step_plan& plan) {
    step(in, plan, store_outputs<Act>{in});
  }
  /// The step of `plan`, each output handed to `out` (`out(0, p, y)`, `store_outputs`) rather
  /// than stored.
  template <class Outputs>
  __device__ void step(const mamba2_head_inputs<Act>& in, const step_plan& plan, Outputs&& out) {
    step(in, plan, out, always_write{});
  }
  /// The step of `plan`, its outputs handed to `out`, written only if `gate()` says so once
  /// the tile's loads are issued (`always_write`); returns whether it wrote.
  template <class Outputs, class Gate>
  __device__ bool step(const mamba2_head_inputs<Act>& in, const step_plan& plan, Outputs&& out, Gate&& gate) {
    static_assert(policy_supported, "mamba2_tile_step: a shared state and a window of up to 32 (policy_supported)");
    if constexpr (!Policy::is_writeback)  // the two roles apart: in one path their registers spilled
      if (role_of(plan) == warp_role::read)
        return detail::read_tile(in, state_, shape_, plan, first_row_, lanes_, out, gate);
    return detail::fold_tile(in, state_, shape_, plan, first_row_, lanes_, out, gate, storage_.log_decays);
  }

  /// Records the step of `plan` in the head's cursor (lane 0 writes it): by one warp of the
  /// head, once every tile of it has run `step`.
  __device__ void advance_cursor(const step_plan& plan) const {
    if (threadIdx.x % 32 == 0 && state_.cursor != nullptr) *state_.cursor = next_cursor(plan, step_kind::decode);
  }

 private:
  TempStorage& storage_;
  const mamba2_head_state<Policy, Act>& state_;
  mamba2_layer_shape shape_;
  int32_t first_row_;
  lanes_type lanes_;
};

}  // namespace warp
}  // namespace replayssm
