// SPDX-License-Identifier: Apache-2.0
/// \file warp_step.cuh
/// The Gated DeltaNet decode steps of one value head run by one warp, on the streaming
/// structure of the Mamba-2 warp steps (docs/kernels.md): the head's state streams through the
/// warp's ring (warp/state_stream.cuh), started before any other load. No block barrier:
/// every warp is independent.
///
/// - A read step (`gdn_warp_read`) streams its read copy once while the window's u rows are
///   prefetched into L2, the token's q and k normalized and the window's coefficients formed;
///   the one pass queries the state with both k_t (for the corrected value u_t) and q_t (for
///   the output); the window's terms come after it. A verify step's read (`Tokens` drafts)
///   queries the same pass with every draft's k_t and q_t. Each lane owns V / 32 rows of the
///   head (rows lane, lane + 32, ...): the state's chunk order (`gdn_state_chunk`: a unit of
///   columns of every row, then the next unit) puts the lanes' rows side by side in every
///   stage, so a lane's dot products need no shuffle. They follow the four-chain order of the
///   head step's `partial_dot`, and the window terms its order too, so that u_t, which a
///   later flush folds into the checkpoint, has the CPU's bits.
/// - A flush (the token fills the window; a write-back step is the flush of a window of one)
///   streams the checkpoint once, folding the window's committed entries; the token is left
///   open (`gdn_flush_folds_token`: a write-back step folds it): the same pass queries the
///   new state with its k_t and q_t, and it opens the next window. Two ways
///   (`gdn_warp_flush_path`): in the read step's column stages (`gdn_warp_flush`: stored u,
///   `corrected_values`), or in stages of whole rows, four lanes per row running the head
///   step's own row code (`gdn_warp_row_flush`: write-back, `raw_inputs`). A verify step's
///   flush folds the committed entries only and leaves its drafts to the read that follows.
///
/// `gdn_warp_step` is the primitive an engine's kernel instantiates (its comment shows how);
/// the three steps above are its parts. A verify step of up to `Tokens` drafts is two
/// launches, as in gated_deltanet/cuda.cuh: the flush (`step<step_kind::verify>` of the flush
/// role, cursor unchanged) of the requests whose `plan_step<step_kind::verify>` writes the
/// checkpoint, then the read of up to `Tokens` drafts of every request, which moves the
/// cursor (`advance_cursor(plan, step_kind::verify)`).
///
/// Flushes of windows over 16 run the head step instead.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "replayssm/gated_deltanet/head_step.hpp"
#include "replayssm/gated_deltanet/inputs.hpp"
#include "replayssm/gated_deltanet/recurrence.hpp"
#include "replayssm/numeric/activation.hpp"
#include "replayssm/replay/scalar_decay.hpp"
#include "replayssm/replay/step_plan.hpp"
#include "replayssm/warp/async_copy.cuh"
#include "replayssm/warp/state_stream.cuh"
#include "replayssm/warp/warp_role.hpp"

namespace replayssm {
namespace warp {

/// Stage sizes and the shapes of a Gated DeltaNet warp step streaming a state in `Format`:
/// the read step its read copy (`read_format`, the default), the flush its checkpoint.
template <class Policy, class Format = typename Policy::read_format>
struct gdn_warp_config {
  using format = Format;
  static constexpr int window = Policy::window;
  /// Value rows of a head: four per lane.
  static constexpr int value_dim = 128, rows_per_lane = value_dim / 32;
  /// A stage holds 4 KB of stored data whatever the format (as for Mamba-2): whole units of
  /// columns of every row.
  static constexpr int stage_chunks = 4096 / format::data_bytes_per_chunk;
  static constexpr int units_per_stage = stage_chunks / value_dim;
  static constexpr int stage_columns = units_per_stage * format::chunk_elems;
  static constexpr int stages = 3;
  static_assert(units_per_stage >= 1 && stage_chunks % value_dim == 0, "gdn_warp_config: a stage holds whole units");
  static_assert(format::chunk_elems <= gdn_column_block && gdn_column_block % format::chunk_elems == 0,
                "gdn_warp_config: a chunk lies within one column block");
  template <copy_engine Engine>
  using stream = state_stream<format, stage_chunks * format::chunk_elems, stages, Engine>;

  /// Whether a layer of this shape runs on the warp read step (other shapes take the block
  /// kernels).
  __host__ __device__ static constexpr bool supported(gdn_layer_shape s) {
    return s.value_dim == value_dim && s.key_dim % stage_columns == 0 && s.key_dim % gdn_column_block == 0;
  }
};

/// The stages of a flush: the checkpoint in its own format.
template <class Policy>
using gdn_flush_config = gdn_warp_config<Policy, typename Policy::checkpoint_format>;

/// Stages of a flush of whole rows (`gdn_warp_row_flush`): `RowsPerLane` runs of eight whole
/// rows of the head per stage, gathered from the state's chunk order as one piece per unit of
/// columns (the rows of a unit lie side by side). Lane l works on row l % 8 of each run with
/// the column blocks of chain l / 8 (`gdn_row_part<4>`), so that a quarter warp reads one unit
/// of eight rows, consecutive bytes of the stage. The ring holds 8 KB of stored data per row
/// a lane works on (2 stages in FP32), at most 8 stages. (Two rows of a 16-bit lane went to
/// local memory before `gdn_row_part`'s loops were unrolled.)
template <class Format, int RowsPerLane = 1>
struct gdn_row_config {
  using format = Format;
  static constexpr int value_dim = 128, key_dim = 128;
  static constexpr int units = key_dim / format::chunk_elems;  ///< pieces of a stage
  static constexpr int lane_rows = 32 / replayssm::detail::gdn_dot_chains;  ///< rows at once
  static constexpr int rows_per_lane = RowsPerLane;
  static constexpr int stage_rows = rows_per_lane * lane_rows;
  static constexpr int stage_bytes = stage_rows * units * format::data_bytes_per_chunk;
  static constexpr int ring_bytes = 8192 * rows_per_lane;
  static constexpr int stages = ring_bytes / stage_bytes < 8 ? ring_bytes / stage_bytes : 8;
  /// The lanes gather the pieces, whatever the engine (`state_stream`).
  template <copy_engine>
  using stream = state_stream<format, stage_rows * key_dim, stages, copy_engine::lanes, units>;

