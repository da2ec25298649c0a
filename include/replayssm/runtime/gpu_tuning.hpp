// SPDX-License-Identifier: Apache-2.0
/// \file gpu_tuning.hpp
/// Every launch-geometry constant of the ready-made CUDA kernels, in one place.
/// None of them changes a result: random bits and reduction orders are fixed by the data
/// layout, so any block size and register cap give the same bits. The measurements behind
/// each choice are in docs/benchmarks.md ("Launch geometry").
#pragma once

#include "replayssm/replay/cursor.hpp"

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
/// Blocks per SM the warp steps' registers are capped for: within 128 registers, except
/// (`Wide`) a flush of a window within 168, since it holds the window's keys (64 floats)
/// beside its 32 state values, and its shared memory allows no more warps than that anyway,
/// and a verify step's read of up to 8 drafts, which holds every draft's C and row sums.
/// (A write-back step capped at 168 lost 10% at batch 512: it needs its 16 warps per SM. A
/// verify read of up to 4 drafts fits 128 with its C spilled around the key dots, outside
/// the stream's loop, and then 16 warps per SM.)
template <bool Wide>
inline constexpr int warp_step_min_blocks = Wide ? 3 : 4;

/// Blocks per SM the Gated DeltaNet warp steps' registers are capped for. A read step: 128
/// registers, so that registers allow the 16 warps per SM its shared memory (13.5 KB per
/// warp) allows (at 150 registers, 13; the cap spills 32-44 bytes); a verify read of up to 4
/// drafts (`Tokens`), whose shared memory (16.5 KB) allows 13 warps: 168. A flush (`Flush`),
/// whose shared memory (the window's keys, 21 KB per warp) allows 10 warps: up to 255.
template <bool Flush, int Tokens = 1>
inline constexpr int gdn_warp_min_blocks = Flush ? 2 : (Tokens > 1 ? 3 : 4);

/// Drafts a Gated DeltaNet verify step reads on the warp read step (more take the head step).
inline constexpr int gdn_warp_verify_tokens = 4;

/// Lanes of a Gated DeltaNet state row: the write-back and snapshot steps stream the state
/// and are best with a whole row per thread; replay steps, bound by the latency of their
/// staging, with four lanes per row and more blocks. (A flush of a shared FP32 state takes
/// about as long either way, a `raw_inputs` flush less with whole rows; with a BF16 read
/// copy beside the checkpoint, whole rows doubled the mean step.)
template <bool Streaming>
inline constexpr int gdn_row_lanes = Streaming ? 1 : 4;

/// Blocks per SM of a Gated DeltaNet step: 3 for the streaming (whole-row) steps, 8 for
/// replay decode steps, 6 for verify steps with their per-draft arrays.
template <bool Streaming, step_kind Kind>
inline constexpr int gdn_blocks_per_sm = Streaming ? 3 : (Kind == step_kind::decode ? 8 : 6);

}  // namespace cuda
}  // namespace replayssm
