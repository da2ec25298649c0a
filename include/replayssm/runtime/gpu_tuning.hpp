// SPDX-License-Identifier: Apache-2.0
/// \file gpu_tuning.hpp
/// Every launch-geometry constant of the ready-made CUDA kernels, in one place.
/// None of them changes a result: random bits and reduction orders are fixed by the data
/// layout, so any block size and register cap give the same bits. Each constant's comment
/// says why it was chosen, from measurements on the H200.
#pragma once

#include <cstdint>

#include "replayssm/replay/cursor.hpp"
#include "replayssm/warp/warp_role.hpp"

namespace replayssm {
namespace cuda {

/// Threads per (request, head) block of the ready-made kernels by default.
inline constexpr int decode_block_threads = 128;

/// The `minBlocksPerMultiprocessor` of `__launch_bounds__` that asks registers for `Blocks`
/// blocks of 128 threads per SM, scaled to blocks of `Threads` threads. Without a cap the
/// register allocator's choice swung with small changes of a step's code.
template <int Threads, int Blocks>
inline constexpr int decode_min_blocks = 128 * Blocks / Threads > 0 ? 128 * Blocks / Threads : 1;

/// Blocks per SM of a Mamba-2 step: replay decode steps run 8 (a few registers spilled, more
/// blocks in flight); write-back and verify steps 6, since at 8 they spill their flush and
/// their per-draft arrays.
template <class Policy, step_kind Kind>
inline constexpr int mamba2_blocks_per_sm = Policy::is_writeback || Kind == step_kind::verify ? 6 : 8;

/// Threads per block of the warp steps (one warp per head): four heads of a request, fewer
/// when their shared memory does not fit. Every warp is independent, so the block size only
/// sets how finely the block scheduler balances the heads.
inline constexpr int warp_step_threads = 128;

/// Threads per block of a small batch's decode step in tiles at most: a head of up to 16
/// tiles, a warp each, within 128 registers per thread.
inline constexpr int tile_threads = 512;

/// The registers per thread a warp kernel's launch bounds allow, as blocks of
/// `warp_step_threads` per SM (`warp_step_min_blocks`).
enum class register_cap : uint8_t {
  registers_128,  ///< 4 blocks: 16 warps per SM
  registers_168,  ///< 3 blocks
  registers_255,  ///< 2 blocks
};

/// The `minBlocksPerMultiprocessor` of a warp kernel capped at `Cap`. Mamba-2's warp steps
/// are capped at 128 registers, except at 168 a flush of a window, since it holds the
/// window's keys (64 floats) beside its 32 state values, and its shared memory allows no more
/// warps than that anyway, and a verify step's read of up to 8 drafts, which holds every
/// draft's C and row sums. (A write-back step capped at 168 lost 10% at batch 512: it needs
/// its 16 warps per SM. A verify read of up to 4 drafts fits 128 with its C spilled around
/// the key dots, outside the stream's loop, and then 16 warps per SM.)
template <register_cap Cap>
inline constexpr int warp_step_min_blocks = Cap == register_cap::registers_128   ? 4
                                            : Cap == register_cap::registers_168 ? 3
                                                                                 : 2;

/// How a Mamba-2 replay decode step runs its reads and flushes after the planner, where its
/// warps do not all fit on the device at once (where they do, it is always one launch).
enum class mamba2_decode_launches : uint8_t {
  one,           ///< one launch reads or flushes each request as planned
  side_by_side,  ///< a flush launch over the flushing requests beside a read launch
};
/// The launches of `Policy`'s replay decode steps at a large batch. One launch holds both
/// roles, so its warps take the flush's registers and shared memory: it is kept where that
/// costs the reads little and spreads the flushes among them, shared FP32 states of windows
/// up to 16 and 16-bit ones of 16 (their kernel capped at 128 registers, spilling a few
/// bytes, so that reads keep 16 warps per SM). Side by side elsewhere, where one launch was
/// slower (docs/kernels.md, "One decode step"): at W = 32 the flush's shared memory halves
/// the reads' warps, 16-bit states at W = 8 spill over a hundred bytes under the cap, and
/// split policies' read steps lose their occupancy.
template <class Policy>
inline constexpr mamba2_decode_launches mamba2_large_batch_launches =
    Policy::shared_state &&
            (Policy::checkpoint_format::bytes_per_element == 4.0 ? Policy::window <= 16 : Policy::window == 16)
        ? mamba2_decode_launches::one
        : mamba2_decode_launches::side_by_side;
/// The register cap of a Gated DeltaNet warp step of `Policy` in `Role`. A read step and the
/// write-back step: 128 registers, so that registers allow the 16 warps per SM a read step's
/// shared memory (13.5 KB per warp) allows (at 150 registers, 13; the cap spills 32-44
/// bytes); a verify read of up to 4 drafts (`Tokens`), whose shared memory (16.5 KB) allows
/// 13 warps: 168. A replay flush, whose shared memory (the window's keys, 21 KB per warp)
/// allows 10 warps: up to 255.
template <class Policy, warp::warp_role Role, int Tokens = 1>
inline constexpr register_cap gdn_warp_registers =
    Role == warp::warp_role::flush && !Policy::is_writeback ? register_cap::registers_255
    : Tokens > 1                                            ? register_cap::registers_168
                                                            : register_cap::registers_128;

/// Drafts a Gated DeltaNet verify step reads on the warp read step (more take the head step).
inline constexpr int gdn_warp_verify_tokens = 4;

/// How a Gated DeltaNet block step spreads a state row over its threads: the write-back and
/// snapshot steps stream the state and are best with a whole row per thread; replay steps,
/// bound by the latency of their staging, with four lanes per row and more blocks. (A flush
/// of a shared FP32 state takes about as long either way, a `raw_inputs` flush less with
/// whole rows; with a BF16 read copy beside the checkpoint, whole rows doubled the mean step.)
enum class gdn_row_split : uint8_t {
  whole_rows,  ///< a whole row per thread: the streaming steps
  four_lanes,  ///< four lanes per row: the other replay steps
};

/// Lanes of a Gated DeltaNet state row in a block step split as `Split`.
template <gdn_row_split Split>
inline constexpr int gdn_row_lanes = Split == gdn_row_split::whole_rows ? 1 : 4;

/// Blocks per SM of a Gated DeltaNet block step: 3 for the streaming (whole-row) steps, 8 for
/// replay decode steps, 6 for verify steps with their per-draft arrays.
template <gdn_row_split Split, step_kind Kind>
inline constexpr int gdn_blocks_per_sm = Split == gdn_row_split::whole_rows ? 3 : (Kind == step_kind::decode ? 8 : 6);

}  // namespace cuda
}  // namespace replayssm
