// SPDX-License-Identifier: Apache-2.0
/// \file state_stream.cuh
/// One warp streams one head's stored state through a ring of shared-memory stages, in
/// the CUB manner: the caller provides `TempStorage` (in shared memory, one per warp) and
/// consumes each stage as it lands. The state moves by the copy engine (`cp.async.bulk` on
/// an mbarrier per stage, sm_90+) or by the lanes (`cp.async`), so that no register holds
/// it in flight; a stage is refilled as soon as the warp has read it. Start the stream
/// before any other load of the step: the stages then fill while the rest is fetched
/// (docs/kernels.md).
///
/// Lanes see a stage in units of whole chunks through `unit_lanes`.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "replayssm/replay/state_view.hpp"
#include "replayssm/warp/async_copy.cuh"

namespace replayssm {
namespace warp {

/// Rows [first, first + count) of a head: what one warp steps.
struct row_range {
  int32_t first, count;
};

/// Which of a group's summed values a lane holds after `reduce_scatter`.
struct value_share {
  int first, count;  ///< values first .. first + count - 1 (of the N summed), in v[0 .. count)
  bool owner;        ///< one lane per share: the one that writes it

  /// On the owner lane, calls `f(index, value)` for each summed value it holds (index among
  /// the N); `v` as `reduce_scatter` left it. The count is the same on every lane, so the
  /// loop stops there (a verify read's lane holds 1 of its 32 row sums per stage).
  template <int N, class F>
  __device__ void for_each_owned(const float (&v)[N], F&& f) const {
    if (!owner) return;
#pragma unroll
    for (int k = 0; k < N; ++k) {
      if (k >= count) break;
      f(first + k, v[k]);
    }
  }
};

namespace detail {

/// The halving rounds of `reduce_scatter` from `Count` values: the lane with the offset's bit
/// set keeps the upper half of the values, its partner the lower half, each adding what the
/// other sends (with `Sums`; without, the rounds only say which values the lane keeps); then
/// the next round. One function per round, so that every index into `v` is a constant (as
/// one loop whose trip count the run-time group decides, `v` went to local memory: a verify
/// step's 32 row sums per stage, through L2, at a fifth of the bandwidth).
template <int Count, bool Sums, int N>
__device__ void halve(float (&v)[N], value_share& share, int& offset, int position) {
  if constexpr (Count % 2 == 0 && Count > 0) {
    if (offset < 1) return;
    const bool upper = (position & offset) != 0;
    if constexpr (Sums) {
#pragma unroll
      for (int i = 0; i < Count / 2; ++i) {
        const float send = upper ? v[i] : v[i + Count / 2];
        const float keep = upper ? v[i + Count / 2] : v[i];
        v[i] = keep + __shfl_xor_sync(0xffffffffu, send, offset);
      }
    }
    share.first += upper ? Count / 2 : 0;
    share.count = Count / 2;
    offset /= 2;
    halve<Count / 2, Sums>(v, share, offset, position);
  }
}

/// Whether the lane at `position` writes the values it holds once the halving rounds stop at
/// `offset`. Values left whole on a lane (an odd count, or fewer values than lanes): lanes
/// that differ in the remaining bits hold the same sums; the one with those bits clear writes.
__device__ inline bool owns_share(int offset, int position) {
  return offset < 1 || (position & (2 * offset - 1)) == 0;
}

}  // namespace detail

/// Which of N values summed over a group of `group` lanes `reduce_scatter` leaves the lane
/// at `position`, known before the sums are: what is combined with them then loads beside
/// the shuffles.
template <int N>
__device__ value_share scatter_share(int group, int position) {
  value_share share{0, N, true};
  int offset = group / 2;
  float unsummed[N];  // not read: the rounds only count
  detail::halve<N, false>(unsummed, share, offset, position);
  share.owner = detail::owns_share(offset, position);
  return share;
}

/// Sums each of the N values `v` over a group of `group` consecutive lanes (a power of two
/// up to 32; `position` the lane's place in it), spread over the group's lanes as
/// `scatter_share` says: a
/// reduce-scatter, which sums 8 values over 32 lanes in 9 shuffles where every lane summing
/// every value takes 40 (CUB's warp reductions leave each sum on one lane, and have no
/// reduce-scatter). Every lane of the warp calls it.
template <int N>
__device__ value_share reduce_scatter(float (&v)[N], int group, int position) {
  value_share share{0, N, true};
  int offset = group / 2;
  detail::halve<N, true>(v, share, offset, position);
  share.owner = detail::owns_share(offset, position);
  for (; offset >= 1; offset /= 2) {
#pragma unroll
    for (int i = 0; i < N; ++i) {
      if (i >= share.count) break;  // the same count on every lane
      v[i] += __shfl_xor_sync(0xffffffffu, v[i], offset);
    }
  }
  return share;
}

/// Which units of a stage one lane handles. A row has `units_per_row()` units of `Unit`
/// elements, a power of two up to 32: that many consecutive lanes (a row group) share each
/// row, and the warp's 32 / units_per_row() row groups split the stage's rows into runs of
/// `rows` consecutive rows. A lane keeps the same unit of every row it handles, so that what
/// it multiplies the unit with (its slice of C) stays in its registers, and its rows are
/// consecutive, so that per-row values (the flush's weighted x) load as vectors.
/// `RowLanes`, where it is not 0, is the row group's size known at compile time
/// (`with_unit_lanes` picks it): the row sums' reduce-scatter then has constant lane offsets
/// and counts, where a run-time group costs a stream loop a branch around every shuffle.
template <int StageElems, int Unit, int RowLanes = 0>
struct unit_lanes {
  static constexpr int rows = StageElems / (Unit * 32);  ///< rows per stage of one lane
  static_assert(rows >= 1, "unit_lanes: a stage must give every lane a unit");
  static_assert(RowLanes >= 0 && RowLanes <= 32 && (RowLanes & (RowLanes - 1)) == 0,
                "unit_lanes: RowLanes is 0 (at run time) or a power of two up to 32");
  // Formed once: a division by a run-time divisor is some twenty instructions, and per unit
  // of every stage it made a read step issue-bound (ncu).
  int group, first_row, first_unit;

