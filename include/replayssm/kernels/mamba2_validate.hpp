// SPDX-License-Identifier: Apache-2.0
/// \file mamba2_validate.hpp
/// Layer 6: host-side validation of `mamba2_params` for a policy. Every launcher runs it
/// first and returns its error instead of launching.
#pragma once

#include <cstdint>
#include <string>

#include "replayssm/kernels/mamba2_params.hpp"
#include "replayssm/kernels/requests.hpp"
#include "replayssm/kernels/status.hpp"
#include "replayssm/policy/policy.hpp"

namespace replayssm {

/// Largest state dimension the ready-made steps support (scratch lives in shared memory).
inline constexpr int32_t max_state_dim = 256;
/// Largest head dimension the ready-made steps support.
inline constexpr int32_t max_head_dim = 256;

namespace detail {

inline std::string field(const char* name, int64_t value) {
  return std::string(name) + "=" + std::to_string(value);
}

inline bool aligned(const void* p, int64_t alignment) {
  return reinterpret_cast<uintptr_t>(p) % uintptr_t(alignment) == 0;
}

/// Alignment the vector loads of a plane with `chunk_bytes`-byte chunks need (at most 16).
inline int64_t chunk_alignment(int64_t chunk_bytes) {
  int64_t a = 1;
  while (a < 16 && chunk_bytes % (a * 2) == 0) a *= 2;
  return a;
}

/// Checks a `[batch][rows][inner]` activation: present, aligned, rows and batches disjoint.
inline status check_rows(const char* name, const void* ptr, int64_t batch_stride, int64_t row_stride,
                         int32_t rows, int32_t inner, int elem_size, bool optional = false) {
  const std::string who = std::string("mamba2: ") + name;
  if (ptr == nullptr) return optional ? status{} : status::error(who + " is null");
  if (!aligned(ptr, elem_size))
    return status::error(who + " is not aligned to its element size (" + std::to_string(elem_size) + " bytes)");
  if (row_stride < inner)
    return status::error(who + ": " + field("row stride", row_stride) + " is smaller than the row length " +
                         std::to_string(inner) + " (rows would overlap)");
  if (batch_stride < (rows - 1) * row_stride + inner)
    return status::error(who + ": " + field("batch stride", batch_stride) + " is smaller than one request's extent " +
                         std::to_string((rows - 1) * row_stride + inner));
  return {};
}

template <class Format>
status check_pool(const char* name, const void* data, const void* scales) {
  const std::string who = std::string("mamba2: ") + name;
  if (data == nullptr) return status::error(who + " is null");
  if (!aligned(data, chunk_alignment(Format::data_bytes_per_chunk)))
    return status::error(who + " is not aligned to " + std::to_string(chunk_alignment(Format::data_bytes_per_chunk)) +
                         " bytes (" + Format::name + " chunks are loaded as vectors)");
  if constexpr (Format::scale_bytes_per_chunk > 0) {
    if (scales == nullptr) return status::error(who + " scales are null (" + Format::name + " is a scaled format)");
    if (!aligned(scales, chunk_alignment(Format::scale_bytes_per_chunk)))
      return status::error(who + " scales are misaligned");
  }
  return {};
}

}  // namespace detail

namespace detail {

/// Checks the token counts of a decode (`immediate`) or verify (`pending`) step.
template <class Policy>
status check_tokens(const mamba2_params& p, token_commit commit, bool host_memory) {
  if (commit == token_commit::immediate) {
    if (p.tokens != 1 || p.token_counts != nullptr)
      return status::error("mamba2: a decode step takes one token per request (" + field("tokens", p.tokens) +
                           "); speculative drafts go through the verify step");
  } else {
    if (Policy::is_writeback)
      return status::error("mamba2: the verify step needs a replay policy (drafts wait in the window)");
    if (p.tokens < 1 || p.tokens > max_draft_tokens)
      return status::error("mamba2: " + field("tokens", p.tokens) + " is outside [1, max_draft_tokens=" +
                           std::to_string(max_draft_tokens) + "]");
    if (p.tokens > Policy::window)
      return status::error("mamba2: " + field("tokens", p.tokens) + " drafts do not fit the window of " +
                           std::to_string(Policy::window));
    if (p.ring_entries<Policy>() < Policy::window + p.tokens)
      return status::error("mamba2: " + field("window_entries", p.ring_entries<Policy>()) +
                           " is too short for a verify step: it needs window + tokens = " +
                           std::to_string(Policy::window + p.tokens) + " ring entries");
    if (host_memory) {
      if (status s = detail::check_token_counts(p, "mamba2"); !s) return s;
    }
  }
  if (p.window_entries != 0 && p.window_entries < Policy::window)
    return status::error("mamba2: " + field("window_entries", p.window_entries) + " is shorter than the window " +
                         std::to_string(Policy::window));
  return {};
}

}  // namespace detail

/// Validates `p` for a decode (`immediate`) or verify (`pending`) step under `Policy`. With
/// `host_memory` (the CPU path) the slot indices, flush phases and token counts are checked
/// too; on the device they are checked by the kernel, which skips a bad row and reports it
/// through `error_flags`.
template <class Policy>
[[nodiscard]] status validate_mamba2(const mamba2_params& p, bool host_memory,
                                     token_commit commit = token_commit::immediate) {
  using detail::field;
  using ckpt = typename Policy::checkpoint_format;
  using read = typename Policy::read_format;
  if (p.batch < 0) return status::error("mamba2: " + field("batch", p.batch) + " is negative");
  if (p.heads <= 0 || p.groups <= 0 || p.head_dim <= 0)
    return status::error("mamba2: heads, groups and head_dim must be positive (" + field("heads", p.heads) + ", " +
                         field("groups", p.groups) + ", " + field("head_dim", p.head_dim) + ")");
  if (p.heads % p.groups != 0)
    return status::error("mamba2: " + field("heads", p.heads) + " is not a multiple of " + field("groups", p.groups));
  if (p.head_dim > max_head_dim)
    return status::error("mamba2: " + field("head_dim", p.head_dim) + " exceeds the supported maximum " +
                         std::to_string(max_head_dim));
  if (p.state_dim < 16 || p.state_dim > max_state_dim || p.state_dim % 16 != 0)
    return status::error("mamba2: unsupported " + field("state_dim", p.state_dim) +
                         ": must be a multiple of 16 in [16, 256]");
  if (p.state_dim % ckpt::chunk_elems != 0 || p.state_dim % read::chunk_elems != 0)
    return status::error("mamba2: " + field("state_dim", p.state_dim) + " is not a multiple of the formats' chunk (" +
                         ckpt::name + ", " + read::name + ")");
  if (status s = detail::check_tokens<Policy>(p, commit, host_memory); !s) return s;
  const int elem = dtype_size(p.act_dtype);
  if (elem == 0)
    return status::error("mamba2: unsupported activation dtype tag " + std::to_string(int(p.act_dtype)) +
                         " (expected f32, f16 or bf16)");
  if (p.num_slots <= 0) return status::error("mamba2: " + field("num_slots", p.num_slots) + " must be positive");
  if (p.slot_indices == nullptr && p.batch > p.num_slots)
    return status::error("mamba2: without slot_indices request b uses slot b, but " + field("batch", p.batch) +
                         " exceeds " + field("num_slots", p.num_slots));
  if (p.pad_slot_id >= 0 && p.pad_slot_id < p.num_slots)
    return status::error("mamba2: " + field("pad_slot_id", p.pad_slot_id) + " names a real slot (num_slots=" +
                         std::to_string(p.num_slots) + ")");

  status s;
  if (!(s = detail::check_rows("x", p.x, p.x_batch_stride, p.x_head_stride, p.heads, p.head_dim, elem))) return s;
  if (!(s = detail::check_rows("z", p.z, p.z_batch_stride, p.z_head_stride, p.heads, p.head_dim, elem, true))) return s;
  if (!(s = detail::check_rows("y", p.y, p.y_batch_stride, p.y_head_stride, p.heads, p.head_dim, elem))) return s;
  if (!(s = detail::check_rows("dt", p.dt, p.dt_batch_stride, p.dt_head_stride, p.heads, 1, elem))) return s;
  if (!(s = detail::check_rows("B", p.B, p.B_batch_stride, p.B_group_stride, p.groups, p.state_dim, elem))) return s;
  if (!(s = detail::check_rows("C", p.C, p.C_batch_stride, p.C_group_stride, p.groups, p.state_dim, elem))) return s;
  if (p.A == nullptr) return status::error("mamba2: A is null");

  if (!(s = detail::check_pool<ckpt>("checkpoint", p.checkpoint, p.checkpoint_scales))) return s;
  if constexpr (!Policy::shared_state) {
    if (!(s = detail::check_pool<read>("read_copy", p.read_copy, p.read_copy_scales))) return s;
  }
  if constexpr (!Policy::is_writeback) {
    if (p.window_x == nullptr || p.window_B == nullptr || p.window_dt == nullptr)
      return status::error("mamba2: replay needs window_x, window_B and window_dt");
    if (!detail::aligned(p.window_x, elem) || !detail::aligned(p.window_B, elem) || !detail::aligned(p.window_dt, 4))
      return status::error("mamba2: a window buffer is not aligned to its element size");
    if (p.cursors == nullptr) return status::error("mamba2: replay needs cursors");
  }
  if (Policy::rounding::is_stochastic && p.cursors == nullptr)
    return status::error("mamba2: stochastic rounding needs cursors (they count flushes, which key the random bits)");
  if (p.cursors != nullptr && !detail::aligned(p.cursors, alignof(replay_cursor)))
    return status::error("mamba2: cursors are misaligned");

  if (host_memory) {
    for (int32_t b = 0; b < p.batch && p.slot_indices != nullptr; ++b) {
      const int32_t slot = p.slot_indices[b];
      if (slot != p.pad_slot_id && (slot < 0 || slot >= p.num_slots))
        return status::error("mamba2: slot_indices[" + std::to_string(b) + "]=" + std::to_string(slot) +
                             " is outside [0, " + std::to_string(p.num_slots) + ") and is not the pad id " +
                             std::to_string(p.pad_slot_id));
    }
    for (int32_t slot = 0; slot < p.num_slots && p.flush_phase != nullptr && !Policy::is_writeback; ++slot) {
      if (p.flush_phase[slot] < 0 || p.flush_phase[slot] >= Policy::window)
        return status::error("mamba2: flush_phase[" + std::to_string(slot) + "]=" + std::to_string(p.flush_phase[slot]) +
                             " is outside [0, window=" + std::to_string(Policy::window) + ")");
    }
  }
  return {};
}

}  // namespace replayssm
