// SPDX-License-Identifier: Apache-2.0
/// \file state_io.hpp
/// Setting a Gated DeltaNet value head's state from floats (after prefill, or when a slot is
/// reused) and reading a state view back, through the policy's formats and the chunk order
/// of `gdn_state_chunk`.
#pragma once

#include <cstdint>

#include "replayssm/config.hpp"
#include "replayssm/gated_deltanet/head_step.hpp"
#include "replayssm/numeric/rounding.hpp"
#include "replayssm/replay/state_view.hpp"

namespace replayssm {

/// Writes a value head's state from `values` (V x K floats, row-major) into the checkpoint
/// and, in separate mode, the read copy, rounding to nearest even (after prefill, or when a
/// slot is reused). Reset the head's cursor to `replay_cursor{}` with it.
template <class Policy, class Exec>
REPLAYSSM_HOST_DEVICE void write_head_state(const Exec& ex, const float* values, gdn_layer_shape shape,
                                            const state_head_view<typename Policy::checkpoint_format>& checkpoint,
                                            const state_head_view<typename Policy::read_format>& read_copy) {
  const int32_t V = shape.value_dim, K = shape.key_dim;
  ex.for_each_row(V, [&](int p, int lane) {
    detail::gdn_row_part<Exec::row_lanes> s{};
    for (int i = 0; i < s.blocks; ++i)
      for (int e = 0; e < gdn_column_block; ++e) {
        const int32_t c = s.column(i, lane) + e;
        if (c < K) s.v[i * gdn_column_block + e] = values[p * K + c];
      }
    s.template store<round_nearest_even>(checkpoint, p, V, K, lane, random_stream_key{});
    if constexpr (!Policy::shared_state)
      s.template store<round_nearest_even>(read_copy, p, V, K, lane, random_stream_key{});
  });
}

/// Decodes a value head's state view into `values` (V x K floats, row-major).
template <class Format, class Exec>
REPLAYSSM_HOST_DEVICE void read_head_state(const Exec& ex, const state_head_view<Format>& view, gdn_layer_shape shape,
                                           float* values) {
  const int32_t V = shape.value_dim, K = shape.key_dim;
  ex.for_each_row(V, [&](int p, int lane) {
    detail::gdn_row_part<Exec::row_lanes> s;
    s.load(view, p, V, K, lane);
    for (int i = 0; i < s.blocks; ++i)
      for (int e = 0; e < gdn_column_block; ++e) {
        const int32_t c = s.column(i, lane) + e;
        if (c < K) values[p * K + c] = s.v[i * gdn_column_block + e];
      }
  });
}

}  // namespace replayssm