  /// Whether rows of `state_dim` elements map onto the lanes this way.
  __host__ __device__ static constexpr bool supported(int state_dim) {
    const int units = state_dim / Unit;
    return state_dim % Unit == 0 && StageElems % state_dim == 0 && units >= 1 && units <= 32 &&
           (units & (units - 1)) == 0 && (RowLanes == 0 || units == RowLanes);
  }
  __device__ unit_lanes(int state_dim, int lane) : group(RowLanes > 0 ? RowLanes : state_dim / Unit) {
    first_row = lane / units_per_row() * rows;
    first_unit = lane % units_per_row();
  }
  /// Lanes that share a row (the units of a row).
  __device__ int units_per_row() const { return RowLanes > 0 ? RowLanes : group; }
  /// Rows of a stage: every row group's `rows` rows.
  __device__ int stage_rows() const { return rows * (32 / units_per_row()); }
  /// Row within the stage of the lane's i-th row.
  __device__ int row(int i) const { return first_row + i; }
  /// Index within the stage of the lane's unit of its i-th row.
  __device__ int unit_index(int i) const { return row(i) * units_per_row() + first_unit; }
  /// First element within a row of the lane's unit.
  __device__ int column() const { return first_unit * Unit; }
  /// The chunk of `ChunkElems` elements (a divisor of `Unit`) that starts the lane's unit in
  /// the head's row `row`: consecutive rows' a constant apart where the row group is, so
  /// that a lane's stores of its rows share one address.
  template <int ChunkElems>
  __device__ int32_t chunk_of(int32_t row) const {
    static_assert(Unit % ChunkElems == 0, "unit_lanes::chunk_of: whole chunks in a unit");
    return row * (units_per_row() * (Unit / ChunkElems)) + first_unit * (Unit / ChunkElems);
  }
  /// Sums the lane's partial sums `v` of its rows over the lanes of each row (`reduce_scatter`).
  template <int N>
  __device__ value_share row_sums(float (&v)[N]) const {
    return reduce_scatter(v, units_per_row(), first_unit);
  }
  /// Which of N row sums `row_sums` leaves the lane, before it runs (`scatter_share`).
  template <int N>
  __device__ value_share row_share() const {
    return scatter_share<N>(units_per_row(), first_unit);
  }
};

/// The state dimension whose row group `with_unit_lanes` compiles as a constant: Mamba-2's
/// usual one (its reference models and the Nemotron-H, Codestral and Granite layers).
inline constexpr int common_state_dim = 128;

/// Calls `f(lanes)` with the `unit_lanes` of rows of `state_dim` elements (`supported`): lanes
/// whose row group is a compile-time constant when `state_dim` is `common_state_dim`, else
/// lanes that hold it at run time; what `f` runs (a stream loop) is compiled once for each.
/// A constant group leaves the row sums' reduce-scatter its shuffles alone (a run-time one
/// branches around each), which the instruction-bound steps of narrow formats feel; a
/// constant for every group size compiled the loops four times over.
template <int StageElems, int Unit, class F>
__device__ void with_unit_lanes(int state_dim, int lane, F&& f) {
  constexpr int common = common_state_dim / Unit;
  if constexpr (common >= 1 && common <= 32 && unit_lanes<StageElems, Unit>::supported(common_state_dim)) {
    if (state_dim == common_state_dim) {
      f(unit_lanes<StageElems, Unit, common>(state_dim, lane));
      return;
    }
  }
  f(unit_lanes<StageElems, Unit>(state_dim, lane));
}

/// A warp's ring of `Stages` stages of `StageElems` elements of a head's state in `Format`.
/// A stage is `Pieces` runs of consecutive elements (pieces), `piece_stride` elements apart
/// in the head and side by side in the stage; stage i's pieces start i pieces' lengths
/// after the first element. With one piece a stage is a run of the state; with more, a
/// gather (whole rows of a state stored in chunks of columns of every row), copied by the
/// lanes (as 128-byte bulk copies, one barrier arrival per piece, a Gated DeltaNet
/// write-back step was slower).
template <class Format, int StageElems, int Stages, copy_engine Engine, int Pieces = 1>
class state_stream {
 public:
  static constexpr int chunk_elems = Format::chunk_elems;
  static constexpr int stages = Stages;
  static constexpr int piece_elems = StageElems / Pieces;
  static constexpr uint32_t piece_data_bytes = piece_elems / chunk_elems * Format::data_bytes_per_chunk;
  static constexpr uint32_t piece_scale_bytes = piece_elems / chunk_elems * Format::scale_bytes_per_chunk;
  static constexpr uint32_t stage_data_bytes = Pieces * piece_data_bytes;
  static constexpr uint32_t stage_scale_bytes = Pieces * piece_scale_bytes;
  static_assert(StageElems % Pieces == 0 && piece_elems % chunk_elems == 0 && piece_data_bytes % 16 == 0 &&
                    piece_scale_bytes % 16 == 0,
                "state_stream: a piece must hold whole chunks in 16-byte multiples of each plane");
  static_assert(Pieces == 1 || Engine == copy_engine::lanes, "state_stream: the lanes gather pieces");