  /// Whether a layer of this shape flushes on whole rows.
  __host__ __device__ static constexpr bool supported(gdn_layer_shape s) {
    return s.value_dim == value_dim && s.key_dim == key_dim;
  }
  /// Every row of a head.
  static constexpr row_range all_rows{0, value_dim};
  /// Part `part` of `parts` (a power of two up to 8) of a head's rows, whole stages each.
  __host__ __device__ static constexpr row_range part_rows(int32_t parts, int32_t part) {
    return {part * (value_dim / parts), value_dim / parts};
  }
  static_assert(value_dim / 8 % stage_rows == 0, "gdn_row_config: eighths of a head hold whole stages");
};

/// Rows per lane of a flush of `Policy` on whole rows. Two for a write-back step: its stages
/// of 16 rows gather 256-byte pieces, faster than 8 rows' 128-byte pieces with more warps
/// per SM. One for a `raw_inputs` flush, whose scratch (18 KB per warp at W = 16) would
/// leave room for only 6 warps per SM beside the larger ring.
template <class Policy>
inline constexpr int gdn_rows_per_lane = Policy::is_writeback ? 2 : 1;

/// The stages of a flush of `Policy` on whole rows.
template <class Policy>
using gdn_row_flush_config = gdn_row_config<typename Policy::checkpoint_format, gdn_rows_per_lane<Policy>>;

/// How the flushes of `Policy` (a write-back step's included) run.
enum class gdn_flush_path {
  head_step,      ///< one block per value head: windows over 16 (the scratch would leave too few warps per SM)
  column_stages,  ///< `gdn_warp_flush`: the checkpoint streamed in column stages
  whole_rows,     ///< `gdn_warp_row_flush`: the checkpoint streamed in whole rows
};

/// Stored u (`corrected_values`) folds in column stages, where a lane holds the window's
/// u of its four rows in registers and its keys' columns serve four rows (faster than whole
/// rows, whose lanes load every entry's key columns per row); the checkpoint's stages must
/// hold whole chunks of a separate read copy (written from them). Recomputed u
/// (`raw_inputs`) and the write-back step need each row whole as they fold: whole rows
/// (faster than the head step for `raw_inputs`).
template <class Policy>
inline constexpr gdn_flush_path gdn_warp_flush_path =
    Policy::window > 16 ? gdn_flush_path::head_step
    : !keeps_raw_inputs<Policy> && !Policy::is_writeback &&
            gdn_flush_config<Policy>::stage_columns % Policy::read_format::chunk_elems == 0
        ? gdn_flush_path::column_stages
        : gdn_flush_path::whole_rows;

/// Whether the flushes of `Policy` run on whole rows (`gdn_warp_row_flush`).
template <class Policy>
inline constexpr bool gdn_row_flushes = gdn_warp_flush_path<Policy> == gdn_flush_path::whole_rows;

/// Whether the flushes of `Policy` run on a warp step (either path).
template <class Policy>
inline constexpr bool gdn_warp_flushes = gdn_warp_flush_path<Policy> != gdn_flush_path::head_step;

/// The flush path whose shared memory a warp step of `Role` lays out (`gdn_warp_layout`): a
/// read step lays its own out as the column stages do.
template <class Policy, warp_role Role>
inline constexpr gdn_flush_path gdn_layout_path =
    Role == warp_role::flush ? gdn_warp_flush_path<Policy> : gdn_flush_path::column_stages;

/// One warp's shared memory for a read (of up to `Tokens` tokens) or flush step (`Role`;
/// bytes, 16-byte aligned regions): the stream's ring, the normalized keys (a read step's
/// tokens; a flush's window entries and token) and queries, then per-entry floats: log
/// decays, a flush's fold coefficients, a read step's tokens' write strengths and
/// coefficients (`coef_pitch` per token). (A read step's window u rows, 8 KB at W = 16, stay
/// in memory: staged here they allowed 10 warps per SM instead of 16.)
template <class Policy, warp_role Role = warp_role::read, int Tokens = 1,
          gdn_flush_path Path = gdn_layout_path<Policy, Role>>
struct gdn_warp_layout {
  static constexpr bool flushes = Role == warp_role::flush;
  static_assert(Tokens >= 1 && Tokens <= max_draft_tokens && (!flushes || Tokens == 1),
                "gdn_warp_layout: a read step takes 1 to max_draft_tokens tokens, a flush one");
  static constexpr int window = Policy::window;
  /// Coefficients per token: the entries a token sees (its window and itself).
  static constexpr int coef_pitch = window + 1;
  using config = std::conditional_t<flushes, gdn_flush_config<Policy>, gdn_warp_config<Policy>>;
  static constexpr uint32_t stream_bytes = sizeof(typename config::template stream<copy_engine::bulk>::TempStorage);
  uint32_t key, query, log_decay, fold_coef, beta, key_coef, query_coef, bytes;

  static constexpr uint32_t align16(uint32_t n) { return (n + 15u) / 16u * 16u; }
  __host__ __device__ static gdn_warp_layout make(gdn_layer_shape s) {
    gdn_warp_layout l{};
    uint32_t at = stream_bytes;
    auto take = [&at](uint32_t n) {
      const uint32_t start = at;
      at += align16(n);
      return start;
    };
    l.key = take((flushes ? window : Tokens) * uint32_t(s.key_dim) * 4);
    l.query = take(Tokens * uint32_t(s.key_dim) * 4);
    l.log_decay = take((window + 1) * 4);
    l.fold_coef = take(flushes ? (window + 1) * 4 : 0);
    l.beta = take(flushes ? 0 : Tokens * 4);
    l.key_coef = take(flushes ? 0 : Tokens * coef_pitch * 4);
    l.query_coef = take(flushes ? 0 : Tokens * coef_pitch * 4);
    l.bytes = (at + 127u) / 128u * 128u;
    return l;
  }
};

/// A flush's shared memory on whole rows: the ring, then the head step's scratch for one
/// token (`gdn_scratch_layout`), 16-byte aligned.
template <class Policy>
struct gdn_warp_layout<Policy, warp_role::flush, 1, gdn_flush_path::whole_rows> {
  using config = gdn_row_flush_config<Policy>;
  static constexpr uint32_t stream_bytes =
      (sizeof(typename config::template stream<copy_engine::lanes>::TempStorage) + 15u) / 16u * 16u;
  uint32_t scratch, bytes;

