// SPDX-License-Identifier: Apache-2.0
/// \file validate.hpp
/// Host-side validation of `mamba2_params` for a policy. Every launcher runs it
/// first and returns its error instead of launching.
#pragma once

#include <cstdint>
#include <string>

#include "replayssm/mamba2/params.hpp"
#include "replayssm/policy/policy.hpp"
#include "replayssm/runtime/requests.hpp"
#include "replayssm/runtime/status.hpp"
#include "replayssm/runtime/validate.hpp"

namespace replayssm {

/// Largest state dimension the ready-made steps support (scratch lives in shared memory).
inline constexpr int32_t max_state_dim = 256;
/// Largest head dimension the ready-made steps support.
inline constexpr int32_t max_head_dim = 256;

/// Validates `p` for a decode or verify step (`kind`) under `Policy`. With
/// `host_memory` (the CPU path) the slot indices, flush phases and token counts are checked
/// too; on the device a check before the step finds them and reports them through `report`.
template <class Policy, class Act>
[[nodiscard]] status validate_mamba2(const mamba2_params<Act>& p, bool host_memory,
                                     step_kind kind = step_kind::decode) {
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
  if (status s = detail::check_tokens<Policy>("mamba2", p, kind, host_memory); !s) return s;
  constexpr int elem = sizeof(Act);
  if (status s = detail::check_slot_fields("mamba2", p); !s) return s;

  status s;
  if (!(s = detail::check_rows("mamba2", "x", p.x, p.x_batch_stride, p.x_head_stride, p.heads, p.head_dim, elem)))
    return s;
  if (!(s = detail::check_rows("mamba2", "z", p.z, p.z_batch_stride, p.z_head_stride, p.heads, p.head_dim, elem, true)))
    return s;
  if (!(s = detail::check_rows("mamba2", "y", p.y, p.y_batch_stride, p.y_head_stride, p.heads, p.head_dim, elem)))
    return s;
  if (!(s = detail::check_rows("mamba2", "dt", p.dt, p.dt_batch_stride, p.dt_head_stride, p.heads, 1, elem))) return s;
  if (!(s = detail::check_rows("mamba2", "B", p.B, p.B_batch_stride, p.B_group_stride, p.groups, p.state_dim, elem)))
    return s;
  if (!(s = detail::check_rows("mamba2", "C", p.C, p.C_batch_stride, p.C_group_stride, p.groups, p.state_dim, elem)))
    return s;
  if (p.A == nullptr) return status::error("mamba2: A is null");

  if (!(s = detail::check_pool<ckpt>("mamba2", "checkpoint", p.checkpoint, p.checkpoint_scales))) return s;
  if constexpr (!Policy::shared_state) {
    if (!(s = detail::check_pool<read>("mamba2", "read_copy", p.read_copy, p.read_copy_scales))) return s;
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

  return host_memory ? detail::check_requests<Policy>("mamba2", p, kind) : detail::check_report("mamba2", p);
}

}  // namespace replayssm
