// SPDX-License-Identifier: Apache-2.0
/// \file state_pools.hpp
/// The bytes of a layer's state pools (checkpoint and read copy), for any recurrence.
#pragma once

#include <cstddef>
#include <cstdint>

#include "replayssm/replay/state_view.hpp"

namespace replayssm {

/// Bytes of a layer's state pools, for any recurrence: checkpoint and separate read copy.
struct state_pool_sizes {
  size_t checkpoint = 0, checkpoint_scales = 0;
  size_t read_copy = 0, read_copy_scales = 0;
  /// Recurrent checkpoint, data and scales.
  constexpr size_t checkpoint_total() const { return checkpoint + checkpoint_scales; }
  /// Separate read copy, data and scales (0 in shared mode).
  constexpr size_t read_copy_total() const { return read_copy + read_copy_scales; }
};

/// The state pools of `elements` state values under `Policy`.
template <class Policy>
constexpr state_pool_sizes state_pools(size_t elements) {
  state_pool_sizes b;
  b.checkpoint = state_data_bytes<typename Policy::checkpoint_format>(elements);
  b.checkpoint_scales = state_scale_bytes<typename Policy::checkpoint_format>(elements);
  if (!Policy::shared_state) {
    b.read_copy = state_data_bytes<typename Policy::read_format>(elements);
    b.read_copy_scales = state_scale_bytes<typename Policy::read_format>(elements);
  }
  return b;
}

}  // namespace replayssm