  __host__ __device__ static gdn_warp_layout make(gdn_layer_shape s) {
    const auto scratch = gdn_scratch_layout::make(s, Policy::window, 1);
    return {stream_bytes, uint32_t((stream_bytes + scratch.bytes() + 127u) / 128u * 128u)};
  }
};

/// The stream a read step of a head consumes (its read copy, or the checkpoint in shared
/// mode), or a flush's (`Role`: the checkpoint once, in columns or in whole rows: `rows` of
/// them, all by default), started at once: call it before any other load of the step.
template <warp_role Role, copy_engine Engine, class Policy, class Act>
__device__ auto start_gdn_stream(const gdn_head_state<Policy, Act>& st, gdn_layer_shape s, uint8_t* smem, int lane,
                                 row_range rows = gdn_row_flush_config<Policy>::all_rows) {
  constexpr bool flushes = Role == warp_role::flush;
  static_assert(!flushes || gdn_warp_flushes<Policy>, "start_gdn_stream: this policy's flushes run the head step");
  using stream_t = typename gdn_warp_layout<Policy, Role>::config::template stream<Engine>;
  auto& storage = *reinterpret_cast<typename stream_t::TempStorage*>(smem);
  const int32_t elements = s.value_dim * s.key_dim;
  if constexpr (flushes && gdn_row_flushes<Policy>) {
    // Piece u of a stage: unit u of its rows; a unit of every row is V chunks.
    const int32_t unit_elements = s.value_dim * stream_t::chunk_elems;
    return stream_t(storage, st.checkpoint, rows.first * stream_t::chunk_elems, rows.count * stream_t::chunk_elems,
                    lane, unit_elements);
  } else if constexpr (flushes)
    return stream_t(storage, st.checkpoint, 0, elements, lane);
  else if constexpr (Policy::shared_state)
    return stream_t(storage, st.checkpoint, 0, elements, lane);
  else
    return stream_t(storage, st.read_copy, 0, elements, lane);
}

namespace detail {

using replayssm::detail::gdn_dot_chains;

/// A row's dot products in the head step's four-chain order (`partial_dot`): chain c sums
/// the column blocks b with b % 4 == c. The stream walks the blocks in order, so the chain
/// a block feeds is always slot 0 of a rotating set: after each block the slots turn by one.
template <int Rows>
struct row_chains {
  float acc[Rows][gdn_dot_chains] = {};

  /// Turns the slots by one block: slot 0 becomes the next block's chain.
  __device__ void turn() {
#pragma unroll
    for (int i = 0; i < Rows; ++i) {
      const float first = acc[i][0];
#pragma unroll
      for (int c = 0; c + 1 < gdn_dot_chains; ++c) acc[i][c] = acc[i][c + 1];
      acc[i][gdn_dot_chains - 1] = first;
    }
  }
  /// Row i's dot product after `blocks` column blocks: (0 + 1) + (2 + 3) over the chains.
  __device__ float total(int i, int blocks) const {
    float c[gdn_dot_chains];
#pragma unroll
    for (int k = 0; k < gdn_dot_chains; ++k) c[k] = acc[i][k];
    // Slot s holds chain (s + blocks) % 4.
    for (int turned = blocks % gdn_dot_chains; turned > 0; --turned) {
      const float last = c[gdn_dot_chains - 1];
#pragma unroll
      for (int k = gdn_dot_chains - 1; k > 0; --k) c[k] = c[k - 1];
      c[0] = last;
    }
    return math::add(math::add(c[0], c[1]), math::add(c[2], c[3]));
  }
};

/// The entries a read step sees, as a plan of their own: the window from the first entry a
/// verify step's flush left (`plan.folded`) on.
__device__ inline step_plan unfolded(step_plan plan) {
  plan.start = plan.ring_slot(plan.folded);
  plan.length -= plan.folded;
  plan.folded = 0;
  plan.writes_checkpoint = false;
  return plan;
}

/// A flush stage's share of one lane in registers: its rows' chunks of each unit.
template <int Units, int Rows, int ChunkElems>
struct gdn_stage_tile {
  float v[Units][Rows][ChunkElems];
};

/// Writes a flush stage's new state values (`t`, columns from `column0`) to the read copy, in
/// its chunks of the lane's rows, rounded to nearest.
template <class Policy, int Units, int Rows, int ChunkElems>
__device__ void store_read_chunks(const state_head_view<typename Policy::read_format>& read_copy,
                                  const gdn_stage_tile<Units, Rows, ChunkElems>& t, int32_t column0, int lane,
                                  const random_stream_key& key) {
  constexpr int read_chunk = Policy::read_format::chunk_elems, V = Rows * 32;
#pragma unroll
  for (int c = 0; c < Units * ChunkElems; c += read_chunk)
#pragma unroll
    for (int i = 0; i < Rows; ++i) {
      float chunk[read_chunk];
#pragma unroll
      for (int e = 0; e < read_chunk; ++e) chunk[e] = t.v[(c + e) / ChunkElems][i][(c + e) % ChunkElems];
      read_copy.template store<round_nearest_even>((column0 + c) / read_chunk * V + lane + 32 * i, chunk, key);
    }
}

/// The four lanes of a state row in a flush (`gdn_row_config`): lanes l, l + 8,
/// l + 16 and l + 24, chains 0 to 3; their dot products meet as the block executor's
/// `row_sum` pairs them, (0 + 1) + (2 + 3), so that `fold_row` and `row_dot` give the CPU's
/// bits (the order is the checkpoint's definition, which CUB's WarpReduce does not promise).
struct warp_row_lanes {
  static constexpr int row_lanes = replayssm::detail::gdn_dot_chains;
  __device__ float row_sum(float x) const {
    x += __shfl_xor_sync(0xffffffffu, x, 8);
    return x + __shfl_xor_sync(0xffffffffu, x, 16);
  }
};

/// A stage of whole rows in shared memory as a view for `gdn_row_part::load`: chunk
/// `gdn_state_chunk(row, unit, stage_rows)` of the stage's rows.
template <class Format>
struct staged_rows {
  static constexpr int chunk_elems = Format::chunk_elems;
  const uint8_t* data;
  const uint8_t* scales;
  __device__ void load(int32_t chunk, float (&out)[chunk_elems]) const {
    Format::decode(data + chunk * Format::data_bytes_per_chunk, scales + chunk * Format::scale_bytes_per_chunk, out);
  }
};

/// The L2 normalizations of the first `tokens` tokens' k and q into shared memory (token
/// t's k at keys + t K, its q scaled at queries + t K), with the bits of `l2_normalize`:
/// lane c (k) and lane 8 + c (q) sum chunk c, every lane adds a vector's chunk sums in chunk
/// order. A token's k and q load together: two memory round trips per token, where a vector
/// at a time took two each, and the replay step was slower. (All tokens' loads at once made
/// a verify read of four drafts spill.)
template <class Act>
__device__ void warp_normalize_tokens(const gdn_head_inputs<Act>& in, int32_t tokens, int32_t K, float* keys,
                                      float* queries, int lane) {
  constexpr int max_chunks = gdn_max_key_dim / l2_normalize_chunk, per_lane = gdn_max_key_dim / 32;
  const int chunks = l2_normalize_scratch(K);
  const float query_scale = gated_deltanet::query_scale(K);
  for (int32_t t = 0; t < tokens; ++t) {
    const Act* vectors[2] = {in.k.at(t), in.q.at(t)};
    const int c = lane % max_chunks;
    const Act* own = lane < max_chunks ? vectors[0] : vectors[1];
    const float chunk_sum = lane < 2 * max_chunks && c < chunks ? l2_chunk_sum(own, K, c) : 0.0f;
    float x[2][per_lane];
#pragma unroll
    for (int v = 0; v < 2; ++v)
#pragma unroll
      for (int r = 0; r < per_lane; ++r) x[v][r] = lane + 32 * r < K ? to_float(vectors[v][lane + 32 * r]) : 0.0f;
#pragma unroll
    for (int v = 0; v < 2; ++v) {
      float sum = 0.0f;
#pragma unroll
      for (int k = 0; k < max_chunks; ++k) {
        if (k >= chunks) break;
        sum = math::add(sum, __shfl_sync(0xffffffffu, chunk_sum, v * max_chunks + k));
      }
      const float norm = l2_norm(sum);
      float* out = (v == 0 ? keys : queries) + t * K;
#pragma unroll
      for (int r = 0; r < per_lane; ++r)
        if (lane + 32 * r < K) out[lane + 32 * r] = l2_normalized(x[v][r], norm, v == 0 ? 1.0f : query_scale);
    }
  }
}

/// The window's coefficients, with the bits of `stage_gdn_coefficients`: for token t at
/// entry L + t < W, key_coef[e] = exp(decay e -> L + t) (k_e . k_t) for e < L + t and
/// query_coef[e] = exp(decay e -> L + t) (k_e . q_t) for e <= L + t. Four lanes form each dot
/// (a chain each): lane `lane` takes entries lane / 4, lane / 4 + 8, ... The window's keys
/// load into registers at construction, all before any is used, so that they arrive with the
/// tokens' own inputs.
template <int W>
struct window_keys {
  static constexpr int groups = 32 / gdn_dot_chains, rounds = (W + groups - 1) / groups;
  static constexpr int columns = gdn_max_key_dim / gdn_dot_chains;  ///< a chain's columns at most
  float k[rounds][columns];

