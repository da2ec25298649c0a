// SPDX-License-Identifier: Apache-2.0
/// \file head_state_io.hpp
/// Layer 5: setting a head's state from floats (after prefill, or when a slot is reused)
/// and reading its checkpoint back, through the policy's formats.
#pragma once

#include <cstdint>

#include "replayssm/config.hpp"
#include "replayssm/numeric/rounding.hpp"
#include "replayssm/replay/state_view.hpp"

namespace replayssm {

/// Writes `elements` floats (row-major P x N) into the checkpoint and, in separate mode, the
/// read copy, rounding to nearest even. Reset the head's cursor to `replay_cursor{}` with it.
template <class Policy, class Exec>
REPLAYSSM_HOST_DEVICE void write_head_state(const Exec& ex, const float* values, int32_t elements,
                                            const state_head_view<typename Policy::checkpoint_format>& checkpoint,
                                            const state_head_view<typename Policy::read_format>& read_copy) {
  using ckpt = typename Policy::checkpoint_format;
  using read = typename Policy::read_format;
  const random_stream_key unused{};
  ex.for_each(elements / ckpt::chunk_elems, [&](int c) {
    float chunk[ckpt::chunk_elems];
    for (int e = 0; e < ckpt::chunk_elems; ++e) chunk[e] = values[c * ckpt::chunk_elems + e];
    checkpoint.template store<round_nearest_even>(c, chunk, unused);
  });
  if constexpr (!Policy::shared_state) {
    ex.for_each(elements / read::chunk_elems, [&](int c) {
      float chunk[read::chunk_elems];
      for (int e = 0; e < read::chunk_elems; ++e) chunk[e] = values[c * read::chunk_elems + e];
      read_copy.template store<round_nearest_even>(c, chunk, unused);
    });
  }
}

/// Decodes `elements` values of a head's state view into `values`.
template <class Format, class Exec>
REPLAYSSM_HOST_DEVICE void read_head_state(const Exec& ex, const state_head_view<Format>& view, int32_t elements,
                                           float* values) {
  ex.for_each(elements / Format::chunk_elems, [&](int c) {
    float chunk[Format::chunk_elems];
    view.load(c, chunk);
    for (int e = 0; e < Format::chunk_elems; ++e) values[c * Format::chunk_elems + e] = chunk[e];
  });
}

}  // namespace replayssm