  /// The warp's shared memory (one per warp).
  struct TempStorage {
    alignas(128) uint8_t data[Stages][stage_data_bytes];
    alignas(16) uint8_t scales[Stages][stage_scale_bytes > 0 ? stage_scale_bytes : 16];
    uint64_t full[Stages];
  };

  /// Whether a head of `elements` elements in pools at `data` / `scales` can stream with
  /// the bulk engine (each plane's bytes per head a multiple of 16, bases 16-byte aligned).
  __host__ __device__ static bool bulk_ok(int64_t elements, const void* data, const void* scales) {
    const int64_t chunks = elements / chunk_elems;
    const bool data_ok = chunks * Format::data_bytes_per_chunk % 16 == 0 && reinterpret_cast<uintptr_t>(data) % 16 == 0;
    const bool scales_ok = Format::scale_bytes_per_chunk == 0 ||
                           (chunks * Format::scale_bytes_per_chunk % 16 == 0 && reinterpret_cast<uintptr_t>(scales) % 16 == 0);
    return data_ok && scales_ok;
  }

  /// Starts streaming elements [first, first + elements) of `head` (`first` a multiple of
  /// the chunk; every lane calls it). With pieces, `elements` is a piece's run over the
  /// stages (a multiple of a piece) and piece p starts `p * piece_stride` elements after it.
  __device__ state_stream(TempStorage& storage, const state_head_view<Format>& head, int32_t first, int32_t elements,
                          int lane, int32_t piece_stride = 0)
      : s_(storage),
        head_(head),
        first_(first),
        elements_(elements),
        piece_stride_(piece_stride),
        lane_(lane) {
    stages_ = (elements + piece_elems - 1) / piece_elems;
    if constexpr (Engine == copy_engine::bulk) {
      if (lane_ == 0)
        for (int i = 0; i < Stages; ++i) barrier_init(&s_.full[i]);
      __syncwarp();
    }
#pragma unroll
    for (int i = 0; i < Stages; ++i) fill(i, i);
  }

  /// Ends the ring: its barriers are invalidated (every stage has been waited for), so that
  /// another ring may start in the same shared memory (a launch that steps several requests
  /// per warp in turn).
  __device__ ~state_stream() {
    if constexpr (Engine == copy_engine::bulk) {
      if (lane_ == 0)
        for (int i = 0; i < Stages; ++i) barrier_inval(&s_.full[i]);
    }
  }
  state_stream(const state_stream&) = delete;
  state_stream& operator=(const state_stream&) = delete;