  /// Loads the chain's columns of the window's keys (entries < L; others are not read).
  template <class Policy, class Act>
  __device__ window_keys(const gdn_head_state<Policy, Act>& st, const step_plan& plan, int32_t K, int lane) {
    const int chain = lane % gdn_dot_chains;
#pragma unroll
    for (int r = 0; r < rounds; ++r) {
      const int32_t e = lane / gdn_dot_chains + r * groups;
      const float* k_e = st.window_k + plan.ring_slot(e < plan.length ? e : 0) * st.window_k_stride;
#pragma unroll
      for (int i = 0; i < columns; ++i) {
        const int32_t col = (chain + gdn_dot_chains * (i / gdn_column_block)) * gdn_column_block + i % gdn_column_block;
        k[r][i] = e < plan.length && col < K ? k_e[col] : 0.0f;
      }
    }
  }

  /// Forms the coefficients of token t (entry L + t) from the normalized keys and queries of
  /// the step's tokens (`keys`, `queries`: K floats each) and the log decays in shared
  /// memory: key_coef[e] for e < L + t, query_coef[e] for e <= L + t (entries from L on are
  /// the step's tokens).
  __device__ void coefficients(const step_plan& plan, int32_t K, int32_t t, const float* keys, const float* queries,
                               const float* log_decay, float* key_coef, float* query_coef, int lane) const {
    const int32_t L = plan.length, last = L + t, chain = lane % gdn_dot_chains;
    const float* key = keys + t * K;
    const float* query = queries + t * K;
#pragma unroll
    for (int r = 0; r < rounds; ++r) {
      const int32_t e = lane / gdn_dot_chains + r * groups;
      if (e > last) break;  // the same for a group's four lanes
      const float* token_key = keys + (e - L) * K;  // entry e >= L: the step's token e - L
      float dk = 0.0f, dq = 0.0f;
#pragma unroll
      for (int i = 0; i < columns; ++i) {
        const int32_t col = (chain + gdn_dot_chains * (i / gdn_column_block)) * gdn_column_block + i % gdn_column_block;
        if (col >= K) break;
        const float k_e = e < L ? k[r][i] : token_key[col];
        dk = math::fma(k_e, key[col], dk);
        dq = math::fma(k_e, query[col], dq);
      }
      // The chains meet as the block executor's `row_sum` pairs them: (0 + 1) + (2 + 3).
      const unsigned group_mask = 0xfu << (lane & ~3);
      dk += __shfl_xor_sync(group_mask, dk, 1);
      dk += __shfl_xor_sync(group_mask, dk, 2);
      dq += __shfl_xor_sync(group_mask, dq, 1);
      dq += __shfl_xor_sync(group_mask, dq, 2);
      if (chain == 0) {
        const float decay = math::exp(suffix_log_decay(log_decay, e, last + 1));
        if (e < last) key_coef[e] = math::mul(decay, dk);
        query_coef[e] = math::mul(decay, dq);
      }
    }
  }
};

/// The dot product of two K-vectors in shared memory over the warp (lane c sums columns c,
/// c + 32, ..., then the lanes meet in a butterfly), every lane receiving it: an open token's
/// own coefficient k_t . q_t, which only its output uses.
__device__ inline float warp_dot(const float* a, const float* b, int32_t K, int lane) {
  float sum = 0.0f;
  for (int32_t c = lane; c < K; c += 32) sum = math::fma(a[c], b[c], sum);
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  return sum;
}

/// Appends a token's normalized key (on the key head's appending value head), log decay and,
/// in the `raw_inputs` mode, write strength at ring slot `ring` of the window.
template <class Policy, class Act>
__device__ void append_token_scalars(const gdn_head_state<Policy, Act>& st, int32_t ring, int32_t K, const float* key,
                                     float log_decay, float beta, int lane) {
  if (st.appends_key)
    for (int32_t c = lane; c < K; c += 32) st.window_k[ring * st.window_k_stride + c] = key[c];
  if (lane == 0) {
    st.window_g[ring * st.window_g_stride] = log_decay;
    if constexpr (keeps_raw_inputs<Policy>) st.window_beta[ring * st.window_beta_stride] = beta;
  }
}

/// The token a decode step's flush leaves open (`gdn_warp_flush`), from the pass's dot
/// products of the lane's rows of the new state with its k_t and q_t (`key`, `query`): its u
/// with the head step's bits (`open_tokens_row`: the state's decay to the token times the
/// row's dot product), its output (the token's own term k_t . q_t summed in the warp's order),
/// and the token appended as the window's entry L.
template <int Rows, class Policy, class Act>
__device__ void open_flushed_token(const gdn_head_inputs<Act>& in, const gdn_head_state<Policy, Act>& st,
                                   const step_plan& plan, int32_t K, const float* key, const float* query,
                                   const float* log_decay, float beta, const float (&v)[Rows],
                                   const row_chains<Rows>& by_key, const row_chains<Rows>& by_query, int lane) {
  const int32_t L = plan.length, ring = plan.ring_slot(L), blocks = K / gdn_column_block;
  const float state_decay = math::exp(suffix_log_decay(log_decay, L - 1, L + 1));
  const float key_query = warp_dot(key, query, K, lane);
#pragma unroll
  for (int i = 0; i < Rows; ++i) {
    const int32_t p = lane + 32 * i;
    const float u = gated_deltanet::corrected_value(beta, v[i], math::mul(state_decay, by_key.total(i, blocks)));
    in.o.at(0)[p] = from_float<Act>(math::fma(key_query, u, math::mul(state_decay, by_query.total(i, blocks))));
    st.window_u[ring * st.window_u_stride + p] = u;
  }
  append_token_scalars(st, ring, K, key, log_decay[L], beta, lane);
}

}  // namespace detail

/// A read step of one value head by one warp, from `stream` (`start_gdn_stream<warp_role::
/// read>`; `smem` the warp's `gdn_warp_layout<Policy, warp_role::read, Tokens>` bytes): the outputs and u of the
/// step's tokens from the read copy and the window, the tokens appended (k by the key head's
/// appending value head). A decode step has one token; a verify step up to `Tokens` drafts,
/// each seeing the drafts before it: the one pass over the state queries it with every
/// token's k_t and q_t. The entries a verify step's flush folds (`gdn_warp_flush<
/// step_kind::verify>` or `gdn_warp_row_flush`, before this step) are already in the state it
/// reads. A decode `plan` must not write the checkpoint. The cursor is the caller's to advance.
template <int Tokens = 1, class Stream, class Policy, class Act>
__device__ void gdn_warp_read(Stream& stream, const gdn_head_inputs<Act>& in, const gdn_head_state<Policy, Act>& st,
                              gdn_layer_shape s, const step_plan& folding_plan, uint8_t* smem, int lane) {
  // The entries a verify step's flush folded first are in the state read: the window starts
  // after them.
  const step_plan plan = detail::unfolded(folding_plan);
  const int32_t L = plan.length;
  using config = gdn_warp_config<Policy>;
  using format = typename config::format;
  using layout_t = gdn_warp_layout<Policy, warp_role::read, Tokens>;
  constexpr int lane_rows = config::rows_per_lane, stage_units = config::units_per_stage,
                chunk_elems = format::chunk_elems;
  constexpr int W = Policy::window, V = config::value_dim, coef_pitch = layout_t::coef_pitch;
  const int32_t K = s.key_dim;
  const int32_t T = Tokens == 1 ? 1 : (plan.tokens < Tokens ? plan.tokens : Tokens);  // the planner skips more
  const auto l = layout_t::make(s);
  auto floats = [&](uint32_t offset) { return reinterpret_cast<float*>(smem + offset); };

  // The window's u rows on their way to L2 while the tokens' inputs are read.
  constexpr int lines_per_row = V * 4 / 128;
  for (int32_t i = lane; i < L * lines_per_row; i += 32)
    prefetch_l2(st.window_u + plan.ring_slot(i / lines_per_row) * st.window_u_stride + i % lines_per_row * 32);
  const detail::window_keys<W> window_keys(st, plan, K, lane);
  float* key = floats(l.key);
  float* query = floats(l.query);
  float* log_decay = floats(l.log_decay);
  float* beta = floats(l.beta);
  detail::warp_normalize_tokens(in, T, K, key, query, lane);
  for (int32_t e = lane; e < L + T; e += 32) {
    if (e < L) {
      log_decay[e] = st.window_g[plan.ring_slot(e) * st.window_g_stride];
    } else {
      log_decay[e] = gated_deltanet::log_decay(to_float(in.a.at(e - L)[0]), in.A_log, in.dt_bias);
      beta[e - L] = gated_deltanet::write_strength(to_float(in.b.at(e - L)[0]));
    }
  }
  __syncwarp();
  // The coefficients before the stream: their inputs arrived with the tokens'.
  float* key_coef = floats(l.key_coef);
  float* query_coef = floats(l.query_coef);
  for (int32_t t = 0; t < T; ++t)
    window_keys.coefficients(plan, K, t, key, query, log_decay, key_coef + t * coef_pitch, query_coef + t * coef_pitch,
                             lane);

  // The pass over the state: each lane's rows with every token's k_t (in the chains of the
  // head step's order: u_t enters the window and a later flush folds it into the
  // checkpoint) and q_t (the output: one sum, its own order).
  detail::row_chains<lane_rows> by_key[Tokens];
  float by_query[Tokens][lane_rows] = {};
  stream.for_each_stage([&](int stage, const uint8_t* data, const uint8_t* scales, int32_t) {
    const int32_t column0 = stage * config::stage_columns;
#pragma unroll
    for (int unit = 0; unit < stage_units; ++unit) {
      const int32_t column = column0 + unit * chunk_elems;
      float x[lane_rows][chunk_elems];
#pragma unroll
      for (int i = 0; i < lane_rows; ++i) {
        const int chunk = unit * V + lane + 32 * i;
        decode_operands<format>(data + chunk * format::data_bytes_per_chunk,
                                scales + chunk * format::scale_bytes_per_chunk, x[i]);
      }
#pragma unroll
      for (int t = 0; t < Tokens; ++t) {
        if (t >= T) break;  // the same for every lane
        float k[chunk_elems], q[chunk_elems];
        load_scratch(key + t * K + column, k);
        load_scratch(query + t * K + column, q);
#pragma unroll
        for (int i = 0; i < lane_rows; ++i)
#pragma unroll
          for (int e = 0; e < chunk_elems; ++e) {
            by_key[t].acc[i][0] = math::fma(x[i][e], k[e], by_key[t].acc[i][0]);
            by_query[t][i] = math::fma(x[i][e], q[e], by_query[t][i]);
          }
      }
      // A unit that closes a column block turns the chains.
      if ((column + chunk_elems) % gdn_column_block == 0)
#pragma unroll
        for (int t = 0; t < Tokens; ++t) by_key[t].turn();
    }
  });

  // The window's terms, after the stream, in the head step's order (`gdn_rows`).
  const int blocks = K / gdn_column_block;
  float by_key_total[Tokens][lane_rows];
#pragma unroll
  for (int t = 0; t < Tokens; ++t)
#pragma unroll
    for (int i = 0; i < lane_rows; ++i) by_key_total[t][i] = by_key[t].total(i, blocks);
  // Every row's u values and the tokens' v load before any is used: one L2 round trip.
  float window_u[lane_rows][W], v[Tokens][lane_rows];
#pragma unroll
  for (int e = 0; e < W; ++e)
#pragma unroll
    for (int i = 0; i < lane_rows; ++i)
      window_u[i][e] = e < L ? st.window_u[plan.ring_slot(e) * st.window_u_stride + lane + 32 * i] : 0.0f;
#pragma unroll
  for (int t = 0; t < Tokens; ++t)
#pragma unroll
    for (int i = 0; i < lane_rows; ++i) v[t][i] = t < T ? to_float(in.v.at(t)[lane + 32 * i]) : 0.0f;
  float state_decay[Tokens];
#pragma unroll
  for (int t = 0; t < Tokens; ++t) state_decay[t] = math::exp(suffix_log_decay(log_decay, -1, L + t + 1));
#pragma unroll
  for (int i = 0; i < lane_rows; ++i) {
    const int32_t p = lane + 32 * i;
    float u[Tokens];
#pragma unroll
    for (int t = 0; t < Tokens; ++t) {
      if (t >= T) break;
      const float* kc = key_coef + t * coef_pitch;
      const float* qc = query_coef + t * coef_pitch;
      float key_term = math::mul(state_decay[t], by_key_total[t][i]);
      float query_term = math::mul(state_decay[t], by_query[t][i]);
#pragma unroll
      for (int e = 0; e < W; ++e) {
        if (e >= L) break;
        key_term = math::fma(kc[e], window_u[i][e], key_term);
        query_term = math::fma(qc[e], window_u[i][e], query_term);
      }
#pragma unroll
      for (int j = 0; j < t; ++j) key_term = math::fma(kc[L + j], u[j], key_term);
      u[t] = gated_deltanet::corrected_value(beta[t], v[t][i], key_term);
#pragma unroll
      for (int j = 0; j <= t; ++j) query_term = math::fma(qc[L + j], u[j], query_term);
      const int32_t ring = plan.ring_slot(L + t);
      in.o.at(t)[p] = from_float<Act>(query_term);
      st.window_u[ring * st.window_u_stride + p] = u[t];
      if constexpr (keeps_raw_inputs<Policy>) st.window_v[ring * st.window_v_stride + p] = in.v.at(t)[p];
    }
  }
  for (int32_t t = 0; t < T; ++t)
    detail::append_token_scalars(st, plan.ring_slot(L + t), K, key + t * K, log_decay[L + t], beta[t], lane);
}

/// A flush of one value head by one warp in column stages (`gdn_warp_flush_path`), from
/// `stream` (`start_gdn_stream<warp_role::flush, Engine>`; `smem` the warp's
/// `gdn_warp_layout<Policy, warp_role::flush>` bytes), in one pass over the checkpoint: each
/// stage folds the window's committed entries (the head step's arithmetic per element:
/// `decayed_checkpoint`, then `fold_entry` per entry, so that the checkpoint has the CPU's
/// bits) and is stored (a separate read copy from it, rounded to nearest as the head step
/// writes it). A decode step's token (`Kind = step_kind::decode`) is not folded
/// (`gdn_flush_folds_token`): the pass also queries the new state, unrounded, with its k_t
/// (in the chains of the head step's order, so that its u, which enters the window, has the
/// CPU's bits) and q_t, and the token opens the next window, its output written. A verify
/// step's flush writes no output: the verify read that follows reads the new state. The
/// cursor is the caller's to advance.
template <step_kind Kind = step_kind::decode, class Stream, class Policy, class Act>
__device__ void gdn_warp_flush(Stream& stream, const gdn_head_inputs<Act>& in, const gdn_head_state<Policy, Act>& st,
                               gdn_layer_shape s, const step_plan& plan, uint8_t* smem, int lane) {
  static_assert(gdn_warp_flush_path<Policy> == gdn_flush_path::column_stages,
                "gdn_warp_flush: this policy's flushes take another path");
  using config = gdn_flush_config<Policy>;
  using format = typename config::format;
  constexpr bool opens_token = Kind == step_kind::decode;
  constexpr int lane_rows = config::rows_per_lane, stage_units = config::units_per_stage,
                chunk_elems = format::chunk_elems;
  // The window's entries: a decode step's token is the last of W, a verify step's committed
  // entries may fill the window.
  constexpr int W = Policy::window, V = config::value_dim, entries = opens_token ? W - 1 : W;
  const int32_t K = s.key_dim, L = plan.length;  // the window's entries; a decode step's token is entry L
  const auto l = gdn_warp_layout<Policy, warp_role::flush>::make(s);
  float* keys = reinterpret_cast<float*>(smem + l.key);
  float* query = reinterpret_cast<float*>(smem + l.query);
  float* log_decay = reinterpret_cast<float*>(smem + l.log_decay);
  float* fold_coef = reinterpret_cast<float*>(smem + l.fold_coef);

  // The window's keys into shared memory, its u values of the lane's rows into registers.
  for (int32_t j = 0; j < L; ++j)
    lanes_copy(keys + j * K, st.window_k + plan.ring_slot(j) * st.window_k_stride, uint32_t(K) * 4, lane);
  lanes_commit();
  float u[lane_rows][entries];
#pragma unroll
  for (int j = 0; j < entries; ++j)
#pragma unroll
    for (int i = 0; i < lane_rows; ++i)
      u[i][j] = j < L ? st.window_u[plan.ring_slot(j) * st.window_u_stride + lane + 32 * i] : 0.0f;
  float v[lane_rows] = {}, beta = 0.0f;
  float* token_key = keys + L * K;
  if constexpr (opens_token) {
#pragma unroll
    for (int i = 0; i < lane_rows; ++i) v[i] = to_float(in.v.at(0)[lane + 32 * i]);
    beta = gated_deltanet::write_strength(to_float(in.b.at(0)[0]));
    if (lane == 0) log_decay[L] = gated_deltanet::log_decay(to_float(in.a.at(0)[0]), in.A_log, in.dt_bias);
    detail::warp_normalize_tokens(in, 1, K, token_key, query, lane);
  }
  for (int32_t j = lane; j < L; j += 32) log_decay[j] = st.window_g[plan.ring_slot(j) * st.window_g_stride];
  lanes_wait<0>();
  __syncwarp();
  // The closed form's coefficients, as the head step stages them: entry j's at j < L, the
  // checkpoint's decay at L; each lane's u weighted by them once.
  for (int32_t j = lane; j <= L; j += 32) fold_coef[j] = fold_decay(log_decay, j, L);
  __syncwarp();
#pragma unroll
  for (int j = 0; j < entries; ++j)
#pragma unroll
    for (int i = 0; i < lane_rows; ++i)
      if (j < L) u[i][j] = weighted_value(fold_coef[j], u[i][j]);
  const float window_decay = fold_coef[L];

  random_stream_key key = st.key;
  key.flush_index = plan.flush_count;
  detail::row_chains<lane_rows> by_key, by_query;
  // Each stage is copied to registers and released before the fold, so that the next copy
  // is in flight during it.
  auto load = [&](int, const uint8_t* data, const uint8_t* scales, int32_t) {
    detail::gdn_stage_tile<stage_units, lane_rows, chunk_elems> t;
#pragma unroll
    for (int unit = 0; unit < stage_units; ++unit)
#pragma unroll
      for (int i = 0; i < lane_rows; ++i) {
        const int chunk = unit * V + lane + 32 * i;
        format::decode(data + chunk * format::data_bytes_per_chunk, scales + chunk * format::scale_bytes_per_chunk,
                       t.v[unit][i]);
      }
    return t;
  };
  auto fold = [&](int stage, detail::gdn_stage_tile<stage_units, lane_rows, chunk_elems>& t) {
    const int32_t column0 = stage * config::stage_columns;
#pragma unroll
    for (int unit = 0; unit < stage_units; ++unit) {
      const int32_t column = column0 + unit * chunk_elems;
      // The window's entries in closed form: S = exp(G) S, then S += (a_j u_j) k_j in order.
      if (L > 0) {  // the same for every lane
#pragma unroll
        for (int i = 0; i < lane_rows; ++i)
#pragma unroll
          for (int e = 0; e < chunk_elems; ++e) t.v[unit][i][e] = decayed_checkpoint(window_decay, t.v[unit][i][e]);
      }
#pragma unroll
      for (int j = 0; j < entries; ++j) {
        if (j >= L) break;  // the same for every lane
        float k[chunk_elems];
        load_scratch(keys + j * K + column, k);
#pragma unroll
        for (int i = 0; i < lane_rows; ++i)
#pragma unroll
          for (int e = 0; e < chunk_elems; ++e) t.v[unit][i][e] = fold_entry(t.v[unit][i][e], u[i][j], k[e]);
      }
      if constexpr (opens_token) {  // the new state queried with the token's k_t and q_t
        float k[chunk_elems], q[chunk_elems];
        load_scratch(token_key + column, k);
        load_scratch(query + column, q);
#pragma unroll
        for (int i = 0; i < lane_rows; ++i)
#pragma unroll
          for (int e = 0; e < chunk_elems; ++e) {
            by_key.acc[i][0] = math::fma(t.v[unit][i][e], k[e], by_key.acc[i][0]);
            by_query.acc[i][0] = math::fma(t.v[unit][i][e], q[e], by_query.acc[i][0]);
          }
        if ((column + chunk_elems) % gdn_column_block == 0) by_key.turn(), by_query.turn();
      }
#pragma unroll
      for (int i = 0; i < lane_rows; ++i)
        st.checkpoint.template store<typename Policy::rounding>(column / chunk_elems * V + lane + 32 * i, t.v[unit][i],
                                                                key);
    }
    if constexpr (!Policy::shared_state) detail::store_read_chunks<Policy>(st.read_copy, t, column0, lane, key);
  };
  stream.for_each_stage(load, fold);
  if constexpr (opens_token) detail::open_flushed_token(in, st, plan, K, token_key, query, log_decay, beta, v, by_key,
                                                        by_query, lane);
}

/// A flush of one value head by one warp on whole rows (`gdn_warp_flush_path`: the token
/// fills the window; a write-back step is the flush of a window of one), from `stream`
/// (`start_gdn_stream<warp_role::flush>`: the checkpoint in whole rows; `smem` the warp's
/// `gdn_warp_layout<Policy, warp_role::flush>` bytes). The window's entries and the token are staged in
/// the head step's scratch layout (the window's keys and u by asynchronous copies, the
/// token's q and k normalized with the bits of `l2_normalize`), then each row of each stage
/// runs `detail::flush_row` and, for a replay decode step's token (`Kind = step_kind::decode`,
/// `gdn_flush_folds_token`), `detail::open_tokens_row`: the head step's own code, so that
/// the checkpoint (and read copy) and the token's u have the CPU's bits. A verify step's
/// flush folds the committed entries only. `span` is the rows the stream holds (warps that
/// split a head each flush a part, `gdn_row_config::part_rows`; the first part appends the
/// open token). The cursor is the caller's to advance, after every part of the head is done.
template <step_kind Kind = step_kind::decode, class Stream, class Policy, class Act>
__device__ void gdn_warp_row_flush(Stream& stream, const gdn_head_inputs<Act>& in,
                                   const gdn_head_state<Policy, Act>& st, gdn_layer_shape s, const step_plan& plan,
                                   uint8_t* smem, int lane, row_range span = gdn_row_flush_config<Policy>::all_rows) {
  static_assert(gdn_row_flushes<Policy>, "gdn_warp_row_flush: this policy's flushes take another path");
  using config = gdn_row_flush_config<Policy>;
  // The shape as constants (`gdn_row_config::supported`): the row part's column checks
  // against K fold away.
  gdn_layer_shape shape = s;
  shape.key_dim = config::key_dim, shape.value_dim = config::value_dim;
  constexpr int32_t K = config::key_dim, V = config::value_dim;
  const int32_t L = plan.length;  // the window's entries; the token is entry L
  const auto l = gdn_scratch_layout::make(shape, Policy::window, 1);
  // 16-byte aligned, as are the layout's regions: a lane's 16 columns of a key load as vectors.
  auto* scratch = static_cast<float*>(
      __builtin_assume_aligned(smem + gdn_warp_layout<Policy, warp_role::flush>::make(shape).scratch, 16));

  // The window's keys and u on their way while the token's inputs are read.
  for (int32_t j = 0; j < L; ++j) {
    const int32_t slot = plan.ring_slot(j);
    lanes_copy(scratch + l.keys + j * K, st.window_k + slot * st.window_k_stride, uint32_t(K) * 4, lane);
    lanes_copy(scratch + l.window_u + j * V, st.window_u + slot * st.window_u_stride, uint32_t(V) * 4, lane);
  }
  lanes_commit();
  detail::warp_normalize_tokens(in, 1, K, scratch + l.keys + L * K, scratch + l.queries, lane);
  for (int32_t j = lane; j <= L; j += 32) replayssm::detail::stage_gdn_entry_scalars(in, st, plan, l, scratch, j);
  lanes_wait<0>();
  __syncwarp();
  if (L > 0)  // the window's entries fold in closed form (`stage_gdn_coefficients`)
    for (int32_t j = lane; j <= L; j += 32) scratch[l.fold_coef + j] = fold_decay(scratch + l.log_decay, j, L);
  // A token left open: the state's decay to it and its own coefficient k_t . q_t (the
  // output's only; summed in the warp's order), as `stage_gdn_coefficients` stages them.
  constexpr bool opens_token = Kind == step_kind::decode && !gdn_flush_folds_token<Policy>;
  if constexpr (opens_token) {
    const float key_query = detail::warp_dot(scratch + l.keys + L * K, scratch + l.queries, K, lane);
    if (lane == 0) {
      scratch[l.state_decay] = math::exp(suffix_log_decay(scratch + l.log_decay, L - 1, L + 1));
      scratch[l.query_coef + L] = key_query;
    }
  }
  __syncwarp();

  random_stream_key key = st.key;
  key.flush_index = plan.flush_count;
  const int chain = lane / config::lane_rows, row = lane % config::lane_rows;
  struct rows_t {
    replayssm::detail::gdn_row_part<replayssm::detail::gdn_dot_chains> part[config::rows_per_lane];
  };
  // Each stage's rows are copied to registers and the stage released before the fold.
  auto load = [&](int, const uint8_t* data, const uint8_t* scales, int32_t) {
    rows_t rows;
#pragma unroll
    for (int i = 0; i < config::rows_per_lane; ++i)
      rows.part[i].load(detail::staged_rows<typename config::format>{data, scales}, row + i * config::lane_rows,
                        config::stage_rows, K, chain);
    return rows;
  };
  auto fold = [&](int stage, rows_t& rows) {
#pragma unroll
    for (int i = 0; i < config::rows_per_lane; ++i) {
      const int32_t p = span.first + stage * config::stage_rows + row + i * config::lane_rows;
      replayssm::detail::flush_row(detail::warp_row_lanes{}, rows.part[i], in, st, shape, plan, l, scratch, p, chain,
                                   key);
      if constexpr (opens_token)
        replayssm::detail::open_tokens_row<1>(detail::warp_row_lanes{}, rows.part[i], in, st, shape, plan, l, scratch,
                                              p, chain);
    }
  };
  stream.for_each_stage(load, fold);
  if constexpr (opens_token) {
    if (span.first != 0) return;
    const int32_t ring = plan.ring_slot(L);
    if constexpr (keeps_raw_inputs<Policy>)
      for (int32_t p = lane; p < V; p += 32) st.window_v[ring * st.window_v_stride + p] = in.v.at(0)[p];
    detail::append_token_scalars(st, ring, K, scratch + l.keys + L * K, scratch[l.log_decay + L], scratch[l.beta + L],
                                 lane);
  }
}

/// One warp's Gated DeltaNet step on one value head (or, for a flush on whole rows, a part
/// of its rows), a warp primitive in the manner of `mamba2_warp_step`: constructed on the
/// warp's temp storage with the head's state, it starts streaming that state at once, before
/// any other load of the step; `step` runs the step of the plan, whose role must be `Role`
/// (a read: `gdn_warp_read`; a flush: `gdn_warp_flush` or `gdn_warp_row_flush`, as
/// `gdn_warp_flush_path` says), its outputs stored to `in.y`; `advance_cursor` records the
/// step once every warp of the head has run it. Every lane of the warp calls each. With
/// `Tokens` > 1 a read is a speculative verify step of up to `Tokens` drafts, and a verify
/// step's flush (`step<step_kind::verify>`) folds the committed entries only, leaving the
/// drafts and the cursor to the read that follows. `Engine` copies the state with the bulk
/// copy engine (sm_90 on; the state's rows 16-byte aligned) or with the lanes (anywhere).
///
/// The temp storage is `temp_storage_bytes(shape)` bytes of shared memory per warp,
/// 128-byte aligned. A read step of one warp per value head (this code is compiled by
/// test/gpu/doc_snippets.cu; `v` the head's `gdn_head_views`, `storage` the warp's temp
/// storage):
///
///     warp::gdn_warp_step<Policy, Act, warp::warp_role::read> step(storage, v.state, shape);
///     const step_plan plan = plan_step<step_kind::decode>(v.state, 1);  // after the stream starts
///     step.step(v.in, plan);
///     step.advance_cursor(plan);  // the warp is the head's only one
template <class Policy, class Act, warp_role Role, int Tokens = 1, copy_engine Engine = copy_engine::bulk>
class gdn_warp_step {
  static constexpr bool flushes = Role == warp_role::flush;

