// SPDX-License-Identifier: Apache-2.0
/// \file validate.hpp
/// Host-side validation of `gdn_params` for a policy and window mode. Every
/// launcher runs it first and returns its error instead of launching.
#pragma once

#include <cstdint>
#include <string>

#include "replayssm/gated_deltanet/params.hpp"
#include "replayssm/policy/policy.hpp"
#include "replayssm/runtime/status.hpp"
#include "replayssm/runtime/validate.hpp"

namespace replayssm {

/// Largest value dimension the ready-made Gated DeltaNet steps support.
inline constexpr int32_t gdn_max_value_dim = 256;

/// Validates `p` for a decode or verify step (`kind`) under `Policy`, in its
/// window mode. With `host_memory` (the CPU path) the slot indices, flush phases and
/// token counts are checked too; on the device a check before the step finds them and reports
/// them through `report`.
template <class Policy, class Act>
[[nodiscard]] status validate_gdn(const gdn_params<Act>& p, bool host_memory, step_kind kind = step_kind::decode) {
  using detail::field;
  using ckpt = typename Policy::checkpoint_format;
  using read = typename Policy::read_format;
  const char* who = "gated_deltanet";
  const std::string w = std::string(who) + ": ";
  if (p.batch < 0) return status::error(w + field("batch", p.batch) + " is negative");
  if (p.heads <= 0 || p.key_heads <= 0 || p.value_dim <= 0)
    return status::error(w + "heads, key_heads and value_dim must be positive (" + field("heads", p.heads) + ", " +
                         field("key_heads", p.key_heads) + ", " + field("value_dim", p.value_dim) + ")");
  if (p.heads % p.key_heads != 0)
    return status::error(w + field("heads", p.heads) + " is not a multiple of " + field("key_heads", p.key_heads));
  if (p.value_dim > gdn_max_value_dim)
    return status::error(w + field("value_dim", p.value_dim) + " exceeds the supported maximum " +
                         std::to_string(gdn_max_value_dim));
  if (p.key_dim < 16 || p.key_dim > gdn_max_key_dim || p.key_dim % 16 != 0)
    return status::error(w + "unsupported " + field("key_dim", p.key_dim) + ": must be a multiple of 16 in [16, " +
                         std::to_string(gdn_max_key_dim) + "] (a state row is held in registers)");
  if (p.key_dim % ckpt::chunk_elems != 0 || p.key_dim % read::chunk_elems != 0)
    return status::error(w + field("key_dim", p.key_dim) + " is not a multiple of the formats' chunk (" + ckpt::name +
                         ", " + read::name + ")");
  if (status s = detail::check_tokens<Policy>(who, p, kind, host_memory); !s) return s;
  constexpr int elem = sizeof(Act);
  if (status s = detail::check_slot_fields(who, p); !s) return s;

  status s;
  if (!(s = detail::check_rows(who, "q", p.q, p.q_batch_stride, p.q_head_stride, p.key_heads, p.key_dim, elem)))
    return s;
  if (!(s = detail::check_rows(who, "k", p.k, p.k_batch_stride, p.k_head_stride, p.key_heads, p.key_dim, elem)))
    return s;
  if (!(s = detail::check_rows(who, "v", p.v, p.v_batch_stride, p.v_head_stride, p.heads, p.value_dim, elem))) return s;
  if (!(s = detail::check_rows(who, "o", p.o, p.o_batch_stride, p.o_head_stride, p.heads, p.value_dim, elem))) return s;
  if (!(s = detail::check_rows(who, "a", p.a, p.a_batch_stride, p.a_head_stride, p.heads, 1, elem))) return s;
  if (!(s = detail::check_rows(who, "b", p.b, p.b_batch_stride, p.b_head_stride, p.heads, 1, elem))) return s;
  if (p.A_log == nullptr) return status::error(w + "A_log is null");

  if (!(s = detail::check_pool<ckpt>(who, "checkpoint", p.checkpoint, p.checkpoint_scales))) return s;
  if constexpr (!Policy::shared_state) {
    if (!(s = detail::check_pool<read>(who, "read_copy", p.read_copy, p.read_copy_scales))) return s;
  }
  if constexpr (!Policy::is_writeback) {
    if (p.window_u == nullptr || p.window_k == nullptr || p.window_g == nullptr)
      return status::error(w + "replay needs window_u, window_k and window_g");
    if (!detail::aligned(p.window_u, 4) || !detail::aligned(p.window_k, 4) || !detail::aligned(p.window_g, 4))
      return status::error(w + "a window buffer is not aligned to its element size");
    if constexpr (keeps_raw_inputs<Policy>) {
      if (p.window_v == nullptr || p.window_beta == nullptr)
        return status::error(w + "the raw_inputs window mode needs window_v and window_beta");
      if (!detail::aligned(p.window_v, elem) || !detail::aligned(p.window_beta, 4))
        return status::error(w + "window_v or window_beta is not aligned to its element size");
    }
    if (p.cursors == nullptr) return status::error(w + "replay needs cursors");
  }
  if (Policy::rounding::is_stochastic && p.cursors == nullptr)
    return status::error(w + "stochastic rounding needs cursors (they count flushes, which key the random bits)");
  if (p.cursors != nullptr && !detail::aligned(p.cursors, alignof(replay_cursor)))
    return status::error(w + "cursors are misaligned");
  return host_memory ? detail::check_requests<Policy>(who, p, kind) : detail::check_report(who, p);
}

}  // namespace replayssm
