// SPDX-License-Identifier: Apache-2.0
/// \file state_io.hpp
/// Setting a Mamba-2 head's state from floats (after prefill, or when a slot is reused) and
/// reading a state view back, through the policy's formats.
#pragma once

#include <cstdint>

#include "replayssm/config.hpp"
#include "replayssm/mamba2/head_step.hpp"
#include "replayssm/numeric/rounding.hpp"
#include "replayssm/replay/state_view.hpp"

namespace replayssm {

namespace detail {

/// Encodes `elements` floats into a state view, chunk by chunk, rounding to nearest even.
template <class Format, class Exec>
REPLAYSSM_HOST_DEVICE void store_head_values(const Exec& ex, const float* values, int32_t elements,
                                             const state_head_view<Format>& view) {
  ex.for_each(elements / Format::chunk_elems, [&](int c) {
    float chunk[Format::chunk_elems];
    for (int e = 0; e < Format::chunk_elems; ++e) chunk[e] = values[c * Format::chunk_elems + e];
    view.template store<round_nearest_even>(c, chunk, random_stream_key{});
  });
}

}  // namespace detail

/// Writes a head's state from `values` (P x N floats, row-major) into the checkpoint and, in
/// separate mode, the read copy, rounding to nearest even. Reset the head's cursor to
/// `replay_cursor{}` with it.
template <class Policy, class Exec>
REPLAYSSM_HOST_DEVICE void write_head_state(const Exec& ex, const float* values, mamba2_layer_shape shape,
                                            const state_head_view<typename Policy::checkpoint_format>& checkpoint,
                                            const state_head_view<typename Policy::read_format>& read_copy) {
  const int32_t elements = shape.head_dim * shape.state_dim;
  detail::store_head_values(ex, values, elements, checkpoint);
  if constexpr (!Policy::shared_state) detail::store_head_values(ex, values, elements, read_copy);
}

/// Decodes a head's state view into `values` (P x N floats, row-major).
template <class Format, class Exec>
REPLAYSSM_HOST_DEVICE void read_head_state(const Exec& ex, const state_head_view<Format>& view,
                                           mamba2_layer_shape shape, float* values) {
  ex.for_each(shape.head_dim * shape.state_dim / Format::chunk_elems, [&](int c) {
    float chunk[Format::chunk_elems];
    view.load(c, chunk);
    for (int e = 0; e < Format::chunk_elems; ++e) values[c * Format::chunk_elems + e] = chunk[e];
  });
}

}  // namespace replayssm