 public:
  using layout = gdn_warp_layout<Policy, Role, Tokens>;
  using stream_type = typename gdn_warp_layout<Policy, Role>::config::template stream<Engine>;
  /// Whether several warps may share a head (`part_rows`): flushes on whole rows.
  static constexpr bool splits_rows = flushes && gdn_row_flushes<Policy>;

  /// Bytes of shared memory each warp's temp storage takes for a layer of shape `s`.
  __host__ __device__ static uint32_t temp_storage_bytes(gdn_layer_shape s) { return layout::make(s).bytes; }
  /// Part `part` of `parts` (a power of two up to 8) of a head's rows, for a flush on whole
  /// rows (`splits_rows`); every row otherwise.
  __host__ __device__ static constexpr row_range part_rows(int32_t parts, int32_t part) {
    return gdn_row_flush_config<Policy>::part_rows(splits_rows ? parts : 1, splits_rows ? part : 0);
  }

  /// Starts streaming the head's state (its read copy for a read, its checkpoint for a
  /// flush; `rows` of it for a flush on whole rows) into `temp_storage`. `state` must
  /// outlive the step.
  __device__ gdn_warp_step(void* temp_storage, const gdn_head_state<Policy, Act>& state, gdn_layer_shape shape,
                           row_range rows = gdn_row_flush_config<Policy>::all_rows)
      : storage_(static_cast<uint8_t*>(temp_storage)),
        state_(state),
        shape_(shape),
        rows_(rows),
        lane_(int(threadIdx.x % 32)),
        stream_(start_gdn_stream<Role, Engine>(state, shape, storage_, lane_, rows)) {}

