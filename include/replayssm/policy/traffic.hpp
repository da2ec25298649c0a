// SPDX-License-Identifier: Apache-2.0
/// \file traffic.hpp
/// The traffic model: bytes per element of state moved by a decode step.
#pragma once

namespace replayssm {

/// Modelled state traffic per element of state per decode step, averaged over a window.
struct state_traffic {
  double read_bytes;   ///< bytes read per element per step
  double write_bytes;  ///< bytes written per element per step
  /// Read plus write.
  constexpr double total() const { return read_bytes + write_bytes; }
};

/// Traffic of one decode step under `Policy`, averaged over the `Period` steps from one
/// flush to the next (the window; a Gated DeltaNet replay window flushes every W - 1 steps).
///
/// Conventional write-back reads and writes the state each step. Replay reads the read copy
/// each step; once per period the flush reads and writes the checkpoint and, when separate,
/// writes the read copy. The flush step reads the checkpoint instead of the read copy, which
/// the average counts as one read-copy read saved and one checkpoint read spent.
template <class Policy, int Period = Policy::window>
constexpr state_traffic state_traffic_per_step() {
  constexpr double read = Policy::read_format::bytes_per_element;
  constexpr double checkpoint = Policy::checkpoint_format::bytes_per_element;
  constexpr double w = Period;
  if constexpr (Policy::is_writeback) {
    return {checkpoint, checkpoint};
  } else if constexpr (Policy::shared_state) {
    return {read, checkpoint / w};
  } else {
    return {read + (checkpoint - read) / w, (checkpoint + read) / w};
  }
}

}  // namespace replayssm