  /// Waits for every stage without reading it: a warp that gives up its step must not
  /// leave copies landing in shared memory it no longer owns.
  __device__ void drain() {
    for_each_stage([](int, const uint8_t*, const uint8_t*, int32_t) {});
  }

  /// Calls `consume(stage, data, scales, first_element)` for every stage in order, with
  /// the stage's bytes in shared memory (`first_element`, its first piece's, counts from the
  /// head's start);
  /// refills it after the call. Every lane calls it.
  template <class Consume>
  __device__ void for_each_stage(Consume&& consume) {
    for_each_stage(
        [&](int stage, const uint8_t* data, const uint8_t* scales, int32_t first) {
          consume(stage, data, scales, first);
          return 0;
        },
        [](int, int) {});
  }

  /// For every stage in order: `load(stage, data, scales, first_element)` copies what it
  /// needs out of the stage, the stage is refilled at once, then `use(stage, loaded)` works
  /// on what `load` returned. A step with long work per stage (a flush) keeps the next copy
  /// in flight while it works this way. Every lane calls it.
  template <class Load, class Use>
  __device__ void for_each_stage(Load&& load, Use&& use) {
    for (int stage = 0; stage < stages_; ++stage) {
      const int slot = stage % Stages;
      wait(slot, uint32_t(stage / Stages) & 1u);
      auto loaded = load(stage, static_cast<const uint8_t*>(s_.data[slot]), static_cast<const uint8_t*>(s_.scales[slot]),
                         first_ + stage * piece_elems);
      __syncwarp();
      fill(slot, stage + Stages);
      use(stage, loaded);
    }
  }

 private:
  /// Issues stage `stage` into ring slot `slot` (nothing past the last stage; the lane
  /// engine still closes a group, so that every slot's wait counts the same groups).
  __device__ void fill(int slot, int stage) {
    const int32_t first = stage < stages_ ? stage * piece_elems : 0;
    const int32_t elems = stage < stages_ ? (elements_ - first < piece_elems ? elements_ - first : piece_elems) : 0;
    const uint32_t chunk0 = uint32_t((first_ + first) / chunk_elems), chunks = uint32_t(elems / chunk_elems);
    const uint8_t* data = head_.data + int64_t(chunk0) * Format::data_bytes_per_chunk;
    const uint32_t data_bytes = chunks * Format::data_bytes_per_chunk;
    if constexpr (Engine == copy_engine::bulk) {
      if (lane_ == 0 && elems > 0) {
        fence_async_proxy();
        if constexpr (Format::scale_bytes_per_chunk > 0)
          bulk_copy_pair(s_.data[slot], data, data_bytes, s_.scales[slot],
                         head_.scales + int64_t(chunk0) * Format::scale_bytes_per_chunk,
                         chunks * Format::scale_bytes_per_chunk, &s_.full[slot]);
        else
          bulk_copy(s_.data[slot], data, data_bytes, &s_.full[slot]);
      }
    } else if constexpr (Pieces > 1) {
      if (elems > 0) {
        const int64_t stride = piece_stride_ / chunk_elems;
        const uint8_t* scales = head_.scales + int64_t(chunk0) * Format::scale_bytes_per_chunk;
        lanes_gather<piece_data_bytes>(s_.data[slot], data, Pieces, stride * Format::data_bytes_per_chunk, lane_);
        if constexpr (Format::scale_bytes_per_chunk > 0)
          lanes_gather<piece_scale_bytes>(s_.scales[slot], scales, Pieces, stride * Format::scale_bytes_per_chunk,
                                          lane_);
      }
      lanes_commit();
    } else {
      if (elems > 0) {
        lanes_copy(s_.data[slot], data, data_bytes, lane_);
        if constexpr (Format::scale_bytes_per_chunk > 0)
          lanes_copy(s_.scales[slot], head_.scales + int64_t(chunk0) * Format::scale_bytes_per_chunk,
                     chunks * Format::scale_bytes_per_chunk, lane_);
      }
      lanes_commit();
    }
  }

  __device__ void wait(int slot, uint32_t parity) {
    if constexpr (Engine == copy_engine::bulk) {
      barrier_wait(&s_.full[slot], parity);
    } else {
      lanes_wait<Stages - 1>();
      __syncwarp();
    }
  }

  TempStorage& s_;
  state_head_view<Format> head_;
  int32_t first_, elements_, piece_stride_;
  int lane_;
  int stages_;
};

}  // namespace warp
}  // namespace replayssm