  /// The step of `plan` (of `Kind`), its outputs stored to `in.y`. The cursor is not moved.
  template <step_kind Kind = step_kind::decode>
  __device__ void step(const gdn_head_inputs<Act>& in, const step_plan& plan) {
    static_assert(Kind == step_kind::verify || Tokens == 1, "gdn_warp_step: a decode step takes one token");
    if constexpr (splits_rows)
      gdn_warp_row_flush<Kind>(stream_, in, state_, shape_, plan, storage_, lane_, rows_);
    else if constexpr (flushes)
      gdn_warp_flush<Kind>(stream_, in, state_, shape_, plan, storage_, lane_);
    else
      gdn_warp_read<Tokens>(stream_, in, state_, shape_, plan, storage_, lane_);
  }

  /// Gives the step up: waits for the stream's copies, so that none lands in shared memory
  /// the warp no longer owns.
  __device__ void drain() { stream_.drain(); }

  /// Records the step of `plan` in the head's cursor (lane 0 writes it): once every warp of
  /// the head has run `step`.
  __device__ void advance_cursor(const step_plan& plan, step_kind kind = step_kind::decode) const {
    if (lane_ == 0 && state_.cursor != nullptr) *state_.cursor = next_cursor(plan, kind);
  }

 private:
  uint8_t* storage_;
  const gdn_head_state<Policy, Act>& state_;
  gdn_layer_shape shape_;
  row_range rows_;
  int lane_;
  stream_type stream_;
};

}  // namespace warp
}  // namespace replayssm
